// Rate limits per key and per subject end to end (docs/operations.md "Rate limits per key and subject"):
// one real redis-server, two gateways sharing it, the upstream simulator, the official SDKs.

import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import { GoogleGenAI, Modality } from '@google/genai';
import OpenAI from 'openai';
import type { StoredAccessKey } from '../../common/store-types.ts';
import { type RunningGateway, startGateway } from '../../proxy/gateway.ts';
import { startUpstreamSim, type UpstreamSim } from '../../sim/upstream/server.ts';
import { openRedisStores, type RedisStores } from '../../store/redis-store.ts';
import { waitUntil } from '../support/billing-stack.ts';
import { type HeldStreamUpstream, startHeldStreamUpstream } from '../support/held-stream.ts';
import { RealtimeClient } from '../support/realtime-client.ts';
import { type RedisServer, startRedis, testKeyRecord, testStoreConfig } from '../support/redis.ts';
import { MODELS_FILE, PROVIDERS_DIR, simProviderEnv, TRUST_LOOPBACK_IDS } from '../support/stack.ts';

const PREFIX = 'rl:';

let redis: RedisServer;
let upstream: UpstreamSim;
let held: HeldStreamUpstream;
let stores: RedisStores;
let dir: string;
const gateways: RunningGateway[] = [];
let serial = 0;

before(async () => {
  redis = await startRedis();
  upstream = await startUpstreamSim();
  held = await startHeldStreamUpstream(1, 1);
  dir = await mkdtemp(join(tmpdir(), 'router-rl-'));
  const configFile = join(dir, 'router.yaml');
  await writeFile(
    configFile,
    [
      'listen: 127.0.0.1:0',
      `providers_dir: ${PROVIDERS_DIR}`,
      `models: ${MODELS_FILE}`,
      'log: { level: silent }',
      TRUST_LOOPBACK_IDS,
      'store:',
      '  enabled: true',
      `  addr: ${redis.url}`,
      `  key_prefix: "${PREFIX}"`,
      '  access_key_hash_secret: test-hash-secret',
      '  access_key_mode: redis_only',
      // A loaded CI machine must not turn a slow admission into failure_mode's open door.
      '  operation_timeout_ms: 5000',
      'rate_limits:',
      '  lease_s: 3',
      '',
    ].join('\n'),
  );
  // `held` stands in for groq: its streams stay open until the test releases them.
  const env = simProviderEnv(upstream.url, [], { groq: held.url });
  for (let i = 0; i < 2; i++) gateways.push(await startGateway(configFile, { env, sidecar: false }));
  stores = await openRedisStores(testStoreConfig(redis.url, { keyPrefix: PREFIX }));
  // Loads the scripts and warms both gateways up.
  const warm = await newKey({ limits: { requestsPerMinute: 1000 } });
  for (const g of gateways) assert.equal((await chat(g, warm)).status, 200);
});

after(async () => {
  held.release();
  for (const g of gateways) await g.close();
  await stores.close();
  await held.close();
  await upstream.close();
  await redis.close();
  await rm(dir, { recursive: true, force: true });
});

/** A new key of its own subject (so tests do not share windows) and its secret. */
async function newKey(extra: Partial<StoredAccessKey>): Promise<string> {
  const name = `rl-key-${++serial}`;
  const secret = `ak_rl_secret_${serial}_${Math.random().toString(36).slice(2)}`;
  assert.equal(await stores.accessKeys.create(testKeyRecord(name, secret, extra)), 'created');
  return secret;
}

