// The gateway's HTTP server: the listener and its limits, the serving phases (serving, unready,
// draining) and the dispatch of each request to its route. A proxied request goes on in
// proxy-request.ts (its stages in the order of docs/lifecycle.md), forward.ts (the upstream leg),
// relay.ts and relay-stream.ts (the reply), and request-completion.ts (its end). Configuration is a
// compiled Runtime captured at the start of each request, so a reload never changes a request in flight.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { clip, type ErrorCode, errorText, GatewayError, toGatewayError } from '../common/errors.ts';
import type { Principal } from '../common/types.ts';
import { carrierFamily } from '../hooks/families/index.ts';
import {
  clientErrorCode,
  type ParserError,
  rawErrorResponse,
  requestLineOpen,
  trackRequestLine,
} from './client-errors.ts';
import { answerClientSecret } from './client-secret-endpoint.ts';
import { ConnectionGuard, fitToDescriptors, readNofile } from './connection-guard.ts';
import { isLingering, lingerSocket } from './lingering-close.ts';
import { proxyRequest } from './proxy-request.ts';
import { handleRealtimeUpgrade, RealtimeSessions } from './realtime-session.ts';
import { bodyTimedOut } from './request-body.ts';
import { requestIdPolicy } from './request-id.ts';
import { type Route, resolveRoute } from './routes.ts';
import type { Runtime } from './runtime.ts';
import { identify, sendError, sendJson } from './send.ts';
import { answerStoredResponse } from './stored-response-endpoint.ts';

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
  /** Closes the realtime sessions still open (1001, going away). */
  closeSessions(): Promise<void>;
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
  const sessions = new RealtimeSessions();
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
        rt.log.error({ err: errorText(err) }, 'unhandled request failure');
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
  server.on('connection', (socket: Socket) => {
    if (guard.admit(socket)) trackRequestLine(socket);
  });
  // Expect: 100-continue. Node would send 100 Continue before any handler ran: a body declared over
  // max_body_bytes is refused (413, by the handler) without asking the client to send it.
  server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
    if (!(Number(req.headers['content-length']) > current.config.limits.maxBodyBytes)) res.writeContinue();
    server.emit('request', req, res);
  });
  // Idle keep-alive connections: Node closes them itself only when nobody listens for this event.
  server.on('timeout', (socket: Socket) => {
    metrics.clientTimeouts.inc({ kind: 'keepalive' });
    socket.destroy();
  });
  // WebSocket upgrades: realtime sessions (proxy/realtime-session.ts); any other upgrade is a 404.
  server.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => {
    const rt = current;
    socket.on('error', () => socket.destroy());
    const { id, correlationId } = requestIdPolicy(rt.config.requestId.trustedSources)(req);
    if (phase === 'draining') {
      socket.end(rawErrorResponse('shutting_down'));
      return;
    }
    // A session holds its runtime as a request does: a reload retires the runtime (and closes its
    // billing queue) only once the session has ended.
    active++;
    const u = users.get(rt);
    if (u === undefined) users.set(rt, { count: 1, idle: [] });
    else u.count++;
    let open = true;
    const ended = () => {
      if (!open) return;
      open = false;
      active--;
      release(rt);
    };
    if (!handleRealtimeUpgrade(rt, req, socket, head, { id, correlationId, ended, sessions })) {
      ended();
      socket.end(rawErrorResponse('not_found'));
    }
  });
  // Requests the parser refused or timed out before a request existed: 408/414/431/413/400, then a
  // lingering close (the client may still be sending the rest of the request).
  server.on('clientError', (err: ParserError, socket: Socket) => {
    const code = clientErrorCode(err, requestLineOpen(socket));
    if (code !== undefined && isLingering(socket)) return;
    const inFlight = (socket as { _httpMessage?: ServerResponse | null })._httpMessage;
    if (code === undefined || !socket.writable || inFlight?.headersSent === true) {
      socket.destroy();
      return;
    }
    if (code === 'request_timeout') metrics.clientTimeouts.inc({ kind: 'header' });
    else metrics.clientRejected.inc({ reason: CLIENT_REJECTION[code] ?? 'malformed' });
    socket.write(rawErrorResponse(code));
    lingerSocket(socket);
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
    closeSessions: () => sessions.close(),
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
  const route = resolveRoute(
    req.method ?? 'GET',
    path,
    carrierFamily(req.headers, query),
    rt.config.billing.balanceEnforcement.webhookPath,
  );
  // A proxied request's replies say them where they are written (proxy/send.ts `identify`).
  if (route.kind !== 'proxy') identify(res, id, correlationId);
  switch (route.kind) {
    case 'proxy':
      if (phase === 'draining') {
        identify(res, id, correlationId);
        return sendError(res, route.format, new GatewayError('shutting_down'), id);
      }
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
    case 'client_secret':
      if (phase === 'draining') return sendError(res, route.format, new GatewayError('shutting_down'), id);
      return answerClientSecret(rt, req, res, id, query, route.format);
    case 'webhook':
      return rt.forwardWebhook(req, res);
    case 'subject_state':
      return rt.stateNotice(req, res);
    case 'models':
    case 'model':
      return listModels(rt, route, req, res, id, query);
    case 'stored_response':
      return answerStoredResponse(rt, route, req, res, id, path, query);
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
  let principal: Principal;
  try {
    principal = await rt.authenticate(req.headers, query);
  } catch (err) {
    sendError(res, route.format, toGatewayError(err), id);
    return;
  }
  if (route.kind === 'models') {
    sendJson(res, 200, rt.modelList(route.format, principal));
    return;
  }
  const found = rt.modelInfo(route.format, route.id, principal);
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
