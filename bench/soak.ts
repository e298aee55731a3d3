// `node bench/soak.ts [--minutes 30] [--rate 60] [--out <dir>]`: whether the gateway keeps memory after
// mixed and hostile traffic. It starts the upstream simulator, the billing simulator and a gateway with
// billing on (file outbox + sidecar), warms the gateway up, takes a heap snapshot of it (through its
// inspector, after a forced collection), sends a mixed load at a bounded rate for --minutes, lets the
// gateway go idle, and takes a second snapshot. RSS (from /proc) and the V8 heap (from the gateway's
// /metrics) are sampled throughout, the heap after a forced collection every --gc-every-s. The report
// (report.json, report.txt, both snapshots) goes to --out: memory over time, the snapshots' totals,
// classes by self-size growth, and for objects allocated between the snapshots and still alive, the
// chain of references that holds the largest of them.
//
//   node bench/soak.ts --minutes 2                 a short run
//   node bench/soak.ts --analyze <start> <end>     the comparison of two saved snapshots only
//   --repo <checkout>   run the gateway and simulators of another checkout (e.g. a `git archive` of HEAD,
//                       so that edits in this work tree during a long run do not reach the gateway)

import { Buffer } from 'node:buffer';
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Agent, FormData, request } from 'undici';
import {
  type ClassDelta,
  diffSummaries,
  HeapSnapshot,
  type HeapSummary,
  topClasses,
} from './lib/heap-snapshot.ts';
import { InspectorSession, type MemoryUsage } from './lib/inspector.ts';
import { loadAverage, type MachineInfo, machineInfo } from './lib/machine.ts';
import {
  BENCH_ACCESS_KEY,
  GATEWAY_V8_FLAGS,
  SIM_KEY,
  startBillingSimProcess,
  startUpstreamSimProcess,
  type Workspace,
  waitForBillingDrain,
  writeGatewayConfig,
} from './lib/peers.ts';
import { freePort, processTree, round, type Service, startService, waitForHttp } from './lib/proc.ts';
import { CHAT_MODEL, pacedModel, TRANSLATE_MODEL } from './lib/requests.ts';

const REPO = join(dirname(fileURLToPath(import.meta.url)), '..');
const GEMINI_MODEL = 'gemini-3.8-flash';
const MB = 1024 * 1024;

interface Options {
  minutes: number;
  rate: number;
  maxInFlight: number;
  warmupS: number;
  sampleS: number;
  gcEveryS: number;
  maxBodyMb: number;
  logLevel: string;
  /** Which heap snapshots to take: each leaves the gateway's RSS higher (the allocator keeps what
   * writing it used), so RSS figures after a start snapshot include that. */
  snapshots: 'both' | 'end' | 'none';
  /** More environment for the gateway process (e.g. GLIBC_TUNABLES). */
  gatewayEnv: Record<string, string>;
  seed: number;
  out: string | undefined;
  repo: string;
  top: number;
}

