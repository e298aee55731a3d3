// Realtime sessions (docs/realtime.md): an upgrade request goes through the same stages as an HTTP
// request (onRequest for the key and the balance, selectTarget, the provider rule for the realtime api),
// then the gateway opens the upstream WebSocket, accepts the client's and hands both to the relay
// (realtime-relay.ts), which passes frames unchanged or through the rule's realtime translator and bills
// each model response.

import type { IncomingMessage } from 'node:http';
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import { type RawData, WebSocket, WebSocketServer } from 'ws';
import { splitBaseUrl } from '../common/base-url.ts';
import { errorText, GatewayError, toGatewayError } from '../common/errors.ts';
import type { JsonObject, UpstreamRequest } from '../common/types.ts';
import { errorBody, realtimeDialectOf } from '../hooks/families/index.ts';
import type { RealtimeDialect } from '../hooks/families/types.ts';
import { jsonDeeperThan } from './json-depth.ts';
import { MODEL_NAME_RULE, modelNameProblem } from './model-name.ts';
import { runRequestStages, runRewriteBody, runSelectTarget } from './pipeline.ts';
import {
  CLOSE,
  closeReason,
  type Frame,
  relay,
  toBuffer,
  type Upstream,
  upstreamOf,
} from './realtime-relay.ts';
import { ruleTranslation } from './realtime-translate.ts';
import { Context } from './request-context.ts';
import type { Route } from './routes.ts';
import type { Runtime } from './runtime.ts';
import { upstreamFailure } from './upstream.ts';

const acceptor = new WebSocketServer({ noServer: true, perMessageDeflate: false, clientTracking: false });

export interface UpgradeInfo {
  readonly id: string;
  readonly correlationId: string | undefined;
  /** Called once when the upgrade was refused or the session has ended (the runtime is free). */
  readonly ended: () => void;
  /** The server's open sessions, which the session joins while it is open. */
  readonly sessions: RealtimeSessions;
}

/** A server's open sessions, so that shutdown can close them ("going away") after the drain timeout. */
export class RealtimeSessions {
  readonly open = new Set<WebSocket>();

  /** Closes every open session with 1001 (going away); resolves when their sockets have closed. */
  close(reason = 'the gateway is shutting down'): Promise<void> {
    return closeAll(this.open, reason);
  }
}

async function closeAll(sessions: ReadonlySet<WebSocket>, reason: string): Promise<void> {
  await Promise.all(
    [...sessions].map(async (client) => {
      const upstream = upstreamOf.get(client);
      // The client's close is passed upstream by the relay.
      await closed(client, () => client.close(CLOSE.goingAway, reason));
      if (upstream !== undefined) await closed(upstream, () => upstream.close(CLOSE.goingAway, reason));
    }),
  );
}

/** Resolves once `ws` has closed; `start` begins the close, and a peer that never answers is cut. */
function closed(ws: WebSocket, start: () => void): Promise<void> {
  return new Promise<void>((resolve) => {
    if (ws.readyState === WebSocket.CLOSED) return resolve();
    ws.once('close', () => resolve());
    if (ws.readyState !== WebSocket.CLOSING) start();
    setTimeout(() => ws.terminate(), 2000).unref();
  });
}

/** Answers an upgrade request the gateway serves as a realtime session; false when the path is not one. */
export function handleRealtimeUpgrade(
  rt: Runtime,
  req: IncomingMessage,
  socket: Duplex,
  head: Buffer,
  info: UpgradeInfo,
): boolean {
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  // The genai SDK joins its base URL and path with a double slash.
  const path = (q === -1 ? url : url.slice(0, q)).replace(/\/{2,}/g, '/');
  const found = realtimeDialectOf(path);
  if (found === undefined) return false;
  const query = new URLSearchParams(q === -1 ? '' : url.slice(q + 1));
  const { dialect, format } = found;
  const route: Extract<Route, { kind: 'proxy' }> = { kind: 'proxy', api: dialect.api, format, body: 'json' };
  const ctx = new Context(rt.log, route, withKeyHeader(req, dialect, query), info.id, path, query);
  ctx.correlationId = info.correlationId;
  ctx.stream = true;
  let ended = false;
  const end = () => {
    if (ended) return;
    ended = true;
    rt.endSession(ctx);
    info.ended();
  };
  const join = (client: WebSocket) => {
    info.sessions.open.add(client);
    client.once('close', () => {
      info.sessions.open.delete(client);
      end();
    });
  };
  open(rt, ctx, dialect, req, socket, head, join, end).catch((err: unknown) => {
    const gwErr = toGatewayError(err);
    if (!(err instanceof GatewayError)) ctx.log.error({ err: errorText(err) }, 'realtime session failed');
    refuse(socket, format, gwErr, ctx.id);
    end();
  });
  return true;
}

