// HTTP client of the billing service (docs/billing.md): usage ingest and the realtime
// wallet amount. One undici Pool per billing origin, kept alive, so delivery pipelining reuses sockets.
// Never logs the api key or event contents: log lines carry ids, statuses and error codes only.

import type { Logger } from 'pino';
import { Pool, request } from 'undici';
import type { BillingConfig } from '../common/config-types.ts';
import { errorText } from '../common/errors.ts';
import { failSpan, type Tracing } from '../common/tracing.ts';
import type { UsageEvent } from './event/usage-event.ts';

export type IngestResult =
  | { kind: 'ok'; status: number }
  | {
      kind: 'retryable';
      status: number | undefined;
      code: string;
      message: string;
      /**
       * The service looks unreachable or overloaded (refused connection, timeout, 408, 429, 502, 503, 504)
       * rather than unhappy with this event. A connection closed with no answer (`connection_reset`) and
       * other 5xx are neither: billing/delivery/delivery-policy.ts decides those.
       */
      unavailable: boolean;
    }
  | { kind: 'permanent'; status: number; code: string; message: string; hint?: string };

export interface Balance {
  /** Decimal string, compared exactly by callers (decimal.js), never as a float. */
  balance: string;
  currency: string;
  /** The billing service answered that the subject has no wallet: a definite answer, not an outage. */
  noWallet?: true;
}

/**
 * Error codes of a JSON 404 that mean "this subject has no wallet". Any other 404 (the portal's HTML
 * page, an unknown project or route) is a configuration fault and stays a lookup failure.
 */
const NO_WALLET_CODES = new Set(['wallet_not_found', 'account_not_found', 'subject_not_found']);

function errorCodeOf(text: string): string | undefined {
  try {
    const code = (JSON.parse(text) as { error?: { code?: unknown } } | null)?.error?.code;
    return typeof code === 'string' ? code : undefined;
  } catch {
    return undefined;
  }
}

export class BillingRequestError extends Error {
  readonly code: string;
  readonly status: number | undefined;
  constructor(code: string, status: number | undefined, message: string) {
    super(message);
    this.name = 'BillingRequestError';
    this.code = code;
    this.status = status;
  }
}

export type BillingClientConfig = Pick<
  BillingConfig,
  'baseUrl' | 'projectId' | 'apiKey' | 'extractorRuleSetId' | 'requestTimeoutMs'
> & { balanceEnforcement?: Pick<BillingConfig['balanceEnforcement'], 'requestTimeoutMs'> };

export interface BillingClientOptions {
  /** Sockets to the billing origin (default 16). */
  connections?: number;
  logger?: Logger;
  /** A delivery of an event that carries its request's traceparent is a span of that trace. */
  tracing?: Tracing;
}

export interface BillingClient {
  ingest(event: UsageEvent, signal?: AbortSignal, traceparent?: string): Promise<IngestResult>;
  /**
   * Whether the service answers at all: a GET of the ingest path, which carries no event and changes
   * nothing. Any answer but 408, 429 and 5xx counts (405 included); no answer does not.
   */
  probe(): Promise<boolean>;
  getBalance(
    subjectType: string,
    subjectId: string,
    currency: string,
    signal?: AbortSignal,
  ): Promise<Balance>;
  close(): Promise<void>;
}

const PORTAL_HINT =
  'billing.base_url must be the billing API host, not the portal (the portal answers HTML 404)';
const MAX_ERROR_BODY = 8 * 1024;

