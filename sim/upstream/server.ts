// The upstream simulator: one node:http server speaking the OpenAI, Anthropic and Gemini wire formats,
// with x-sim-* knobs for pacing, latency and injected failures. See sim/upstream/README.md.

import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { anthropicDialect, anthropicRoutes } from './anthropic.ts';
import { BEDROCK_PATH, bedrockDialect, bedrockError, bedrockOperations } from './bedrock.ts';
import {
  type CloudAuth,
  type CloudAuthInternals,
  createCloudAuth,
  type EntraApp,
  type ServiceAccountKey,
} from './cloud-auth.ts';
import { geminiDialect, geminiListModels, geminiMethods } from './gemini.ts';
import { readKnobs } from './knobs.ts';
import { openaiDialect, openaiGetModel, openaiRoutes } from './openai.ts';
import { createRealtimeEndpoints } from './realtime.ts';
import type { RealtimeRecording } from './realtime-types.ts';
import { FixtureLibrary } from './replay.ts';
import { type AwsCredentials, verifySigV4 } from './sigv4.ts';
import { precountTokens, withPrecounted } from './text.ts';
import {
  type Dialect,
  type FailMode,
  framesBeforeCut,
  type Knobs,
  type RecordedRequest,
  type RouteHandler,
  type SimReply,
  type SimRequest,
  type SimStats,
} from './types.ts';
import { VERTEX_PATH, vertexAnthropicDialect, vertexDialect, vertexHandler } from './vertex.ts';

export type {
  CloudAuth,
  CloudAuthStats,
  EntraApp,
  ServiceAccountKey,
  ServiceAccountOptions,
} from './cloud-auth.ts';
export type { RealtimeClose, RealtimeRecording, RecordedRealtimeSession } from './realtime-types.ts';
export type { AwsCredentials } from './sigv4.ts';
export type { RecordedRequest, SimStats } from './types.ts';

export interface UpstreamSimOptions {
  host?: string;
  /** 0 (default) picks a free port. */
  port?: number;
  /** Pause between SSE events when the request has no x-sim-chunk-delay-ms; default 0 (no pacing). */
  defaultChunkDelayMs?: number;
  /** Keep the last requests in `requests` (default true); turn off for benchmarks. */
  record?: boolean;
  /** How many requests to keep (default 200). */
  maxRecorded?: number;
  /** Answer 401 in the provider's format when a request carries no credentials (default true). */
  requireAuth?: boolean;
  /** Where replay fixtures live (default test/fixtures/upstream). */
  fixturesDir?: string;
  /** Bedrock routes verify SigV4 signatures made with these credentials (else any Authorization passes). */
  aws?: AwsCredentials;
  /** Bedrock API key accepted as `Authorization: Bearer <key>`. */
  bedrockApiKey?: string;
  /** Entra app of the client-credentials grant; Azure routes then check bearer tokens. */
  entra?: EntraApp;
  /** Lifetime of issued access tokens, seconds (default 3600); `sim.auth.tokenLifetimeS` changes it later. */
  tokenLifetimeS?: number;
  /** Service-account key files (their client_email and private_key) whose grants are accepted. */
  serviceAccounts?: Pick<ServiceAccountKey, 'client_email' | 'private_key'>[];
}

export interface UpstreamSim {
  /** Origin, e.g. "http://127.0.0.1:43121" (no trailing slash). */
  readonly url: string;
  readonly port: number;
  close(): Promise<void>;
  /** The most recent requests, oldest first (bounded). */
  readonly requests: RecordedRequest[];
  readonly stats: SimStats;
  /** Realtime WebSocket sessions (OpenAI Realtime, Gemini Live): README "Realtime". */
  readonly realtime: RealtimeRecording;
  /** Token endpoints (Google service accounts, Entra) and the tokens they issued: README "Cloud credentials". */
  readonly auth: CloudAuth;
  /** Clears recorded requests, realtime sessions, stats and x-sim-fail-times counters. */
  reset(): void;
  /** Lets every stream held at its x-sim-hold-after point go on; returns how many it released. */
  release(): number;
  /**
   * Resolves once `predicate` holds; re-checked after every request, response end and abort, and after
   * every realtime handshake, frame (either way) and close.
   */
  waitFor(predicate: (sim: UpstreamSim) => boolean, timeoutMs?: number): Promise<void>;
}