/**
 * The request's headers with a key carried as a subprotocol or in the query moved to `Authorization`,
 * where the auth hook reads it (the subprotocol and the query parameter are never forwarded).
 */
function withKeyHeader(
  req: IncomingMessage,
  dialect: RealtimeDialect,
  query: URLSearchParams,
): IncomingMessage {
  if (req.headers.authorization !== undefined) return req;
  let key: string | undefined;
  const prefix = dialect.keyProtocolPrefix;
  if (prefix !== undefined) {
    for (const p of protocolsOf(req)) if (p.startsWith(prefix)) key = p.slice(prefix.length);
  }
  for (const name of dialect.keyQuery ?? []) key ??= query.get(name) ?? undefined;
  if (key !== undefined) req.headers.authorization = `Bearer ${key}`;
  return req;
}

function protocolsOf(req: IncomingMessage): string[] {
  const header = req.headers['sec-websocket-protocol'];
  if (header === undefined) return [];
  return header
    .split(',')
    .map((p) => p.trim())
    .filter((p) => p !== '');
}

function refuse(socket: Duplex, format: string, err: GatewayError, id: string): void {
  if (socket.destroyed) return;
  const body = JSON.stringify(errorBody(format, err, id));
  socket.end(
    `HTTP/1.1 ${err.status} ${STATUS_CODES[err.status] ?? 'Error'}\r\nconnection: close\r\n` +
      `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n` +
      `x-router-request-id: ${id}\r\n\r\n${body}`,
  );
}

