// Concurrency slots and their leases (rate_limits.lease_s: 3): the slot of a gateway killed with -9 mid
// stream frees itself within the lease, while a live gateway renews its held slots, so they never free
// themselves however long the stream lasts.

import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { StoredAccessKey } from '../../common/store-types.ts';
import { type RunningGateway, startGateway } from '../../proxy/gateway.ts';
import { startUpstreamSim, type UpstreamSim } from '../../sim/upstream/server.ts';
import { openRedisStores, type RedisStores } from '../../store/redis-store.ts';
import { type ChildGateway, spawnLogged, waitUntil } from '../support/billing-stack.ts';
import { type HeldStreamUpstream, startHeldStreamUpstream } from '../support/held-stream.ts';
import { type RedisServer, startRedis, testKeyRecord, testStoreConfig } from '../support/redis.ts';
import { MODELS_FILE, PROVIDERS_DIR, simProviderEnv } from '../support/stack.ts';

const PREFIX = 'rlk:';
const LEASE_MS = 3000;
/** Time a loaded machine may take beyond the lease to answer the request that finds the slot free. */
const MARGIN_MS = 4000;

let redis: RedisServer;
let upstream: UpstreamSim;
let held: HeldStreamUpstream;
let stores: RedisStores;
let dir: string;
let configFile: string;
let env: Record<string, string>;
const gateways: RunningGateway[] = [];
let child: ChildGateway | undefined;
let serial = 0;

before(async () => {
  redis = await startRedis();
  upstream = await startUpstreamSim();
  held = await startHeldStreamUpstream(1, 1);
  dir = await mkdtemp(join(tmpdir(), 'router-rl-kill-'));
  configFile = join(dir, 'router.yaml');
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
      'rate_limits:',
      `  lease_s: ${LEASE_MS / 1000}`,
      '',
    ].join('\n'),
  );
  // groq is the held upstream: its streams stay open until the test releases them.
  env = simProviderEnv(upstream.url, [], { groq: held.url });
  for (let i = 0; i < 2; i++) gateways.push(await startGateway(configFile, { env, sidecar: false }));
  stores = await openRedisStores(testStoreConfig(redis.url, { keyPrefix: PREFIX }));
});

after(async () => {
  child?.killAll();
  await child?.exited;
  held?.release();
  for (const g of gateways) await g.close();
  await stores?.close();
  await held?.close();
  await upstream?.close();
  await redis?.close();
  await rm(dir, { recursive: true, force: true });
});

async function newKey(extra: Partial<StoredAccessKey>): Promise<{ name: string; secret: string }> {
  const name = `rlk-key-${++serial}`;
  const secret = `ak_rlk_secret_${serial}_${Math.random().toString(36).slice(2)}`;
  assert.equal(await stores.accessKeys.create(testKeyRecord(name, secret, extra)), 'created');
  return { name, secret };
}

/** The key's concurrency slots (docs/operations.md "Keys in Redis"). */
function slotsKey(name: string): string {
  return `${PREFIX}{rl:api_key:${name}}:k:${name}:c`;
}

/** A held stream (groq) or a plain request that completes at once (the simulator). */
function chat(url: string, secret: string, init: { stream?: boolean; signal?: AbortSignal } = {}) {
  return fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${secret}`,
      'content-type': 'application/json',
      ...(init.stream ? { 'x-router-provider': 'groq' } : {}),
    },
    body: JSON.stringify({
      model: 'gpt-5.4-mini',
      messages: [{ role: 'user', content: 'hi' }],
      ...(init.stream ? { stream: true } : {}),
    }),
    ...(init.signal === undefined ? {} : { signal: init.signal }),
  });
}

/** A plain request's status and error code. */
async function attempt(g: RunningGateway, secret: string): Promise<{ status: number; code?: string }> {
  const r = await chat(g.url, secret);
  const body = (await r.json()) as { error?: { code?: string } };
  return { status: r.status, code: body.error?.code };
}

test('kill -9 of a gateway holding a slot: refused elsewhere at first, free again within the lease', async () => {
  const key = await newKey({ limits: { maxConcurrent: 1 } });
  child = await spawnLogged('proxy/cli.ts', ['-c', configFile, '--no-sidecar'], env, 'router listening');
  const holding = await chat(child.url, key.secret, { stream: true });
  assert.equal(holding.status, 200);
  // Drained in the background: the kill cuts it.
  const cut = holding.text().catch(() => 'cut');
  await held.held(1);
  assert.deepEqual(await attempt(gateways[0]!, key.secret), { status: 429, code: 'concurrency_limit' });

  child.killAll();
  assert.equal((await child.exited).signal, 'SIGKILL');
  const killedAt = Date.now();
  // Nobody released the slot: it is still held right after the death.
  assert.deepEqual(await attempt(gateways[1]!, key.secret), { status: 429, code: 'concurrency_limit' });
  let admittedAt: number | undefined;
  for (let i = 0; Date.now() < killedAt + LEASE_MS + MARGIN_MS; i++) {
    const r = await attempt(gateways[i % 2]!, key.secret);
    if (r.status === 200) {
      admittedAt = Date.now();
      break;
    }
    assert.deepEqual(r, { status: 429, code: 'concurrency_limit' });
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  assert.ok(admittedAt !== undefined, `not admitted within ${LEASE_MS + MARGIN_MS} ms of the kill`);
  assert.equal(await cut, 'cut');
});

test('a live gateway renews its slot: a stream held for over two leases keeps it until it ends', async () => {
  const key = await newKey({ limits: { maxConcurrent: 1 } });
  const holding = await chat(gateways[0]!.url, key.secret, { stream: true });
  assert.equal(holding.status, 200);
  const heldSince = Date.now();
  // The one slot held: its lease is the admission's own id.
  const [lease = '', first = '0'] = await redis.admin.zrange(slotsKey(key.name), '0', '-1', 'WITHSCORES');
  const firstExpiry = Number(first);
  assert.ok(firstExpiry > 0, 'the slot is held');
  let refusals = 0;
  // Both gateways refuse all along, well past the time an unrenewed slot would have been free.
  while (Date.now() < heldSince + 2 * LEASE_MS + 1000) {
    assert.deepEqual(await attempt(gateways[refusals % 2]!, key.secret), {
      status: 429,
      code: 'concurrency_limit',
    });
    refusals++;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  assert.ok(refusals >= 2);
  // Renewed: its expiry moved on by more than a lease.
  const renewedExpiry = Number(await redis.admin.zscore(slotsKey(key.name), lease));
  assert.ok(renewedExpiry > firstExpiry + LEASE_MS, `expiry ${firstExpiry} -> ${renewedExpiry}`);
  held.release();
  assert.match(await holding.text(), /data: \[DONE\]/);
  // Removed by its completion: an expired lease would stay in the set until the next admission.
  await waitUntil(async () => (await redis.admin.zcard(slotsKey(key.name))) === 0, 'the slot released');
  assert.equal((await attempt(gateways[1]!, key.secret)).status, 200);
});