function log(message: string): void {
  process.stderr.write(`[soak ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
}

// ---------------------------------------------------------------------------------------------------
// The request mix

/** Deterministic, so that two runs with one seed send the same requests. */
function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Ctx {
  origin: string;
  host: string;
  port: number;
  agent: Agent;
  rnd: () => number;
  maxBodyBytes: number;
  seq: number;
}

type Outcome = string;

const WORDS =
  'alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa'.split(
    ' ',
  );

function pick<T>(ctx: Ctx, items: readonly T[]): T {
  return items[Math.floor(ctx.rnd() * items.length)]!;
}

function between(ctx: Ctx, lo: number, hi: number): number {
  return Math.floor(lo + ctx.rnd() * (hi - lo));
}

/** A prompt that differs from request to request, as real traffic does. */
function prompt(ctx: Ctx): string {
  const n = between(ctx, 4, 40);
  const words: string[] = [`soak ${ctx.seq}`];
  for (let i = 0; i < n; i++) words.push(pick(ctx, WORDS));
  return words.join(' ');
}

function bearer(key = BENCH_ACCESS_KEY): Record<string, string> {
  return { 'content-type': 'application/json', authorization: `Bearer ${key}` };
}

function anthropicHeaders(key = BENCH_ACCESS_KEY): Record<string, string> {
  return { 'content-type': 'application/json', 'x-api-key': key, 'anthropic-version': '2023-06-01' };
}

function geminiHeaders(key = BENCH_ACCESS_KEY): Record<string, string> {
  return { 'content-type': 'application/json', 'x-goog-api-key': key };
}

/** Sends one request and reads the whole answer; the outcome is its status. */
async function send(
  ctx: Ctx,
  path: string,
  headers: Record<string, string>,
  body: string | Buffer | FormData | undefined,
  method: 'POST' | 'GET' = 'POST',
): Promise<Outcome> {
  const res = await request(ctx.origin + path, {
    method,
    headers,
    body,
    dispatcher: ctx.agent,
    signal: AbortSignal.timeout(90_000),
  });
  await res.body.arrayBuffer();
  return String(res.statusCode);
}

/** Starts a stream, reads `chunks` pieces of it and walks away (the client goes mid-reply). */
async function sendAndAbort(
  ctx: Ctx,
  path: string,
  headers: Record<string, string>,
  body: string | Buffer,
  chunks: number,
): Promise<Outcome> {
  const abort = new AbortController();
  const res = await request(ctx.origin + path, {
    method: 'POST',
    headers,
    body,
    dispatcher: ctx.agent,
    signal: abort.signal,
  });
  if (res.statusCode !== 200) {
    await res.body.arrayBuffer();
    return String(res.statusCode);
  }
  let seen = 0;
  try {
    for await (const _chunk of res.body) if (++seen >= chunks) break;
  } catch {
    // the abort below is what ends it
  }
  abort.abort();
  return 'aborted';
}

function chatBody(ctx: Ctx, model: string, stream: boolean, extra: Record<string, unknown> = {}): string {
  return JSON.stringify({
    model,
    messages: [{ role: 'user', content: prompt(ctx) }],
    ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
    ...extra,
  });
}

function anthropicBody(ctx: Ctx, model: string, stream: boolean): string {
  return JSON.stringify({
    model,
    max_tokens: 512,
    ...(stream ? { stream: true } : {}),
    messages: [{ role: 'user', content: prompt(ctx) }],
  });
}

function geminiBody(ctx: Ctx): string {
  return JSON.stringify({ contents: [{ role: 'user', parts: [{ text: prompt(ctx) }] }] });
}

let bigWords: Buffer | undefined;
let bigX: Buffer | undefined;
/** `bytes` of prompt text, plain words or one space-less run; the same bytes every time. */
function filler(bytes: number, spaceless: boolean): Buffer {
  const size = 8 * MB;
  bigWords ??= Buffer.from('benchmark '.repeat(size / 10));
  bigX ??= Buffer.alloc(size, 'x');
  return (spaceless ? bigX : bigWords).subarray(0, Math.min(bytes, size));
}

/** A word of this request alone, longer than the strings V8 copies rather than slices (13). */
function rareWord(ctx: Ctx): string {
  return `soakwordident${[...ctx.seq.toString(26)].map((d) => String.fromCharCode(97 + Number.parseInt(d, 26))).join('')}`;
}

/** A chat request of about `bytes` bytes, its prompt opened by a rare word (as identifiers, URLs and
 * base64 in real prompts are). */
function largeChat(
  ctx: Ctx,
  bytes: number,
  spaceless: boolean,
  opts: { model?: string; stream?: boolean } = {},
): Buffer {
  const head = Buffer.from(
    `{"model":"${opts.model ?? CHAT_MODEL}",${opts.stream ? '"stream":true,' : ''}"messages":[{"role":"user","content":"${rareWord(ctx)} `,
  );
  const tail = Buffer.from('"}]}');
  return Buffer.concat([head, filler(Math.max(0, bytes - head.length - tail.length), spaceless), tail]);
}

/** One of several variants, picked at random; the outcome names the variant. */
async function oneOf(ctx: Ctx, variants: Record<string, () => Promise<Outcome>>): Promise<Outcome> {
  const name = pick(ctx, Object.keys(variants));
  try {
    return `${name} ${await variants[name]!()}`;
  } catch (err) {
    const e = err as Error & { code?: string };
    return `${name} error ${e.code ?? e.name}`;
  }
}

interface Kind {
  name: string;
  weight: number;
  run(ctx: Ctx): Promise<Outcome>;
}

const KINDS: readonly Kind[] = [
  {
    name: 'chat',
    weight: 12,
    run: (ctx) =>
      send(
        ctx,
        '/v1/chat/completions',
        bearer(),
        chatBody(
          ctx,
          CHAT_MODEL,
          false,
          ctx.rnd() < 0.2
            ? {
                tools: [
                  {
                    type: 'function',
                    function: {
                      name: 'get_weather',
                      parameters: { type: 'object', properties: { location: { type: 'string' } } },
                    },
                  },
                ],
              }
            : {},
        ),
      ),
  },
  {
    name: 'chat_stream',
    weight: 10,
    run: (ctx) =>
      send(ctx, '/v1/chat/completions', bearer(), chatBody(ctx, pacedModel(CHAT_MODEL, 20, 5), true)),
  },
  {
    name: 'chat_to_anthropic_stream',
    weight: 4,
    run: (ctx) =>
      send(ctx, '/v1/chat/completions', bearer(), chatBody(ctx, pacedModel(TRANSLATE_MODEL, 20, 5), true)),
  },
  {
    name: 'responses_stream',
    weight: 3,
    run: (ctx) =>
      send(
        ctx,
        '/v1/responses',
        bearer(),
        JSON.stringify({ model: pacedModel(CHAT_MODEL, 10, 5), input: prompt(ctx), stream: true }),
      ),
  },
  {
    name: 'anthropic',
    weight: 5,
    run: (ctx) => send(ctx, '/v1/messages', anthropicHeaders(), anthropicBody(ctx, TRANSLATE_MODEL, false)),
  },
  {
    name: 'anthropic_stream',
    weight: 5,
    run: (ctx) =>
      send(
        ctx,
        '/v1/messages',
        anthropicHeaders(),
        anthropicBody(ctx, pacedModel(TRANSLATE_MODEL, 20, 5), true),
      ),
  },
  {
    name: 'gemini',
    weight: 4,
    run: (ctx) =>
      send(ctx, `/v1beta/models/${GEMINI_MODEL}:generateContent`, geminiHeaders(), geminiBody(ctx)),
  },
  {
    name: 'gemini_stream',
    weight: 4,
    run: (ctx) =>
      send(
        ctx,
        `/v1beta/models/${pacedModel(GEMINI_MODEL, 20, 5)}:streamGenerateContent?alt=sse`,
        geminiHeaders(),
        geminiBody(ctx),
      ),
  },
  {
    name: 'embeddings',
    weight: 6,
    run: (ctx) =>
      send(
        ctx,
        '/v1/embeddings',
        bearer(),
        JSON.stringify({
          model: 'text-embedding-3-small',
          input: Array.from({ length: between(ctx, 1, 9) }, () => prompt(ctx)),
          ...(ctx.rnd() < 0.5 ? { encoding_format: 'base64' } : {}),
        }),
      ),
  },
  {
    name: 'gemini_embeddings',
    weight: 2,
    run: (ctx) =>
      send(
        ctx,
        '/v1/embeddings',
        bearer(),
        JSON.stringify({ model: 'gemini-embedding-001', input: [prompt(ctx), prompt(ctx)] }),
      ),
  },
  {
    name: 'transcription',
    weight: 4,
    run: (ctx) => {
      const form = new FormData();
      form.set('model', 'whisper-1');
      form.set(
        'file',
        new Blob([filler(between(ctx, 16_000, 400_000), true)], { type: 'audio/mpeg' }),
        'a.mp3',
      );
      form.set('response_format', pick(ctx, ['json', 'text', 'verbose_json']));
      return send(ctx, '/v1/audio/transcriptions', { authorization: `Bearer ${BENCH_ACCESS_KEY}` }, form);
    },
  },
  {
    name: 'unauthorized',
    weight: 5,
    run: (ctx) => {
      // A different wrong key every time: whatever the gateway remembers of failed keys shows up here.
      const key = `sk-soak-${ctx.seq}-${Math.floor(ctx.rnd() * 1e9)}`;
      return oneOf(ctx, {
        openai: () => send(ctx, '/v1/chat/completions', bearer(key), chatBody(ctx, CHAT_MODEL, false)),
        anthropic: () =>
          send(ctx, '/v1/messages', anthropicHeaders(key), anthropicBody(ctx, TRANSLATE_MODEL, false)),
        gemini: () =>
          send(ctx, `/v1beta/models/${GEMINI_MODEL}:generateContent`, geminiHeaders(key), geminiBody(ctx)),
        // As long as the header limit (16 KB by default) lets through.
        long_key: () =>
          send(
            ctx,
            '/v1/chat/completions',
            bearer(key.padEnd(between(ctx, 4096, 15_000), 'k')),
            chatBody(ctx, CHAT_MODEL, false),
          ),
        no_key: () =>
          send(
            ctx,
            '/v1/chat/completions',
            { 'content-type': 'application/json' },
            chatBody(ctx, CHAT_MODEL, false),
          ),
      });
    },
  },
  {
    name: 'bad_request',
    weight: 5,
    run: (ctx) =>
      oneOf(ctx, {
        cut_json: () =>
          send(ctx, '/v1/chat/completions', bearer(), `{"model":"${CHAT_MODEL}","messages":[{"role":`),
        no_messages: () => send(ctx, '/v1/chat/completions', bearer(), JSON.stringify({ model: CHAT_MODEL })),
        messages_string: () =>
          send(ctx, '/v1/chat/completions', bearer(), JSON.stringify({ model: CHAT_MODEL, messages: 'x' })),
        unknown_path: () => send(ctx, `/v1/soak-${ctx.seq}/unknown`, bearer(), '{}'),
        get_on_post: () => send(ctx, '/v1/chat/completions', bearer(), undefined, 'GET'),
        invalid_utf8: () =>
          send(
            ctx,
            '/v1/chat/completions',
            bearer(),
            Buffer.concat([
              Buffer.from(`{"model":"${CHAT_MODEL}","messages":[{"role":"user","content":"`),
              Buffer.from([0xff, 0xfe, 0xc3]),
              Buffer.from('"}]}'),
            ]),
          ),
        bad_gemini_path: () =>
          send(ctx, `/v1beta/models/%ZZ${ctx.seq}:generateContent`, geminiHeaders(), geminiBody(ctx)),
        text_plain: () =>
          send(
            ctx,
            '/v1/chat/completions',
            { ...bearer(), 'content-type': 'text/plain' },
            chatBody(ctx, CHAT_MODEL, false),
          ),
        // Larger than Node's header limit: answered 431 by node:http itself.
        huge_header: () =>
          send(
            ctx,
            '/v1/chat/completions',
            { ...bearer(), 'x-soak-padding': 'p'.repeat(20_000) },
            chatBody(ctx, CHAT_MODEL, false),
          ),
      }),
  },
  {
    name: 'unknown_model',
    weight: 2,
    run: (ctx) =>
      send(
        ctx,
        '/v1/chat/completions',
        bearer(),
        chatBody(ctx, `soak-unknown-${ctx.seq}-${between(ctx, 0, 1e9)}`, false),
      ),
  },
  {
    name: 'deep_json',
    weight: 2,
    run: (ctx) => {
      const depth = between(ctx, 200, 20_000);
      return send(
        ctx,
        '/v1/chat/completions',
        bearer(),
        `{"model":"${CHAT_MODEL}","metadata":${'['.repeat(depth)}${']'.repeat(depth)},"messages":[{"role":"user","content":"deep"}]}`,
      );
    },
  },
  {
    name: 'many_messages',
    weight: 2,
    run: (ctx) => {
      const messages = Array.from({ length: between(ctx, 500, 5000) }, (_, i) => ({
        role: i % 2 === 0 ? 'user' : 'assistant',
        content: `${pick(ctx, WORDS)} ${i}`,
      }));
      messages.push({ role: 'user', content: prompt(ctx) });
      return send(ctx, '/v1/chat/completions', bearer(), JSON.stringify({ model: CHAT_MODEL, messages }));
    },
  },
  {
    name: 'large_prompt',
    weight: 3,
    // Space-less prompts stay below 256 KB: the simulator's token count of larger ones, several a second,
    // would take the cores this measures the gateway on.
    run: (ctx) =>
      oneOf(ctx, {
        words: () =>
          send(
            ctx,
            '/v1/chat/completions',
            bearer(),
            largeChat(ctx, between(ctx, MB / 2, ctx.maxBodyBytes - 1024), false),
          ),
        spaceless: () =>
          send(
            ctx,
            '/v1/chat/completions',
            bearer(),
            largeChat(ctx, between(ctx, 64 * 1024, 256 * 1024), true),
          ),
      }),
  },
  {
    name: 'estimated_large',
    weight: 3,
    // Usage the upstream does not report is estimated from the prompt (billing on): a stream the client
    // leaves, or a model that reports none.
    run: (ctx) =>
      oneOf(ctx, {
        aborted_stream: () =>
          sendAndAbort(
            ctx,
            '/v1/chat/completions',
            bearer(),
            largeChat(ctx, between(ctx, 64 * 1024, MB), false, {
              model: pacedModel(CHAT_MODEL, 40, 25),
              stream: true,
            }),
            1,
          ),
        no_usage: () =>
          send(
            ctx,
            '/v1/chat/completions',
            bearer(),
            largeChat(ctx, between(ctx, 64 * 1024, MB), false, { model: `${CHAT_MODEL}-no-usage` }),
          ),
      }),
  },
  {
    name: 'oversize',
    weight: 3,
    run: async (ctx) => {
      const bytes = between(ctx, ctx.maxBodyBytes + 1, ctx.maxBodyBytes + 2 * MB);
      const body = largeChat(ctx, bytes, ctx.rnd() < 0.5);
      const chunked = ctx.rnd() < 0.5;
      // The gateway closes the connection after a 413, so each gets one of its own.
      const agent = new Agent({ connections: 1 });
      try {
        const res = await request(`${ctx.origin}/v1/chat/completions`, {
          method: 'POST',
          headers: bearer(),
          body: chunked
            ? Readable.from(
                (function* () {
                  for (let i = 0; i < body.length; i += 256 * 1024) yield body.subarray(i, i + 256 * 1024);
                })(),
              )
            : body,
          dispatcher: agent,
          signal: AbortSignal.timeout(60_000),
        });
        await res.body.arrayBuffer();
        return `${res.statusCode}${chunked ? ' chunked' : ''}`;
      } finally {
        await agent.destroy().catch(() => undefined);
      }
    },
  },
  {
    name: 'abort_stream',
    weight: 6,
    run: (ctx) => {
      const chunks = between(ctx, 1, 6);
      switch (between(ctx, 0, 3)) {
        case 0:
          return sendAndAbort(
            ctx,
            '/v1/chat/completions',
            bearer(),
            chatBody(ctx, pacedModel(CHAT_MODEL, 40, 25), true),
            chunks,
          );
        case 1:
          return sendAndAbort(
            ctx,
            '/v1/messages',
            anthropicHeaders(),
            anthropicBody(ctx, pacedModel(TRANSLATE_MODEL, 40, 25), true),
            chunks,
          );
        default:
          return sendAndAbort(
            ctx,
            `/v1beta/models/${pacedModel(GEMINI_MODEL, 40, 25)}:streamGenerateContent?alt=sse`,
            geminiHeaders(),
            geminiBody(ctx),
            chunks,
          );
      }
    },
  },
  {
    name: 'abort_upload',
    weight: 2,
    run: (ctx) => {
      // Headers announce a body of up to the limit; half of it is sent, then the client is gone.
      const body = largeChat(ctx, between(ctx, 64 * 1024, ctx.maxBodyBytes), false);
      return new Promise<Outcome>((resolve) => {
        const socket = connect(ctx.port, ctx.host);
        socket.on('error', () => resolve('socket error'));
        socket.once('connect', () => {
          socket.write(
            `POST /v1/chat/completions HTTP/1.1\r\nhost: ${ctx.host}:${ctx.port}\r\nauthorization: Bearer ${BENCH_ACCESS_KEY}\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n`,
          );
          socket.write(body.subarray(0, body.length >> 1), () => {
            setTimeout(() => {
              socket.destroy();
              resolve('aborted');
            }, 50);
          });
        });
      });
    },
  },
  {
    name: 'abort_waiting',
    weight: 2,
    run: async (ctx) => {
      // The client leaves while the gateway waits for the upstream's headers (slow or hung upstream).
      const model = ctx.rnd() < 0.5 ? `${CHAT_MODEL}-latency-3000` : `${CHAT_MODEL}-fail-hang`;
      try {
        const res = await request(`${ctx.origin}/v1/chat/completions`, {
          method: 'POST',
          headers: bearer(),
          body: chatBody(ctx, model, ctx.rnd() < 0.5),
          dispatcher: ctx.agent,
          signal: AbortSignal.timeout(between(ctx, 100, 1500)),
        });
        await res.body.arrayBuffer();
        return String(res.statusCode);
      } catch (err) {
        if ((err as Error).name === 'TimeoutError' || (err as Error).name === 'AbortError') return 'aborted';
        throw err;
      }
    },
  },
  {
    name: 'upstream_error',
    weight: 5,
    run: (ctx) =>
      oneOf(ctx, {
        openai_500: () =>
          send(ctx, '/v1/chat/completions', bearer(), chatBody(ctx, `${CHAT_MODEL}-fail-500`, false)),
        openai_429_stream: () =>
          send(ctx, '/v1/chat/completions', bearer(), chatBody(ctx, `${CHAT_MODEL}-fail-429`, true)),
        midstream_error: () =>
          send(ctx, '/v1/chat/completions', bearer(), chatBody(ctx, `${CHAT_MODEL}-fail-midstream`, true)),
        midstream_reset: () =>
          send(
            ctx,
            '/v1/chat/completions',
            bearer(),
            chatBody(ctx, `${CHAT_MODEL}-fail-midstream-reset`, true),
          ),
        anthropic_529_stream: () =>
          send(
            ctx,
            '/v1/messages',
            anthropicHeaders(),
            anthropicBody(ctx, `${TRANSLATE_MODEL}-fail-529`, true),
          ),
        gemini_503: () =>
          send(
            ctx,
            `/v1beta/models/${GEMINI_MODEL}-fail-503:generateContent`,
            geminiHeaders(),
            geminiBody(ctx),
          ),
      }),
  },
];

function pickKind(r: number): Kind {
  let rest = r;
  for (const k of KINDS) {
    rest -= k.weight;
    if (rest < 0) return k;
  }
  return KINDS[0]!;
}

interface LoadStats {
  durationS: number;
  rate: number;
  started: number;
  /** Due while `maxInFlight` requests were open: not sent. */
  skipped: number;
  maxInFlightSeen: number;
  byKind: Record<string, Record<Outcome, number>>;
}

/** Requests at `rate` per second until `stop()` (never more than `maxInFlight` open), then waits for them. */
async function runLoad(ctx: Ctx, rate: number, maxInFlight: number, stop: () => boolean): Promise<LoadStats> {
  const totalWeight = KINDS.reduce((s, k) => s + k.weight, 0);
  const byKind: LoadStats['byKind'] = {};
  for (const k of KINDS) byKind[k.name] = {};
  const open = new Set<Promise<void>>();
  let started = 0;
  let skipped = 0;
  let maxSeen = 0;
  const interval = 1000 / rate;
  const t0 = performance.now();
  let due = t0;
  while (!stop()) {
    if (open.size >= maxInFlight) skipped++;
    else {
      const kind = pickKind(ctx.rnd() * totalWeight);
      ctx.seq++;
      started++;
      const p = kind.run(ctx).then(
        (outcome) => outcome,
        (err: unknown) => {
          const e = err as Error & { code?: string };
          return `error ${e.code ?? e.name}`;
        },
      );
      const done = p.then((outcome) => {
        const counts = byKind[kind.name]!;
        counts[outcome] = (counts[outcome] ?? 0) + 1;
        open.delete(done);
      });
      open.add(done);
      if (open.size > maxSeen) maxSeen = open.size;
    }
    // After a stall (a snapshot, a slow machine) the schedule restarts rather than bursting to catch up.
    due = Math.max(due + interval, performance.now() - interval);
    const wait = due - performance.now();
    if (wait > 0) await sleep(Math.ceil(wait));
  }
  await Promise.all(open);
  return {
    durationS: round((performance.now() - t0) / 1000, 1),
    rate,
    started,
    skipped,
    maxInFlightSeen: maxSeen,
    byKind,
  };
}

// ---------------------------------------------------------------------------------------------------
// Processes and sampling

interface Gateway {
  service: Service;
  origin: string;
  port: number;
  inspectPort: number;
}

async function startGateway(
  ws: Workspace,
  upstreamUrl: string,
  billingUrl: string,
  opts: { logLevel: string; maxBodyBytes: number; env: Record<string, string> },
): Promise<Gateway> {
  const port = await freePort();
  const inspectPort = await freePort();
  const configFile = await writeGatewayConfig(ws, 'gateway-soak', {
    listenPort: port,
    billingUrl,
    logLevel: opts.logLevel,
  });
  const config = JSON.parse(await readFile(configFile, 'utf8')) as Record<string, unknown>;
  config.limits = { max_body_bytes: opts.maxBodyBytes };
  await writeFile(configFile, `${JSON.stringify(config, null, 2)}\n`);
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!k.startsWith('ROUTER_') && k !== 'NODE_OPTIONS') env[k] = v;
  }
  for (const provider of ['OPENAI', 'ANTHROPIC', 'GEMINI']) {
    env[`ROUTER_PROVIDER_${provider}_BASE_URL`] = upstreamUrl;
    env[`ROUTER_PROVIDER_${provider}_API_KEY`] = SIM_KEY;
  }
  env.ROUTER_ACCESS_KEY_BENCH = BENCH_ACCESS_KEY;
  Object.assign(env, opts.env);
  const service = startService(
    'gateway',
    process.execPath,
    [
      ...GATEWAY_V8_FLAGS,
      `--inspect=127.0.0.1:${inspectPort}`,
      join(ws.repo, 'proxy/cli.ts'),
      '-c',
      configFile,
    ],
    { env, logFile: join(ws.tmp, 'gateway.log') },
  );
  const origin = `http://127.0.0.1:${port}`;
  await waitForHttp(`${origin}/healthz`, service);
  return { service, origin, port, inspectPort };
}

interface ProcMemory {
  rssMb: number;
  rssAnonMb: number;
  rssFileMb: number;
  hwmMb: number;
  /** Resident part of the `[heap]` mapping: glibc's main malloc arena (brk), not V8's heap. */
  brkHeapMb: number;
}

async function procMemory(pid: number): Promise<ProcMemory | undefined> {
  try {
    const text = await readFile(`/proc/${pid}/status`, 'utf8');
    const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? 0);
    const smaps = await readFile(`/proc/${pid}/smaps`, 'utf8').catch(() => '');
    const heap = /\[heap\]\n(?:.*\n)*?Rss:\s+(\d+) kB/.exec(smaps);
    return {
      brkHeapMb: round(Number(heap?.[1] ?? 0) / 1024, 1),
      rssMb: round(kb('VmRSS') / 1024, 1),
      rssAnonMb: round(kb('RssAnon') / 1024, 1),
      rssFileMb: round(kb('RssFile') / 1024, 1),
      hwmMb: round(kb('VmHWM') / 1024, 1),
    };
  } catch {
    return undefined;
  }
}

