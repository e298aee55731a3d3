// The hot path's upstream leg: an undici Agent (one keep-alive pool per origin), chosen over
// http-proxy-3 for throughput (docs/architecture.md "Choices and why" has the measurements); no request
// path uses http-proxy-3. Calls go through `Agent.dispatch` with the gateway's own handler and body
// (UpstreamBody), not `request()`, whose per-call Readable, AsyncResource and abort plumbing cost a
// large share of the gateway's CPU per small reply.

import { Agent, type Dispatcher, errors as undiciErrors } from 'undici';
import { GatewayError } from '../common/errors.ts';
import type { UpstreamRequest } from '../common/types.ts';

export interface UpstreamTimeouts {
  readonly headersTimeoutMs: number;
  readonly bodyTimeoutMs: number;
}

export interface UpstreamClientOptions {
  readonly connectTimeoutMs: number;
  /** Connections per origin; undefined = no cap. */
  readonly connections?: number;
}

export interface UpstreamResponse {
  readonly statusCode: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: UpstreamBody;
}

/**
 * A reply body fed by undici's dispatch handler: read whole (`readAll`, JSON replies), iterated chunk by
 * chunk (streams, with backpressure: the connection pauses while more than HIGH_WATER bytes wait), or
 * dumped. It replaces undici's `request()` body (a Readable stream, an AsyncResource and an abort
 * listener per request; see the header for what that cost).
 */
export class UpstreamBody implements AsyncIterable<Buffer> {
  static readonly HIGH_WATER = 64 * 1024;
  #controller: Dispatcher.DispatchController;
  #chunks: Buffer[] = [];
  #queued = 0;
  #ended = false;
  #error: Error | undefined;
  #wake: (() => void) | undefined;
  /** readAll's cap; while collecting, the connection is not paused (the cap bounds memory). */
  #collectLimit = -1;
  #discard = false;

  constructor(controller: Dispatcher.DispatchController) {
    this.#controller = controller;
  }

  /** @internal handler side */
  push(chunk: Buffer): void {
    if (this.#discard) return;
    this.#chunks.push(chunk);
    this.#queued += chunk.length;
    if (this.#collectLimit >= 0) {
      if (this.#queued > this.#collectLimit) {
        const err = tooLarge();
        this.fail(err);
        this.#controller.abort(err);
        return;
      }
    } else if (this.#queued > UpstreamBody.HIGH_WATER) {
      this.#controller.pause();
    }
    this.#notify();
  }

  /** @internal handler side */
  end(): void {
    this.#ended = true;
    this.#notify();
  }

  /** @internal handler side */
  fail(err: Error): void {
    this.#error ??= err;
    this.#notify();
  }

  #notify(): void {
    const wake = this.#wake;
    if (wake !== undefined) {
      this.#wake = undefined;
      wake();
    }
  }

