// The model listing endpoints authenticate as every other endpoint does: in shared-store mode with
// access_key_mode redis_only, a key that exists only in the store lists and describes models (both wire
// families) and a keys-file key is refused (docs/operations.md "Managing access keys").

import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { pino } from 'pino';
import { type RunningGateway, startGateway } from '../../proxy/gateway.ts';
import { startUpstreamSim, type UpstreamSim } from '../../sim/upstream/server.ts';
import { openRedisStores } from '../../store/redis-store.ts';
import { type RedisServer, startRedis, testKeyRecord, testStoreConfig } from '../support/redis.ts';
import { ACCESS_KEY, MODELS_FILE, PRICING_FILE, PROVIDERS_DIR, simProviderEnv } from '../support/stack.ts';

const STORE_KEY = 'ak_store_only_models_secret';
const PREFIX = 'models-keys:';

let redis: RedisServer;
let sim: UpstreamSim;
let dir: string;
let gateway: RunningGateway;

before(async () => {
  redis = await startRedis();
  sim = await startUpstreamSim();
  const stores = await openRedisStores(testStoreConfig(redis.url, { keyPrefix: PREFIX }));
  try {
    assert.equal(await stores.accessKeys.create(testKeyRecord('store-only', STORE_KEY)), 'created');
  } finally {
    await stores.close();
  }
  dir = await mkdtemp(join(tmpdir(), 'router-models-keys-'));
  const configFile = join(dir, 'router.yaml');
  await writeFile(
    configFile,
    [
      'listen: 127.0.0.1:0',
      `providers_dir: ${PROVIDERS_DIR}`,
      `models: ${MODELS_FILE}`,
      `pricing: ${PRICING_FILE}`,
      'log: { level: silent }',
      'store:',
      '  enabled: true',
      `  addr: ${redis.url}`,
      `  key_prefix: "${PREFIX}"`,
      '  access_key_mode: redis_only',
      '  access_key_hash_secret: test-hash-secret',
      '',
    ].join('\n'),
  );
  gateway = await startGateway(configFile, {
    env: simProviderEnv(sim.url),
    sidecar: false,
    logger: pino({ level: 'silent' }),
  });
});

after(async () => {
  await gateway?.close();
  await sim?.close();
  await redis?.close();
  await rm(dir, { recursive: true, force: true });
});

test('redis_only: a store key lists and describes models; a keys-file key is refused', async () => {
  const list = await fetch(`${gateway.url}/v1/models`, { headers: { authorization: `Bearer ${STORE_KEY}` } });
  assert.equal(list.status, 200);
  const ids = ((await list.json()) as { data: { id: string }[] }).data.map((m) => m.id);
  assert.ok(ids.includes('gpt-5.5'), ids.join(','));

  const one = await fetch(`${gateway.url}/v1/models/gpt-5.5`, {
    headers: { authorization: `Bearer ${STORE_KEY}` },
  });
  assert.equal(one.status, 200);
  assert.equal(((await one.json()) as { id: string }).id, 'gpt-5.5');

  const gemini = await fetch(`${gateway.url}/v1beta/models`, { headers: { 'x-goog-api-key': STORE_KEY } });
  assert.equal(gemini.status, 200);
  assert.ok(Array.isArray(((await gemini.json()) as { models: unknown[] }).models));

  // ACCESS_KEY is in the environment's keys (ROUTER_ACCESS_KEY_CLIENT_A), which redis_only ignores.
  const fileKey = await fetch(`${gateway.url}/v1/models`, {
    headers: { authorization: `Bearer ${ACCESS_KEY}` },
  });
  assert.equal(fileKey.status, 401);
});