const METRICS = [
  'nodejs_heap_size_used_bytes',
  'nodejs_heap_size_total_bytes',
  'nodejs_external_memory_bytes',
  'nodejs_active_handles_total',
  'nodejs_active_resources_total',
] as const;

async function gatewayMetrics(origin: string): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  try {
    const text = await (await fetch(`${origin}/metrics`, { signal: AbortSignal.timeout(10_000) })).text();
    for (const line of text.split('\n')) {
      const [name, value] = line.split(' ');
      if ((METRICS as readonly string[]).includes(name!)) out[name!] = Number(value);
    }
  } catch {
    // a sample without heap figures
  }
  return out;
}

interface Sample {
  t: number;
  phase: string;
  gateway?: ProcMemory;
  sidecarRssMb?: number;
  heapUsedMb?: number;
  heapTotalMb?: number;
  externalMb?: number;
  activeHandles?: number;
  /** Set on samples taken right after a forced collection (through the inspector). */
  afterGc?: MemoryUsage;
  billingPending?: number;
}

const toMb = (bytes: number | undefined) => (bytes === undefined ? undefined : round(bytes / MB, 1));

async function sample(gw: Gateway, t0: number, phase: string, afterGc?: MemoryUsage): Promise<Sample> {
  const [gateway, metrics, tree, pending] = await Promise.all([
    procMemory(gw.service.pid),
    afterGc === undefined ? gatewayMetrics(gw.origin) : Promise.resolve({} as Record<string, number>),
    processTree(gw.service.pid),
    fetch(`${gw.origin}/readyz`, { signal: AbortSignal.timeout(10_000) }).then(
      async (r) => ((await r.json()) as { billing?: { pending?: number } }).billing?.pending,
      () => undefined,
    ),
  ]);
  let sidecar = 0;
  for (const pid of tree.slice(1)) sidecar += (await procMemory(pid))?.rssMb ?? 0;
  return {
    t: round((performance.now() - t0) / 1000, 1),
    phase,
    gateway,
    sidecarRssMb: round(sidecar, 1),
    heapUsedMb: toMb(afterGc?.heapUsed ?? metrics.nodejs_heap_size_used_bytes),
    heapTotalMb: toMb(afterGc?.heapTotal ?? metrics.nodejs_heap_size_total_bytes),
    externalMb: toMb(afterGc?.external ?? metrics.nodejs_external_memory_bytes),
    activeHandles: metrics.nodejs_active_handles_total,
    afterGc,
    billingPending: pending,
  };
}