interface Route {
  dialect: Dialect;
  handler: RouteHandler;
  params: Record<string, string>;
  /** How credentials are checked, beyond the dialect's "any credential" rule. */
  auth?: 'sigv4' | 'google' | 'azure';
}

function decodeSegment(s: string): string | undefined {
  try {
    return decodeURIComponent(s);
  } catch {
    return undefined;
  }
}

/** Per-response bookkeeping, so a client disconnect can stop timers and be told apart from our own resets. */
interface Exchange {
  timer: NodeJS.Timeout | undefined;
  deliberate: boolean;
  admin: boolean;
}

const EXACT_ROUTES = new Map<string, Route>();
const AZURE_PATH = /^\/openai\/deployments\/[^/]+\/(.+)$/;
for (const [key, handler] of Object.entries(openaiRoutes))
  EXACT_ROUTES.set(key, { dialect: openaiDialect, handler, params: {} });
for (const [key, handler] of Object.entries(anthropicRoutes)) {
  EXACT_ROUTES.set(key, { dialect: anthropicDialect, handler, params: {} });
}
const GEMINI_LIST: Route = { dialect: geminiDialect, handler: geminiListModels, params: {} };
EXACT_ROUTES.set('GET /v1beta/models', GEMINI_LIST);

const GEMINI_PATH = /^\/(?:v1beta|v1)\/models\/([^/:]+):([A-Za-z]+)$/;
const OPENAI_MODEL_PATH = /^\/v1\/models\/([^/]+)$/;
const GEMINI_MODEL_PATH = /^\/v1beta\/models\/([^/:]+)$/;

function looksGoogle(headers: IncomingHttpHeaders, query: URLSearchParams): boolean {
  return headers['x-goog-api-key'] !== undefined || query.has('key');
}

function resolveRoute(
  method: string,
  pathname: string,
  headers: IncomingHttpHeaders,
  query: URLSearchParams,
): Route | undefined {
  // GET /v1/models exists in both OpenAI and Gemini; Google credentials decide.
  if (method === 'GET' && pathname === '/v1/models' && looksGoogle(headers, query)) return GEMINI_LIST;
  const exact = EXACT_ROUTES.get(`${method} ${pathname}`);
  if (exact) return exact;
  // Azure OpenAI: /openai/deployments/{deployment}/chat/completions and the like, the OpenAI endpoints.
  const azure = AZURE_PATH.exec(pathname);
  if (azure) {
    const route = EXACT_ROUTES.get(`${method} /v1/${azure[1]}`);
    if (route) return { ...route, auth: 'azure' };
  }
  if (method === 'POST') {
    const b = BEDROCK_PATH.exec(pathname);
    const model = b ? decodeSegment(b[1]!) : undefined;
    if (b && model !== undefined)
      return {
        dialect: bedrockDialect,
        handler: bedrockOperations[b[2]!]!,
        params: { model },
        auth: 'sigv4',
      };
    const v = VERTEX_PATH.exec(pathname);
    const vertex = v ? vertexHandler(v[3]!, v[4]!, v[5]!) : undefined;
    if (v && vertex)
      return {
        dialect: v[3] === 'google' ? vertexDialect : vertexAnthropicDialect,
        handler: vertex,
        params: { project: v[1]!, location: v[2]!, model: decodeSegment(v[4]!) ?? v[4]! },
        auth: 'google',
      };
    const m = GEMINI_PATH.exec(pathname);
    const handler = m ? geminiMethods[m[2]!] : undefined;
    if (m && handler)
      return { dialect: geminiDialect, handler, params: { model: decodeURIComponent(m[1]!) } };
  } else if (method === 'GET') {
    const g = GEMINI_MODEL_PATH.exec(pathname);
    if (g)
      return {
        dialect: geminiDialect,
        handler: geminiModelInfo,
        params: { model: decodeURIComponent(g[1]!) },
      };
    const o = OPENAI_MODEL_PATH.exec(pathname);
    if (o)
      return {
        dialect: openaiDialect,
        handler: openaiGetModel,
        params: { model: decodeURIComponent(o[1]!) },
      };
  }
  return undefined;
}

function geminiModelInfo(req: SimRequest): SimReply {
  const id = req.params.model;
  return {
    kind: 'json',
    status: 200,
    body: JSON.stringify({
      name: `models/${id}`,
      version: '001',
      displayName: id,
      supportedGenerationMethods: ['generateContent', 'streamGenerateContent', 'countTokens'],
    }),
  };
}

