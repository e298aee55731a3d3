// The official SDKs' own retry on the gateway's 429: with their default maxRetries, the openai and
// @anthropic-ai/sdk clients wait the retry-after-ms the refusal names (both honour it when it is at most
// 60 s) and succeed once the window has room, without the test waiting by hand. Both run in parallel on
// keys of their own, so the test waits one window. genai's RetryInfo is checked in rate-limits.test.ts.

import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { type RunningGateway, startGateway } from '../../proxy/gateway.ts';
import { startUpstreamSim, type UpstreamSim } from '../../sim/upstream/server.ts';
import { openRedisStores, type RedisStores } from '../../store/redis-store.ts';
import { type RedisServer, startRedis, testKeyRecord, testStoreConfig } from '../support/redis.ts';
import { MODELS_FILE, PROVIDERS_DIR, simProviderEnv } from '../support/stack.ts';

const PREFIX = 'rls:';

let redis: RedisServer;
let upstream: UpstreamSim;
let stores: RedisStores;
let dir: string;
const gateways: RunningGateway[] = [];

before(async () => {
  redis = await startRedis();
  upstream = await startUpstreamSim();
  dir = await mkdtemp(join(tmpdir(), 'router-rl-sdk-'));
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
});

after(async () => {
  for (const g of gateways) await g.close();
  await stores?.close();
  await upstream?.close();
  await redis?.close();
  await rm(dir, { recursive: true, force: true });
});

async function newKey(name: string): Promise<string> {
  const secret = `ak_rls_${name}_${Math.random().toString(36).slice(2)}`;
  const created = await stores.accessKeys.create(
    testKeyRecord(name, secret, { limits: { requestsPerMinute: 1 } }),
  );
  assert.equal(created, 'created');
  return secret;
}

interface Seen {
  readonly status: number;
  readonly retryAfterMs: number;
  readonly retryAfter: number;
  readonly at: number;
}

/** A fetch that records each reply the SDK gets, retries included. */
function recordingFetch(seen: Seen[]): typeof fetch {
  return async (input, init) => {
    const res = await fetch(input, init);
    seen.push({
      status: res.status,
      retryAfterMs: Number(res.headers.get('retry-after-ms')),
      retryAfter: Number(res.headers.get('retry-after')),
      at: Date.now(),
    });
    return res;
  };
}

/** The second call's 429 named a wait below 60 s, the SDK waited at least that long, and its retry passed. */
function assertRetriedAfterWindow(seen: readonly Seen[]): void {
  assert.deepEqual(
    seen.map((s) => s.status),
    [200, 429, 200],
  );
  const refusal = seen[1]!;
  assert.ok(
    refusal.retryAfterMs > 0 && refusal.retryAfterMs <= 60_000,
    `retry-after-ms ${refusal.retryAfterMs}`,
  );
  assert.ok(refusal.retryAfter >= 1 && refusal.retryAfter <= 60, `retry-after ${refusal.retryAfter}`);
  assert.ok(
    seen[2]!.at - refusal.at >= refusal.retryAfterMs,
    `retried ${seen[2]!.at - refusal.at} ms after a retry-after-ms of ${refusal.retryAfterMs}`,
  );
}

test('openai and Anthropic SDKs with default retries: the second call in the window succeeds after it', async () => {
  const [openaiKey, anthropicKey] = await Promise.all([newKey('rls-openai'), newKey('rls-anthropic')]);
  const openaiSeen: Seen[] = [];
  const anthropicSeen: Seen[] = [];
  const openai = new OpenAI({
    apiKey: openaiKey,
    baseURL: `${gateways[0]!.url}/v1`,
    fetch: recordingFetch(openaiSeen),
  });
  const anthropic = new Anthropic({
    apiKey: anthropicKey,
    baseURL: gateways[1]!.url,
    fetch: recordingFetch(anthropicSeen),
  });

  const openaiRun = async () => {
    const ask = () =>
      openai.chat.completions.create({ model: 'gpt-5.4-mini', messages: [{ role: 'user', content: 'hi' }] });
    assert.equal((await ask()).object, 'chat.completion');
    // Refused in the window, then retried by the SDK itself once the window has room.
    assert.equal((await ask()).object, 'chat.completion');
  };
  const anthropicRun = async () => {
    const ask = () =>
      anthropic.messages.create({
        model: 'claude-sonnet-5',
        max_tokens: 16,
        messages: [{ role: 'user', content: 'hi' }],
      });
    assert.equal((await ask()).type, 'message');
    assert.equal((await ask()).type, 'message');
  };
  await Promise.all([openaiRun(), anthropicRun()]);
  assertRetriedAfterWindow(openaiSeen);
  assertRetriedAfterWindow(anthropicSeen);
});