function chat(
  g: RunningGateway,
  secret: string,
  init: { model?: string; stream?: boolean; signal?: AbortSignal; provider?: string } = {},
) {
  return fetch(`${g.url}/v1/chat/completions`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${secret}`,
      'content-type': 'application/json',
      ...(init.provider === undefined ? {} : { 'x-router-provider': init.provider }),
    },
    body: JSON.stringify({
      model: init.model ?? 'gpt-5.4-mini',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 16,
      ...(init.stream ? { stream: true } : {}),
    }),
    ...(init.signal === undefined ? {} : { signal: init.signal }),
  });
}

test('two gateways on one Redis: 80 concurrent requests on a key limited to 30 per minute admit exactly 30', async () => {
  const secret = await newKey({ limits: { requestsPerMinute: 30 } });
  const replies = await Promise.all(Array.from({ length: 80 }, (_, i) => chat(gateways[i % 2]!, secret)));
  const bodies = await Promise.all(
    replies.map((r) => r.json() as Promise<{ error?: { code?: string; type?: string } }>),
  );
  const ok = replies.filter((r) => r.status === 200);
  const refused = replies.filter((r) => r.status === 429);
  assert.equal(ok.length, 30);
  assert.equal(refused.length, 50);
  for (const [i, r] of replies.entries()) {
    if (r.status !== 429) continue;
    assert.equal(bodies[i]!.error?.code, 'rate_limit_requests');
    assert.equal(bodies[i]!.error?.type, 'rate_limit_error');
    const after = Number(r.headers.get('retry-after'));
    assert.ok(after >= 1 && after <= 60, `retry-after ${after}`);
    assert.ok(Number(r.headers.get('retry-after-ms')) > 0);
    assert.equal(r.headers.get('x-ratelimit-limit-requests'), '30');
    assert.equal(r.headers.get('x-ratelimit-remaining-requests'), '0');
    assert.match(r.headers.get('x-ratelimit-reset-requests') ?? '', /^(\d+m)?\d+s$/);
  }
  // Admitted replies carry the gateway's headers, not the provider's (what is left as this gateway
  // sees it: another's share counts as used, docs/operations.md "Instance shares").
  for (const r of ok) {
    assert.equal(r.headers.get('x-ratelimit-limit-requests'), '30');
    const left = Number(r.headers.get('x-ratelimit-remaining-requests'));
    assert.ok(left >= 0 && left < 30, `remaining ${left}`);
  }
});

test('two gateways on one Redis, far from the limit (instance shares): never more than 300 a minute, and what a share held comes back within its second', async () => {
  const secret = await newKey({ limits: { requestsPerMinute: 300 } });
  const name = `rl-key-${serial}`;
  const windowSum = async () => {
    const h = await redis.admin.hgetall(`${PREFIX}{rl:api_key:${name}}:k:${name}:r`);
    return Object.values(h).reduce((sum, v) => sum + Number(v), 0);
  };
  // Waves of concurrent requests through both gateways until one is refused.
  let admitted = 0;
  let refusals: Response[] = [];
  while (refusals.length === 0) {
    const replies = await Promise.all(Array.from({ length: 40 }, (_, i) => chat(gateways[i % 2]!, secret)));
    for (const r of replies) await r.arrayBuffer();
    admitted += replies.filter((r) => r.status === 200).length;
    refusals = replies.filter((r) => r.status === 429);
    assert.ok(admitted <= 300, `${admitted} admitted`);
  }
  // A refusal while a share is out says to come back within a second, when the share has come back.
  for (const r of refusals) assert.ok(Number(r.headers.get('retry-after')) >= 1);
  // Once every share has ended the window holds exactly what was admitted, and the rest of the minute's
  // 300 is there for the taking, no more.
  await waitUntil(async () => (await windowSum()) === admitted, 'every share given back', 5000);
  const rest = await Promise.all(
    Array.from({ length: 300 - admitted + 10 }, (_, i) => chat(gateways[i % 2]!, secret)),
  );
  for (const r of rest) await r.arrayBuffer();
  const more = rest.filter((r) => r.status === 200).length;
  await waitUntil(async () => (await windowSum()) === admitted + more, 'the last shares given back', 5000);
  assert.ok(admitted + more <= 300, `${admitted} + ${more} admitted`);
  // Near the limit there are no shares: the last requests are the store's own, one by one.
  assert.equal(admitted + more, 300, `${admitted} + ${more} admitted`);
});

test('a key without limits gets replies unchanged: no rate-limit headers of the gateway', async () => {
  const secret = await newKey({});
  const r = await chat(gateways[0]!, secret);
  assert.equal(r.status, 200);
  assert.equal(r.headers.get('x-ratelimit-limit-requests'), null);
  await r.arrayBuffer();
});

test('the model list: a model outside it is the SDK permission error, naming the model; x-router-provider does not bypass it', async () => {
  const secret = await newKey({ models: ['claude-*'] });
  const client = new OpenAI({ apiKey: secret, baseURL: `${gateways[0]!.url}/v1`, maxRetries: 0 });
  await assert.rejects(
    client.chat.completions.create({ model: 'gpt-5.4-mini', messages: [{ role: 'user', content: 'hi' }] }),
    (err: unknown) => {
      assert.ok(err instanceof OpenAI.PermissionDeniedError, String(err));
      assert.equal(err.status, 403);
      assert.match(err.message, /gpt-5\.4-mini/);
      return true;
    },
  );
  const viaHeader = await fetch(`${gateways[1]!.url}/v1/chat/completions`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${secret}`,
      'content-type': 'application/json',
      'x-router-provider': 'openai',
    },
    body: JSON.stringify({ model: 'gpt-5.4-mini', messages: [{ role: 'user', content: 'hi' }] }),
  });
  assert.equal(viaHeader.status, 403);
  assert.equal(((await viaHeader.json()) as { error: { code: string } }).error.code, 'model_not_allowed');
  // Model lists show the key only what it may use, in every family's list.
  const listed = (await client.models.list()).data.map((m) => m.id);
  assert.ok(listed.length > 0 && listed.every((id) => id.startsWith('claude-')), listed.join(','));
  const anthropic = new Anthropic({ apiKey: secret, baseURL: gateways[0]!.url, maxRetries: 0 });
  const anthropicListed = (await anthropic.models.list()).data.map((m) => m.id);
  assert.ok(anthropicListed.includes('claude-sonnet-5'));
  assert.ok(anthropicListed.every((id) => id.startsWith('claude-')));
  const genaiList = await fetch(`${gateways[1]!.url}/v1beta/models?key=${secret}`);
  const genaiNames = ((await genaiList.json()) as { models: { name: string }[] }).models.map((m) => m.name);
  assert.ok(
    genaiNames.length > 0 && genaiNames.every((n) => n.startsWith('models/claude-')),
    genaiNames.join(','),
  );
  const one = await fetch(`${gateways[1]!.url}/v1/models/gpt-5.4-mini`, {
    headers: { authorization: `Bearer ${secret}` },
  });
  assert.equal(one.status, 404);
  await one.arrayBuffer();
  const msg = await anthropic.messages.create({
    model: 'claude-sonnet-5',
    max_tokens: 16,
    messages: [{ role: 'user', content: 'hi' }],
  });
  assert.equal(msg.type, 'message');
});