// ---------------------------------------------------------------------------------------------------
// Snapshots

interface MeasurePoint {
  /** process.memoryUsage() right after a forced collection. */
  memory: MemoryUsage;
  rss?: ProcMemory;
  snapshot?: { file: string; bytes: number; ms: number; rssAfter?: ProcMemory };
}

/** Forced collection, memory figures, then (with `file`) a heap snapshot. */
async function measure(inspector: InspectorSession, gw: Gateway, file?: string): Promise<MeasurePoint> {
  await inspector.collectGarbage();
  const memory = await inspector.memoryUsage();
  const rss = await procMemory(gw.service.pid);
  if (file === undefined) return { memory, rss };
  const t = performance.now();
  const bytes = await inspector.writeHeapSnapshot(file);
  const ms = Math.round(performance.now() - t);
  return { memory, rss, snapshot: { file, bytes, ms, rssAfter: await procMemory(gw.service.pid) } };
}

interface SnapshotSummary {
  nodes: number;
  totalSelfSizeMb: number;
  top: { className: string; count: number; selfSize: number }[];
}

interface Comparison {
  start: SnapshotSummary;
  end: SnapshotSummary;
  /** Largest growth of self size by class between the snapshots. */
  growers: ClassDelta[];
  /** Largest shrinkage (warm-up objects released later). */
  shrinkers: ClassDelta[];
  /** Objects of the end snapshot allocated after the start snapshot (higher ids), by class. */
  allocatedSince: {
    nodes: number;
    selfSizeMb: number;
    top: { className: string; count: number; selfSize: number }[];
  };
  /** The shortest strong reference chain from a root to the largest new objects of the top classes. */
  retainers: { className: string; paths: string[][] }[];
}