async function open(
  rt: Runtime,
  ctx: Context,
  dialect: RealtimeDialect,
  req: IncomingMessage,
  socket: Duplex,
  head: Buffer,
  join: (client: WebSocket) => void,
  end: () => void,
): Promise<void> {
  // Known before the stages run: a client secret may be bound to the model.
  if (dialect.modelIn === 'query') ctx.model = checkedModel(ctx.query.get('model') ?? undefined);
  const early = await runRequestStages(rt.requestHooks, ctx);
  if (early.kind === 'respond') {
    const message =
      typeof early.body === 'object' && early.body !== null ? JSON.stringify(early.body) : String(early.body);
    const extra = Object.entries(early.headers ?? {})
      .map(([name, value]) => `${name}: ${value}\r\n`)
      .join('');
    socket.end(
      `HTTP/1.1 ${early.status} ${STATUS_CODES[early.status] ?? 'Error'}\r\nconnection: close\r\n` +
        `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(message)}\r\n` +
        `x-router-request-id: ${ctx.id}\r\n${extra}\r\n${message}`,
    );
    end();
    return;
  }
  const offered = protocolsOf(req).filter(
    (p) => dialect.keyProtocolPrefix === undefined || !p.startsWith(dialect.keyProtocolPrefix),
  );
  if (dialect.modelIn === 'query') {
    if (ctx.model === undefined)
      throw new GatewayError('invalid_parameter', 'The realtime session needs ?model=<model>', 'model');
    const upstream = await connectUpstream(rt, ctx, offered);
    const client = await accept(req, socket, head, offered, ctx.id, rt.config.limits.realtimeMaxMessageBytes);
    join(client);
    relay(rt, ctx, dialect, client, upstream, []);
    return;
  }
  // The model is in the client's first message: accept, read it, then open the upstream.
  const client = await accept(req, socket, head, offered, ctx.id, rt.config.limits.realtimeMaxMessageBytes);
  join(client);
  // Messages after the setup (sent before setupComplete, while the upstream opens) go after it; frames
  // of one read arrive in one turn, so the listener is on from the start.
  const waiting: Frame[] = [];
  const keep = (data: RawData, binary: boolean) => waiting.push({ data, binary });
  client.on('message', keep);
  const first = await firstMessage(client, waiting, rt.config.limits.clientHeaderTimeoutMs);
  if (first === undefined) return;
  let setup: JsonObject;
  try {
    // Nested deeper than a request body may be, it would overflow the stack when rewritten for upstream.
    if (jsonDeeperThan(first, rt.config.limits.maxJsonDepth)) throw new Error('too deep');
    setup = JSON.parse(first.toString('utf8')) as JsonObject;
  } catch {
    client.close(CLOSE.badMessage, 'the first message must be the JSON setup message');
    return;
  }
  try {
    ctx.model = checkedModel(dialect.firstMessageModel?.(setup));
    // Named only now: the key's model list is checked here (the upgrade had no model to check).
    if (ctx.model !== undefined) rt.checkModel(ctx.principal, ctx.model);
  } catch (err) {
    client.close(CLOSE.policy, closeReason(toGatewayError(err).message));
    return;
  }
  if (ctx.model === undefined) {
    client.close(CLOSE.policy, 'the first message must be the setup message naming the model');
    return;
  }
  let upstream: Upstream;
  // Not read while the upstream opens: what the client sends meanwhile stays in its socket (TCP
  // back-pressure), not in `waiting`, however long the upstream takes to answer.
  client.pause();
  try {
    upstream = await connectUpstream(rt, ctx, offered);
  } catch (err) {
    client.resume(); // to read the client's answer to the close
    const gwErr = toGatewayError(err);
    client.close(gwErr.status >= 500 ? CLOSE.upstreamGone : CLOSE.policy, closeReason(gwErr.message));
    return;
  }
  const mapped =
    ctx.upstreamModel !== undefined && dialect.withModel !== undefined
      ? Buffer.from(JSON.stringify(dialect.withModel(setup, ctx.upstreamModel)))
      : first;
  client.off('message', keep);
  relay(rt, ctx, dialect, client, upstream, [{ data: mapped, binary: false }, ...waiting]);
  client.resume();
}

/** A model name outside the documented shape is refused before it is routed or sent anywhere. */
function checkedModel(model: string | undefined): string | undefined {
  if (model === undefined) return undefined;
  const problem = modelNameProblem(model);
  if (problem !== undefined)
    throw new GatewayError(
      'invalid_model',
      `The model name is not valid: ${problem}. ${MODEL_NAME_RULE}`,
      'model',
    );
  return model;
}

function accept(
  req: IncomingMessage,
  socket: Duplex,
  head: Buffer,
  offered: readonly string[],
  id: string,
  maxMessageBytes: number,
): Promise<WebSocket> {
  return new Promise((resolve) => {
    const addId = (headers: string[]) => headers.push(`x-router-request-id: ${id}`);
    acceptor.once('headers', addId);
    // The client's first offered protocol other than the key (the SDKs' `realtime`).
    acceptor.options.handleProtocols = () => offered[0] ?? false;
    // A larger message closes the session (1009) before it is buffered whole.
    acceptor.options.maxPayload = maxMessageBytes;
    acceptor.handleUpgrade(req, socket, head, (ws) => {
      // From the first frame on: a protocol error (a message over the limit, a bad frame) is an 'error'
      // event, which without a listener would end the process. ws closes the socket itself.
      ws.on('error', () => undefined);
      resolve(ws);
    });
  });
}

/**
 * The first message the client sends (taken off `waiting`, where every message lands). A client that
 * sends none within `timeoutMs` (the time a request has for its head) is closed: an accepted socket
 * that never names its model would otherwise be held forever.
 */
