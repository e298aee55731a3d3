// The gateway's HTTP server: routes a request, builds its context, runs the hook stages in their fixed
// order (docs/lifecycle.md) and relays the upstream reply: raw bytes when every response hook only
// observes, parsed events or JSON when a hook transforms. Configuration is a compiled Runtime captured
// at the start of each request, so a reload never changes a request in flight.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { splitBaseUrl } from '../common/base-url.ts';
import { clip, describeError, type ErrorCode, GatewayError, toGatewayError } from '../common/errors.ts';
import type {
  Hook,
  JsonObject,
  JsonValue,
  RequestContext,
  ResponseHead,
  ResponsePart,
  UpstreamRequest,
  WireFormat,
} from '../common/types.ts';
import type { CompiledRule } from '../hooks/dsl/types.ts';
import {
  carrierFamily,
  errorBody,
  errorEvent,
  FORWARDED_REQUEST_HEADERS,
  upstreamQuery,
} from '../hooks/families/index.ts';
import { clientErrorCode, type ParserError, rawErrorResponse } from './client-errors.ts';
import { ConnectionGuard, fitToDescriptors, readNofile } from './connection-guard.ts';
import { DELIVERED_TEXT_LIMIT, recordDelivered } from './metering.ts';
import { MODEL_NAME_RULE, modelNameProblem } from './model-name.ts';
import {
  runOnComplete,
  runOnRequest,
  runResponseChunk,
  runResponseEnd,
  runResponseHead,
  runRewriteBody,
  runSelectTarget,
} from './pipeline.ts';
import { bodyTimedOut, parseJsonBody, readBody, readMultipartFields } from './request-body.ts';
import { requestIdPolicy } from './request-id.ts';
import { type Route, resolveRoute } from './routes.ts';
import type { RuleHooks, Runtime } from './runtime.ts';
import { endsWithBlankLine, type SseEvent, SseReader, serializeEvent } from './sse.ts';
import {
  Cancellation,
  classifyUpstreamError,
  forwardableHeaders,
  type UpstreamResponse,
} from './upstream.ts';

/** JSON replies up to this size are observed before any byte is sent; larger ones stream but a byte. */
const OBSERVE_FIRST_BYTES = 16 * 1024;

/** Largest upstream JSON reply the gateway parses (images as base64 can be large). */
const MAX_JSON_REPLY_BYTES = 256 * 1024 * 1024;

export interface GatewayServer {
  readonly server: Server;
  /** Swap the compiled configuration; requests in flight keep the one they started with. */
  setRuntime(runtime: Runtime): void;
  runtime(): Runtime;
  /**
   * Fail /readyz but keep serving, so load balancers stop sending before the listener closes
   * (the first step of a graceful shutdown when a shutdown delay is configured).
   */
  unready(): void;
  /** Flip readiness to failing and stop accepting new requests (graceful shutdown). */
  drain(): void;
  /** Requests currently in flight. */
  inFlight(): number;
  /** Resolves once no request that started on `runtime` is in flight (reload: retire the old one). */
  settled(runtime: Runtime): Promise<void>;
  /** Client connections open. */
  connections(): number;
}

/** The metric reason of each answer the clientError handler gives, but timeouts. */
const CLIENT_REJECTION: Partial<Record<ErrorCode, string>> = {
  header_too_large: 'header_too_large',
  url_too_long: 'url_too_long',
  request_too_large: 'chunk_extensions_too_large',
  malformed_request: 'malformed',
};

