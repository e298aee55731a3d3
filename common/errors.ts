// The error catalogue: every error the gateway itself answers has a stable code, an HTTP status, a
// completion-style `type` and a user-facing message. Anything not in the catalogue becomes
// `internal_error` with the request id and no internals. Bodies are shaped for the client's wire family
// by the family's module (hooks/families), so each official SDK raises a proper error.

interface CatalogueEntry {
  readonly status: number;
  readonly type: string;
  readonly message: string;
}

export const ERROR_CATALOGUE = {
  invalid_api_key: { status: 401, type: 'authentication_error', message: 'Invalid or missing access key' },
  insufficient_balance: {
    status: 402,
    type: 'billing_error',
    message: 'The account balance is insufficient for this request; top up the wallet and retry',
  },
  billing_unavailable: {
    status: 503,
    type: 'billing_error',
    message: 'The balance check is temporarily unavailable',
  },
  authentication_unavailable: {
    status: 503,
    type: 'authentication_error',
    message: 'Access keys cannot be verified right now',
  },
  invalid_json: { status: 400, type: 'invalid_request_error', message: 'The request body is not valid JSON' },
  invalid_parameter: { status: 400, type: 'invalid_request_error', message: 'Invalid request parameter' },
  invalid_model: {
    status: 400,
    type: 'invalid_request_error',
    message: 'The model name is not valid',
  },
  invalid_path: {
    status: 400,
    type: 'invalid_request_error',
    message: 'The request path has malformed percent-encoding',
  },
  json_too_deep: {
    status: 400,
    type: 'invalid_request_error',
    message: 'The request body nests arrays and objects too deeply',
  },
  request_timeout: {
    status: 408,
    type: 'invalid_request_error',
    message: 'The request was not received in time',
  },
  provider_not_selected: {
    status: 400,
    type: 'invalid_request_error',
    message: 'No provider could be selected for this request',
  },
  unknown_provider: { status: 400, type: 'invalid_request_error', message: 'Unknown provider' },
  no_matching_rule: {
    status: 400,
    type: 'invalid_request_error',
    message: 'The provider has no configuration for this API',
  },
  model_not_found: { status: 404, type: 'invalid_request_error', message: 'The model does not exist' },
  not_found: { status: 404, type: 'invalid_request_error', message: 'Unknown endpoint' },
  method_not_allowed: { status: 405, type: 'invalid_request_error', message: 'Method not allowed' },
  request_too_large: { status: 413, type: 'invalid_request_error', message: 'The request body is too large' },
  malformed_request: { status: 400, type: 'invalid_request_error', message: 'The request is not valid HTTP' },
  url_too_long: { status: 414, type: 'invalid_request_error', message: 'The request URL is too long' },
  header_too_large: {
    status: 431,
    type: 'invalid_request_error',
    message: 'The request headers are too large',
  },
  unsupported_media_type: {
    status: 415,
    type: 'invalid_request_error',
    message: 'Unsupported content type',
  },
  upstream_unreachable: {
    status: 502,
    type: 'upstream_error',
    message: 'The upstream provider is unreachable',
  },
  upstream_bad_response: {
    status: 502,
    type: 'upstream_error',
    message: 'The upstream provider sent an unreadable response',
  },
  provider_key_missing: {
    status: 503,
    type: 'upstream_error',
    message: 'The provider has no upstream API key configured',
  },
  upstream_auth_failed: {
    status: 502,
    type: 'upstream_error',
    message:
      "The upstream provider refused the gateway's credentials; the operator must check the provider key",
  },
  translation_failed: {
    status: 400,
    type: 'invalid_request_error',
    message: 'The request cannot be translated for this provider',
  },
  upstream_timeout: { status: 504, type: 'upstream_error', message: 'The upstream provider timed out' },
  shutting_down: { status: 503, type: 'server_error', message: 'The gateway is shutting down' },
  sidecar_unavailable: {
    status: 503,
    type: 'server_error',
    message: 'The billing sidecar is not running; the webhook was not applied, send it again later',
  },
  internal_error: { status: 500, type: 'server_error', message: 'Internal error' },
} as const satisfies Record<string, CatalogueEntry>;

export type ErrorCode = keyof typeof ERROR_CATALOGUE;

/** An error the gateway answers itself. `detail` is user-facing and must hold no secret or prompt text. */
export class GatewayError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly type: string;
  readonly param: string | undefined;
  constructor(code: ErrorCode, detail?: string, param?: string) {
    const entry: CatalogueEntry = ERROR_CATALOGUE[code];
    super(detail ?? entry.message);
    this.name = 'GatewayError';
    this.code = code;
    this.status = entry.status;
    this.type = entry.type;
    this.param = param;
  }
}

/** Client text quoted in an error message, cut to a bounded length. */
export function clip(text: string, max = 120): string {
  return text.length <= max ? text : `${text.slice(0, max)}…`;
}

/** Coerce anything thrown into a catalogue error without leaking its message. */
export function toGatewayError(err: unknown): GatewayError {
  return err instanceof GatewayError ? err : new GatewayError('internal_error');
}

/** A loggable description of an error: name, code and message, never a stack of secrets. */
export function describeError(err: unknown): { name: string; code?: string; message: string } {
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    return { name: err.name, code: typeof code === 'string' ? code : undefined, message: err.message };
  }
  return { name: 'unknown', message: String(err) };
}
