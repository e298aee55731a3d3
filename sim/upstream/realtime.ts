// Realtime WebSocket endpoints of the upstream simulator: the upgrade router (OpenAI Realtime, Gemini
// Live), credentials, knobs, injected failures, pacing and the session recording. The protocols
// themselves live in realtime-openai.ts and realtime-gemini.ts. See sim/upstream/README.md "Realtime".

import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { type RawData, type WebSocket, WebSocketServer } from 'ws';
import { geminiDialect } from './gemini.ts';
import { readKnobs } from './knobs.ts';
import { openaiDialect } from './openai-common.ts';
import { GeminiLiveSession } from './realtime-gemini.ts';
import { OpenAIRealtimeSession } from './realtime-openai.ts';
import {
  failMessage,
  type HandshakeFailure,
  MAX_FRAMES,
  type RealtimeClose,
  type RealtimeConn,
  type RealtimeProtocolSession,
  type RealtimeProvider,
  type RealtimeRecording,
  type RecordedRealtimeSession,
} from './realtime-types.ts';
import type { Dialect, FailMode, Knobs } from './types.ts';

export interface RealtimeOptions {
  requireAuth: boolean;
  record: boolean;
  maxRecorded: number;
  defaultChunkDelayMs: number;
  /** The simulator's x-sim-fail decision (x-sim-fail-times counting) and stats.injected. */
  failure(knobs: Knobs): FailMode | undefined;
  /** Re-checks waitFor predicates. */
  notify(): void;
}

export interface RealtimeEndpoints extends RealtimeRecording {
  /** The http server's 'upgrade' listener: a realtime endpoint upgrades; any other path is answered 404. */
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void;
  reset(): void;
  /** Terminates every open socket (simulator shutdown). */
  closeAll(): void;
}

const OPENAI_PATHS = new Set(['/v1/realtime', '/openai/realtime', '/openai/v1/realtime', '/realtime']);
const GEMINI_PATH =
  /^\/ws\/google\.ai\.generativelanguage\.(v1alpha|v1beta|v1)\.GenerativeService\.(BidiGenerateContent|BidiGenerateContentConstrained)$/;

function header(headers: IncomingHttpHeaders, name: string): string {
  const v = headers[name];
  return (Array.isArray(v) ? v[0] : v) ?? '';
}

/** The subprotocols a client offered (Sec-WebSocket-Protocol). */
function offeredProtocols(headers: IncomingHttpHeaders): string[] {
  return header(headers, 'sec-websocket-protocol')
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean);
}

function openaiHasAuth(headers: IncomingHttpHeaders): boolean {
  if (openaiDialect.hasAuth(headers, new URLSearchParams())) return true;
  if (header(headers, 'api-key') !== '') return true; // Azure
  return offeredProtocols(headers).some(
    (p) => p.startsWith('openai-insecure-api-key.') && p.length > 'openai-insecure-api-key.'.length,
  );
}

function geminiHasAuth(headers: IncomingHttpHeaders, query: URLSearchParams): boolean {
  return geminiDialect.hasAuth(headers, query) || (query.get('access_token') ?? '') !== '';
}

/** Headers plus the x-sim-* query parameters (the query wins), so knobs can ride in the URL. */
function knobHeaders(headers: IncomingHttpHeaders, query: URLSearchParams): IncomingHttpHeaders {
  let merged: IncomingHttpHeaders | undefined;
  for (const [key, value] of query) {
    const name = key.toLowerCase();
    if (!name.startsWith('x-sim-')) continue;
    merged ??= { ...headers };
    merged[name] = value;
  }
  return merged ?? headers;
}

const STATUS_TEXT: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
  504: 'Gateway Timeout',
};

function refuse(socket: Duplex, dialect: Dialect, status: number, message: string): void {
  const reply = dialect.errorReply(status, message);
  const lines = [
    `HTTP/1.1 ${status} ${STATUS_TEXT[status] ?? 'Error'}`,
    'Content-Type: application/json',
    `Content-Length: ${Buffer.byteLength(reply.body)}`,
    'Connection: close',
  ];
  for (const [k, v] of Object.entries(reply.headers ?? {})) lines.push(`${k}: ${v}`);
  socket.end(`${lines.join('\r\n')}\r\n\r\n${reply.body}`);
}

function ignoreError(): void {}

/** A received frame as text (ws hands text and binary frames over alike). */
function frameText(data: RawData): string {
  if (Buffer.isBuffer(data)) return data.toString('utf8');
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  return Buffer.from(data).toString('utf8');
}