export function createGatewayServer(initial: Runtime): GatewayServer {
  let current = initial;
  let phase: ServingPhase = 'serving';
  let active = 0;
  // Requests in flight per runtime, and who waits for a runtime to have none (reload retires it).
  const users = new Map<Runtime, { count: number; idle: (() => void)[] }>();
  const release = (rt: Runtime) => {
    const u = users.get(rt);
    if (u === undefined || --u.count > 0) return;
    users.delete(rt);
    for (const resolve of u.idle) resolve();
  };

  const metrics = initial.metrics;
  const guard = new ConnectionGuard(Number.POSITIVE_INFINITY, (reason) =>
    metrics.connectionsShed.inc({ reason }),
  );
  const nofile = readNofile();
  const server = createServer(
    {
      noDelay: true,
      // No whole-request deadline: a request body may take long as long as it keeps arriving (readBody
      // times out silence), and a reply (a stream) is never cut by a client-side timer.
      requestTimeout: 0,
      // How late past client_header_timeout_ms a stalled head is answered (Node checks on an interval).
      connectionsCheckingInterval: Math.max(
        10,
        Math.min(1000, initial.config.limits.clientHeaderTimeoutMs / 4),
      ),
    },
    (req, res) => {
      active++;
      const rt = current;
      const u = users.get(rt);
      if (u === undefined) users.set(rt, { count: 1, idle: [] });
      else u.count++;
      const socket = req.socket;
      guard.requestStarted(socket);
      // In flight until the reply has closed and the handler has returned (the usage event of a cut
      // request is queued after its close): shutdown and reload close the runtime only after both.
      let open = 2;
      const ended = () => {
        if (--open > 0) return;
        active--;
        release(rt);
      };
      res.on('close', () => {
        ended();
        guard.requestEnded(socket);
        // The rest of a stalled body would be read as the next request: the connection ends here.
        if (!req.complete && bodyTimedOut(req)) {
          metrics.clientTimeouts.inc({ kind: 'body' });
          socket.destroySoon();
        }
      });
      handle(rt, req, res, phase).then(ended, (err: unknown) => {
        ended();
        rt.log.error({ err: describeError(err) }, 'unhandled request failure');
        if (!res.headersSent) {
          res.writeHead(500, { 'content-type': 'application/json' });
          res.end('{"error":{"message":"Internal error","type":"server_error","code":"internal_error"}}');
        } else {
          res.destroy();
        }
      });
    },
  );
  // The limits a reload may change; a new max_header_bytes applies to new connections.
  const applyLimits = (rt: Runtime) => {
    const limits = rt.config.limits;
    server.headersTimeout = limits.clientHeaderTimeoutMs;
    server.keepAliveTimeout = limits.keepAliveTimeoutMs;
    // Read per connection by Node (the createServer option sets it too; @types/node omits the field).
    (server as { maxHeaderSize?: number }).maxHeaderSize = limits.maxHeaderBytes;
    const max = fitToDescriptors(limits.maxConnections, nofile);
    if (max < limits.maxConnections && max !== guard.max) {
      rt.log.warn(
        { maxConnections: limits.maxConnections, lowered: max, nofile },
        'limits.max_connections lowered to fit the file-descriptor limit (RLIMIT_NOFILE): two per proxied request',
      );
    }
    guard.max = max;
    metrics.trackConnections(() => guard.open, max);
  };
  applyLimits(initial);
  server.on('connection', (socket: Socket) => guard.admit(socket));
  // Idle keep-alive connections: Node closes them itself only when nobody listens for this event.
  server.on('timeout', (socket: Socket) => {
    metrics.clientTimeouts.inc({ kind: 'keepalive' });
    socket.destroy();
  });
  // Requests the parser refused or timed out before a request existed: 408/414/431/413/400, then close.
  server.on('clientError', (err: ParserError, socket: Socket) => {
    const code = clientErrorCode(err);
    const inFlight = (socket as { _httpMessage?: ServerResponse | null })._httpMessage;
    if (code === undefined || !socket.writable || inFlight?.headersSent === true) {
      socket.destroy();
      return;
    }
    if (code === 'request_timeout') metrics.clientTimeouts.inc({ kind: 'header' });
    else metrics.clientRejected.inc({ reason: CLIENT_REJECTION[code] ?? 'malformed' });
    socket.end(rawErrorResponse(code));
    socket.destroySoon();
  });

  return {
    server,
    setRuntime(runtime) {
      current = runtime;
      applyLimits(runtime);
    },
    runtime: () => current,
    unready() {
      if (phase === 'serving') phase = 'unready';
    },
    drain() {
      phase = 'draining';
      server.close();
      server.closeIdleConnections();
    },
    inFlight: () => active,
    connections: () => guard.open,
    settled(runtime) {
      const u = users.get(runtime);
      if (u === undefined) return Promise.resolve();
      return new Promise((resolve) => u.idle.push(resolve));
    },
  };
}

