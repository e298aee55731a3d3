// Served = billed, as a number, end to end (gateway + upstream simulator + billing simulator): a few hundred
// mixed requests (completion-style chat, Responses, Anthropic Messages and Gemini clients, streamed and
// not; clean replies, upstream 500s and 400s, streams that fail mid-way with an error event or a cut
// connection, replies without usage, clients that hang up mid-stream or before the provider answered,
// token counts, refused keys, and a realtime session's responses) leave the gap of
// test/support/served-billed.ts at exactly 0 on the gateway's /metrics: every request that reached a
// provider ends in exactly one of queued / not reportable. With the gateway in this process and
// only_billable_success on (failed replies have no event); with billing.interrupted_stream void (no event
// for an interrupted stream) and finish_upstream (the upstream read on after its client left); in
// shared-store mode (events on the Redis billing stream); and as a `router` child with `workers: 2` and
// the defaults (failed replies are reported with zero usage), whose /metrics adds up both workers.
//
// The mix is drawn from a fixed seed. Knobs of the upstream simulator ride in the model name
// (sim/upstream/README.md): fail-500, fail-400, fail-midstream, fail-midstream-reset, fail-hang, no-usage,
// delay-N, chunks-N.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  type BillingStack,
  type ChildGateway,
  spawnGateway,
  startBillingStack,
  waitUntil,
} from '../support/billing-stack.ts';
import { RealtimeClient } from '../support/realtime-client.ts';
import { type RedisServer, startRedis } from '../support/redis.ts';
import { type ServedBilled, scrapeServedBilled } from '../support/served-billed.ts';
import { ACCESS_KEY } from '../support/stack.ts';

const SEED = 4512026;
const REQUESTS = 300;
const CONCURRENCY = 12;
/** Responses a realtime session asks for: each is a request of its own in both counts. */
const REALTIME_RESPONSES = 3;

type Family = 'chat' | 'responses' | 'anthropic' | 'gemini';
type Fault =
  | 'none'
  | 'fail-500'
  | 'fail-400'
  | 'fail-midstream'
  | 'fail-midstream-reset'
  | 'no-usage'
  | 'abort-mid-stream'
  | 'abort-before-reply'
  | 'count'
  | 'bad-key';

interface Planned {
  readonly n: number;
  readonly family: Family;
  readonly stream: boolean;
  readonly fault: Fault;
}

/** mulberry32: a small seeded generator, so the mix is the same on every run. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const FAMILIES: readonly Family[] = ['chat', 'responses', 'anthropic', 'gemini'];
const FAULTS: readonly (readonly [Fault, number])[] = [
  ['none', 30],
  ['fail-500', 10],
  ['fail-400', 8],
  ['fail-midstream', 10],
  ['fail-midstream-reset', 8],
  ['no-usage', 8],
  ['abort-mid-stream', 8],
  ['abort-before-reply', 6],
  ['count', 6],
  ['bad-key', 6],
];

function plan(): Planned[] {
  const next = random(SEED);
  const weight = FAULTS.reduce((sum, [, w]) => sum + w, 0);
  const out: Planned[] = [];
  for (let n = 0; n < REQUESTS; n++) {
    const family = FAMILIES[Math.floor(next() * FAMILIES.length)]!;
    let pick = next() * weight;
    let fault: Fault = 'none';
    for (const [f, w] of FAULTS) {
      pick -= w;
      if (pick < 0) {
        fault = f;
        break;
      }
    }
    // Hanging up mid-stream needs a stream; a token count is never one.
    const stream = fault === 'abort-mid-stream' || (fault !== 'count' && next() < 0.5);
    out.push({ n, family, stream, fault });
  }
  return out;
}

/** Model name, path and body of a planned request; knobs in the model name. */
function shape(p: Planned, nonce: string): { path: string; body: Record<string, unknown> } {
  const knobs: string[] = [];
  if (p.fault.startsWith('fail-') || p.fault === 'no-usage') knobs.push(p.fault);
  if (p.fault === 'abort-mid-stream') knobs.push('delay-20', 'chunks-12');
  if (p.fault === 'abort-before-reply') knobs.push('fail-hang');
  const suffix = knobs.length === 0 ? '' : `-${knobs.join('-')}`;
  const prompt = `Served and billed ${nonce}: say something short.`;
  switch (p.family) {
    case 'chat':
      return {
        path: '/v1/chat/completions',
        body: {
          model: `gpt-5.4-mini${suffix}`,
          stream: p.stream,
          messages: [{ role: 'user', content: prompt }],
        },
      };
    case 'responses':
      return {
        path: p.fault === 'count' ? '/v1/responses/input_tokens' : '/v1/responses',
        body: {
          model: `gpt-5.4-mini${suffix}`,
          input: prompt,
          ...(p.fault === 'count' ? {} : { stream: p.stream }),
        },
      };
    case 'anthropic':
      return {
        path: p.fault === 'count' ? '/v1/messages/count_tokens' : '/v1/messages',
        body: {
          model: `claude-sonnet-5${suffix}`,
          messages: [{ role: 'user', content: prompt }],
          ...(p.fault === 'count' ? {} : { max_tokens: 100, stream: p.stream }),
        },
      };
    case 'gemini': {
      const model = `gemini-3.8-flash${suffix}`;
      const method =
        p.fault === 'count' ? 'countTokens' : p.stream ? 'streamGenerateContent?alt=sse' : 'generateContent';
      return {
        path: `/v1beta/models/${model}:${method}`,
        body: { contents: [{ role: 'user', parts: [{ text: prompt }] }] },
      };
    }
  }
}