  #wait(): Promise<void> {
    return new Promise((resolve) => {
      this.#wake = resolve;
    });
  }

  /** The whole body, at most `limit` bytes (more aborts the call: upstream_bad_response). */
  async readAll(limit: number): Promise<Buffer> {
    this.#collectLimit = limit;
    if (this.#queued > limit) throw tooLarge();
    this.#controller.resume();
    while (!this.#ended && this.#error === undefined) await this.#wait();
    if (this.#error !== undefined) throw this.#error;
    const chunks = this.#chunks;
    this.#chunks = [];
    this.#queued = 0;
    return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
  }

  /** Discard the body (the connection is reused once it has been read to its end). */
  async dump(): Promise<void> {
    this.#discard = true;
    this.#chunks = [];
    this.#queued = 0;
    this.#controller.resume();
    while (!this.#ended && this.#error === undefined) await this.#wait();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<Buffer> {
    try {
      for (;;) {
        if (this.#chunks.length > 0) {
          const chunks = this.#chunks;
          this.#chunks = [];
          this.#queued = 0;
          if (this.#controller.paused) this.#controller.resume();
          for (const chunk of chunks) yield chunk;
          continue;
        }
        if (this.#error !== undefined) throw this.#error;
        if (this.#ended) return;
        await this.#wait();
      }
    } finally {
      // A consumer that stops early (break, throw) ends the call: the connection cannot be reused.
      if (!this.#ended && this.#error === undefined) {
        this.#discard = true;
        this.#controller.abort(new Error('reply body abandoned'));
      }
    }
  }
}

function tooLarge(): GatewayError {
  return new GatewayError('upstream_bad_response', 'The upstream reply is too large');
}

/**
 * Cancels a request's upstream calls when its client goes away. A plain object with one listener, not an
 * AbortSignal: an AbortController per request (an EventTarget, listeners added and removed per call) was
 * a visible share of a small request's CPU, and a request makes one upstream call at a time.
 */
export class Cancellation {
  #cancelled = false;
  #listener: (() => void) | undefined;
  #instead: (() => void) | undefined;

  get cancelled(): boolean {
    return this.#cancelled;
  }

  cancel(): void {
    if (this.#cancelled) return;
    this.#cancelled = true;
    const instead = this.#instead;
    if (instead === undefined) this.end();
    else instead();
  }

  /**
   * A cancel from now on runs `instead` and leaves the running call on: a stream read on after its client
   * left (billing.interrupted_stream: finish_upstream), which end() stops. undefined: cancels end it again.
   */
  defer(instead: (() => void) | undefined): void {
    this.#instead = instead;
  }

  /** Ends the running call now, if one is running. */
  end(): void {
    const listener = this.#listener;
    this.#listener = undefined;
    listener?.();
  }

  /** The one listener (the running call), or undefined once the call is over. */
  listen(listener: (() => void) | undefined): void {
    this.#listener = listener;
  }
}

function abortError(): Error {
  return new DOMException('This operation was aborted', 'AbortError');
}

/** One upstream call: resolves with the reply head, then feeds the body. */
class ReplyHandler implements Dispatcher.DispatchHandler {
  #resolve: (res: UpstreamResponse) => void;
  #reject: (err: unknown) => void;
  #cancel: Cancellation;
  #controller: Dispatcher.DispatchController | undefined;
  #body: UpstreamBody | undefined;
  #onCancel = (): void => {
    this.#controller?.abort(abortError());
  };

  constructor(
    resolve: (res: UpstreamResponse) => void,
    reject: (err: unknown) => void,
    cancel: Cancellation,
  ) {
    this.#resolve = resolve;
    this.#reject = reject;
    this.#cancel = cancel;
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.#controller = controller;
    if (this.#cancel.cancelled) this.#onCancel();
    else this.#cancel.listen(this.#onCancel);
  }

  onResponseStart(
    controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: Record<string, string | string[] | undefined>,
  ): void {
    if (statusCode < 200) return; // 1xx: informational, the real head follows
    const body = new UpstreamBody(controller);
    this.#body = body;
    this.#resolve({ statusCode, headers, body });
  }

  onResponseData(_controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.#body?.push(chunk);
  }

  onResponseEnd(): void {
    this.#cancel.listen(undefined);
    this.#body?.end();
  }

  onResponseError(_controller: Dispatcher.DispatchController | null, err: Error): void {
    this.#cancel.listen(undefined);
    if (this.#body === undefined) this.#reject(classifyUpstreamError(err));
    else this.#body.fail(err);
  }
}

export class UpstreamClient {
  readonly #agent: Agent;
  /** How to stop each call read on after its client left (finish_upstream); undefined once shutting down. */
  #orphans: Set<() => void> | undefined = new Set();

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
  send(req: UpstreamRequest, timeouts: UpstreamTimeouts, cancel: Cancellation): Promise<UpstreamResponse> {
    const query = req.query.size > 0 ? `?${req.query.toString()}` : '';
    let body: string | Buffer | undefined;
    if (req.body === undefined) body = undefined;
    else if (Buffer.isBuffer(req.body)) body = req.body;
    else body = JSON.stringify(req.body);
    return new Promise<UpstreamResponse>((resolve, reject) => {
      this.#agent.dispatch(
        {
          origin: req.origin,
          path: req.path + query,
          method: req.method as Dispatcher.HttpMethod,
          headers: req.headers,
          body,
          headersTimeout: timeouts.headersTimeoutMs,
          bodyTimeout: timeouts.bodyTimeoutMs,
        },
        new ReplyHandler(resolve, reject, cancel),
      );
    });
  }

  /**
   * Keeps `stop` for a call read on after its client left, until the returned function forgets it; a
   * call that starts reading on after stopOrphans() is stopped at once.
   */
  adopt(stop: () => void): () => void {
    const orphans = this.#orphans;
    if (orphans === undefined) {
      stop();
      return () => {};
    }
    orphans.add(stop);
    return () => orphans.delete(stop);
  }

  /**
   * Shutdown: the calls read on after their client left stop now instead of at their bound, so that they
   * complete (and their usage is queued) while the queue is still open.
   */
  stopOrphans(): void {
    const orphans = this.#orphans;
    this.#orphans = undefined;
    for (const stop of orphans ?? []) stop();
  }

  close(): Promise<void> {
    return this.#agent.close();
  }
}

/**
 * Map a transport error to the catalogue: timeouts -> 504, anything else before a reply -> 502. The
 * transport error stays on the result as its `cause` (not enumerable: never serialized) for the log.
 */
export function classifyUpstreamError(err: unknown): GatewayError | Error {
  if (err instanceof GatewayError) return err;
  if (err instanceof Error && err.name === 'AbortError') return err;
  if (
    err instanceof undiciErrors.HeadersTimeoutError ||
    err instanceof undiciErrors.BodyTimeoutError ||
    err instanceof undiciErrors.ConnectTimeoutError
  ) {
    return withCause(new GatewayError('upstream_timeout'), err);
  }
  return withCause(new GatewayError('upstream_unreachable'), err);
}

function withCause(err: GatewayError, cause: unknown): GatewayError {
  Object.defineProperty(err, 'cause', {
    value: cause,
    writable: true,
    configurable: true,
    enumerable: false,
  });
  return err;
}

/** The log fields of an upstream call that failed before a reply (for the gateway's log, never a client). */
export interface UpstreamFailure {
  /** `host:port` of the upstream (from the origin: no credentials, path or query). */
  readonly upstream: string;
  /**
   * The transport's code: the system's errno name (ECONNREFUSED, ENOTFOUND, ECONNRESET, ETIMEDOUT), the
   * TLS library's (CERT_HAS_EXPIRED, DEPTH_ZERO_SELF_SIGNED_CERT), else undici's (UND_ERR_HEADERS_TIMEOUT).
   */
  readonly code: string | undefined;
  /** The messages of the transport error and its causes, outermost first. */
  readonly cause: string | undefined;
}

/** How deep a chain of causes is followed (undici and fetch wrap one or two levels). */
const CAUSE_DEPTH = 5;

/**
 * Where a failed call went and why, from what `send` rejected with (a catalogue error whose cause is the
 * transport error, or the transport error itself) and the request's origin.
 */
export function upstreamFailure(err: unknown, origin: string): UpstreamFailure {
  const chain: Error[] = [];
  let at: unknown = err;
  while (at instanceof Error && chain.length < CAUSE_DEPTH) {
    if (!(at instanceof GatewayError)) chain.push(at);
    at = at.cause;
  }
  let code: string | undefined;
  let fallback: string | undefined;
  const messages: string[] = [];
  for (const e of chain) {
    const own = (e as { code?: unknown }).code;
    if (typeof own === 'string') {
      // undici's own codes say less than the system's or TLS library's underneath.
      if (own.startsWith('UND_ERR')) fallback ??= own;
      else code ??= own;
    }
    // Happy eyeballs (several addresses tried) fails with an AggregateError of one error per address.
    const parts = e instanceof AggregateError ? e.errors.filter((x) => x instanceof Error) : [];
    const message =
      e.message !== ''
        ? e.message
        : parts
            .map((x: Error) => x.message)
            .filter((m) => m !== '')
            .join('; ');
    if (message !== '' && !messages.includes(message)) messages.push(message);
  }
  return {
    upstream: hostPort(origin),
    code: code ?? fallback,
    cause: messages.length > 0 ? messages.join(': ') : undefined,
  };
}

/** `host:port` of an origin, the scheme's default port written out. */
function hostPort(origin: string): string {
  try {
    const url = new URL(origin);
    const secure = url.protocol === 'https:' || url.protocol === 'wss:';
    const port = url.port !== '' ? url.port : secure ? '443' : '80';
    return `${url.hostname}:${port}`;
  } catch {
    return 'unknown';
  }
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