/** serving -> unready (readiness fails, requests still served) -> draining (listener closed). */
type ServingPhase = 'serving' | 'unready' | 'draining';

async function handle(
  rt: Runtime,
  req: IncomingMessage,
  res: ServerResponse,
  phase: ServingPhase,
): Promise<void> {
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  const path = q === -1 ? url : url.slice(0, q);
  const query = new URLSearchParams(q === -1 ? '' : url.slice(q + 1));
  const { id, correlationId } = requestIdPolicy(rt.config.requestId.trustedSources)(req);
  res.setHeader('x-router-request-id', id);
  if (correlationId !== undefined) res.setHeader('x-router-correlation-id', correlationId);

  const route = resolveRoute(
    req.method ?? 'GET',
    path,
    carrierFamily(req.headers, query),
    rt.config.billing.balanceEnforcement.webhookPath,
  );
  switch (route.kind) {
    case 'proxy':
      if (phase === 'draining') return sendError(res, route.format, new GatewayError('shutting_down'), id);
      return proxyRequest(rt, route, req, res, id, correlationId, path, query);
    case 'healthz':
      return sendJson(res, 200, { status: 'ok' });
    case 'readyz': {
      const report = await rt.readiness();
      const draining = phase !== 'serving';
      const ready = report.ready && !draining;
      return sendJson(res, ready ? 200 : 503, { ...report, ready, draining });
    }
    case 'metrics': {
      const body = await rt.metricsText();
      res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' });
      res.end(body);
      return;
    }
    case 'webhook':
      return rt.forwardWebhook(req, res);
    case 'subject_state':
      return rt.stateNotice(req, res);
    case 'models':
    case 'model':
      return listModels(rt, route, req, res, id, query);
    case 'method_not_allowed':
      res.setHeader('allow', route.allow);
      return sendError(res, route.format, new GatewayError('method_not_allowed'), id);
    case 'bad_path':
      req.resume();
      return sendError(res, route.format, new GatewayError('invalid_path'), id);
    case 'not_found':
      req.resume();
      return sendError(
        res,
        route.format,
        new GatewayError('not_found', `Unknown endpoint ${req.method} ${clip(path)}`),
        id,
      );
  }
}

async function listModels(
  rt: Runtime,
  route: Extract<Route, { kind: 'models' | 'model' }>,
  req: IncomingMessage,
  res: ServerResponse,
  id: string,
  query: URLSearchParams,
): Promise<void> {
  try {
    await rt.authenticate(req.headers, query);
  } catch (err) {
    sendError(res, route.format, toGatewayError(err), id);
    return;
  }
  if (route.kind === 'models') {
    sendJson(res, 200, rt.modelList(route.format));
    return;
  }
  const found = rt.modelInfo(route.format, route.id);
  if (found === undefined) {
    sendError(
      res,
      route.format,
      new GatewayError('model_not_found', `The model '${clip(route.id)}' does not exist`),
      id,
    );
    return;
  }
  sendJson(res, 200, found);
}

function sendJson(res: ServerResponse, status: number, body: JsonValue): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function sendError(res: ServerResponse, format: WireFormat, err: GatewayError, id: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  sendJson(res, err.status, errorBody(format, err, id));
}

/**
 * The per-request context as a class: one stable shape for every request, its fields in one place, and
 * the logger and abort signal created on first use (most requests need neither: the gateway cancels its
 * upstream call through a Cancellation, and logs below the access line are rare).
 */
class Context implements RequestContext {
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
  status = 0;
  usage: RequestContext['usage'] = undefined;
  usageStage: RequestContext['usageStage'] = undefined;
  responseStarted = false;
  clientAborted = false;
  deliveredText: string[] = [];
  error: RequestContext['error'] = undefined;
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
    this.#log ??= this.#rootLog.child(
      this.correlationId === undefined
        ? { reqId: this.id }
        : { reqId: this.id, correlationId: this.correlationId },
    );
    return this.#log;
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

const EMPTY = Buffer.alloc(0);

