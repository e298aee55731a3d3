// Webhooks may reach the gateway's own port (one public address for both); the sidecar verifies and
// applies them, so the gateway passes the raw bytes on untouched (the signature covers them). Only
// end-to-end headers go along: framing (chunked, Content-Length) is the forwarding leg's own, and an
// `Expect: 100-continue` was already answered by this server.

import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { request } from 'undici';
import { backoffDelay } from '../common/backoff.ts';
import type { RouterConfig } from '../common/config-types.ts';
import { errorText, GatewayError } from '../common/errors.ts';
import { DEFAULT_FAMILY } from '../hooks/families/index.ts';
import { readBody } from './request-body.ts';
import type { SidecarStatus } from './sidecar-status.ts';

const HOP_BY_HOP = new Set([
  'connection',
  'expect',
  'host',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/** The request's end-to-end headers (and none that its Connection header names). */
export function forwardedHeaders(headers: IncomingMessage['headers']): Record<string, string> {
  const named = new Set(
    String(headers.connection ?? '')
      .split(',')
      .map((h) => h.trim().toLowerCase()),
  );
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers)) {
    if (v === undefined || HOP_BY_HOP.has(k) || named.has(k)) continue;
    out[k] = Array.isArray(v) ? v.join(', ') : v;
  }
  return out;
}

export async function forwardToSidecar(
  config: RouterConfig,
  req: IncomingMessage,
  res: ServerResponse,
  log: Logger,
  sidecar: SidecarStatus | undefined,
): Promise<void> {
  const requestId = String(res.getHeader('x-router-request-id') ?? '-');
  // Buffered (webhooks are small and capped) so that a send the sidecar never received can be repeated.
  let body: Buffer;
  try {
    body = await readBody(
      req,
      config.billing.balanceEnforcement.webhookMaxBodyBytes,
      config.limits.clientBodyTimeoutMs,
    );
  } catch (err) {
    if (err instanceof GatewayError && err.code === 'request_too_large') {
      const text =
        '{"error":{"message":"webhook body is too large","type":"webhook_error","code":"payload_too_large"}}';
      res.writeHead(413, { 'content-type': 'application/json', connection: 'close' });
      res.end(text);
      return;
    }
    if (!(err instanceof GatewayError)) throw err;
    res.writeHead(err.status, { 'content-type': 'application/json', connection: 'close' });
    res.end(JSON.stringify(DEFAULT_FAMILY.errorBody(err, requestId)));
    return;
  }
  const headers = forwardedHeaders(req.headers);
  headers['content-length'] = String(body.length);
  const { host, port } = config.billing.listen;
  const target = `http://${host.includes(':') ? `[${host}]` : host}:${port}${req.url ?? '/'}`;
  const deadline = Date.now() + config.sidecar.webhookWaitMs;
  const supervised = sidecar?.supervised === true;
  for (let attempt = 0; ; attempt++) {
    if (supervised && sidecar.state !== 'up' && !(await sidecar.whenUp(deadline - Date.now()))) {
      log.warn(
        { waitedMs: config.sidecar.webhookWaitMs },
        'webhook refused: the supervised billing sidecar is not up',
      );
      return unavailable(res, requestId, 'The billing sidecar is not running yet');
    }
    try {
      const reply = await request(target, {
        method: 'POST',
        headers,
        body,
        headersTimeout: 10_000,
        bodyTimeout: 10_000,
      });
      const answer = await reply.body.arrayBuffer();
      const out: Record<string, string> = {};
      const ct = reply.headers['content-type'];
      if (typeof ct === 'string') out['content-type'] = ct;
      res.writeHead(reply.statusCode, out);
      res.end(Buffer.from(answer));
      return;
    } catch (err) {
      // A supervised sidecar that is being restarted refuses or drops connections until the gateway
      // notices its exit; the webhook waits for it like one sent while it starts. Repeating a send is
      // safe: the sidecar applies each webhook id once.
      const wait = backoffDelay(attempt + 1, 50, 1000);
      if (supervised && isConnectionFailure(err) && Date.now() + wait < deadline) {
        await new Promise((r) => setTimeout(r, wait));
        continue;
      }
      log.warn({ err: errorText(err) }, 'webhook forward to the billing sidecar failed');
      return unavailable(res, requestId, 'The billing sidecar is unreachable');
    }
  }
}

const CONNECTION_FAILURES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
]);

function isConnectionFailure(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && CONNECTION_FAILURES.has(code);
}

function unavailable(res: ServerResponse, requestId: string, why: string): void {
  const e = new GatewayError(
    'sidecar_unavailable',
    `${why}; the webhook was not applied, send it again later`,
  );
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(503, { 'content-type': 'application/json', 'retry-after': '1' });
  res.end(JSON.stringify(DEFAULT_FAMILY.errorBody(e, requestId)));
}