const TIMEOUT_CODES = new Set(['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);

// The peer closed a connection it had accepted, before answering: what a body-size guard that drops the
// socket mid-upload looks like, and also a service dying mid-request.
const RESET_CODES = new Set(['ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET']);

function errCode(err: unknown): string {
  return typeof err === 'object' && err !== null ? String((err as { code?: unknown }).code) : '';
}

export function createBillingClient(
  config: BillingClientConfig,
  opts: BillingClientOptions = {},
): BillingClient {
  const base = new URL(config.baseUrl);
  const prefix = base.pathname.replace(/\/+$/, '');
  const project = encodeURIComponent(config.projectId);
  const ingestPath = `${prefix}/v1/projects/${project}/extractor-rule-sets/${encodeURIComponent(config.extractorRuleSetId)}/events/ingest`;
  const balancePath = `${prefix}/v1/projects/${project}/wallets/realtime/amount`;
  const authorization = `Bearer ${config.apiKey}`;
  // The pool's own timers bound every ingest (connect, then headers, then each body read): a per-call
  // AbortSignal.timeout costs a timer that always fires and a DOMException per event, which showed in
  // the sidecar's drain profile (docs/architecture.md).
  const pool = new Pool(base.origin, {
    connections: opts.connections ?? 16,
    headersTimeout: config.requestTimeoutMs,
    bodyTimeout: config.requestTimeoutMs,
    connect: { timeout: config.requestTimeoutMs },
  });
  const log = opts.logger;

  const tracing = opts.tracing?.enabled === true ? opts.tracing : undefined;

  async function ingest(
    event: UsageEvent,
    signal?: AbortSignal,
    traceparent?: string,
  ): Promise<IngestResult> {
    if (tracing === undefined || traceparent === undefined) return send(event, signal, undefined);
    const span = tracing.startFromTraceparent('billing ingest', traceparent, {
      'http.request.method': 'POST',
      'server.address': base.hostname,
      'router.request_id': event.raw_json.meta.request_id,
      'router.subject_id': event.subject_id,
    });
    const headers: Record<string, string> = {};
    tracing.inject(span, headers);
    const result = await send(event, signal, headers.traceparent);
    if (result.status !== undefined) span.setAttribute('http.response.status_code', result.status);
    if (result.kind !== 'ok') failSpan(span, result.code);
    span.end();
    return result;
  }

  async function send(
    event: UsageEvent,
    signal: AbortSignal | undefined,
    traceparent: string | undefined,
  ): Promise<IngestResult> {
    let status: number;
    let contentType: string;
    let text = '';
    try {
      const res = await pool.request({
        path: ingestPath,
        method: 'POST',
        headers: {
          authorization,
          'content-type': 'application/json',
          'idempotency-key': event.idempotency_key,
          ...(traceparent === undefined ? {} : { traceparent }),
        },
        body: JSON.stringify(event),
        ...(signal === undefined ? {} : { signal }),
      });
      status = res.statusCode;
      contentType = String(res.headers['content-type'] ?? '');
      if (status >= 200 && status < 300) {
        await res.body.dump({ limit: MAX_ERROR_BODY, ...(signal === undefined ? {} : { signal }) });
        return { kind: 'ok', status };
      }
      text = await readLimited(res.body);
    } catch (err) {
      const raw = errCode(err);
      const code = signal?.aborted
        ? 'aborted'
        : TIMEOUT_CODES.has(raw)
          ? 'timeout'
          : RESET_CODES.has(raw)
            ? 'connection_reset'
            : 'network_error';
      const message = code === 'timeout' ? `no answer within ${config.requestTimeoutMs} ms` : errorText(err);
      return {
        kind: 'retryable',
        status: undefined,
        code,
        message,
        unavailable: code !== 'connection_reset',
      };
    }
    return classifyFailure(status, contentType, text, event);
  }

  function classifyFailure(
    status: number,
    contentType: string,
    text: string,
    event: UsageEvent,
  ): IngestResult {
    const html = contentType.includes('text/html') || /^\s*</.test(text);
    if (status === 404 && html) {
      log?.error(
        { status, request_id: event.external_event_id, hint: PORTAL_HINT },
        'billing ingest got an HTML 404',
      );
      return {
        kind: 'permanent',
        status,
        code: 'portal_html_404',
        message: 'HTML 404 page',
        hint: PORTAL_HINT,
      };
    }
    const message = html ? `HTML error page (${status})` : serviceMessage(text);
    if (status === 408 || status === 429 || status >= 500) {
      const unavailable =
        status === 408 || status === 429 || status === 502 || status === 503 || status === 504;
      return { kind: 'retryable', status, code: `http_${status}`, message, unavailable };
    }
    const code = /not published/i.test(message) ? 'rule_set_not_published' : `http_${status}`;
    return { kind: 'permanent', status, code, message };
  }

  async function probe(): Promise<boolean> {
    try {
      const res = await pool.request({ path: ingestPath, method: 'GET', headers: { authorization } });
      await res.body.dump({ limit: MAX_ERROR_BODY });
      return res.statusCode < 500 && res.statusCode !== 408 && res.statusCode !== 429;
    } catch {
      return false;
    }
  }

  async function getBalance(
    subjectType: string,
    subjectId: string,
    currency: string,
    signal?: AbortSignal,
  ): Promise<Balance> {
    const timeoutMs = config.balanceEnforcement?.requestTimeoutMs ?? config.requestTimeoutMs;
    const timeout = AbortSignal.timeout(timeoutMs);
    const combined = signal ? AbortSignal.any([signal, timeout]) : timeout;
    const query = new URLSearchParams({ subject_type: subjectType, subject_id: subjectId, currency });
    let status: number;
    let text: string;
    try {
      const res = await pool.request({
        path: `${balancePath}?${query}`,
        method: 'GET',
        headers: { authorization, accept: 'application/json' },
        signal: combined,
      });
      status = res.statusCode;
      text = await readLimited(res.body);
    } catch (err) {
      if (timeout.aborted)
        throw new BillingRequestError('timeout', undefined, `no answer within ${timeoutMs} ms`);
      throw new BillingRequestError(signal?.aborted ? 'aborted' : 'network_error', undefined, errorText(err));
    }
    if (status === 404 && NO_WALLET_CODES.has(errorCodeOf(text) ?? '')) {
      return { balance: '0', currency, noWallet: true };
    }
    if (status < 200 || status >= 300) {
      throw new BillingRequestError(
        `http_${status}`,
        status,
        `balance lookup failed: ${serviceMessage(text)}`,
      );
    }
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      throw new BillingRequestError('invalid_response', status, 'balance lookup answered non-JSON');
    }
    const b = body as { balance?: unknown; currency?: unknown } | null;
    const balance =
      typeof b?.balance === 'string'
        ? b.balance
        : typeof b?.balance === 'number'
          ? String(b.balance)
          : undefined;
    if (balance === undefined || !/^-?\d+(\.\d+)?([eE][-+]?\d+)?$/.test(balance)) {
      throw new BillingRequestError(
        'invalid_response',
        status,
        'balance lookup answered without a decimal balance',
      );
    }
    return { balance, currency: typeof b?.currency === 'string' ? b.currency : currency };
  }

  return {
    ingest,
    probe,
    getBalance,
    close: () => pool.close(),
  } satisfies BillingClient;
}

/** Largest `limit` of GET /usage/events/details. */
export const DETAILS_MAX_LIMIT = 1000;

export type DetailsClientConfig = Pick<
  BillingConfig,
  'baseUrl' | 'projectId' | 'readApiKey' | 'requestTimeoutMs'
>;

/**
 * One page of `GET /v1/projects/{project_id}/usage/events/details?limit&offset`: the ingested
 * events as the service returns them, newest first, and its `has_more` when it says. Authorised with
 * billing.read_api_key. Throws a BillingRequestError on any failure; its message never carries the key.
 */
export async function fetchUsageEventDetails(
  config: DetailsClientConfig,
  page: { readonly limit: number; readonly offset: number },
): Promise<{ records: Record<string, unknown>[]; hasMore: boolean | undefined }> {
  const base = new URL(config.baseUrl);
  const prefix = base.pathname.replace(/\/+$/, '');
  const path = `${prefix}/v1/projects/${encodeURIComponent(config.projectId)}/usage/events/details`;
  const url = `${base.origin}${path}?limit=${page.limit}&offset=${page.offset}`;
  let status: number;
  let text: string;
  try {
    const res = await request(url, {
      method: 'GET',
      headers: { authorization: `Bearer ${config.readApiKey}`, accept: 'application/json' },
      headersTimeout: config.requestTimeoutMs,
      bodyTimeout: config.requestTimeoutMs,
    });
    status = res.statusCode;
    text = status >= 200 && status < 300 ? await res.body.text() : await readLimited(res.body);
  } catch (err) {
    throw new BillingRequestError(errCode(err) || 'network_error', undefined, errorText(err));
  }
  if (status === 401 || status === 403) {
    throw new BillingRequestError(
      'unauthorized',
      status,
      `the billing service refused to list usage events (${status}: ${serviceMessage(text)}); ` +
        'billing.read_api_key (default billing.api_key) needs read access to usage events',
    );
  }
  if (status < 200 || status >= 300) {
    const hint = status === 404 && !text.trimStart().startsWith('{') ? ` (${PORTAL_HINT})` : '';
    throw new BillingRequestError(`http_${status}`, status, `${serviceMessage(text)}${hint}`);
  }
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new BillingRequestError('invalid_response', status, 'usage event details: the answer is not JSON');
  }
  const data = Array.isArray(body) ? body : (body as { data?: unknown } | null)?.data;
  if (!Array.isArray(data))
    throw new BillingRequestError('invalid_response', status, 'usage event details: no "data" list');
  const hasMore = (body as { has_more?: unknown } | null)?.has_more;
  return {
    records: data.filter((d): d is Record<string, unknown> => typeof d === 'object' && d !== null),
    hasMore: typeof hasMore === 'boolean' ? hasMore : undefined,
  };
}

async function readLimited(body: AsyncIterable<Buffer>): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    if (size < MAX_ERROR_BODY) chunks.push(chunk);
    size += chunk.length;
  }
  return Buffer.concat(chunks).subarray(0, MAX_ERROR_BODY).toString('utf8');
}

/** The service's own error text, e.g. "extractor rule set is not published"; bounded, single line. */
function serviceMessage(text: string): string {
  let message = text;
  try {
    const body = JSON.parse(text) as { error?: { message?: unknown } | string; message?: unknown };
    if (typeof body.error === 'object' && typeof body.error?.message === 'string')
      message = body.error.message;
    else if (typeof body.error === 'string') message = body.error;
    else if (typeof body.message === 'string') message = body.message;
  } catch {
    // not JSON: keep the text
  }
  return message.replace(/\s+/g, ' ').trim().slice(0, 300);
}