const INTERNAL_CLASSES = new Set(['(code)', '(hidden)', '(object shape)', '(compiled code)', '(number)']);
/** Classes whose new objects add up to less are not followed to their roots. */
const RETAINERS_FROM_BYTES = 64 * 1024;

function summaryOf(s: HeapSummary, top: number): SnapshotSummary {
  return { nodes: s.nodes, totalSelfSizeMb: round(s.totalSelfSize / MB, 2), top: topClasses(s, top) };
}

async function compareSnapshots(startFile: string, endFile: string, top: number): Promise<Comparison> {
  let start: HeapSummary | undefined = (await HeapSnapshot.read(startFile)).summary();
  const end = await HeapSnapshot.read(endFile);
  const endSummary = end.summary();
  const maxIdBefore = start.maxId;
  const fresh = end.summary((n) => end.id(n) > maxIdBefore);
  const diff = diffSummaries(start, endSummary);
  const startOut = summaryOf(start, top);
  start = undefined;
  const retainers: Comparison['retainers'] = [];
  // V8's own objects (code, shapes, feedback) grow as code is optimized; the walk follows the others.
  const followed = topClasses(fresh, 50)
    .filter((c) => !c.className.startsWith('system / ') && !INTERNAL_CLASSES.has(c.className))
    .filter((c) => c.selfSize >= RETAINERS_FROM_BYTES)
    .slice(0, 3);
  for (const { className } of followed) {
    const paths: string[][] = [];
    for (const node of end.instances(className, maxIdBefore, 3)) {
      paths.push(end.retainerPath(node) ?? ['(reachable only through weak references)']);
    }
    retainers.push({ className, paths });
  }
  return {
    start: startOut,
    end: summaryOf(endSummary, top),
    growers: diff.filter((d) => d.selfSizeDelta > 0).slice(0, top),
    shrinkers: diff
      .filter((d) => d.selfSizeDelta < 0)
      .reverse()
      .slice(0, top),
    allocatedSince: {
      nodes: fresh.nodes,
      selfSizeMb: round(fresh.totalSelfSize / MB, 2),
      top: topClasses(fresh, top),
    },
    retainers,
  };
}