async function proxyRequest(
  rt: Runtime,
  route: Extract<Route, { kind: 'proxy' }>,
  req: IncomingMessage,
  res: ServerResponse,
  id: string,
  correlationId: string | undefined,
  path: string,
  query: URLSearchParams,
): Promise<void> {
  const ctx = new Context(rt.log, route, req, id, route.upstreamPath ?? path, query);
  ctx.correlationId = correlationId;
  res.on('close', () => {
    if (!res.writableFinished) ctx.abort();
  });
  // The request completes (usage settled, logged, usage event queued) exactly once: just before the
  // reply's last byte when it is served, or after the connection closes otherwise.
  const done: Completion = { hooks: undefined, promise: undefined };
  // Returns the promise that the request's usage event is on record, when the queue batches its writes
  // (the outbox: one write per event-loop turn): the reply's last byte goes out after it.
  const completeNow = (): Promise<void> | undefined => {
    done.promise ??= finish(rt, ctx, done.hooks);
    return rt.recorded();
  };
  try {
    // A malformed body is answered only after authentication, so unauthenticated callers learn nothing.
    const bodyError = await readRequest(rt, route, req, ctx);
    const early = await runOnRequest(rt.requestHooks, ctx);
    if (early.kind === 'respond') {
      if (early.headers !== undefined)
        for (const [k, v] of Object.entries(early.headers)) res.setHeader(k, v);
      ctx.status = early.status;
      sendJson(res, early.status, early.body);
      return;
    }
    if (bodyError !== undefined) throw bodyError;
    await forward(rt, ctx, res, done, completeNow);
  } catch (err) {
    const gwErr = toGatewayError(err);
    if (err instanceof GatewayError) {
      // answered below in the client's shape
    } else if (ctx.clientAborted || req.destroyed || isConnectionReset(err)) {
      // A client that goes away mid-request is ordinary traffic, not a gateway fault.
      ctx.abort();
      ctx.log.debug({ err: describeError(err) }, 'client went away');
    } else {
      ctx.log.error({ err: describeError(err) }, 'request failed');
    }
    ctx.error = { code: gwErr.code, message: gwErr.message };
    if (!res.headersSent) {
      ctx.status = gwErr.status;
      // A request that reached a provider is reported even when it failed: its event goes on record
      // before the error reply leaves, as a served reply's does (docs/billing.md "The guarantees").
      const recorded = ctx.provider === undefined ? undefined : completeNow();
      if (recorded !== undefined) await recorded;
      sendError(res, ctx.clientFormat, gwErr, id);
    } else if (!res.writableEnded) {
      res.end();
    }
  } finally {
    if (done.promise === undefined && !res.writableFinished && !res.destroyed) await onceClosed(res);
    completeNow();
    await done.promise;
  }
}

function isConnectionReset(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === 'ECONNRESET' || code === 'ERR_STREAM_PREMATURE_CLOSE' || code === 'EPIPE';
}

interface Completion {
  hooks: RuleHooks | undefined;
  promise: Promise<void> | undefined;
}

function onceClosed(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    if (res.writableFinished || res.destroyed) resolve();
    else res.once('close', resolve);
  });
}

async function readRequest(
  rt: Runtime,
  route: Extract<Route, { kind: 'proxy' }>,
  req: IncomingMessage,
  ctx: RequestContext,
): Promise<GatewayError | undefined> {
  ctx.rawBody = await readBody(req, rt.config.limits.maxBodyBytes, rt.config.limits.clientBodyTimeoutMs);
  if (route.body === 'json') {
    let body: JsonObject;
    try {
      body = parseJsonBody(route.api, ctx.rawBody, rt.config.limits.maxJsonDepth);
    } catch (err) {
      if (err instanceof GatewayError) return err;
      throw err;
    }
    ctx.body = body;
    if (ctx.model === undefined && typeof body.model === 'string') ctx.model = body.model;
    if (body.stream === true) ctx.stream = true;
    return modelError(ctx);
  }
  const contentType = req.headers['content-type'] ?? '';
  if (!contentType.startsWith('multipart/form-data')) {
    throw new GatewayError('unsupported_media_type', 'Expected a multipart/form-data body');
  }
  const fields = await readMultipartFields(contentType, ctx.rawBody);
  ctx.model = fields.model;
  ctx.stream = fields.stream;
  return modelError(ctx);
}

