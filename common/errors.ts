// The error catalogue: every error the gateway itself answers has a stable code, an HTTP status, a
// completion-style `type` and a user-facing message. Anything not in the catalogue becomes
// `internal_error` with the request id and no internals. Bodies are shaped for the client's wire family
// by the family's module (hooks/families), so each official SDK raises a proper error.

interface CatalogueEntry {
  readonly status: number;
  readonly type: string;
  readonly message: string;
}

function entry(type: string) {
  return (status: number, message: string): CatalogueEntry => ({ status, type, message });
}
const auth = entry('authentication_error');
const billing = entry('billing_error');
const upstream = entry('upstream_error');
const server = entry('server_error');
const rateLimit = entry('rate_limit_error');
const invalidEntry = entry('invalid_request_error');
const invalid = (message: string, status = 400) => invalidEntry(status, message);

export const ERROR_CATALOGUE = {
  invalid_api_key: auth(401, 'Invalid or missing access key'),
  insufficient_balance: billing(
    402,
    'The account balance is insufficient for this request; top up the wallet and retry',
  ),
  billing_unavailable: billing(503, 'The balance check is temporarily unavailable'),
  authentication_unavailable: auth(503, 'Access keys cannot be verified right now'),
  rate_limit_requests: rateLimit(429, 'Rate limit reached for requests per minute'),
  rate_limit_tokens: rateLimit(429, 'Rate limit reached for tokens per minute'),
  concurrency_limit: rateLimit(429, 'Too many requests in flight at once'),
  rate_limit_unavailable: server(503, 'Rate limits cannot be checked right now; retry shortly'),
  model_not_allowed: entry('permission_error')(403, 'This access key may not use this model'),
  invalid_json: invalid('The request body is not valid JSON'),
  invalid_parameter: invalid('Invalid request parameter'),
  invalid_model: invalid('The model name is not valid'),
  invalid_path: invalid('The request path has malformed percent-encoding'),
  json_too_deep: invalid('The request body nests arrays and objects too deeply'),
  request_timeout: invalid('The request was not received in time', 408),
  provider_not_selected: invalid('No provider could be selected for this request'),
  unknown_provider: invalid('Unknown provider'),
  provider_not_offered: invalid('The provider named by the x-router-provider header is not offered here'),
  no_matching_rule: invalid('The provider has no configuration for this API'),
  model_not_found: invalid('The model does not exist', 404),
  not_found: invalid('Unknown endpoint', 404),
  // Stored responses (docs/translation.md "Stored responses"): unknown, expired, not stored
  // (`store: false`) or another subject's all read the same.
  previous_response_not_found: invalid('The previous response was not found', 404),
  item_not_found: invalid('The referenced item was not found', 404),
  response_not_found: invalid('The response was not found', 404),
  stored_response_unavailable: server(503, 'Stored responses cannot be read right now; retry shortly'),
  method_not_allowed: invalid('Method not allowed', 405),
  request_too_large: invalid('The request body is too large', 413),
  malformed_request: invalid('The request is not valid HTTP'),
  url_too_long: invalid('The request URL is too long', 414),
  header_too_large: invalid('The request headers are too large', 431),
  unsupported_media_type: invalid('Unsupported content type', 415),
  upstream_unreachable: upstream(502, 'The upstream provider is unreachable'),
  upstream_bad_response: upstream(502, 'The upstream provider sent an unreadable response'),
  provider_key_missing: upstream(503, 'The provider has no upstream API key configured'),
  upstream_auth_failed: upstream(
    502,
    "The upstream provider refused the gateway's credentials; the operator must check the provider key",
  ),
  translation_failed: invalid('The request cannot be translated for this provider'),
  count_unavailable: invalid(
    'The gateway cannot count this request for this provider; count it with your own estimate',
    422,
  ),
  upstream_timeout: upstream(504, 'The upstream provider timed out'),
  // The provider throttles the gateway's credentials (Bedrock ThrottlingException, Vertex
  // RESOURCE_EXHAUSTED): not the gateway's own rate_limit_* codes, which are about the client's key.
  upstream_rate_limited: rateLimit(429, 'The upstream provider is throttling requests; retry later'),
  shutting_down: server(503, 'The gateway is shutting down'),
  sidecar_unavailable: server(
    503,
    'The billing sidecar is not running; the webhook was not applied, send it again later',
  ),
  internal_error: server(500, 'Internal error'),
} as const satisfies Record<string, CatalogueEntry>;