test('each SDK raises its own rate-limit error on the 429', async () => {
  const secret = await newKey({ limits: { requestsPerMinute: 1 } });
  const openai = new OpenAI({ apiKey: secret, baseURL: `${gateways[0]!.url}/v1`, maxRetries: 0 });
  await openai.chat.completions.create({
    model: 'gpt-5.4-mini',
    messages: [{ role: 'user', content: 'hi' }],
  });
  await assert.rejects(
    openai.chat.completions.create({ model: 'gpt-5.4-mini', messages: [{ role: 'user', content: 'hi' }] }),
    (err: unknown) => err instanceof OpenAI.RateLimitError && err.status === 429,
  );
  // The Responses client too, with the OpenAI-style headers.
  await assert.rejects(openai.responses.create({ model: 'gpt-5.4-mini', input: 'hi' }), (err: unknown) => {
    assert.ok(err instanceof OpenAI.RateLimitError, String(err));
    assert.equal(err.headers?.get('x-ratelimit-limit-requests'), '1');
    return true;
  });
  const anthropic = new Anthropic({ apiKey: secret, baseURL: gateways[1]!.url, maxRetries: 0 });
  await assert.rejects(
    anthropic.messages.create({
      model: 'claude-sonnet-5',
      max_tokens: 16,
      messages: [{ role: 'user', content: 'hi' }],
    }),
    (err: unknown) => {
      assert.ok(err instanceof Anthropic.RateLimitError, String(err));
      assert.equal(err.headers?.get('anthropic-ratelimit-requests-limit'), '1');
      assert.match(
        err.headers?.get('anthropic-ratelimit-requests-reset') ?? '',
        /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/,
      );
      return true;
    },
  );
  const genai = new GoogleGenAI({ apiKey: secret, httpOptions: { baseUrl: gateways[0]!.url } });
  await assert.rejects(
    genai.models.generateContent({ model: 'gemini-3.8-flash', contents: 'hi' }),
    (err: unknown) => {
      const e = err as { status?: number; message?: string };
      assert.equal(e.status, 429);
      assert.match(String(e.message), /RESOURCE_EXHAUSTED/);
      const body = JSON.parse(String(e.message).slice(String(e.message).indexOf('{'))) as {
        error: { details: { '@type': string; retryDelay?: string }[] };
      };
      const retry = body.error.details.find((d) => d['@type'] === 'type.googleapis.com/google.rpc.RetryInfo');
      assert.match(retry?.retryDelay ?? '', /^([1-9]|[1-5]\d|60)s$/);
      return true;
    },
  );
});

