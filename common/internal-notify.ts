// The sidecar -> gateway "subject state changed" notice that closes the stale window of file mode: after
// the sidecar has persisted a webhook's state change and BEFORE it answers the webhook 2xx, it tells the
// gateway, which reloads the state file and drops the subject's cached balance, then answers. So once
// the billing service sees its 2xx, the very next request of that subject already sees the new state.
// The notice carries no state (the gateway re-reads the file, which is authoritative and immune to
// reordering); it is accepted only from loopback and only with an HMAC keyed by the webhook secret,
// domain-separated from webhook signatures so neither can stand in for the other.

import { createHmac, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { request } from 'undici';
import { errorText } from './errors.ts';
import type { SubjectRef } from './store-types.ts';

export const SUBJECT_STATE_PATH = '/internal/router/subject-state';
export const NOTICE_SIGNATURE_HEADER = 'x-router-notice-signature';
export const NOTICE_TIMESTAMP_HEADER = 'x-router-notice-timestamp';
/** Set by the gateway for its supervised sidecar: where the notice goes (the gateway may listen on port 0). */
export const GATEWAY_URL_ENV = 'ROUTER_INTERNAL_GATEWAY_URL';
/** Set by `router` for its sidecar child: stop when stdin (a pipe from the gateway) closes. */
export const SUPERVISED_ENV = 'ROUTER_SIDECAR_SUPERVISED';

const NOTICE_MAX_BYTES = 16 * 1024;
const NOTICE_TOLERANCE_S = 60;
const DEFAULT_TIMEOUT_MS = 2_000;

export interface SubjectStateNotice {
  readonly subject_type: string;
  readonly subject_id: string;
  readonly event_id: string;
  readonly event_type: string;
}

export function signNotice(secret: string, timestamp: string, body: string | Buffer): string {
  return createHmac('sha256', secret).update(`router-subject-state.${timestamp}.`).update(body).digest('hex');
}

/** Loopback peers only: the notice never crosses the network. */
export function isLoopback(address: string | undefined): boolean {
  if (address === undefined) return false;
  return address === '::1' || address.startsWith('127.') || address.startsWith('::ffff:127.');
}

/** http://host:port a local process can reach for a listen address (wildcards become loopback). */
export function loopbackUrl(host: string, port: number): string {
  if (host === '0.0.0.0' || host === '') return `http://127.0.0.1:${port}`;
  if (host === '::') return `http://[::1]:${port}`;
  return host.includes(':') ? `http://[${host}]:${port}` : `http://${host}:${port}`;
}

export interface StateNotifierOptions {
  /** Gateway base URL; a function when it is only known later (a gateway listening on port 0). */
  readonly gatewayUrl: string | undefined | (() => string | undefined);
  readonly secret: string;
  readonly timeoutMs?: number;
  readonly log?: Logger;
  readonly now?: () => number;
}

export type StateNotifier = (notice: SubjectStateNotice) => Promise<boolean>;

/**
 * The sidecar side. Resolves true when the gateway applied the notice, false when it could not be told
 * (down, slow, refused): the webhook is still answered 2xx, because the state is on disk and a gateway
 * loads it at start and on its file watch.
 */
export function createStateNotifier(opts: StateNotifierOptions): StateNotifier {
  const now = opts.now ?? Date.now;
  return async function notifyGateway(notice) {
    const base = typeof opts.gatewayUrl === 'function' ? opts.gatewayUrl() : opts.gatewayUrl;
    if (base === undefined || opts.secret === '') return false;
    const body = JSON.stringify(notice);
    const timestamp = String(Math.floor(now() / 1000));
    const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    try {
      const res = await request(`${base}${SUBJECT_STATE_PATH}`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          [NOTICE_TIMESTAMP_HEADER]: timestamp,
          [NOTICE_SIGNATURE_HEADER]: signNotice(opts.secret, timestamp, body),
        },
        body,
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
        signal: AbortSignal.timeout(timeoutMs),
      });
      await res.body.dump();
      if (res.statusCode >= 200 && res.statusCode < 300) return true;
      opts.log?.warn({ status: res.statusCode }, 'gateway refused the subject state notice');
      return false;
    } catch (err) {
      opts.log?.warn(
        { err: errorText(err) },
        'gateway unreachable for the subject state notice; it will load the state file itself',
      );
      return false;
    }
  };
}