// ---------------------------------------------------------------------------------------------------
// Report

interface Report {
  startedAt: string;
  finishedAt: string;
  interrupted: boolean;
  machine: MachineInfo;
  options: Omit<Options, 'out'>;
  gatewayCommit?: string;
  warmup: LoadStats;
  load: LoadStats;
  points: { start: MeasurePoint; end: MeasurePoint };
  peak: {
    rssMb: number;
    rssAt: number;
    heapUsedMb: number;
    heapAt: number;
    hwmMb: number;
    sidecarRssMb: number;
  };
  gatewayLogBytes: number;
  samples: Sample[];
  /** Both snapshots compared (`--snapshots both`). */
  comparison?: Comparison;
  /** The end snapshot alone (`--snapshots end`). */
  endSnapshot?: SnapshotSummary;
}

function pad(s: string | number, n: number, left = false): string {
  const t = String(s);
  return left ? t.padStart(n) : t.padEnd(n);
}

function kb(bytes: number): string {
  return (bytes / 1024).toFixed(1);
}

function classTable(title: string, rows: { className: string; count: number; selfSize: number }[]): string[] {
  const lines = ['', title, `${pad('class', 48)} ${pad('count', 9, true)} ${pad('self KB', 10, true)}`];
  for (const r of rows) {
    lines.push(
      `${pad(r.className.slice(0, 48), 48)} ${pad(r.count, 9, true)} ${pad(kb(r.selfSize), 10, true)}`,
    );
  }
  return lines;
}

function renderComparison(c: Comparison): string[] {
  const lines: string[] = [];
  lines.push(
    `heap snapshot start: ${c.start.nodes} objects, ${c.start.totalSelfSizeMb} MB; end: ${c.end.nodes} objects, ${c.end.totalSelfSizeMb} MB`,
  );
  lines.push(
    `allocated after the start snapshot and alive at the end: ${c.allocatedSince.nodes} objects, ${c.allocatedSince.selfSizeMb} MB`,
  );
  const deltas = (title: string, rows: ClassDelta[]) => {
    lines.push(
      '',
      title,
      `${pad('class', 48)} ${pad('count', 9, true)} ${pad('Δcount', 9, true)} ${pad('self KB', 10, true)} ${pad('Δself KB', 10, true)}`,
    );
    for (const r of rows) {
      lines.push(
        `${pad(r.className.slice(0, 48), 48)} ${pad(r.countEnd, 9, true)} ${pad(r.countDelta, 9, true)} ${pad(kb(r.selfSizeEnd), 10, true)} ${pad(kb(r.selfSizeDelta), 10, true)}`,
      );
    }
  };
  deltas('top growers by self size (end - start)', c.growers);
  deltas('top shrinkers', c.shrinkers);
  lines.push(...classTable('allocated between the snapshots, still alive', c.allocatedSince.top));
  lines.push('', 'what holds the largest of them (root first)');
  if (c.retainers.length === 0) {
    lines.push(`  no class besides V8's own objects adds up to ${RETAINERS_FROM_BYTES / 1024} KB`);
  }
  for (const r of c.retainers) {
    lines.push(`  ${r.className}`);
    for (const p of r.paths) {
      lines.push(...p.map((step, i) => `    ${'  '.repeat(Math.min(i, 12))}${step}`), '');
    }
  }
  return lines;
}

function memoryLine(label: string, p: MeasurePoint): string {
  const m = p.memory;
  return `${label}: RSS ${p.rss?.rssMb} MB (anon ${p.rss?.rssAnonMb}, malloc [heap] ${p.rss?.brkHeapMb}), heapUsed ${toMb(m.heapUsed)} MB, heapTotal ${toMb(m.heapTotal)} MB, external ${toMb(m.external)} MB, arrayBuffers ${toMb(m.arrayBuffers)} MB${p.snapshot ? `; snapshot ${round(p.snapshot.bytes / MB, 1)} MB in ${p.snapshot.ms} ms, RSS after it ${p.snapshot.rssAfter?.rssMb} MB` : ''}`;
}