export type ErrorCode = keyof typeof ERROR_CATALOGUE;

/** An error the gateway answers itself. `detail` is user-facing and must hold no secret or prompt text. */
export class GatewayError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly type: string;
  readonly param: string | undefined;
  /** When the client may retry (a rate limit's refusal); families that carry it in the body do. */
  retryAfterMs: number | undefined = undefined;
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

/**
 * An error message naming the request id once: behind another gateway that passed the same id on, the
 * upstream's message already ends with it.
 */
export function withRequestId(message: string, requestId: string): string {
  const tag = `(request id: ${requestId})`;
  return message.endsWith(tag) ? message : `${message} ${tag}`;
}

/** Client text quoted in an error message, cut to a bounded length. */
export function clip(text: string, max = 120): string {
  return text.length <= max ? text : `${text.slice(0, max)}…`;
}

/** Coerce anything thrown into a catalogue error without leaking its message. */
export function toGatewayError(err: unknown): GatewayError {
  return err instanceof GatewayError ? err : new GatewayError('internal_error');
}

const ERROR_TEXT_MAX = 1000;

/** What errorText masks: credentials as headers, URLs and query strings carry them, and key shapes. */
const SECRET_PATTERNS: readonly [RegExp, string][] = [
  [/\b(Bearer|Basic)\s+[\w.~+/=-]+/gi, '$1 [redacted]'],
  [/\b([a-z][a-z0-9+.-]*:\/\/)[^\s/@]*:[^\s/@]*@/gi, '$1[redacted]@'],
  [/\b((?:x-)?(?:api-key|goog-api-key|authorization)\s*[:=]\s*)\S+/gi, '$1[redacted]'],
  [/([?&;\s](?:key|api_?key|access_token|token|password|secret)=)[^&\s;]+/gi, '$1[redacted]'],
  [/\b(?:sk|ak|rk|pk)[-_][\w-]{12,}|\bAIza[\w-]{20,}/g, '[redacted]'],
  // Cloud credentials: key files, form fields of token grants, signed-URL parameters, keys-file fields.
  [/-----BEGIN [A-Z ]*PRIVATE KEY-----[^"]*/g, '[redacted]'],
  [
    /\b((?:client_secret|assertion|x-amz-security-token|x-amz-signature|secret_access_key|session_token|private_key)["']?\s*[:=]\s*["']?)[^\s"'&,;]+/gi,
    '$1[redacted]',
  ],
  [/\b(?:AKIA|ASIA)[A-Z0-9]{16}\b/g, '[redacted]'],
];

/**
 * The one text of anything caught, for log fields, CLI messages, diagnostics and internal replies: an
 * Error's message (its `code` added when the message lacks it; an AggregateError without one tells its
 * first error), String() of anything else. Safe for logs, so it is cut down: only the first line (what
 * follows is a stack, a parser's code frame or Node's require stack, which quote files), the input a JSON
 * parser quotes dropped (it can be prompt text), credentials in the shapes above masked, at most 1,000
 * characters. A client's error body is never built from it: that is the catalogue's (GatewayError).
 */
export function errorText(err: unknown): string {
  let text: string;
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    const inner = err instanceof AggregateError ? err.errors[0] : undefined;
    text = err.message !== '' ? err.message : inner !== undefined ? errorText(inner) : err.name;
    if (typeof code === 'string' && code !== '' && !text.includes(code)) text = `${text} (${code})`;
  } else text = String(err);
  text = text.trim().split('\n', 1)[0] ?? '';
  text = text.replace(/(?:\.\.\.)?"[\s\S]*"(?:\.\.\.)? is not valid JSON/, 'the input is not valid JSON');
  for (const [pattern, mask] of SECRET_PATTERNS) text = text.replace(pattern, mask);
  return clip(text, ERROR_TEXT_MAX);
}
