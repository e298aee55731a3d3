// Webhooks may reach the gateway's own port (one public address for both); the sidecar verifies and
// applies them, so the gateway streams them there untouched (the signature covers the raw bytes). Only
// end-to-end headers go along: framing (chunked, Content-Length) is the forwarding leg's own, and an
// `Expect: 100-continue` was already answered by this server.

import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { request } from 'undici';
import type { RouterConfig } from '../common/config-types.ts';
import { describeError, GatewayError } from '../common/errors.ts';
import { DEFAULT_FAMILY } from '../hooks/families/index.ts';
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
  // An oversized webhook is refused here, not streamed to the sidecar (which would refuse it too).
  const declared = Number(req.headers['content-length']);
  if (declared > config.billing.balanceEnforcement.webhookMaxBodyBytes) {
    const text =
      '{"error":{"message":"webhook body is too large","type":"webhook_error","code":"payload_too_large"}}';
    res.writeHead(413, { 'content-type': 'application/json', connection: 'close' });
    res.end(text);
    return;
  }
  const waitMs = config.sidecar.webhookWaitMs;
  if (sidecar?.supervised === true && sidecar.state !== 'up' && !(await sidecar.whenUp(waitMs))) {
    log.warn({ waitedMs: waitMs }, 'webhook refused: the supervised billing sidecar is not up');
    req.resume();
    return unavailable(res, requestId, 'The billing sidecar is not running yet');
  }
  const { host, port } = config.billing.listen;
  const target = `http://${host.includes(':') ? `[${host}]` : host}:${port}${req.url ?? '/'}`;
  try {
    const reply = await request(target, {
      method: 'POST',
      headers: forwardedHeaders(req.headers),
      body: req,
      headersTimeout: 10_000,
      bodyTimeout: 10_000,
    });
    const body = await reply.body.arrayBuffer();
    const out: Record<string, string> = {};
    const ct = reply.headers['content-type'];
    if (typeof ct === 'string') out['content-type'] = ct;
    res.writeHead(reply.statusCode, out);
    res.end(Buffer.from(body));
  } catch (err) {
    log.warn({ err: describeError(err) }, 'webhook forward to the billing sidecar failed');
    unavailable(res, requestId, 'The billing sidecar is unreachable');
  }
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
