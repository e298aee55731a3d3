// Rate limits in a real three-primary Redis Cluster: two gateways sharing it admit together exactly what
// one would, the counters of a key living in its subject's own {rl:<type>:<id>} slot.

import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { StoredAccessKey } from '../../common/store-types.ts';
import { type RunningGateway, startGateway } from '../../proxy/gateway.ts';
import { startUpstreamSim, type UpstreamSim } from '../../sim/upstream/server.ts';
import { openRedisStores, type RedisStores } from '../../store/redis-store.ts';
import { waitUntil } from '../support/billing-stack.ts';
import { type HeldStreamUpstream, startHeldStreamUpstream } from '../support/held-stream.ts';
import { testKeyRecord, testStoreConfig } from '../support/redis.ts';
import { type RedisClusterSetup, startRedisCluster } from '../support/redis-cluster.ts';
import { MODELS_FILE, PROVIDERS_DIR, simProviderEnv } from '../support/stack.ts';

const PREFIX = 'rlc:';

let cluster: RedisClusterSetup;
let upstream: UpstreamSim;
let held: HeldStreamUpstream;
let stores: RedisStores;
let dir: string;
const gateways: RunningGateway[] = [];
let serial = 0;

before(async () => {
  cluster = await startRedisCluster();
  upstream = await startUpstreamSim();
  held = await startHeldStreamUpstream(1, 1);
  dir = await mkdtemp(join(tmpdir(), 'router-rl-cluster-'));
  const addr = cluster.seeds
    .split(',')
    .map((s) => `redis://${s}`)
    .join(',');
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
      '  cluster: true',
      `  addr: ${addr}`,
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
  const env = simProviderEnv(upstream.url, [], { groq: held.url });
  for (let i = 0; i < 2; i++) gateways.push(await startGateway(configFile, { env, sidecar: false }));
  stores = await openRedisStores(testStoreConfig(addr, { cluster: true, keyPrefix: PREFIX }));
  // Loads the scripts on the nodes and opens both gateways' connections.
  const warm = await newKey({ limits: { requestsPerMinute: 1000 } });
  for (const g of gateways) assert.equal((await chat(g, warm.secret)).status, 200);
});

after(async () => {
  held?.release();
  for (const g of gateways) await g.close();
  await stores?.close();
  await held?.close();
  await upstream?.close();
  await cluster?.close();
  await rm(dir, { recursive: true, force: true });
});

async function newKey(extra: Partial<StoredAccessKey>): Promise<{ name: string; secret: string }> {
  const name = `rlc-key-${++serial}`;
  const secret = `ak_rlc_secret_${serial}_${Math.random().toString(36).slice(2)}`;
  assert.equal(await stores.accessKeys.create(testKeyRecord(name, secret, extra)), 'created');
  return { name, secret };
}

function chat(g: RunningGateway, secret: string, init: { stream?: boolean; signal?: AbortSignal } = {}) {
  return fetch(`${g.url}/v1/chat/completions`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${secret}`,
      'content-type': 'application/json',
      // Streams go to the held upstream, which keeps them open until the test releases them.
      ...(init.stream ? { 'x-router-provider': 'groq' } : {}),
    },
    body: JSON.stringify({
      model: 'gpt-5.4-mini',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 16,
      ...(init.stream ? { stream: true } : {}),
    }),
    ...(init.signal === undefined ? {} : { signal: init.signal }),
  });
}

/** A key's counter hash (docs/operations.md "Keys in Redis"), read through the cluster. */
function counterKey(name: string, suffix: 'r' | 'c'): string {
  return `${PREFIX}{rl:api_key:${name}}:k:${name}:${suffix}`;
}

async function requestsCounted(name: string): Promise<number> {
  const buckets = await cluster.admin.hvals(counterKey(name, 'r'));
  return buckets.reduce((sum, v) => sum + Number(v), 0);
}

test('cluster, two gateways: 80 concurrent requests on a key limited to 30 per minute admit exactly 30', async () => {
  const key = await newKey({ limits: { requestsPerMinute: 30 } });
  const replies = await Promise.all(Array.from({ length: 80 }, (_, i) => chat(gateways[i % 2]!, key.secret)));
  const bodies = await Promise.all(replies.map((r) => r.json() as Promise<{ error?: { code?: string } }>));
  const statuses = replies.map((r) => r.status);
  assert.equal(statuses.filter((s) => s === 200).length, 30, `statuses ${statuses}`);
  assert.equal(statuses.filter((s) => s === 429).length, 50);
  for (const [i, r] of replies.entries()) {
    if (r.status !== 429) continue;
    assert.equal(bodies[i]!.error?.code, 'rate_limit_requests');
    assert.equal(r.headers.get('x-ratelimit-remaining-requests'), '0');
  }
  const remaining = replies
    .filter((r) => r.status === 200)
    .map((r) => Number(r.headers.get('x-ratelimit-remaining-requests')))
    .sort((a, b) => a - b);
  assert.deepEqual(
    remaining,
    Array.from({ length: 30 }, (_, i) => i),
  );
  assert.equal(await requestsCounted(key.name), 30);
});

test('cluster, two gateways: max_concurrent 2 admits 2 of 5 streams, and another once they end', async () => {
  const key = await newKey({ limits: { maxConcurrent: 2 } });
  const aborts = Array.from({ length: 5 }, () => new AbortController());
  const replies = await Promise.all(
    aborts.map((a, i) => chat(gateways[i % 2]!, key.secret, { stream: true, signal: a.signal })),
  );
  const statuses = replies.map((r) => r.status);
  assert.equal(statuses.filter((s) => s === 200).length, 2, `statuses ${statuses}`);
  assert.equal(statuses.filter((s) => s === 429).length, 3);
  for (const r of replies) {
    if (r.status !== 429) continue;
    assert.equal(r.headers.get('retry-after'), '1');
    assert.equal(((await r.json()) as { error: { code: string } }).error.code, 'concurrency_limit');
  }
  assert.equal(await cluster.admin.zcard(counterKey(key.name, 'c')), 2);
  // Still refused on both while the two are in flight.
  for (const g of gateways) {
    const r = await chat(g, key.secret, { stream: true });
    assert.equal(r.status, 429);
    await r.arrayBuffer();
  }
  held.release();
  const texts = await Promise.all(replies.filter((r) => r.status === 200).map((r) => r.text()));
  for (const t of texts) assert.match(t, /data: \[DONE\]/);
  // Removed by their completion: an expired lease would stay in the set until the next admission.
  await waitUntil(
    async () => (await cluster.admin.zcard(counterKey(key.name, 'c'))) === 0,
    'both slots released',
  );
  for (const g of gateways) {
    const again = await chat(g, key.secret, { stream: true });
    assert.equal(again.status, 200);
    assert.match(await again.text(), /data: \[DONE\]/);
  }
});