export interface NoticeHandlerOptions {
  readonly secret: string;
  /** Apply the change: reload the state, drop the subject's cached balance. */
  readonly apply: (subject: SubjectRef, notice: SubjectStateNotice) => Promise<void>;
  readonly log?: Logger;
  readonly now?: () => number;
}

/** The gateway side: answers 204 only once the new state is applied. */
export function createNoticeHandler(
  opts: NoticeHandlerOptions,
): (req: IncomingMessage, res: ServerResponse) => Promise<void> {
  const now = opts.now ?? Date.now;
  return async function handleNotice(req, res) {
    if (!isLoopback(req.socket.remoteAddress)) {
      req.resume();
      return reply(res, 403, 'forbidden');
    }
    const body = await readCapped(req, NOTICE_MAX_BYTES);
    if (body === undefined) {
      return replyTooLarge(
        res,
        JSON.stringify({ error: { message: 'too large', type: 'internal_notice_error' } }),
      );
    }
    const ts = header(req, NOTICE_TIMESTAMP_HEADER);
    const sig = header(req, NOTICE_SIGNATURE_HEADER);
    if (opts.secret === '' || ts === undefined || sig === undefined || !/^\d{1,12}$/.test(ts)) {
      return reply(res, 401, 'unauthorized');
    }
    const expected = Buffer.from(signNotice(opts.secret, ts, body), 'hex');
    const given = /^[0-9a-f]{64}$/.test(sig) ? Buffer.from(sig, 'hex') : Buffer.alloc(expected.length);
    const fresh = Math.abs(now() / 1000 - Number(ts)) <= NOTICE_TOLERANCE_S;
    if (!timingSafeEqual(given, expected) || !fresh) return reply(res, 401, 'unauthorized');
    let notice: SubjectStateNotice;
    try {
      notice = JSON.parse(body.toString('utf8')) as SubjectStateNotice;
    } catch {
      return reply(res, 400, 'malformed');
    }
    if (typeof notice?.subject_type !== 'string' || typeof notice.subject_id !== 'string') {
      return reply(res, 400, 'malformed');
    }
    try {
      await opts.apply({ type: notice.subject_type, id: notice.subject_id }, notice);
    } catch (err) {
      opts.log?.error({ err: errorText(err) }, 'applying a subject state notice failed');
      return reply(res, 500, 'apply failed');
    }
    res.writeHead(204);
    res.end();
  };
}

function header(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return typeof v === 'string' ? v : undefined;
}

function reply(res: ServerResponse, status: number, message: string): void {
  const text = JSON.stringify({ error: { message, type: 'internal_notice_error' } });
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/**
 * The whole body, or undefined as soon as it exceeds `max` (declared or actual length): the caller
 * then answers 413 with `connection: close`, and the rest of the upload is never buffered.
 */
export function readCapped(req: IncomingMessage, max: number): Promise<Buffer | undefined> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > max) return Promise.resolve(undefined);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    function onData(chunk: Buffer): void {
      size += chunk.length;
      if (size > max) {
        cleanup();
        chunks.length = 0;
        resolve(undefined);
        return;
      }
      chunks.push(chunk);
    }
    function onEnd(): void {
      cleanup();
      resolve(Buffer.concat(chunks, size));
    }
    function onError(err: Error): void {
      cleanup();
      reject(err);
    }
    function cleanup(): void {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
    }
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
  });
}

/** 413 for an oversized body; the connection closes so the unread rest of the upload is dropped. */
export function replyTooLarge(res: ServerResponse, body: string): void {
  res.writeHead(413, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
    connection: 'close',
  });
  res.end(body);
}
