// billing.interrupted_stream end to end (gateway + upstream simulator + billing simulator), with each
// family's official client (openai chat and Responses, @anthropic-ai/sdk, @google/genai):
// - bill_delivered (the default): a client that leaves is billed what it was delivered, `estimated`,
//   end_reason client_gone; an in-stream error event or a cut connection is upstream_error, a stream that
//   simply stops is upstream_cut;
// - finish_upstream: the upstream is read on after the client left and its final usage billed (`upstream`,
//   end_reason client_gone, the same counts as the whole stream), the request holding its concurrency slot
//   until then (in shared-store mode its provisional tokens in Redis too); an upstream that outlasts
//   interrupted_stream_max_ms is cut there (`estimated`, timeout), and a shutdown's drain cut stops it;
// - void: no event, router_billing_events_total{result="void_interrupted"}.
// Streams are held by the simulator (model token hold-N) until the test releases them, and the gateway's
// own log line says when it reads on: no step waits a guessed duration.

import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { after, before, describe, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import { GoogleGenAI } from '@google/genai';
import OpenAI from 'openai';
import type { UsageEvent } from '../../billing/event/usage-event.ts';
import { type BillingStack, outboxText, startBillingStack, waitUntil } from '../support/billing-stack.ts';
import { type RedisServer, startRedis } from '../support/redis.ts';
import { ACCESS_KEY } from '../support/stack.ts';

type Family = 'chat' | 'responses' | 'anthropic' | 'gemini';
const FAMILIES: readonly Family[] = ['chat', 'responses', 'anthropic', 'gemini'];
const MODEL: Record<Family, string> = {
  chat: 'gpt-5.4-mini',
  responses: 'gpt-5.4-mini',
  anthropic: 'claude-sonnet-5',
  gemini: 'gemini-3.8-flash',
};
const PROMPT = 'Tell me about foxes and dogs, in a few words please.';
/** Six frames reach the client at once (text among them in every family); the rest waits for release(). */
const HOLD = 'hold-6';
const READ_ON = 'client gone: reading the upstream on for its final usage';

let seq = 0;
function nextId(): string {
  return `interrupted-${++seq}-${Date.now()}`;
}

function isAbort(err: unknown): boolean {
  const name = (err as { name?: unknown } | null)?.name;
  return (
    name === 'AbortError' ||
    err instanceof OpenAI.APIUserAbortError ||
    err instanceof Anthropic.APIUserAbortError ||
    /abort/i.test(String(err))
  );
}

/**
 * Streams `model` with the family's official client. With `stop`, the client hangs up at the first text
 * it reads; otherwise it reads the stream to its end. Returns the text it read.
 */
async function stream(
  stack: BillingStack,
  family: Family,
  model: string,
  rid: string,
  stop: boolean,
): Promise<string> {
  const controller = new AbortController();
  const headers = { 'x-router-request-id': rid };
  let text = '';
  const read = (piece: string | undefined): boolean => {
    text += piece ?? '';
    if (stop && text !== '') controller.abort();
    return stop && text !== '';
  };
  try {
    if (family === 'chat' || family === 'responses') {
      const client = new OpenAI({
        apiKey: ACCESS_KEY,
        baseURL: `${stack.url}/v1`,
        maxRetries: 0,
        defaultHeaders: headers,
      });
      if (family === 'chat') {
        const s = await client.chat.completions.create(
          { model, messages: [{ role: 'user', content: PROMPT }], stream: true },
          { signal: controller.signal },
        );
        for await (const chunk of s) if (read(chunk.choices[0]?.delta?.content ?? undefined)) break;
      } else {
        const s = await client.responses.create(
          { model, input: PROMPT, stream: true },
          { signal: controller.signal },
        );
        for await (const ev of s) if (ev.type === 'response.output_text.delta' && read(ev.delta)) break;
      }
    } else if (family === 'anthropic') {
      const client = new Anthropic({
        apiKey: ACCESS_KEY,
        baseURL: stack.url,
        maxRetries: 0,
        defaultHeaders: headers,
      });
      const s = await client.messages.create(
        { model, max_tokens: 500, messages: [{ role: 'user', content: PROMPT }], stream: true },
        { signal: controller.signal },
      );
      for await (const ev of s) {
        if (ev.type === 'content_block_delta' && ev.delta.type === 'text_delta' && read(ev.delta.text)) break;
      }
    } else {
      const client = new GoogleGenAI({ apiKey: ACCESS_KEY, httpOptions: { baseUrl: stack.url, headers } });
      const s = await client.models.generateContentStream({
        model,
        contents: PROMPT,
        config: { abortSignal: controller.signal },
      });
      for await (const chunk of s) if (read(chunk.text)) break;
    }
  } catch (err) {
    if (!(stop && isAbort(err))) throw err;
  }
  if (stop) assert.notEqual(text, '', 'the client read text before it left');
  return text;
}

/** A whole stream of a held model: the simulator holds it, the test releases it, the client reads it all. */
async function wholeStream(stack: BillingStack, family: Family, model: string): Promise<UsageEvent> {
  const rid = nextId();
  const held = stack.upstream.stats.held;
  const reading = stream(stack, family, model, rid, false);
  await stack.upstream.waitFor((s) => s.stats.held > held, 10_000);
  assert.equal(stack.upstream.release(), 1);
  await reading;
  const event = await stack.eventFor(rid);
  assert.equal(event.raw_json.usage_stage, 'upstream');
  assert.equal(event.raw_json.meta.end_reason, undefined, 'a whole stream is not interrupted');
  return event;
}

/** Raw SSE request in the family's own wire shape (for failure modes the clients would raise on). */
async function rawStream(stack: BillingStack, family: Family, model: string, rid: string): Promise<void> {
  const headers = {
    authorization: `Bearer ${ACCESS_KEY}`,
    'content-type': 'application/json',
    'x-router-request-id': rid,
  };
  const [path, body] =
    family === 'chat'
      ? ['/v1/chat/completions', { model, stream: true, messages: [{ role: 'user', content: PROMPT }] }]
      : family === 'responses'
        ? ['/v1/responses', { model, stream: true, input: PROMPT }]
        : family === 'anthropic'
          ? [
              '/v1/messages',
              { model, max_tokens: 500, stream: true, messages: [{ role: 'user', content: PROMPT }] },
            ]
          : [
              `/v1beta/models/${model}:streamGenerateContent?alt=sse`,
              { contents: [{ role: 'user', parts: [{ text: PROMPT }] }] },
            ];
  const res = await fetch(`${stack.url}${path}`, { method: 'POST', headers, body: JSON.stringify(body) });
  assert.equal(res.status, 200);
  await res.text().catch(() => undefined);
}

function assertInterrupted(event: UsageEvent, reason: string, stage: 'upstream' | 'estimated'): void {
  assert.equal(event.raw_json.meta.end_reason, reason);
  assert.equal(event.raw_json.usage_stage, stage);
  assert.equal(event.raw_json.status, 200);
  assert.ok(event.raw_json.usage.input_tokens > 0, 'input billed');
  assert.ok(event.raw_json.usage.output_tokens > 0, 'output billed');
}

describe('bill_delivered (the default)', () => {
  let stack: BillingStack;
  before(async () => {
    stack = await startBillingStack();
  });
  after(async () => {
    await stack?.close();
  });

  for (const family of FAMILIES) {
    test(`${family}: a client that leaves is billed what it was delivered, estimated, end_reason client_gone`, async () => {
      const model = `${MODEL[family]}-${HOLD}`;
      const rid = nextId();
      const aborted = stack.upstream.stats.aborted;
      await stream(stack, family, model, rid, true);
      // The gateway stops reading at once: the upstream call is cancelled.
      await stack.upstream.waitFor((s) => s.stats.aborted > aborted, 10_000);
      assertInterrupted(await stack.eventFor(rid), 'client_gone', 'estimated');
    });

    for (const [fail, reason] of [
      ['midstream', 'upstream_error'],
      ['midstream-reset', 'upstream_error'],
      ['midstream-end', 'upstream_cut'],
    ] as const) {
      test(`${family}: fail-${fail} is billed estimated with end_reason ${reason}`, async () => {
        const rid = nextId();
        await rawStream(stack, family, `${MODEL[family]}-fail-${fail}`, rid);
        assertInterrupted(await stack.eventFor(rid), reason, 'estimated');
      });
    }
  }
});

describe('finish_upstream', () => {
  let stack: BillingStack;
  before(async () => {
    stack = await startBillingStack({
      billing: { interrupted_stream: 'finish_upstream', interrupted_stream_max_ms: 60_000 },
      extraYaml: ['rate_limits:', '  per_key:', '    max_concurrent: 1'].join('\n'),
      logLevel: 'debug',
    });
  });
  after(async () => {
    await stack?.close();
  });

  /** Hangs up at the first text and resolves once the gateway reads the upstream on without the client. */
  async function leave(family: Family, model: string): Promise<string> {
    const rid = nextId();
    const held = stack.upstream.stats.held;
    await stream(stack, family, model, rid, true);
    assert.ok(stack.upstream.stats.held > held, 'the stream is held');
    await waitUntil(
      () => stack.logs.some((line) => line.msg === READ_ON && line.reqId === rid),
      `the gateway reading ${rid} on`,
    );
    return rid;
  }

  /** A request of the same key while the read-on stream holds the key's one slot. */
  async function probeStatus(): Promise<number> {
    const res = await fetch(`${stack.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ACCESS_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-5.4-mini', messages: [{ role: 'user', content: 'probe' }] }),
    });
    await res.arrayBuffer();
    return res.status;
  }

  for (const family of FAMILIES) {
    test(`${family}: the upstream's final usage is billed after the client left (upstream, client_gone), the slot held until then`, async () => {
      const model = `${MODEL[family]}-${HOLD}`;
      const whole = await wholeStream(stack, family, model);
      const aborted = stack.upstream.stats.aborted;
      const rid = await leave(family, model);
      assert.equal(await probeStatus(), 429, 'the read-on stream keeps its concurrency slot');
      assert.equal(stack.upstream.release(), 1);
      const event = await stack.eventFor(rid);
      assertInterrupted(event, 'client_gone', 'upstream');
      assert.deepEqual(event.raw_json.usage, whole.raw_json.usage, 'the whole stream’s counts');
      assert.deepEqual(event['x-billing'], whole['x-billing']);
      assert.equal(stack.upstream.stats.aborted, aborted, 'the upstream was read to its end');
      assert.equal(await probeStatus(), 200, 'the slot is free once the request completed');
    });
  }

  test('an upstream error after the client left: estimated, end_reason upstream_error', async () => {
    const rid = await leave('anthropic', `${MODEL.anthropic}-hold-4-fail-midstream-chunks-12`);
    assert.equal(stack.upstream.release(), 1);
    assertInterrupted(await stack.eventFor(rid), 'upstream_error', 'estimated');
  });

  test('an upstream that stops without its final usage after the client left: estimated, upstream_cut', async () => {
    const rid = await leave('chat', `${MODEL.chat}-hold-3-fail-midstream-end-chunks-12`);
    assert.equal(stack.upstream.release(), 1);
    assertInterrupted(await stack.eventFor(rid), 'upstream_cut', 'estimated');
  });
});