/**
 * A model name outside the documented shape is refused before it is routed, priced, logged or rendered
 * into an upstream path; ctx.model is cleared so nothing after this keeps the client's string.
 */
function modelError(ctx: RequestContext): GatewayError | undefined {
  if (ctx.model === undefined) return undefined;
  const problem = modelNameProblem(ctx.model);
  if (problem === undefined) return undefined;
  ctx.model = undefined;
  return new GatewayError(
    'invalid_model',
    `The model name is not valid: ${problem}. ${MODEL_NAME_RULE}`,
    'model',
  );
}

/** Pick a target, call it (retrying on the next candidate while nothing was sent) and relay the reply. */
async function forward(
  rt: Runtime,
  ctx: Context,
  res: ServerResponse,
  done: Completion,
  completeNow: () => Promise<void> | undefined,
): Promise<void> {
  const choice = await runSelectTarget(rt.requestHooks, ctx);
  if (choice === undefined || choice.candidates.length === 0) throw new GatewayError('provider_not_selected');
  const attempts = Math.min(choice.candidates.length, rt.config.limits.maxRetries + 1);
  let lastError: unknown;
  for (let i = 0; i < attempts; i++) {
    const candidate = choice.candidates[i]!;
    const provider = rt.providers.get(candidate.provider);
    if (provider === undefined) {
      lastError = new GatewayError('unknown_provider', `Unknown provider '${candidate.provider}'`);
      continue;
    }
    const rule = rt.matchRule(provider, ctx.api, ctx.stream);
    if (rule === undefined) {
      if (i === 0) {
        throw new GatewayError(
          'no_matching_rule',
          `The provider '${candidate.provider}' has no rule for api '${ctx.api}' with stream=${ctx.stream}`,
        );
      }
      continue;
    }
    ctx.provider = candidate.provider;
    ctx.upstreamModel = candidate.upstreamModel;
    const hooks = rt.ruleHooks(candidate.provider, rule);
    const upstreamReq = await runRewriteBody(hooks.rewrite, ctx, baseRequest(ctx, rule));
    const last = i === attempts - 1;
    let upstreamRes: UpstreamResponse;
    const t0 = performance.now();
    try {
      upstreamRes = await rt.upstream.send(upstreamReq, hooks.timeouts, ctx.cancellation);
    } catch (err) {
      if (ctx.clientAborted) {
        done.hooks = hooks;
        return;
      }
      lastError = classifyUpstreamError(err);
      ctx.log.warn(
        { provider: candidate.provider, err: describeError(err), attempt: i + 1 },
        'upstream call failed',
      );
      if (last) throw lastError;
      continue;
    }
    ctx.upstreamTtfbMs = performance.now() - t0;
    const status = upstreamRes.statusCode;
    if (status === 401 || status === 403) {
      // The upstream refused the operator's key, not the client's: its text (which may quote the key)
      // stays in the gateway's log, and the client learns the provider is misconfigured.
      ctx.log.warn(
        {
          provider: candidate.provider,
          status,
          reason: await upstreamErrorReason(upstreamRes),
          attempt: i + 1,
        },
        "upstream refused the gateway's credentials",
      );
      lastError = new GatewayError('upstream_auth_failed');
      if (last) throw lastError;
      continue;
    }
    if ((status === 429 || status >= 500) && !last) {
      ctx.log.warn(
        { provider: candidate.provider, status, attempt: i + 1 },
        'upstream refused; trying the next provider',
      );
      await upstreamRes.body.dump().catch(() => undefined);
      continue;
    }
    done.hooks = hooks;
    await relay(ctx, hooks, upstreamRes, res, rt.metrics.activeStreams, completeNow);
    return;
  }
  throw lastError ?? new GatewayError('provider_not_selected');
}

