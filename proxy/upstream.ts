// The hot path's upstream leg: an undici Agent (one keep-alive pool per origin). The benchmark issue
// measured undici's Pool at about twice the requests/s of http-proxy-3's http.Agent path on this machine
// kind; docs/architecture.md records the choice. http-proxy-3 remains for transparent upgrades.

import { Agent, type Dispatcher, errors as undiciErrors } from 'undici';
import type { UpstreamRequest } from '../hooks/types.ts';
import { GatewayError } from './errors.ts';

export interface UpstreamTimeouts {
  readonly headersTimeoutMs: number;
  readonly bodyTimeoutMs: number;
}

export interface UpstreamClientOptions {
  readonly connectTimeoutMs: number;
  /** Connections per origin; undefined = no cap. */
  readonly connections?: number;
}

export type UpstreamResponse = Dispatcher.ResponseData;

export class UpstreamClient {
  readonly #agent: Agent;

  constructor(opts: UpstreamClientOptions) {
    this.#agent = new Agent({
      // No cap by default: a long stream holds its connection for its whole life, so a per-origin cap
      // would queue new streams behind old ones (at 1,000 concurrent streams, seconds of added TTFB).
      connections: opts.connections ?? null,
      pipelining: 1,
      keepAliveTimeout: 30_000,
      keepAliveMaxTimeout: 120_000,
      connect: { timeout: opts.connectTimeoutMs },
    });
  }

  /** Send a request; errors before the response head become catalogue errors (502 / 504). */
  async send(
    req: UpstreamRequest,
    timeouts: UpstreamTimeouts,
    signal: AbortSignal,
  ): Promise<UpstreamResponse> {
    const query = req.query.size > 0 ? `?${req.query.toString()}` : '';
    let body: string | Buffer | undefined;
    if (req.body === undefined) body = undefined;
    else if (Buffer.isBuffer(req.body)) body = req.body;
    else body = JSON.stringify(req.body);
    try {
      return await this.#agent.request({
        origin: req.origin,
        path: req.path + query,
        method: req.method as Dispatcher.HttpMethod,
        headers: req.headers,
        body,
        signal,
        headersTimeout: timeouts.headersTimeoutMs,
        bodyTimeout: timeouts.bodyTimeoutMs,
      });
    } catch (err) {
      throw classifyUpstreamError(err);
    }
  }

  close(): Promise<void> {
    return this.#agent.close();
  }
}

/** Map a transport error to the catalogue: timeouts -> 504, anything else before a reply -> 502. */
export function classifyUpstreamError(err: unknown): GatewayError | Error {
  if (err instanceof GatewayError) return err;
  if (err instanceof Error && err.name === 'AbortError') return err;
  if (
    err instanceof undiciErrors.HeadersTimeoutError ||
    err instanceof undiciErrors.BodyTimeoutError ||
    err instanceof undiciErrors.ConnectTimeoutError
  ) {
    return new GatewayError('upstream_timeout');
  }
  return new GatewayError('upstream_unreachable');
}

/** Response headers worth forwarding to the client (hop-by-hop and length/encoding are recomputed). */
const DROPPED_RESPONSE_HEADERS = new Set([
  'connection',
  'keep-alive',
  'transfer-encoding',
  'content-length',
  'content-encoding',
  'proxy-authenticate',
  'proxy-connection',
  'trailer',
  'upgrade',
  'te',
  'set-cookie',
  'alt-svc',
  'server',
  'date',
]);

export function forwardableHeaders(
  headers: Record<string, string | string[] | undefined>,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined || DROPPED_RESPONSE_HEADERS.has(name)) continue;
    out[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return out;
}

const baseUrls = new Map<string, { origin: string; prefix: string }>();

/**
 * Origin and path prefix of a provider base URL (`http://h:8000/openai/` -> `http://h:8000`, `/openai`),
 * parsed once per distinct URL: base URLs come from configuration, so the map stays small.
 */
export function splitBaseUrl(baseUrl: string): { origin: string; prefix: string } {
  let hit = baseUrls.get(baseUrl);
  if (hit === undefined) {
    const url = new URL(baseUrl);
    hit = { origin: url.origin, prefix: url.pathname.replace(/\/+$/, '') };
    baseUrls.set(baseUrl, hit);
  }
  return hit;
}