function renderText(r: Report): string {
  const lines: string[] = [];
  lines.push(`soak ${r.startedAt} .. ${r.finishedAt}${r.interrupted ? ' (interrupted)' : ''}`);
  lines.push(
    `machine: ${r.machine.cpus} CPUs ${r.machine.cpuModel}, ${r.machine.memoryGiB} GiB, node ${r.machine.node}, load ${r.machine.loadAvgStart} -> ${r.machine.loadAvgEnd}; gateway ${r.gatewayCommit ?? r.options.repo}`,
  );
  lines.push(
    `load: ${r.load.durationS} s at ${r.load.rate} req/s: ${r.load.started} requests (skipped ${r.load.skipped} at the in-flight cap of ${r.options.maxInFlight}; most open ${r.load.maxInFlightSeen}); warm-up ${r.warmup.started} requests in ${r.warmup.durationS} s`,
  );
  lines.push(memoryLine('start (after warm-up, forced GC)', r.points.start));
  lines.push(
    `peak: RSS ${r.peak.rssMb} MB at ${r.peak.rssAt} s (VmHWM ${r.peak.hwmMb} MB), heapUsed ${r.peak.heapUsedMb} MB at ${r.peak.heapAt} s; sidecar RSS peak ${r.peak.sidecarRssMb} MB`,
  );
  lines.push(memoryLine('end (idle, forced GC)', r.points.end));
  lines.push(`gateway log: ${round(r.gatewayLogBytes / MB, 1)} MB at log level ${r.options.logLevel}`);
  lines.push('', 'requests by kind and outcome');
  for (const [kind, outcomes] of Object.entries(r.load.byKind)) {
    const total = Object.values(outcomes).reduce((a, b) => a + b, 0);
    const detail = Object.entries(outcomes)
      .sort((a, b) => b[1] - a[1])
      .map(([o, n]) => `${o}: ${n}`)
      .join(', ');
    lines.push(`  ${pad(kind, 26)} ${pad(total, 7, true)}  ${detail}`);
  }
  lines.push('', 'memory after forced collections (MB)');
  lines.push(
    `  ${pad('t s', 8, true)} ${pad('phase', 8)} ${pad('RSS', 8, true)} ${pad('[heap]', 8, true)} ${pad('heapUsed', 9, true)} ${pad('external', 9, true)} ${pad('arrayBuf', 9, true)}`,
  );
  for (const x of r.samples.filter((x) => x.afterGc !== undefined)) {
    lines.push(
      `  ${pad(x.t, 8, true)} ${pad(x.phase, 8)} ${pad(x.gateway?.rssMb ?? '', 8, true)} ${pad(x.gateway?.brkHeapMb ?? '', 8, true)} ${pad(toMb(x.afterGc!.heapUsed)!, 9, true)} ${pad(toMb(x.afterGc!.external)!, 9, true)} ${pad(toMb(x.afterGc!.arrayBuffers)!, 9, true)}`,
    );
  }
  if (r.comparison) lines.push('', ...renderComparison(r.comparison));
  if (r.endSnapshot) {
    lines.push(
      '',
      `end snapshot: ${r.endSnapshot.nodes} objects, ${r.endSnapshot.totalSelfSizeMb} MB`,
      ...classTable('largest classes at the end', r.endSnapshot.top),
    );
  }
  return `${lines.join('\n')}\n`;
}

// ---------------------------------------------------------------------------------------------------

function parseOptions(argv: string[]): Options & { analyze?: string[] } {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      minutes: { type: 'string', default: '30' },
      rate: { type: 'string', default: '60' },
      'max-in-flight': { type: 'string', default: '64' },
      'warmup-s': { type: 'string', default: '30' },
      'sample-s': { type: 'string', default: '10' },
      'gc-every-s': { type: 'string', default: '120' },
      'max-body-mb': { type: 'string', default: '4' },
      'log-level': { type: 'string', default: 'info' },
      snapshots: { type: 'string', default: 'both' },
      'gateway-env': { type: 'string', multiple: true },
      seed: { type: 'string', default: '1' },
      top: { type: 'string', default: '15' },
      out: { type: 'string' },
      repo: { type: 'string' },
      analyze: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
  });
  if (values.help) {
    console.log(
      'usage: node bench/soak.ts [--minutes 30] [--rate 60] [--max-in-flight 64] [--warmup-s 30] [--sample-s 10]\n' +
        '         [--gc-every-s 120] [--max-body-mb 4] [--log-level info] [--snapshots both|end|none]\n' +
        '         [--gateway-env NAME=value]... [--seed 1] [--top 15] [--out dir] [--repo checkout]\n' +
        '       node bench/soak.ts --analyze <start.heapsnapshot> <end.heapsnapshot> [--out dir]',
    );
    process.exit(0);
  }
  const num = (name: string, v: string, min: number) => {
    const n = Number(v);
    if (!Number.isFinite(n) || n < min) throw new Error(`--${name} must be a number >= ${min}`);
    return n;
  };
  if (!['both', 'end', 'none'].includes(values.snapshots))
    throw new Error('--snapshots is both, end or none');
  const gatewayEnv: Record<string, string> = {};
  for (const kv of values['gateway-env'] ?? []) {
    const eq = kv.indexOf('=');
    if (eq < 1) throw new Error(`--gateway-env ${kv}: NAME=value`);
    gatewayEnv[kv.slice(0, eq)] = kv.slice(eq + 1);
  }
  return {
    minutes: num('minutes', values.minutes, 0),
    rate: num('rate', values.rate, 0.1),
    maxInFlight: num('max-in-flight', values['max-in-flight'], 1),
    warmupS: num('warmup-s', values['warmup-s'], 0),
    sampleS: num('sample-s', values['sample-s'], 0.5),
    gcEveryS: num('gc-every-s', values['gc-every-s'], 1),
    maxBodyMb: num('max-body-mb', values['max-body-mb'], 1),
    logLevel: values['log-level'],
    snapshots: values.snapshots as Options['snapshots'],
    gatewayEnv,
    seed: num('seed', values.seed, 0),
    top: num('top', values.top, 1),
    out: values.out,
    repo: resolve(values.repo ?? REPO),
    analyze: values.analyze ? positionals : undefined,
  };
}

async function gitHead(repo: string): Promise<string | undefined> {
  try {
    const head = (await readFile(join(repo, '.git/HEAD'), 'utf8')).trim();
    if (!head.startsWith('ref: ')) return head;
    return (await readFile(join(repo, '.git', head.slice(5)), 'utf8')).trim();
  } catch {
    // An export (git archive) names its commit in a COMMIT file, when whoever made it wrote one.
    return (await readFile(join(repo, 'COMMIT'), 'utf8').catch(() => '')).trim() || undefined;
  }
}