/** The error type or code of an upstream error body (never its message, which may quote the key). */
async function upstreamErrorReason(up: UpstreamResponse): Promise<string | undefined> {
  let raw: Buffer;
  try {
    raw = await up.body.readAll(64 * 1024);
  } catch {
    return undefined;
  }
  try {
    const body = JSON.parse(raw.toString('utf8')) as { error?: Record<string, unknown> } | null;
    const error = body?.error;
    if (error === null || typeof error !== 'object') return undefined;
    for (const field of ['code', 'type', 'status']) {
      const value = error[field];
      if (typeof value === 'string' && value.length <= 64) return value;
    }
  } catch {
    // not JSON: no reason to report
  }
  return undefined;
}

/** The request as it would go upstream before any rule op: same path below the base URL's prefix. */
function baseRequest(ctx: RequestContext, rule: CompiledRule): UpstreamRequest {
  const { origin, prefix } = splitBaseUrl(rule.upstreamConfig.baseUrl);
  const headers: Record<string, string> = { 'accept-encoding': 'identity' };
  for (const name of FORWARDED_REQUEST_HEADERS) {
    const value = ctx.headers[name];
    if (typeof value === 'string') headers[name] = value;
  }
  let body: UpstreamRequest['body'];
  if (ctx.body !== undefined) {
    headers['content-type'] = 'application/json';
    body = ctx.body;
    // The registry's upstream model name replaces the client's (copy: the original stays for billing).
    if (
      typeof body.model === 'string' &&
      ctx.upstreamModel !== undefined &&
      ctx.upstreamModel !== body.model
    ) {
      body = { ...body, model: ctx.upstreamModel };
    }
  } else {
    headers['content-type'] = ctx.headers['content-type'] ?? 'application/octet-stream';
    body = ctx.rawBody.length > 0 ? ctx.rawBody : undefined;
  }
  // The client's query never reaches the upstream: it could carry the client's own key or steer the
  // upstream API; the rule's set_query ops add what the provider needs.
  const query = new URLSearchParams();
  const needed = upstreamQuery(ctx.api);
  if (needed !== undefined) for (const [name, value] of Object.entries(needed)) query.set(name, value);
  return { method: ctx.method, origin, path: prefix + ctx.path, query, headers, body };
}

async function relay(
  ctx: RequestContext,
  hooks: RuleHooks,
  up: UpstreamResponse,
  res: ServerResponse,
  activeStreams: { inc(): void; dec(): void },
  beforeEnd: () => Promise<void> | undefined,
): Promise<void> {
  ctx.status = up.statusCode;
  const head: ResponseHead = runResponseHead(hooks.response, ctx, {
    status: up.statusCode,
    headers: forwardableHeaders(up.headers),
  });
  ctx.status = head.status;
  head.headers['x-router-request-id'] = ctx.id;
  const contentType = head.headers['content-type'] ?? '';
  if (contentType.startsWith('text/event-stream') && head.status < 400) {
    activeStreams.inc();
    try {
      return await relayStream(ctx, hooks, up, res, head, beforeEnd);
    } finally {
      activeStreams.dec();
    }
  }
  if (contentType.includes('json') || head.status >= 400) {
    return relayJson(ctx, hooks, up, res, head, beforeEnd);
  }
  return relayRaw(ctx, up, res, head, beforeEnd);
}

function write(res: ServerResponse, chunk: string | Uint8Array): Promise<void> | undefined {
  if (res.write(chunk)) return undefined;
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}