describe('finish_upstream in shared-store mode (rate limits in Redis, events on the Redis stream)', () => {
  let redis: RedisServer;
  let stack: BillingStack;
  before(async () => {
    redis = await startRedis();
    stack = await startBillingStack({
      billing: { interrupted_stream: 'finish_upstream', interrupted_stream_max_ms: 60_000 },
      extraYaml: [
        'store:',
        '  enabled: true',
        `  addr: ${redis.url}`,
        `  key_prefix: "interrupted${process.pid}:"`,
        '  access_key_mode: file_only',
        '  access_key_hash_secret: interrupted-streams-hash-secret',
        // One request without an output cap is admitted at its input plus 1,024 output tokens: that
        // provisional count alone fills the minute until it is settled to the metered usage.
        'rate_limits:',
        '  per_key:',
        '    tokens_per_minute: 1000',
      ].join('\n'),
      logLevel: 'debug',
    });
  });
  after(async () => {
    await stack?.close();
    await redis?.close();
  });

  async function probe(): Promise<{ status: number; code: unknown }> {
    const res = await fetch(`${stack.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ACCESS_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-5.4-mini', messages: [{ role: 'user', content: 'probe' }] }),
    });
    const body = (await res.json()) as { error?: { code?: unknown } };
    return { status: res.status, code: body.error?.code };
  }

  test('the read-on stream keeps its provisional tokens until its final usage is billed', async () => {
    const rid = nextId();
    await stream(stack, 'chat', `${MODEL.chat}-${HOLD}`, rid, true);
    await waitUntil(
      () => stack.logs.some((line) => line.msg === READ_ON && line.reqId === rid),
      `the gateway reading ${rid} on`,
    );
    assert.deepEqual(await probe(), { status: 429, code: 'rate_limit_tokens' });
    assert.equal(stack.upstream.release(), 1);
    const event = await stack.eventFor(rid);
    assertInterrupted(event, 'client_gone', 'upstream');
    assert.ok(event.raw_json.usage.total_tokens < 200, 'settled to the metered usage');
    // The settle is a Redis call of its own, sent before the event was queued; a refused probe adds nothing.
    await waitUntil(async () => (await probe()).status === 200, 'room in the minute once settled');
  });
});

describe('finish_upstream, an upstream that outlasts interrupted_stream_max_ms', () => {
  const MAX_MS = 300;
  let stack: BillingStack;
  before(async () => {
    stack = await startBillingStack({
      billing: { interrupted_stream: 'finish_upstream', interrupted_stream_max_ms: MAX_MS },
    });
  });
  after(async () => {
    await stack?.close();
  });

  for (const family of ['chat', 'gemini'] as const) {
    test(`${family}: cut at the bound, billed estimated with end_reason timeout`, async () => {
      const rid = nextId();
      const aborted = stack.upstream.stats.aborted;
      const started = performance.now();
      // Never released: only the bound ends the reading (and only the bound's end is `timeout`).
      await stream(stack, family, `${MODEL[family]}-${HOLD}`, rid, true);
      await stack.upstream.waitFor((s) => s.stats.aborted > aborted, 10_000);
      const cutAfter = performance.now() - started;
      // A sanity bound only (timers fire late, never early; the event loop's clock may lag a little).
      assert.ok(cutAfter >= MAX_MS / 2, `the upstream was cut ${cutAfter} ms after the request started`);
      assertInterrupted(await stack.eventFor(rid), 'timeout', 'estimated');
    });
  }
});

describe('finish_upstream, a shutdown while a stream is read on', () => {
  let stack: BillingStack;
  before(async () => {
    stack = await startBillingStack({
      billing: { interrupted_stream: 'finish_upstream', interrupted_stream_max_ms: 600_000 },
      extraYaml: ['limits:', '  drain_timeout_ms: 100'].join('\n'),
      logLevel: 'debug',
    });
  });
  after(async () => {
    await stack?.close();
  });

  test('the drain cut stops the reading: the stream completes, billed as it stood, before the queue closes', async () => {
    const rid = nextId();
    await stream(stack, 'chat', `${MODEL.chat}-${HOLD}`, rid, true);
    await waitUntil(
      () => stack.logs.some((line) => line.msg === READ_ON && line.reqId === rid),
      `the gateway reading ${rid} on`,
    );
    const started = performance.now();
    await stack.gateway?.close();
    // Far below the 600 s bound and the 5 s the cut requests get to complete.
    assert.ok(performance.now() - started < 4000, 'the shutdown did not wait for the bound');
    assert.equal(
      stack.logs.some((line) => /did not complete/.test(line.msg)),
      false,
      'every cut request completed',
    );
    assertInterrupted(await stack.eventFor(rid), 'client_gone', 'estimated');
  });
});

describe('void', () => {
  let stack: BillingStack;
  before(async () => {
    stack = await startBillingStack({ billing: { interrupted_stream: 'void' } });
  });
  after(async () => {
    await stack?.close();
  });

  async function voidCount(): Promise<number> {
    const text = await (await fetch(`${stack.url}/metrics`)).text();
    const m = /^router_billing_events_total\{result="void_interrupted"\} (\d+)/m.exec(text);
    return m === null ? 0 : Number(m[1]);
  }

  test('an interrupted stream sends no event and counts void_interrupted; a whole stream is billed', async () => {
    const left = nextId();
    const failed = nextId();
    const aborted = stack.upstream.stats.aborted;
    await stream(stack, 'chat', `${MODEL.chat}-${HOLD}`, left, true);
    await stack.upstream.waitFor((s) => s.stats.aborted > aborted, 10_000);
    await rawStream(stack, 'anthropic', `${MODEL.anthropic}-fail-midstream`, failed);
    await waitUntil(async () => (await voidCount()) === 2, 'two void_interrupted counts');
    // Events are delivered in outbox order: once a later one is in, the voided ones would be too.
    const whole = nextId();
    await stream(stack, 'chat', MODEL.chat, whole, false);
    await stack.eventFor(whole);
    for (const rid of [left, failed]) {
      assert.equal(
        stack.billing.events.some((e) => e.external_event_id === rid),
        false,
      );
      assert.equal((await outboxText(stack.outboxDir)).includes(rid), false);
    }
  });
});