export function createRealtimeEndpoints(opts: RealtimeOptions): RealtimeEndpoints {
  const sessions: RecordedRealtimeSession[] = [];
  let shuttingDown = false;
  const wss = new WebSocketServer({
    noServer: true,
    clientTracking: true,
    perMessageDeflate: false,
    // The OpenAI browser client offers "realtime" plus credential subprotocols: choose "realtime".
    handleProtocols: (protocols) =>
      protocols.has('realtime') ? 'realtime' : (protocols.values().next().value ?? false),
  });

  function keep(record: RecordedRealtimeSession): void {
    if (!opts.record) return;
    sessions.push(record);
    if (sessions.length > opts.maxRecorded) sessions.shift();
  }

  function handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on('error', ignoreError);
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    // The genai SDK joins its base URL and path with a double slash.
    const pathname = (q < 0 ? url : url.slice(0, q)).replace(/\/{2,}/g, '/');
    const query = new URLSearchParams(q < 0 ? '' : url.slice(q + 1));
    const provider: RealtimeProvider | undefined = OPENAI_PATHS.has(pathname)
      ? 'openai'
      : GEMINI_PATH.test(pathname)
        ? 'gemini'
        : undefined;
    if (provider === undefined) {
      refuse(socket, openaiDialect, 404, `No realtime endpoint at ${pathname}.`);
      return;
    }
    const dialect = provider === 'openai' ? openaiDialect : geminiDialect;
    const model = provider === 'openai' ? (query.get('model') ?? query.get('deployment') ?? '') : '';
    const record: RecordedRealtimeSession = {
      provider,
      path: url,
      headers: req.headers,
      status: 101,
      protocol: '',
      id: '',
      model,
      received: [],
      sent: [],
      counts: { received: 0, sent: 0, responses: 0 },
      closed: undefined,
    };
    const hasAuth = provider === 'openai' ? openaiHasAuth(req.headers) : geminiHasAuth(req.headers, query);
    if (opts.requireAuth && !hasAuth) {
      record.status = 401;
      keep(record);
      opts.notify();
      refuse(
        socket,
        dialect,
        401,
        provider === 'openai'
          ? 'Missing bearer or basic authentication in header.'
          : 'Method doesn\u2019t allow unregistered callers. Please use an API key.',
      );
      return;
    }
    const hdrs = knobHeaders(req.headers, query);
    const knobs = readKnobs(hdrs, model, opts.defaultChunkDelayMs);
    // OpenAI carries the model in the URL, so every knob is known now; Gemini's model arrives in its
    // setup message, so only header/query failures act on the handshake (model-name ones at setup).
    const decided = provider === 'openai' || knobs.fail !== undefined;
    const failure = knobs.fail !== undefined ? opts.failure(knobs) : undefined;
    if (typeof failure === 'number') {
      record.status = failure;
      keep(record);
      opts.notify();
      refuse(socket, dialect, failure, failMessage(failure));
      return;
    }
    if (failure === 'reset') {
      record.status = 0;
      keep(record);
      opts.notify();
      const s = socket as Socket;
      if (typeof s.resetAndDestroy === 'function') s.resetAndDestroy();
      else socket.destroy();
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      record.protocol = ws.protocol;
      keep(record);
      startSession(ws, record, query, hdrs, knobs, { decided, mode: failure });
    });
  }

  function startSession(
    ws: WebSocket,
    record: RecordedRealtimeSession,
    query: URLSearchParams,
    hdrs: IncomingHttpHeaders,
    knobs: Knobs,
    failure: HandshakeFailure,
  ): void {
    const timers = new Set<NodeJS.Timeout>();
    let closed = false;
    let closeBy: RealtimeClose | undefined;
    const conn: RealtimeConn = {
      record,
      knobs,
      query,
      binary: false,
      get closed() {
        return closed;
      },
      send(message) {
        if (closed || ws.readyState !== 1) return;
        const text = JSON.stringify(message);
        if (conn.binary) ws.send(Buffer.from(text), { binary: true });
        else ws.send(text);
        record.counts.sent++;
        if (opts.record && record.sent.length < MAX_FRAMES) record.sent.push(message);
        opts.notify();
      },
      close(code, reason) {
        if (closed || closeBy !== undefined) return;
        closeBy = { code, reason, by: 'server' };
        ws.close(code, reason);
      },
      terminate() {
        if (closed) return;
        closeBy ??= { code: 1006, reason: '', by: 'server' };
        ws.terminate();
      },
      later(fn, ms) {
        if (closed) return;
        const t = setTimeout(() => {
          timers.delete(t);
          if (!closed) fn();
        }, ms);
        timers.add(t);
      },
      responseDone() {
        record.counts.responses++;
        opts.notify();
      },
      failure: (k) => opts.failure(k),
      knobsFor: (model) => readKnobs(hdrs, model, opts.defaultChunkDelayMs),
      knobHeaders: hdrs,
    };
    const session: RealtimeProtocolSession =
      record.provider === 'openai'
        ? new OpenAIRealtimeSession(conn, failure)
        : new GeminiLiveSession(conn, failure);
    ws.on('error', ignoreError);
    ws.on('message', (data: RawData, isBinary: boolean) => {
      if (closed) return;
      const text = frameText(data);
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch {
        value = undefined;
      }
      record.counts.received++;
      if (opts.record && record.received.length < MAX_FRAMES)
        record.received.push(value === undefined ? text : value);
      opts.notify();
      session.message(value, text, isBinary);
    });
    ws.on('close', (code: number, reason: Buffer) => {
      closed = true;
      for (const t of timers) clearTimeout(t);
      timers.clear();
      record.closed =
        closeBy ??
        (shuttingDown
          ? { code: 1006, reason: '', by: 'server' }
          : { code, reason: reason.toString('utf8'), by: 'client' });
      session.closed();
      opts.notify();
    });
    opts.notify();
    session.open();
  }

  return {
    sessions,
    get open() {
      return wss.clients.size;
    },
    handleUpgrade,
    reset() {
      sessions.length = 0;
    },
    hangUp(code, reason) {
      for (const ws of wss.clients) ws.close(code, reason);
    },
    closeAll() {
      shuttingDown = true;
      for (const ws of wss.clients) ws.terminate();
    },
  };
}