async function relayStream(
  ctx: RequestContext,
  hooks: RuleHooks,
  up: UpstreamResponse,
  res: ServerResponse,
  head: ResponseHead,
  beforeEnd: () => Promise<void> | undefined,
): Promise<void> {
  head.headers['content-type'] ??= 'text/event-stream';
  head.headers['cache-control'] = 'no-cache';
  head.headers['x-accel-buffering'] = 'no';
  res.writeHead(head.status, head.headers);
  res.flushHeaders();
  ctx.responseStarted = true;
  const passthrough = hooks.observeOnly;
  const keep = { bytes: hooks.keepDelivered ? 0 : DELIVERED_TEXT_LIMIT };
  // Transform mode: the events the hooks gave out for the current chunk; serialized only when the chunk
  // cannot go out as received (see the loop).
  const held: SseEvent[] = [];
  let unchanged = true;
  const emit = (parts: readonly ResponsePart[]) => {
    for (const part of parts) {
      if (part.type !== 'event') continue;
      if (!passthrough) held.push(part);
      if (keep.bytes < DELIVERED_TEXT_LIMIT) recordDelivered(ctx, part.data, keep);
    }
  };
  const serializeHeld = (): string => {
    let text = '';
    for (const ev of held) text += serializeEvent(ev);
    held.length = 0;
    return text;
  };
  const reader = new SseReader((ev) => {
    const part: ResponsePart = { type: 'event', event: ev.event, data: ev.data };
    const parts = runResponseChunk(hooks.response, ctx, [part]);
    // Hooks hand an event on unchanged as its own part object (provider-rule.ts, observers).
    if (parts.length !== 1 || parts[0] !== part) unchanged = false;
    emit(parts);
  });
  // In transform mode a chunk still goes out as the bytes received when serializing could not change
  // it: the stream was at an event boundary before the chunk and is again at its end (it ends with a
  // blank line), so its bytes are exactly the events it completed, and the hooks passed every one of
  // them on as it came (nothing dropped, added or changed). That is most chunks of a stream (the usage
  // strip drops one event), and they skip building and encoding a string per event. Comment lines
  // (`: keep-alive`) and id/retry fields in such a chunk reach the client as sent; a chunk that starts
  // or ends mid-event, or in which a hook changed anything, is serialized from the hooks' output.
  let atBoundary = true;
  try {
    for await (const chunk of up.body) {
      if (chunk.length === 0) continue;
      if (passthrough) {
        const pending = write(res, chunk);
        reader.push(chunk);
        if (pending !== undefined) await pending;
      } else {
        const fromBoundary = atBoundary;
        unchanged = true;
        reader.push(chunk);
        atBoundary = endsWithBlankLine(chunk);
        let data: Uint8Array | string;
        if (fromBoundary && atBoundary && unchanged) {
          held.length = 0;
          data = chunk;
        } else {
          data = serializeHeld();
        }
        if (data.length > 0) {
          const pending = write(res, data);
          if (pending !== undefined) await pending;
        }
      }
    }
    reader.end();
  } catch (err) {
    if (ctx.clientAborted) return;
    const gwErr = classifyUpstreamError(err);
    ctx.error = {
      code: gwErr instanceof GatewayError ? gwErr.code : 'upstream_unreachable',
      message: 'upstream stream failed',
    };
    ctx.log.warn({ provider: ctx.provider, err: describeError(err) }, 'upstream stream failed mid-way');
  }
  if (ctx.clientAborted) return;
  const before = held.length;
  emit(runResponseEnd(hooks.response, ctx));
  const ended = held.length > before;
  let out = serializeHeld();
  if (passthrough && ctx.error !== undefined) {
    out += `\n\n${serializeEvent(errorEvent(ctx.clientFormat, streamFailure(ctx), ctx.id))}`;
  } else if (ctx.error !== undefined && !ended) {
    out += serializeEvent(errorEvent(ctx.clientFormat, streamFailure(ctx), ctx.id));
  }
  if (out !== '') res.write(out);
  // Clients (and SDKs) see the stream as over only when the response ends: complete first.
  await endAfterRecord(res, beforeEnd);
}

function streamFailure(ctx: RequestContext): GatewayError {
  return new GatewayError(
    ctx.error?.code === 'upstream_timeout' ? 'upstream_timeout' : 'upstream_unreachable',
    'The upstream stream failed before it completed',
  );
}