export async function main(argv: string[]): Promise<number> {
  const opts = parseOptions(argv);
  const out = opts.out ?? (await mkdtemp(join(tmpdir(), 'llm-router-soak-')));
  await mkdir(out, { recursive: true });
  if (opts.analyze !== undefined) {
    if (opts.analyze.length !== 2) throw new Error('--analyze takes two snapshot files');
    const c = await compareSnapshots(opts.analyze[0]!, opts.analyze[1]!, opts.top);
    await writeFile(join(out, 'comparison.json'), `${JSON.stringify(c, null, 2)}\n`);
    process.stdout.write(`${renderComparison(c).join('\n')}\n`);
    return 0;
  }

  const startedAt = new Date();
  const machine = await machineInfo();
  const tmp = await mkdtemp(join(tmpdir(), 'llm-router-soak-work-'));
  const ws: Workspace = { repo: opts.repo, tmp, gatewayNodeFlags: () => [], sidecarNodeFlags: () => [] };
  log(`work folder ${tmp}, report to ${out}; gateway from ${opts.repo}`);
  let interrupted = false;
  const onSignal = () => {
    if (interrupted) return;
    interrupted = true;
    log('signal: the load stops early; the end measurement and clean-up follow');
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  const services: Service[] = [];
  let inspector: InspectorSession | undefined;
  const agent = new Agent({
    connections: 32,
    keepAliveTimeout: 10_000,
    headersTimeout: 60_000,
    bodyTimeout: 60_000,
  });
  const maxBodyBytes = Math.round(opts.maxBodyMb * MB);
  let failed = false;
  try {
    const upstream = await startUpstreamSimProcess(ws);
    services.push(upstream.service);
    const billing = await startBillingSimProcess(ws);
    services.push(billing.service);
    const gw = await startGateway(ws, upstream.url, billing.url, {
      logLevel: opts.logLevel,
      maxBodyBytes,
      env: opts.gatewayEnv,
    });
    services.unshift(gw.service);
    const session = await InspectorSession.connect(gw.inspectPort);
    inspector = session;
    const peer = { id: 'gateway-billing', kind: 'gateway', origin: gw.origin, service: gw.service } as const;
    const ctx: Ctx = {
      origin: gw.origin,
      host: '127.0.0.1',
      port: gw.port,
      agent,
      rnd: mulberry32(opts.seed),
      maxBodyBytes,
      seq: 0,
    };
    const t0 = performance.now();
    const samples: Sample[] = [];
    let phase = 'warmup';
    let sampling = true;
    let nextGc = Number.POSITIVE_INFINITY;
    const sampler = (async () => {
      while (sampling) {
        if (phase === 'load' && performance.now() >= nextGc) {
          nextGc += opts.gcEveryS * 1000;
          await session.collectGarbage();
          samples.push(await sample(gw, t0, phase, await session.memoryUsage()));
        } else samples.push(await sample(gw, t0, phase));
        await sleep(opts.sampleS * 1000);
      }
    })();

    log(`warm-up: ${opts.warmupS} s`);
    let until = performance.now() + opts.warmupS * 1000;
    const warmup = await runLoad(
      ctx,
      opts.rate,
      opts.maxInFlight,
      () => interrupted || performance.now() > until,
    );
    await waitForBillingDrain(peer);
    await sleep(2000);
    phase = 'measure';
    const start = await measure(
      session,
      gw,
      opts.snapshots === 'both' ? join(out, 'start.heapsnapshot') : undefined,
    );
    samples.push(await sample(gw, t0, 'start', start.memory));
    log(memoryLine('start', start));

    phase = 'load';
    nextGc = performance.now() + opts.gcEveryS * 1000;
    log(`load: ${opts.minutes} min at ${opts.rate} req/s`);
    until = performance.now() + opts.minutes * 60_000;
    let lastLog = performance.now();
    const load = await runLoad(ctx, opts.rate, opts.maxInFlight, () => {
      const now = performance.now();
      if (now - lastLog > 60_000) {
        lastLog = now;
        const last = samples.at(-1);
        log(`  ${ctx.seq} requests; RSS ${last?.gateway?.rssMb} MB, heapUsed ${last?.heapUsedMb} MB`);
      }
      return interrupted || now > until;
    });
    log(`load done: ${load.started} requests in ${load.durationS} s; idle`);
    phase = 'idle';
    await agent.close();
    await waitForBillingDrain(peer);
    // Long enough for keep-alive and idle timers of the last requests to run out.
    await sleep(15_000);
    phase = 'measure';
    const end = await measure(
      session,
      gw,
      opts.snapshots === 'none' ? undefined : join(out, 'end.heapsnapshot'),
    );
    samples.push(await sample(gw, t0, 'end', end.memory));
    sampling = false;
    await sampler;
    log(memoryLine('end', end));
    if (!gw.service.alive()) throw new Error(`the gateway died: ${gw.service.output().slice(-2000)}`);
    const gatewayLogBytes = (await stat(join(tmp, 'gateway.log')).catch(() => ({ size: 0 }))).size;

    session.close();
    inspector = undefined;
    for (const s of services) await s.stop();
    services.length = 0;

    const peak: Report['peak'] = { rssMb: 0, rssAt: 0, heapUsedMb: 0, heapAt: 0, hwmMb: 0, sidecarRssMb: 0 };
    for (const x of samples) {
      // Not while a snapshot is written: that costs the gateway memory of its own.
      const measured = x.phase === 'warmup' || x.phase === 'load' || x.phase === 'idle';
      if (measured && (x.gateway?.rssMb ?? 0) > peak.rssMb) {
        peak.rssMb = x.gateway!.rssMb;
        peak.rssAt = x.t;
      }
      if ((x.heapUsedMb ?? 0) > peak.heapUsedMb) {
        peak.heapUsedMb = x.heapUsedMb!;
        peak.heapAt = x.t;
      }
      if (measured) peak.hwmMb = Math.max(peak.hwmMb, x.gateway?.hwmMb ?? 0);
      peak.sidecarRssMb = Math.max(peak.sidecarRssMb, x.sidecarRssMb ?? 0);
    }
    const { out: _out, ...options } = opts;
    const report: Report = {
      startedAt: startedAt.toISOString(),
      finishedAt: '',
      interrupted,
      machine,
      options,
      gatewayCommit: await gitHead(opts.repo),
      warmup,
      load,
      points: { start, end },
      peak,
      gatewayLogBytes,
      samples,
    };
    if (start.snapshot && end.snapshot) {
      log('comparing the snapshots');
      report.comparison = await compareSnapshots(start.snapshot.file, end.snapshot.file, opts.top);
    } else if (end.snapshot) {
      report.endSnapshot = summaryOf((await HeapSnapshot.read(end.snapshot.file)).summary(), opts.top);
    }
    report.finishedAt = new Date().toISOString();
    report.machine.loadAvgEnd = loadAverage();
    await writeFile(join(out, 'report.json'), `${JSON.stringify(report, null, 2)}\n`);
    const text = renderText(report);
    await writeFile(join(out, 'report.txt'), text);
    process.stdout.write(text);
    log(`report: ${join(out, 'report.txt')}`);
  } catch (err) {
    failed = true;
    log(`soak failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  } finally {
    inspector?.close();
    await agent.destroy().catch(() => undefined);
    for (const s of services) await s.stop();
    await rm(tmp, { recursive: true, force: true });
  }
  return failed ? 1 : 0;
}

if (import.meta.main) {
  process.exitCode = await main(process.argv.slice(2));
}
