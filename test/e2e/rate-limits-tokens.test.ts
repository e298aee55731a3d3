// tokens_per_minute end to end: two gateways on one Redis, many concurrent streams. Admission counts a
// provisional estimate (body bytes / 4 + max_tokens) and completion settles it to the metered usage of
// the same request, so the tokens admitted never exceed the limit by more than one request's estimate,
// and a stream counts against its own window.

import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { type RunningGateway, startGateway } from '../../proxy/gateway.ts';
import { startUpstreamSim, type UpstreamSim } from '../../sim/upstream/server.ts';
import { openRedisStores, type RedisStores } from '../../store/redis-store.ts';
import { waitUntil } from '../support/billing-stack.ts';
import { type RedisServer, startRedis, testKeyRecord, testStoreConfig } from '../support/redis.ts';
import { MODELS_FILE, PROVIDERS_DIR, simProviderEnv } from '../support/stack.ts';

const PREFIX = 'rlt:';
const LIMIT = 2000;
const MAX_TOKENS = 40;

let redis: RedisServer;
let upstream: UpstreamSim;
let stores: RedisStores;
let dir: string;
const gateways: RunningGateway[] = [];
let serial = 0;

before(async () => {
  redis = await startRedis();
  // Paced streams, so that many are in flight at once with only their provisional count in the window.
  upstream = await startUpstreamSim({ defaultChunkDelayMs: 10, maxRecorded: 10 });
  dir = await mkdtemp(join(tmpdir(), 'router-rl-tokens-'));
  const configFile = join(dir, 'router.yaml');
  await writeFile(
    configFile,
    [
      'listen: 127.0.0.1:0',
      `providers_dir: ${PROVIDERS_DIR}`,
      `models: ${MODELS_FILE}`,
      'log: { level: silent }',
      'store:',
      '  enabled: true',
      `  addr: ${redis.url}`,
      `  key_prefix: "${PREFIX}"`,
      '  access_key_hash_secret: test-hash-secret',
      '  access_key_mode: redis_only',
      '  operation_timeout_ms: 5000',
      '',
    ].join('\n'),
  );
  const env = simProviderEnv(upstream.url);
  for (let i = 0; i < 2; i++) gateways.push(await startGateway(configFile, { env, sidecar: false }));
  stores = await openRedisStores(testStoreConfig(redis.url, { keyPrefix: PREFIX }));
  const warm = await newKey(100_000);
  for (const g of gateways) assert.equal((await stream(g, warm.secret, 0)).status, 200);
});

after(async () => {
  for (const g of gateways) await g.close();
  await stores?.close();
  await upstream?.close();
  await redis?.close();
  await rm(dir, { recursive: true, force: true });
});

async function newKey(tokensPerMinute: number): Promise<{ name: string; secret: string }> {
  const name = `rlt-key-${++serial}`;
  const secret = `ak_rlt_secret_${serial}_${Math.random().toString(36).slice(2)}`;
  const record = testKeyRecord(name, secret, { limits: { tokensPerMinute } });
  assert.equal(await stores.accessKeys.create(record), 'created');
  return { name, secret };
}

function body(i: number): string {
  return JSON.stringify({
    model: 'gpt-5.4-mini',
    messages: [{ role: 'user', content: `Request number ${i}: tell me a short story about a lighthouse.` }],
    max_tokens: MAX_TOKENS,
    stream: true,
    stream_options: { include_usage: true },
  });
}

/** What admission counts for a body (hooks/builtin/rate-limit.ts provisionalTokens). */
function provisional(text: string): number {
  return Math.ceil(Buffer.byteLength(text) / 4) + MAX_TOKENS;
}

interface Outcome {
  readonly status: number;
  readonly headers: Headers;
  readonly provisional: number;
  /** prompt + completion tokens of the stream's usage chunk (admitted streams). */
  readonly metered?: number;
  readonly code?: string;
}