async function relayJson(
  ctx: RequestContext,
  hooks: RuleHooks,
  up: UpstreamResponse,
  res: ServerResponse,
  head: ResponseHead,
  beforeEnd: () => Promise<void> | undefined,
): Promise<void> {
  let raw: Buffer;
  try {
    raw = await up.body.readAll(MAX_JSON_REPLY_BYTES);
  } catch (err) {
    throw classifyUpstreamError(err);
  }
  if (hooks.observeOnly) {
    head.headers['content-length'] = String(raw.length);
    res.writeHead(head.status, head.headers);
    ctx.responseStarted = true;
    // The reply is whole for the client at its last byte, and the request must be complete (its usage
    // event on record) by then. A small body is observed first; a large one goes out but for its last
    // byte while the observers parse it.
    const holdBack = raw.length > OBSERVE_FIRST_BYTES;
    if (holdBack) res.write(raw.subarray(0, raw.length - 1));
    if (hooks.response.length > 0 || hooks.keepDelivered) {
      const value = parseReply(raw, head.status);
      if (value !== undefined) runResponseChunk(hooks.response, ctx, [{ type: 'json', value }]);
      // Output text is kept only when it is needed to estimate usage the upstream did not report.
      if (hooks.keepDelivered && head.status < 400 && ctx.usage === undefined) {
        recordDelivered(ctx, raw.toString('utf8'), { bytes: 0 });
      }
    }
    await endAfterRecord(res, beforeEnd, holdBack ? raw.subarray(raw.length - 1) : raw);
    return;
  }
  const value = parseReply(raw, head.status);
  if (value === undefined) throw new GatewayError('upstream_bad_response');
  const parts = runResponseChunk(hooks.response, ctx, [{ type: 'json', value }]);
  const json = parts.find((p) => p.type === 'json');
  const text = JSON.stringify(json === undefined ? value : json.value);
  head.headers['content-length'] = String(Buffer.byteLength(text));
  res.writeHead(head.status, head.headers);
  ctx.responseStarted = true;
  if (hooks.keepDelivered && head.status < 400 && ctx.usage === undefined) {
    recordDelivered(ctx, text, { bytes: 0 });
  }
  await endAfterRecord(res, beforeEnd, text);
}

/** A reply body as JSON; an error body that is not JSON becomes its text, a 2xx one is unreadable. */
function parseReply(raw: Buffer, status: number): JsonValue | undefined {
  const text = raw.toString('utf8');
  try {
    return JSON.parse(text) as JsonValue;
  } catch {
    return status >= 400 ? text : undefined;
  }
}

async function relayRaw(
  ctx: RequestContext,
  up: UpstreamResponse,
  res: ServerResponse,
  head: ResponseHead,
  beforeEnd: () => Promise<void> | undefined,
): Promise<void> {
  res.writeHead(head.status, head.headers);
  ctx.responseStarted = true;
  try {
    for await (const chunk of up.body) {
      const pending = write(res, chunk);
      if (pending !== undefined) await pending;
    }
  } catch (err) {
    if (!ctx.clientAborted) {
      ctx.error = { code: 'upstream_unreachable', message: 'upstream body failed' };
      ctx.log.warn({ err: describeError(err) }, 'upstream body failed mid-way');
      res.destroy();
      return;
    }
  }
  await endAfterRecord(res, beforeEnd);
}

/**
 * Completes the request (`beforeEnd`) and then sends the reply's last bytes, once the usage event is on
 * record when the queue batches its writes: a client that saw the whole reply has its event kept.
 */
async function endAfterRecord(
  res: ServerResponse,
  beforeEnd: () => Promise<void> | undefined,
  last?: string | Buffer,
): Promise<void> {
  const recorded = beforeEnd();
  if (recorded !== undefined) await recorded;
  res.end(last);
}

async function finish(rt: Runtime, ctx: RequestContext, hooks: RuleHooks | undefined): Promise<void> {
  const durationMs = performance.now() - ctx.startedAt;
  // Not awaited when settled at once: the usage event must be queued before recorded() is asked.
  const settling = rt.settle(ctx);
  if (settling !== undefined) await settling;
  if (rt.log.isLevelEnabled('info')) {
    ctx.log.info(
      {
        api: ctx.api,
        provider: ctx.provider,
        model: ctx.model,
        stream: ctx.stream,
        status: ctx.status,
        durationMs: Math.round(durationMs * 1000) / 1000,
        upstreamTtfbMs:
          ctx.upstreamTtfbMs === undefined ? undefined : Math.round(ctx.upstreamTtfbMs * 1000) / 1000,
        aborted: ctx.clientAborted || undefined,
        error: ctx.error?.code,
      },
      'request',
    );
  }
  rt.observe(ctx, durationMs);
  await runOnComplete(hooks === undefined ? rt.completeHooks : hooks.complete, ctx);
}

export type { Hook };