/** Which provider's error shape to use when no route matched. */
function fallbackDialect(pathname: string, headers: IncomingHttpHeaders, query: URLSearchParams): Dialect {
  if (pathname.startsWith('/model/')) return bedrockDialect;
  if (pathname.startsWith('/v1/projects/') || pathname.startsWith('/v1beta1/projects/')) return vertexDialect;
  if (pathname.startsWith('/v1beta/') || GEMINI_PATH.test(pathname) || looksGoogle(headers, query))
    return geminiDialect;
  if (pathname.startsWith('/v1/messages') || headers['anthropic-version'] !== undefined)
    return anthropicDialect;
  return openaiDialect;
}

function parseJson(req: IncomingMessage, body: Buffer, pathname: string): { ok: boolean; value: unknown } {
  if (body.length === 0) return { ok: true, value: undefined };
  const type = req.headers['content-type'];
  // Bedrock reads the body as JSON whatever its content type (the AWS SDK may send octet-stream).
  const isJson =
    type === undefined || pathname.startsWith('/model/')
      ? body[0] === 0x7b || body[0] === 0x5b
      : type.includes('json');
  if (!isJson) return { ok: true, value: undefined };
  try {
    return { ok: true, value: JSON.parse(body.toString('utf8')) };
  } catch {
    return { ok: false, value: undefined };
  }
}

function modelOf(json: unknown, params: Record<string, string>): string {
  if (params.model !== undefined) return params.model;
  if (typeof json === 'object' && json !== null && !Array.isArray(json)) {
    const model = (json as Record<string, unknown>).model;
    if (typeof model === 'string') return model;
  }
  return '';
}

/** The counting endpoints of every provider (x-sim-count-hang). */
const COUNT_PATH = /(?:\/count_tokens|:countTokens|\/input_tokens|\/count-tokens|\/count-tokens:rawPredict)$/;

/** Failures of a generation's stream: a count of the same model, asked alongside it, is answered whole. */
const MIDSTREAM = new Set<FailMode | undefined>([
  'midstream',
  'midstream-429',
  'midstream-reset',
  'midstream-end',
]);

function joined(frames: readonly (string | Buffer)[]): string | Buffer {
  return typeof frames[0] === 'string' ? frames.join('') : Buffer.concat(frames as Buffer[]);
}

const FAIL_MESSAGES: Record<number, string> = {
  400: 'Simulated bad request (x-sim-fail: 400).',
  401: 'Simulated authentication failure (x-sim-fail: 401).',
  429: 'Simulated rate limit (x-sim-fail: 429). Please retry after a short wait.',
  500: 'Simulated internal error (x-sim-fail: 500).',
  503: 'Simulated overload (x-sim-fail: 503). The service is temporarily unavailable.',
};

function ignoreError(): void {}

function recordedJson(r: RecordedRequest) {
  const type = r.headers['content-type'] ?? '';
  const text = r.json !== undefined || type.startsWith('text/') || type.includes('json');
  return {
    method: r.method,
    path: r.path,
    headers: r.headers,
    json: r.json,
    bodyEncoding: text ? 'utf8' : 'base64',
    body: r.body.toString(text ? 'utf8' : 'base64'),
  };
}