test('a request id repeated by a trusted caller does not let two requests share one slot', async () => {
  const secret = await newKey({ limits: { maxConcurrent: 1 } });
  const abort = new AbortController();
  const send = (g: RunningGateway) =>
    fetch(`${g.url}/v1/chat/completions`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${secret}`,
        'content-type': 'application/json',
        'x-router-provider': 'groq',
        'x-router-request-id': 'same-id-twice',
      },
      body: JSON.stringify({
        model: 'gpt-5.4-mini',
        messages: [{ role: 'user', content: 'hi' }],
        stream: true,
      }),
    });
  const first = await send(gateways[0]!);
  assert.equal(first.status, 200);
  const second = await send(gateways[1]!);
  assert.equal(second.status, 429);
  assert.equal(((await second.json()) as { error: { code: string } }).error.code, 'concurrency_limit');
  // Held until the client leaves (the held upstream is released by a later test).
  abort.abort();
});

test('max_concurrent 2: two of five streams admitted; a third once one ends by its client aborting', async () => {
  const secret = await newKey({ limits: { maxConcurrent: 2 } });
  const aborts = Array.from({ length: 5 }, () => new AbortController());
  const replies = await Promise.all(
    aborts.map((a, i) =>
      chat(gateways[i % 2]!, secret, { provider: 'groq', stream: true, signal: a.signal }).catch(
        () => undefined,
      ),
    ),
  );
  const statuses = replies.map((r) => r?.status);
  assert.equal(statuses.filter((s) => s === 200).length, 2, `statuses ${statuses}`);
  assert.equal(statuses.filter((s) => s === 429).length, 3);
  const refused = replies.find((r) => r?.status === 429)!;
  assert.equal(refused.headers.get('retry-after'), '1');
  assert.equal(((await refused.json()) as { error: { code: string } }).error.code, 'concurrency_limit');
  const running = replies.findIndex((r) => r?.status === 200);
  aborts[running]!.abort();
  // Released by the abort's completion: admitted again without waiting for a lease.
  let next: Response | undefined;
  for (let i = 0; i < 200; i++) {
    next = await chat(gateways[0]!, secret, { provider: 'groq', stream: true });
    if (next.status === 200) break;
    await next.arrayBuffer();
    await new Promise((r) => setImmediate(r));
  }
  assert.equal(next?.status, 200);
  for (const a of aborts) a.abort();
  held.release();
  await next?.arrayBuffer();
});

test('a Gemini Live session on a model outside the key list is closed at its setup, naming the model', async () => {
  const secret = await newKey({ models: ['gpt-*'] });
  const ai = new GoogleGenAI({ apiKey: secret, httpOptions: { baseUrl: gateways[0]!.url } });
  let connecting: Promise<unknown> = Promise.resolve();
  const closed = new Promise<{ code: number; reason: string }>((resolve) => {
    connecting = ai.live.connect({
      model: 'gemini-live-2.5-flash',
      config: { responseModalities: [Modality.TEXT] },
      callbacks: { onmessage: () => {}, onclose: (e) => resolve({ code: e.code, reason: e.reason }) },
    });
  });
  await assert.rejects(connecting, /may not use the model/);
  const { code, reason } = await closed;
  assert.equal(code, 1008);
  assert.match(reason, /may not use the model 'gemini-live-2\.5-flash'/);
});

test('a realtime session over its key limit is refused at the upgrade with the 429 and its headers', async () => {
  const secret = await newKey({ limits: { requestsPerMinute: 1 } });
  assert.equal((await chat(gateways[0]!, secret)).status, 200);
  const url = new URL(`${gateways[1]!.url}/v1/realtime?model=gpt-realtime`);
  const res = await new Promise<IncomingMessage>((resolve, reject) => {
    const req = httpRequest(url, {
      headers: {
        authorization: `Bearer ${secret}`,
        connection: 'Upgrade',
        upgrade: 'websocket',
        'sec-websocket-version': '13',
        'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==',
      },
    });
    req.on('response', resolve);
    req.on('upgrade', () => reject(new Error('upgraded past the limit')));
    req.on('error', reject);
    req.end();
  });
  assert.equal(res.statusCode, 429);
  assert.ok(Number(res.headers['retry-after']) >= 1);
  assert.equal(res.headers['x-ratelimit-limit-requests'], '1');
  let text = '';
  for await (const chunk of res) text += String(chunk);
  assert.equal((JSON.parse(text) as { error: { code: string } }).error.code, 'rate_limit_requests');
});

test('a realtime session holds its slot until it closes and counts its tokens response by response', async () => {
  const secret = await newKey({ limits: { maxConcurrent: 1, tokensPerMinute: 1_000_000 } });
  const open = (g: RunningGateway) =>
    RealtimeClient.open(`${g.url.replace(/^http/, 'ws')}/v1/realtime?model=gpt-realtime`, {
      headers: { authorization: `Bearer ${secret}` },
    });
  const session = await open(gateways[0]!);
  await session.until((m) => m.type === 'session.created');
  const remainingBefore = Number(session.upgradeHeaders['x-ratelimit-remaining-tokens']);
  session.ws.send(JSON.stringify({ type: 'response.create', response: { output_modalities: ['text'] } }));
  const done = await session.until((m) => m.type === 'response.done');
  const used = Number(done.response.usage.input_tokens) + Number(done.response.usage.output_tokens);
  assert.ok(used > 0);
  // Its re-check after the response neither counted a request nor took another slot: still one held.
  await assert.rejects(open(gateways[1]!), (err: { status?: number; body?: string }) => {
    assert.equal(err.status, 429);
    assert.match(String(err.body), /concurrency_limit/);
    return true;
  });
  session.ws.close();
  await session.closed;
  let next: RealtimeClient | undefined;
  for (let i = 0; i < 100 && next === undefined; i++) {
    next = await open(gateways[1]!).catch(() => undefined);
    if (next === undefined) await new Promise((r) => setTimeout(r, 20));
  }
  assert.ok(next !== undefined, 'the slot came back once the session closed');
  // The window holds the response's metered tokens.
  assert.equal(Number(next.upgradeHeaders['x-ratelimit-remaining-tokens']), remainingBefore - used);
  next.ws.close();
  await next.closed;
});

test('a model outside the key list: Anthropic PermissionDeniedError, genai 403 PERMISSION_DENIED', async () => {
  const secret = await newKey({ models: ['gpt-*'] });
  const anthropic = new Anthropic({ apiKey: secret, baseURL: gateways[0]!.url, maxRetries: 0 });
  await assert.rejects(
    anthropic.messages.create({
      model: 'claude-sonnet-5',
      max_tokens: 16,
      messages: [{ role: 'user', content: 'hi' }],
    }),
    (err: unknown) => {
      assert.ok(err instanceof Anthropic.PermissionDeniedError, String(err));
      assert.match(err.message, /claude-sonnet-5/);
      return true;
    },
  );
  const genai = new GoogleGenAI({ apiKey: secret, httpOptions: { baseUrl: gateways[1]!.url } });
  await assert.rejects(
    genai.models.generateContent({ model: 'gemini-3.8-flash', contents: 'hi' }),
    (err: unknown) => {
      const e = err as { status?: number; message?: string };
      assert.equal(e.status, 403);
      assert.match(String(e.message), /PERMISSION_DENIED/);
      return true;
    },
  );
});