function firstMessage(ws: WebSocket, waiting: Frame[], timeoutMs: number): Promise<Buffer | undefined> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      ws.off('message', onMessage);
      ws.off('close', onClose);
    };
    const take = () => {
      const f = waiting.shift();
      if (f === undefined) return false;
      done();
      resolve(toBuffer(f.data));
      return true;
    };
    const onMessage = () => {
      take();
    };
    const onClose = () => {
      done();
      resolve(undefined);
    };
    const timer = setTimeout(() => {
      done();
      ws.close(CLOSE.policy, `no setup message within ${timeoutMs} ms`);
      resolve(undefined);
    }, timeoutMs);
    if (take()) return;
    ws.on('message', onMessage);
    ws.once('close', onClose);
  });
}

/** Picks the target as for HTTP and opens the upstream WebSocket; rejects before the client is accepted. */
async function connectUpstream(rt: Runtime, ctx: Context, protocols: readonly string[]): Promise<Upstream> {
  const choice = await runSelectTarget(rt.requestHooks, ctx);
  const candidate = choice?.candidates[0];
  if (candidate === undefined) throw new GatewayError('provider_not_selected');
  const provider = rt.providers.get(candidate.provider);
  if (provider === undefined)
    throw new GatewayError('unknown_provider', `Unknown provider '${candidate.provider}'`);
  const rule = rt.matchRule(provider, ctx.api, true, candidate.upstreamModel ?? ctx.model);
  if (rule === undefined) {
    throw new GatewayError(
      'no_matching_rule',
      `The provider '${candidate.provider}' has no rule for api '${ctx.api}'`,
    );
  }
  ctx.provider = candidate.provider;
  ctx.upstreamModel = candidate.upstreamModel;
  const hooks = rt.ruleHooks(candidate.provider, rule);
  const translation = ruleTranslation(rule);
  const { origin, prefix } = splitBaseUrl(rule.upstreamConfig.baseUrl);
  const base: UpstreamRequest = {
    method: 'GET',
    origin,
    path: prefix + ctx.path,
    query: new URLSearchParams(),
    headers: {},
    body: undefined,
  };
  const up = await runRewriteBody(hooks.rewrite, ctx, base);
  if (hooks.authorizer !== undefined) {
    await hooks.authorizer.authorize(ctx, up);
    ctx.channel = hooks.authorizer.channel;
  }
  const target = new URL(up.path, up.origin);
  target.protocol = target.protocol === 'https:' ? 'wss:' : 'ws:';
  target.search = up.query.toString();
  // The client's subprotocols are its own family's: a translated session offers none upstream.
  const socket = new WebSocket(target, translation === undefined ? [...protocols] : [], {
    headers: up.headers,
    perMessageDeflate: false,
    maxPayload: rt.config.limits.realtimeMaxMessageBytes,
    handshakeTimeout: rt.config.limits.upstreamConnectTimeoutMs + rt.config.limits.upstreamHeadersTimeoutMs,
  });
  // The server speaks first (session.created), in the same read as the handshake's answer, while the
  // client is still being accepted: kept until the relay takes over.
  const early: { data: RawData; binary: boolean }[] = [];
  const keep = (data: RawData, binary: boolean) => early.push({ data, binary });
  socket.on('message', keep);
  await new Promise<void>((resolve, reject) => {
    socket.once('open', () => resolve());
    socket.once('unexpected-response', (_req, res) => {
      res.resume();
      socket.terminate();
      const status = res.statusCode ?? 502;
      reject(
        status === 401 || status === 403
          ? new GatewayError('upstream_auth_failed')
          : new GatewayError('upstream_unreachable', `The upstream refused the session (HTTP ${status})`),
      );
    });
    socket.once('error', (err) => {
      ctx.log.warn(
        { provider: ctx.provider, ...upstreamFailure(err, origin), err: errorText(err) },
        'realtime upstream failed',
      );
      reject(new GatewayError('upstream_unreachable'));
    });
  });
  return { socket, hooks, translation, early, stopKeeping: () => socket.off('message', keep) };
}