async function stream(g: RunningGateway, secret: string, i: number): Promise<Outcome> {
  const text = body(i);
  const res = await fetch(`${g.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
    body: text,
  });
  const reply = await res.text();
  const base = { status: res.status, headers: res.headers, provisional: provisional(text) };
  if (res.status !== 200) {
    return { ...base, code: (JSON.parse(reply) as { error?: { code?: string } }).error?.code };
  }
  assert.match(reply, /data: \[DONE\]\n\n$/);
  let metered: number | undefined;
  for (const line of reply.split('\n')) {
    if (!line.startsWith('data: {')) continue;
    const chunk = JSON.parse(line.slice(6)) as {
      usage?: { prompt_tokens: number; completion_tokens: number } | null;
    };
    if (chunk.usage) metered = chunk.usage.prompt_tokens + chunk.usage.completion_tokens;
  }
  assert.ok(metered !== undefined, `no usage chunk in ${reply.slice(-300)}`);
  return { ...base, metered };
}

/** The tokens the key's window holds now (docs/operations.md "Keys in Redis"). */
async function windowTokens(name: string): Promise<number> {
  const buckets = await redis.admin.hvals(`${PREFIX}{rl:api_key:${name}}:k:${name}:t`);
  return buckets.reduce((sum, v) => sum + Number(v), 0);
}

test('a stream-heavy run on two gateways admits no more tokens than the limit plus one provisional count', async () => {
  const key = await newKey(LIMIT);
  const outcomes: Outcome[] = [];
  let next = 0;
  // 16 clients at a time, 120 streams in all, alternating gateways.
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < 120) {
        const i = next++;
        outcomes.push(await stream(gateways[i % 2]!, key.secret, i));
      }
    }),
  );
  const admitted = outcomes.filter((o) => o.status === 200);
  const refused = outcomes.filter((o) => o.status !== 200);
  const maxProvisional = Math.max(...outcomes.map((o) => o.provisional));
  const meteredSum = admitted.reduce((sum, o) => sum + o.metered!, 0);
  // Each stream used less than its estimate, so the window could only hold its limit through settlement.
  for (const o of admitted) assert.ok(o.metered! < o.provisional, `${o.metered} >= ${o.provisional}`);
  assert.ok(refused.length > 0, 'the limit refused some');
  assert.ok(meteredSum <= LIMIT + maxProvisional, `${meteredSum} tokens admitted, limit ${LIMIT}`);
  // Settled room was used again: more was admitted than the provisional counts alone allow.
  assert.ok(admitted.length > Math.ceil(LIMIT / maxProvisional), `${admitted.length} admitted`);
  for (const o of refused) {
    assert.equal(o.status, 429);
    assert.equal(o.code, 'rate_limit_tokens');
    assert.equal(o.headers.get('x-ratelimit-limit-tokens'), String(LIMIT));
    assert.ok(Number(o.headers.get('retry-after')) >= 1);
  }
  for (const o of admitted) assert.equal(o.headers.get('x-ratelimit-limit-tokens'), String(LIMIT));
  // Once every stream has completed, the window holds exactly what was metered.
  await waitUntil(async () => (await windowTokens(key.name)) === meteredSum, 'every stream settled');
});

test('a stream counts against its own window: after it completes the window holds its metered usage', async () => {
  const key = await newKey(LIMIT);
  const first = await stream(gateways[0]!, key.secret, 1000);
  assert.equal(first.status, 200);
  // At admission, the estimate.
  assert.equal(first.headers.get('x-ratelimit-remaining-tokens'), String(LIMIT - first.provisional));
  assert.ok(first.metered! < first.provisional);
  await waitUntil(async () => (await windowTokens(key.name)) === first.metered, 'the first stream settled');
  // The other gateway's next admission counts from the metered usage, not the estimate.
  const second = await stream(gateways[1]!, key.secret, 1001);
  assert.equal(second.status, 200);
  assert.equal(
    second.headers.get('x-ratelimit-remaining-tokens'),
    String(LIMIT - first.metered! - second.provisional),
  );
  await waitUntil(
    async () => (await windowTokens(key.name)) === first.metered! + second.metered!,
    'the second stream settled',
  );
});