function authHeaders(p: Planned): Record<string, string> {
  const key = p.fault === 'bad-key' ? 'ak_not_a_key_of_this_gateway' : ACCESS_KEY;
  return p.family === 'gemini' ? { 'x-goog-api-key': key } : { authorization: `Bearer ${key}` };
}

/** Whether the request reaches a provider as a model request (the served side of the gap). */
function served(p: Planned): boolean {
  // Completion-style chat has no counting endpoint: its `count` is a plain chat request.
  return p.fault !== 'bad-key' && (p.fault !== 'count' || p.family === 'chat');
}

function isCount(p: Planned): boolean {
  return p.fault === 'count' && p.family !== 'chat';
}

/** Sends one planned request and reads (or abandons) its reply. */
async function send(stack: BillingStack, url: string, p: Planned): Promise<void> {
  const nonce = `sb${SEED}n${p.n}x${url.length}`;
  const { path, body } = shape(p, nonce);
  const controller = new AbortController();
  const sent = fetch(`${url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...authHeaders(p) },
    body: JSON.stringify(body),
    signal: controller.signal,
  });
  if (p.fault === 'abort-before-reply') {
    // The provider has the request and will never answer: the client gives up before any reply.
    await stack.upstream.waitFor((sim) => sim.requests.some((r) => r.body.includes(nonce)), 30_000);
    controller.abort();
    await sent.catch(() => undefined);
    return;
  }
  const res = await sent;
  if (p.fault === 'bad-key') assert.equal(res.status, 401);
  if (p.fault === 'abort-mid-stream') {
    const reader = res.body?.getReader();
    assert.ok(reader, `request ${p.n}: no body`);
    await reader.read();
    controller.abort();
    await reader.cancel().catch(() => undefined);
    return;
  }
  // The rest is read to its end (a cut stream ends in an error on the client's side).
  await res.arrayBuffer().catch(() => undefined);
}

/** A realtime session with REALTIME_RESPONSES model responses, closed by the client. */
async function realtimeSession(url: string): Promise<void> {
  const session = await RealtimeClient.open(`${url.replace(/^http/, 'ws')}/v1/realtime?model=gpt-realtime`, {
    headers: { authorization: `Bearer ${ACCESS_KEY}` },
  });
  await session.until((m) => m.type === 'session.created');
  for (let i = 0; i < REALTIME_RESPONSES; i++) {
    session.ws.send(JSON.stringify({ type: 'response.create', response: { output_modalities: ['text'] } }));
    await session.until((m) => m.type === 'response.done');
  }
  session.ws.close(1000);
  await session.closed;
}

/** Runs the whole mix against a gateway; returns its served-billed count once every request settled. */
async function runMix(
  stack: BillingStack,
  url: string,
): Promise<{ result: ServedBilled; planned: Planned[] }> {
  const planned = plan();
  const queue = [...planned];
  const workers = Array.from({ length: CONCURRENCY }, async () => {
    for (let p = queue.shift(); p !== undefined; p = queue.shift()) await send(stack, url, p);
  });
  await Promise.all([...workers, realtimeSession(url)]);
  const expectedServed = planned.filter(served).length + REALTIME_RESPONSES;
  // Clients that hung up are completed by the gateway when it sees the close: no reply to wait on.
  let result = await scrapeServedBilled(url);
  try {
    await waitUntil(
      async () => {
        result = await scrapeServedBilled(url);
        return result.served >= expectedServed && result.inFlight === 0;
      },
      `${expectedServed} requests served and settled`,
      60_000,
    );
  } catch (err) {
    throw new Error(`${(err as Error).message}; last count: ${JSON.stringify(result)}`);
  }
  assert.equal(result.served, expectedServed, JSON.stringify(result));
  return { result, planned };
}

function count(planned: readonly Planned[], fault: Fault): number {
  return planned.filter((p) => p.fault === fault).length;
}

function assertMix(result: ServedBilled, planned: readonly Planned[], onlyBillableSuccess: boolean): void {
  const detail = JSON.stringify(result, null, 1);
  assert.equal(result.gap, 0, `served - (queued + not reportable) is not 0:\n${detail}`);
  assert.equal(result.queueFailed, 0, detail);
  // The mix went through every path the gap adds up.
  assert.equal(result.unreported.client_aborted, count(planned, 'abort-before-reply'), detail);
  // Failed replies: no event with only_billable_success, else an event of zero usage.
  const failed = count(planned, 'fail-500') + count(planned, 'fail-400');
  if (onlyBillableSuccess) assert.ok((result.results.skip_status ?? 0) >= failed, detail);
  else assert.equal(result.results.skip_status ?? 0, 0, detail);
  assert.equal(result.results.not_billable ?? 0, planned.filter(isCount).length, detail);
  assert.ok(result.queued > count(planned, 'none'), detail);
  for (const api of [
    'chat.completions',
    'responses',
    'native.messages',
    'native.generateContent',
    'native.streamGenerateContent',
    'realtime',
  ]) {
    assert.ok((result.servedByApi[api] ?? 0) > 0, `${api} served: ${detail}`);
  }
}

describe('the gateway in this process', () => {
  let stack: BillingStack;
  before(async () => {
    stack = await startBillingStack({
      sim: { maxRecorded: 2000 },
      billing: { only_billable_success: true },
    });
  });
  after(async () => {
    await stack?.close();
  });

  test(`${REQUESTS} mixed requests and a realtime session: served - (queued + not reportable) is exactly 0`, async () => {
    const { result, planned } = await runMix(stack, stack.url);
    assertMix(result, planned, true);
  });
});

for (const policy of ['void', 'finish_upstream'] as const) {
  describe(`billing.interrupted_stream: ${policy}`, () => {
    let stack: BillingStack;
    before(async () => {
      stack = await startBillingStack({
        sim: { maxRecorded: 2000 },
        billing: { interrupted_stream: policy },
      });
    });
    after(async () => {
      await stack?.close();
    });

    test(`${REQUESTS} mixed requests and a realtime session: the gap is exactly 0 (${policy === 'void' ? 'void_interrupted is not reportable' : 'streams read on after the client left'})`, async () => {
      const { result, planned } = await runMix(stack, stack.url);
      assertMix(result, planned, false);
      if (policy === 'void') assert.ok((result.results.void_interrupted ?? 0) > 0, JSON.stringify(result));
    });
  });
}

describe('shared-store mode (usage events on the Redis billing stream)', () => {
  let redis: RedisServer;
  let stack: BillingStack;
  before(async () => {
    redis = await startRedis();
    stack = await startBillingStack({
      sim: { maxRecorded: 2000 },
      extraYaml: [
        'store:',
        '  enabled: true',
        `  addr: ${redis.url}`,
        `  key_prefix: "served${process.pid}:"`,
        '  access_key_mode: file_only',
        '  access_key_hash_secret: served-billed-hash-secret',
      ].join('\n'),
    });
  });
  after(async () => {
    await stack?.close();
    await redis?.close();
  });

  test(`${REQUESTS} mixed requests and a realtime session: the gap is exactly 0`, async () => {
    const { result, planned } = await runMix(stack, stack.url);
    assertMix(result, planned, false);
  });
});

describe('a router child with workers: 2 (/metrics adds up both workers)', () => {
  let stack: BillingStack;
  let gateway: ChildGateway | undefined;
  before(async () => {
    stack = await startBillingStack({
      gateway: false,
      sidecar: false,
      sim: { maxRecorded: 2000 },
      env: { ROUTER_WORKERS: '2' },
    });
    gateway = await spawnGateway(stack);
  });
  after(async () => {
    if (gateway !== undefined && gateway.child.exitCode === null && gateway.child.signalCode === null) {
      gateway.child.kill('SIGTERM');
      await gateway.exited;
    }
    await stack?.close();
  });

  test(`${REQUESTS} mixed requests and a realtime session over two workers: the gap is exactly 0`, async () => {
    assert.ok(gateway);
    const { result, planned } = await runMix(stack, gateway.url);
    assertMix(result, planned, false);
  });
});
