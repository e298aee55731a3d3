// The per-request context the hooks see (common/types.ts RequestContext), as one class.

import type { IncomingMessage } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { RequestContext } from '../common/types.ts';
import type { RequestTrace } from './request-trace.ts';
import type { Route } from './routes.ts';
import { Cancellation } from './upstream.ts';

const EMPTY = Buffer.alloc(0);

/**
 * The per-request context as a class: one stable shape for every request, its fields in one place, and
 * the logger and abort signal created on first use (most requests need neither: the gateway cancels its
 * upstream call through a Cancellation, and logs below the access line are rare).
 */
export class Context implements RequestContext {
  readonly id: string;
  correlationId: string | undefined = undefined;
  readonly api: RequestContext['api'];
  readonly clientFormat: RequestContext['clientFormat'];
  readonly method: string;
  readonly path: string;
  readonly query: URLSearchParams;
  readonly headers: RequestContext['headers'];
  readonly receivedAt = Date.now();
  readonly startedAt = performance.now();
  body: RequestContext['body'] = undefined;
  rawBody: Buffer = EMPTY;
  model: string | undefined;
  stream: boolean;
  principal: RequestContext['principal'] = undefined;
  provider: string | undefined = undefined;
  upstreamModel: string | undefined = undefined;
  channel: string | undefined = undefined;
  upstreamTtfbMs: number | undefined = undefined;
  firstTokenMs: number | undefined = undefined;
  status = 0;
  usage: RequestContext['usage'] = undefined;
  usageStage: RequestContext['usageStage'] = undefined;
  endReason: RequestContext['endReason'] = undefined;
  responseStarted = false;
  clientAborted = false;
  deliveredText: string[] = [];
  error: RequestContext['error'] = undefined;
  /** The request's spans, when tracing is on. */
  trace: RequestTrace | undefined = undefined;
  storeView: unknown = undefined;
  hookSlot: object | undefined = undefined;
  hookValue: unknown = undefined;
  hookState: Map<object, unknown> | undefined = undefined;
  replyHold: Promise<void> | undefined = undefined;
  readonly #rootLog: RequestContext['log'];
  #log: RequestContext['log'] | undefined = undefined;
  #abort: AbortController | undefined = undefined;
  /** What the gateway's own upstream calls listen to (cheaper than the signal, which hooks may ask for). */
  readonly cancellation = new Cancellation();

  constructor(
    rootLog: RequestContext['log'],
    route: Extract<Route, { kind: 'proxy' }>,
    req: IncomingMessage,
    id: string,
    path: string,
    query: URLSearchParams,
  ) {
    this.#rootLog = rootLog;
    this.id = id;
    this.api = route.api;
    this.clientFormat = route.format;
    this.method = req.method ?? 'POST';
    this.path = path;
    this.query = query;
    this.headers = req.headers;
    this.model = route.pathModel;
    this.stream = route.pathStream === true;
  }

  get log(): RequestContext['log'] {
    if (this.#log === undefined) {
      const fields: Record<string, string> = { reqId: this.id };
      if (this.correlationId !== undefined) fields.correlationId = this.correlationId;
      if (this.trace !== undefined) {
        fields.traceId = this.trace.traceId;
        fields.spanId = this.trace.spanId;
      }
      this.#log = this.#rootLog.child(fields);
    }
    return this.#log;
  }

  /** Made when asked (billing asks): most of a request's life never needs the string. */
  get traceparent(): string | undefined {
    return this.trace?.traceparent();
  }

  get signal(): AbortSignal {
    if (this.#abort === undefined) {
      this.#abort = new AbortController();
      if (this.clientAborted) this.#abort.abort();
    }
    return this.#abort.signal;
  }

  /** The client went away: the upstream call is cancelled and the signal (if anyone asked) aborts. */
  abort(): void {
    this.clientAborted = true;
    this.cancellation.cancel();
    this.#abort?.abort();
  }
}
