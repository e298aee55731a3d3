// HTTP client of the billing service (Meterry, spec 4.3 and conventions.md): usage ingest and the realtime
// wallet amount. One undici Pool per billing origin, kept alive, so delivery pipelining reuses sockets.
// Never logs the api key or event contents: log lines carry ids, statuses and error codes only.

import type { Logger } from 'pino';
import { Pool } from 'undici';
import type { BillingConfig } from '../proxy/config/types.ts';
import type { UsageEvent } from './types.ts';

export type IngestResult =
  | { kind: 'ok'; status: number }
  | {
      kind: 'retryable';
      status: number | undefined;
      code: string;
      message: string;
      /**
       * The service looks unreachable or overloaded (network error, timeout, 408, 429, 502, 503, 504) rather
       * than unhappy with this event; the delivery worker does not count such failures toward dead-lettering.
       */
      unavailable: boolean;
    }
  | { kind: 'permanent'; status: number; code: string; message: string; hint?: string };

export interface Balance {
  /** Decimal string, compared exactly by callers (decimal.js), never as a float. */
  balance: string;
  currency: string;
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
}

export interface BillingClient {
  ingest(event: UsageEvent, signal?: AbortSignal): Promise<IngestResult>;
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

/** undici's own timeouts (connect, headers, body), as opposed to refusals and resets. */
function isTimeout(err: unknown): boolean {
  return (
    typeof err === 'object' && err !== null && TIMEOUT_CODES.has(String((err as { code?: unknown }).code))
  );
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
  // AbortSignal.timeout costed a timer that always fires and a DOMException per event, about 14% of the
  // sidecar's CPU while draining (bench profile).
  const pool = new Pool(base.origin, {
    connections: opts.connections ?? 16,
    headersTimeout: config.requestTimeoutMs,
    bodyTimeout: config.requestTimeoutMs,
    connect: { timeout: config.requestTimeoutMs },
  });
  const log = opts.logger;

  async function ingest(event: UsageEvent, signal?: AbortSignal): Promise<IngestResult> {
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
      const code = isTimeout(err) ? 'timeout' : signal?.aborted ? 'aborted' : 'network_error';
      const message =
        code === 'timeout' ? `no answer within ${config.requestTimeoutMs} ms` : errorMessage(err);
      return { kind: 'retryable', status: undefined, code, message, unavailable: true };
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
      throw new BillingRequestError(
        signal?.aborted ? 'aborted' : 'network_error',
        undefined,
        errorMessage(err),
      );
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
    getBalance,
    close: () => pool.close(),
  } satisfies BillingClient;
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

function errorMessage(err: unknown): string {
  const e = err as { code?: unknown; message?: unknown };
  const code = typeof e?.code === 'string' ? `${e.code}: ` : '';
  return `${code}${typeof e?.message === 'string' ? e.message : String(err)}`.slice(0, 300);
}