export async function startUpstreamSim(opts: UpstreamSimOptions = {}): Promise<UpstreamSim> {
  const defaultDelay = opts.defaultChunkDelayMs ?? 0;
  const record = opts.record ?? true;
  const maxRecorded = opts.maxRecorded ?? 200;
  const requireAuth = opts.requireAuth ?? true;
  const fixtures = new FixtureLibrary(opts.fixturesDir);
  const requests: RecordedRequest[] = [];
  const stats: SimStats = { aborted: 0, served: 0, injected: 0, held: 0 };
  const failCounts = new Map<string, number>();
  const waiters = new Set<() => void>();
  /** Streams held at their x-sim-hold-after point: what sends the rest of each. */
  const holding = new Set<() => void>();
  let closing = false;
  let simUrl = '';
  const aws = opts.aws;
  const bedrockApiKey = opts.bedrockApiKey;
  const cloud: CloudAuthInternals = createCloudAuth({
    url: () => simUrl,
    tokenLifetimeS: opts.tokenLifetimeS,
    entra: opts.entra,
  });
  for (const key of opts.serviceAccounts ?? []) cloud.trustServiceAccount(key);

  /** Bedrock: a Bedrock API key, or a SigV4 signature checked against the configured credentials. */
  function checkBedrock(method: string, url: string, headers: IncomingHttpHeaders, body: Buffer) {
    const authz = headers.authorization ?? '';
    if (aws === undefined && bedrockApiKey === undefined)
      return authz === ''
        ? bedrockError(403, 'MissingAuthenticationTokenException', 'Missing Authentication Token')
        : undefined;
    if (/^bearer /i.test(authz)) {
      return authz.slice(7).trim() === bedrockApiKey
        ? undefined
        : bedrockError(
            403,
            'AccessDeniedException',
            'Authentication failed: Please make sure your API Key is valid.',
          );
    }
    if (aws === undefined)
      return bedrockError(
        403,
        'UnrecognizedClientException',
        'The security token included in the request is invalid.',
      );
    const refusal = verifySigV4(method, url, headers, body, aws);
    return refusal === undefined ? undefined : bedrockError(403, refusal.errorType, refusal.message);
  }

  function authorize(
    route: Route,
    method: string,
    url: string,
    req: IncomingMessage,
    body: Buffer,
    query: URLSearchParams,
  ) {
    switch (route.auth) {
      case 'sigv4':
        return checkBedrock(method, url, req.headers, body);
      case 'google':
        return cloud.checkGoogleBearer(req.headers);
      case 'azure':
        return cloud.checkAzure(req.headers);
      default:
        return route.dialect.hasAuth(req.headers, query)
          ? undefined
          : route.dialect.errorReply(401, 'Missing API key.');
    }
  }

  function notify(): void {
    for (const w of waiters) w();
  }

  function recordRequest(entry: RecordedRequest): void {
    requests.push(entry);
    if (requests.length > maxRecorded) requests.shift();
  }

  /** Whether this request should fail now, counting attempts per x-sim-fail-key when x-sim-fail-times is set. */
  function activeFailure(knobs: Knobs): FailMode | undefined {
    if (knobs.fail === undefined) return undefined;
    if (knobs.failTimes === undefined) return knobs.fail;
    const seen = failCounts.get(knobs.failKey) ?? 0;
    if (seen >= knobs.failTimes) return undefined;
    failCounts.set(knobs.failKey, seen + 1);
    return knobs.fail;
  }

  function destroy(res: ServerResponse, ex: Exchange, hard: boolean): void {
    ex.deliberate = true;
    const socket = res.socket;
    if (socket === null) return;
    if (hard) socket.resetAndDestroy();
    else socket.destroy();
  }

  function sendJson(
    res: ServerResponse,
    status: number,
    body: string,
    headers?: Record<string, string>,
  ): void {
    res.writeHead(status, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(body),
      ...headers,
    });
    res.end(body);
  }

  function send(
    res: ServerResponse,
    ex: Exchange,
    reply: SimReply,
    knobs: Knobs,
    midstream: FailMode | undefined,
  ): void {
    if (res.destroyed) return;
    if (reply.kind !== 'stream') {
      const body = typeof reply.body === 'string' ? Buffer.from(reply.body) : reply.body;
      const contentType = reply.kind === 'json' ? 'application/json' : reply.contentType;
      res.writeHead(reply.status, {
        'content-type': contentType,
        'content-length': body.length,
        ...reply.headers,
      });
      if (midstream === undefined) {
        res.end(body);
        return;
      }
      // A non-streamed body cannot carry an error event: send half of it, then drop the connection.
      res.write(body.subarray(0, body.length >> 1), () => destroy(res, ex, false));
      return;
    }
    res.writeHead(200, { 'content-type': reply.contentType, 'cache-control': 'no-cache', ...reply.headers });
    let frames: (string | Buffer)[] = reply.frames;
    let endWithReset = false;
    if (midstream !== undefined) {
      frames = frames.slice(0, framesBeforeCut(frames.length));
      const errorFrame =
        midstream === 'midstream-429' ? (reply.throttleFrame ?? reply.errorFrame) : reply.errorFrame;
      if ((midstream === 'midstream' || midstream === 'midstream-429') && errorFrame.length > 0)
        frames.push(errorFrame);
      else if (midstream !== 'midstream-end') endWithReset = true;
    }
    const finish = (): void => {
      if (endWithReset) destroy(res, ex, false);
      else res.end();
    };
    const hold = knobs.holdAfter;
    if (hold !== undefined && hold < frames.length) {
      if (hold > 0) res.write(joined(frames.slice(0, hold)));
      const rest = frames.slice(hold);
      stats.held++;
      holding.add(() => {
        if (!res.destroyed) writeFrames(res, ex, rest, knobs, endWithReset, finish);
      });
      notify();
      return;
    }
    writeFrames(res, ex, frames, knobs, endWithReset, finish);
  }

  function writeFrames(
    res: ServerResponse,
    ex: Exchange,
    frames: (string | Buffer)[],
    knobs: Knobs,
    endWithReset: boolean,
    finish: () => void,
  ): void {
    if (knobs.chunkDelayMs <= 0) {
      const whole = joined(frames);
      if (endWithReset) res.write(whole, finish);
      else res.end(whole);
      return;
    }
    let i = 0;
    const step = (): void => {
      ex.timer = undefined;
      const last = i === frames.length - 1;
      if (last) res.write(frames[i++], finish);
      else {
        res.write(frames[i++]);
        ex.timer = setTimeout(step, knobs.chunkDelayMs);
      }
    };
    step();
  }

  async function respond(res: ServerResponse, ex: Exchange, route: Route, simReq: SimRequest): Promise<void> {
    const { knobs } = simReq;
    if (knobs.countHang && COUNT_PATH.test(simReq.pathname)) {
      stats.injected++;
      return;
    }
    const counting = MIDSTREAM.has(knobs.fail) && COUNT_PATH.test(simReq.pathname);
    const failure = counting ? undefined : activeFailure(knobs);
    if (failure !== undefined) {
      stats.injected++;
      if (failure === 'reset') {
        destroy(res, ex, true);
        return;
      }
      if (failure === 'hang') return;
      if (typeof failure === 'number') {
        const reply = route.dialect.errorReply(
          failure,
          FAIL_MESSAGES[failure] ?? `Simulated error ${failure}.`,
          simReq.headers,
        );
        const retryAfter = simReq.headers['x-sim-retry-after'];
        const headers =
          typeof retryAfter === 'string' ? { ...reply.headers, 'retry-after': retryAfter } : reply.headers;
        sendJson(res, reply.status, reply.body, headers);
        return;
      }
    }
    let reply: SimReply;
    if (knobs.replay !== undefined) {
      const replayed = await fixtures.load(knobs.replay);
      reply = replayed ?? route.dialect.errorReply(404, `No fixture named ${knobs.replay}.`);
    } else {
      try {
        const pending = precountTokens(simReq.json);
        const counts = pending instanceof Promise ? await pending : pending;
        reply = await withPrecounted(counts, () => route.handler(simReq));
      } catch {
        reply = route.dialect.errorReply(400, 'The request body could not be processed.');
      }
    }
    send(res, ex, reply, knobs, failure);
  }

  async function admin(res: ServerResponse, ex: Exchange, method: string, pathname: string, knobs: Knobs) {
    if (method === 'GET' && pathname === '/_sim/requests') {
      sendJson(res, 200, JSON.stringify(requests.map(recordedJson)));
    } else if (method === 'GET' && pathname === '/_sim/stats') {
      sendJson(res, 200, JSON.stringify(stats));
    } else if (method === 'POST' && pathname === '/_sim/reset') {
      sim.reset();
      res.writeHead(204).end();
    } else if (method === 'POST' && pathname === '/_sim/release') {
      sendJson(res, 200, JSON.stringify({ released: sim.release() }));
    } else if (method === 'GET' && pathname.startsWith('/_sim/replay/')) {
      const reply = await fixtures.load(decodeURIComponent(pathname.slice('/_sim/replay/'.length)));
      if (reply) send(res, ex, reply, knobs, undefined);
      else sendJson(res, 404, JSON.stringify({ error: { message: 'No such fixture.' } }));
    } else {
      sendJson(res, 404, JSON.stringify({ error: { message: 'Unknown simulator endpoint.' } }));
    }
  }

  function onBody(req: IncomingMessage, res: ServerResponse, ex: Exchange, body: Buffer): void {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const pathname = q < 0 ? url : url.slice(0, q);
    const query = new URLSearchParams(q < 0 ? '' : url.slice(q + 1));
    const method = req.method ?? 'GET';
    if (pathname.startsWith('/_sim/')) {
      ex.admin = true;
      void admin(res, ex, method, pathname, readKnobs(req.headers, '', defaultDelay));
      return;
    }
    const parsed = parseJson(req, body, pathname);
    if (record) recordRequest({ method, path: url, headers: req.headers, body, json: parsed.value });
    const granted = cloud.tokenEndpoint(method, pathname, req.headers, body);
    if (granted !== undefined) {
      notify();
      sendJson(res, granted.status, granted.body, granted.headers);
      return;
    }
    const route = resolveRoute(method, pathname, req.headers, query);
    const dialect = route?.dialect ?? fallbackDialect(pathname, req.headers, query);
    notify();
    if (!route) {
      const reply = dialect.errorReply(404, `Unknown endpoint ${method} ${pathname}.`);
      sendJson(res, reply.status, reply.body, reply.headers);
      return;
    }
    if (!parsed.ok) {
      const reply = dialect.errorReply(400, 'We could not parse the JSON body of your request.');
      sendJson(res, reply.status, reply.body, reply.headers);
      return;
    }
    const refusal = requireAuth ? authorize(route, method, url, req, body, query) : undefined;
    if (refusal !== undefined) {
      sendJson(res, refusal.status, refusal.body, refusal.headers);
      return;
    }
    const json = parsed.value;
    const knobs = readKnobs(req.headers, modelOf(json, route.params), defaultDelay);
    const simReq: SimRequest = {
      method,
      pathname,
      query,
      headers: req.headers,
      body,
      json:
        typeof json === 'object' && json !== null && !Array.isArray(json)
          ? (json as Record<string, unknown>)
          : undefined,
      knobs,
      params: route.params,
    };
    if (knobs.latencyMs > 0) {
      ex.timer = setTimeout(() => {
        ex.timer = undefined;
        void respond(res, ex, route, simReq);
      }, knobs.latencyMs);
    } else {
      void respond(res, ex, route, simReq);
    }
  }

  const realtime = createRealtimeEndpoints({
    requireAuth,
    record,
    maxRecorded,
    defaultChunkDelayMs: defaultDelay,
    failure(knobs) {
      const failure = activeFailure(knobs);
      if (failure !== undefined) stats.injected++;
      return failure;
    },
    notify,
  });

  const server = createServer(function onRequest(req, res) {
    const ex: Exchange = { timer: undefined, deliberate: false, admin: false };
    res.on('finish', function onFinish() {
      if (ex.admin) return;
      stats.served++;
      notify();
    });
    res.on('close', function onClose() {
      if (ex.timer !== undefined) clearTimeout(ex.timer);
      ex.timer = undefined;
      if (!res.writableFinished && !ex.deliberate && !ex.admin && !closing) {
        stats.aborted++;
        notify();
      }
    });
    // A client that disconnects mid-upload makes req emit ECONNRESET; the close handler above accounts for it.
    req.on('error', ignoreError);
    const chunks: Buffer[] = [];
    req.on('data', function onData(chunk: Buffer) {
      chunks.push(chunk);
    });
    req.on('end', function onEnd() {
      onBody(req, res, ex, chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks));
    });
  });
  server.keepAliveTimeout = 30_000;
  server.on('upgrade', realtime.handleUpgrade);

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ port: opts.port ?? 0, host: opts.host ?? '127.0.0.1', backlog: 4096 }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;

  simUrl = `http://${host}:${address.port}`;

  const sim: UpstreamSim = {
    url: simUrl,
    port: address.port,
    requests,
    stats,
    realtime,
    auth: cloud,
    reset() {
      requests.length = 0;
      cloud.reset();
      realtime.reset();
      stats.aborted = 0;
      stats.served = 0;
      stats.injected = 0;
      stats.held = 0;
      failCounts.clear();
    },
    release() {
      const held = [...holding];
      holding.clear();
      for (const resume of held) resume();
      return held.length;
    },
    waitFor(predicate, timeoutMs = 5000) {
      if (predicate(sim)) return Promise.resolve();
      return new Promise<void>((resolve, reject) => {
        const check = (): void => {
          if (!predicate(sim)) return;
          cleanup();
          resolve();
        };
        const timer = setTimeout(() => {
          cleanup();
          reject(new Error(`upstream simulator: condition not met within ${timeoutMs} ms`));
        }, timeoutMs);
        const cleanup = (): void => {
          clearTimeout(timer);
          waiters.delete(check);
        };
        waiters.add(check);
      });
    },
    close() {
      closing = true;
      holding.clear();
      realtime.closeAll();
      return new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
  return sim;
}
