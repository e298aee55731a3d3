// Shared-store mode against a real three-primary Redis Cluster with four billing stream shards: two
// gateways (in this process), two sidecars (child processes, so one can be killed -9), the upstream and
// billing simulators. Keys made with router-admin work on both gateways, a revoke is refused by both at
// the next request, a webhook blocks on both, and every served request is billed exactly once across a
// kill -9 of one sidecar and a restart of one cluster primary.

import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { after, before, test } from 'node:test';
import { runAdmin } from '../../admin/cli.ts';
import { type RunningGateway, startGateway } from '../../proxy/gateway.ts';
import { type BillingSim, startBillingSim } from '../../sim/billing/server.ts';
import { startUpstreamSim, type UpstreamSim } from '../../sim/upstream/server.ts';
import { createKeyLayout } from '../../store/redis-client.ts';
import { streamBacklog } from '../../store/stream-ledger.ts';
import {
  type ChildGateway,
  capturingLogger,
  type LogLine,
  spawnLogged,
  waitUntil,
} from '../support/billing-stack.ts';
import { type RedisClusterSetup, startRedisCluster } from '../support/redis-cluster.ts';
import {
  ACCESS_KEY,
  envName,
  MASTER_KEY,
  MODELS_FILE,
  PRICING_FILE,
  PROVIDERS_DIR,
  SHIPPED_PROVIDERS,
  TRUST_LOOPBACK_IDS,
} from '../support/stack.ts';

const BILLING_KEY = 'sk_billing_cluster_secret';
const PROJECT = 'proj_cluster';
const WEBHOOK_SECRET = 'whsec_cluster';
const PREFIX = 'cl:';
const SHARDS = 4;

let cluster: RedisClusterSetup;
let upstream: UpstreamSim;
let billing: BillingSim;
let dir: string;
let configFile: string;
let env: Record<string, string>;
const logs: LogLine[] = [];
const gateways: RunningGateway[] = [];
const sidecars: ChildGateway[] = [];
const shards = createKeyLayout({
  keyPrefix: PREFIX,
  billingStream: 'billing:events',
  cluster: true,
  billingStreamShards: SHARDS,
}).shards;

before(async () => {
  cluster = await startRedisCluster();
  upstream = await startUpstreamSim();
  billing = await startBillingSim({
    apiKey: BILLING_KEY,
    projectId: PROJECT,
    ruleSets: { rs_router: 'published' },
    wallets: {
      'api_key:cl-a': '1000',
      'api_key:cl-b': '1000',
      'api_key:client_a': '1000',
      'api_key:master-fallback': '1000',
    },
  });
  dir = await mkdtemp(join(tmpdir(), 'router-cluster-'));
  configFile = join(dir, 'router.yaml');
  const addr = cluster.seeds
    .split(',')
    .map((s) => `redis://${s}`)
    .join(',');
  await writeFile(
    configFile,
    [
      'listen: 127.0.0.1:0',
      `providers_dir: ${PROVIDERS_DIR}`,
      `models: ${MODELS_FILE}`,
      `pricing: ${PRICING_FILE}`,
      'log: { level: info }',
      TRUST_LOOPBACK_IDS,
      'billing:',
      '  enabled: true',
      `  base_url: ${billing.url}`,
      `  project_id: ${PROJECT}`,
      `  api_key: ${BILLING_KEY}`,
      '  extractor_rule_set_id: rs_router',
      `  outbox_dir: ${join(dir, 'outbox')}`,
      '  listen: 127.0.0.1:0',
      '  retry_interval_ms: 20',
      '  max_retry_interval_ms: 100',
      '  request_timeout_ms: 800',
      // Master-key requests are billed to this subject (the run below uses the master key).
      '  fallback_subject_id: master-fallback',
      '  balance_enforcement:',
      '    enabled: true',
      '    currency: USD',
      `    webhook_secret: ${WEBHOOK_SECRET}`,
      '    failure_mode: open',
      // No balance refresh (a store write that drops cached views) in the middle of the hot-path test.
      '    cache_ttl_ms: 600000',
      'store:',
      '  enabled: true',
      '  cluster: true',
      `  addr: ${addr}`,
      `  billing_stream_shards: ${SHARDS}`,
      `  key_prefix: "${PREFIX}"`,
      '  access_key_hash_secret: cluster-hash-secret',
      '  operation_timeout_ms: 500',
      '  reclaim_idle_ms: 600',
      '  view_cache_ms: 600000',
      '',
    ].join('\n'),
  );
  env = { ROUTER_ACCESS_KEY_CLIENT_A: ACCESS_KEY, ROUTER_MASTER_KEY: MASTER_KEY };
  for (const p of SHIPPED_PROVIDERS) {
    env[`ROUTER_PROVIDER_${envName(p)}_BASE_URL`] = upstream.url;
    env[`ROUTER_PROVIDER_${envName(p)}_API_KEY`] = `sim-${p}-key`;
  }
  for (let i = 0; i < 2; i++) {
    gateways.push(
      await startGateway(configFile, {
        env,
        sidecar: false,
        logger: capturingLogger(logs).child({ gateway: i }),
      }),
    );
  }
  for (let i = 0; i < 2; i++) sidecars.push(await spawnSidecar());
});

after(async () => {
  for (const s of sidecars)
    if (s.child.exitCode === null && s.child.signalCode === null) s.child.kill('SIGKILL');
  await Promise.all(sidecars.map((s) => s.exited));
  for (const g of gateways) await g.close();
  await upstream?.close();
  await billing?.close();
  await cluster?.close();
  await rm(dir, { recursive: true, force: true });
});

function spawnSidecar(): Promise<ChildGateway> {
  return spawnLogged('bin/sidecar-main.ts', ['-c', configFile], env, 'router-billing listening');
}

async function admin(...argv: string[]): Promise<{ code: number; out: string }> {
  const chunks: string[] = [];
  const out = new Writable({
    write(c: Buffer, _e, done) {
      chunks.push(c.toString());
      done();
    },
  });
  const err = new Writable({ write: (_c, _e, done) => done() });
  const code = await runAdmin([...argv, '--config', configFile], { stdout: out, stderr: err });
  return { code, out: chunks.join('') };
}

async function chat(gateway: RunningGateway, key: string, requestId?: string): Promise<number> {
  const res = await fetch(`${gateway.url}/v1/chat/completions`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${key}`,
      'content-type': 'application/json',
      ...(requestId === undefined ? {} : { 'x-router-request-id': requestId }),
    },
    body: JSON.stringify({ model: 'gpt-5.4-mini', messages: [{ role: 'user', content: 'hi' }] }),
  });
  await res.arrayBuffer();
  return res.status;
}

async function streamLengths(): Promise<number> {
  // Entries still to deliver: delivered ones stay on the stream as the ledger.
  const lengths = await Promise.all(
    shards.map((s) => streamBacklog(cluster.admin, s.stream, 'router-billing')),
  );
  return lengths.reduce((a, b) => a + b, 0);
}

let secret = '';

test('a key made with router-admin works on both gateways; a revoke is refused by both at the next request', async () => {
  const created = await admin('access-key', 'create', '--name', 'cl-a');
  assert.equal(created.code, 0);
  secret = created.out.trim();
  for (const g of gateways) assert.equal(await chat(g, secret), 200);
  const other = (await admin('access-key', 'create', '--name', 'cl-b')).out.trim();
  for (const g of gateways) assert.equal(await chat(g, other), 200);
  assert.equal((await admin('access-key', 'revoke', '--name', 'cl-b')).code, 0);
  for (const g of gateways) assert.equal(await chat(g, other), 401);
  const listed = await admin('access-key', 'list');
  assert.match(listed.out, /cl-a/);
});

/** The commands the gateways' connections send to every node while `fn` runs, in node order. */
async function gatewayCommands(fn: () => Promise<void>): Promise<string[]> {
  const mine = new Set<string>();
  const monitors = [];
  for (const node of cluster.nodes) {
    const addrs = await node.clientAddrs('router-gateway');
    for (const a of addrs) mine.add(a);
    monitors.push(await node.monitor(addrs));
  }
  assert.ok(mine.size >= cluster.nodes.length, 'gateway connections are named on every node');
  await fn();
  const seen: string[] = [];
  for (const m of monitors) for (const c of await m.stop()) seen.push(c[0]!);
  return seen;
}

test('hot path: one XADD per request with a warm view cache; one EVALSHA more after a change', async () => {
  const g = gateways[0]!;
  // Warms the view cache and the cached balance, and writes once to every shard: the cluster client
  // opens a node's connection at its first command there.
  for (let i = 0; i < SHARDS; i++) assert.equal(await chat(g, secret), 200);
  assert.deepEqual(
    await gatewayCommands(async () => {
      assert.equal(await chat(g, secret, 'cl-hot-1'), 200);
      await waitUntil(() => billing.events.some((e) => e.external_event_id === 'cl-hot-1'), 'hot-path event');
    }),
    ['xadd'],
  );
  // A change to the subject by anyone reaches the gateway from the node of the state slot.
  const invalidations = async () =>
    (
      (await (await fetch(`${g.url}/readyz`)).json()) as {
        store: { view_cache?: { live: boolean; invalidations: number } };
      }
    ).store.view_cache?.invalidations ?? 0;
  const heard = await invalidations();
  await cluster.admin.set(
    `${PREFIX}{state}subject:api_key:cl-a`,
    JSON.stringify({ blocked: false, lastEvent: 'test', lastEventId: 'hot', updatedAt: Date.now() }),
  );
  await waitUntil(async () => (await invalidations()) > heard, 'the invalidation at the gateway');
  const commands = await gatewayCommands(async () => {
    assert.equal(await chat(g, secret, 'cl-hot-2'), 200);
    await waitUntil(() => billing.events.some((e) => e.external_event_id === 'cl-hot-2'), 'hot-path event');
  });
  assert.deepEqual([...commands].sort(), ['evalsha', 'xadd']);
});

test('a webhook received by one sidecar blocks the subject on both gateways; a credit unblocks it', async () => {
  const subject = { subject_type: 'api_key', subject_id: 'cl-a' };
  const blocked = await billing.sendWebhook('wallet.insufficient_balance', subject, {
    url: `${sidecars[0]!.url}/internal/billing/webhook`,
    secret: WEBHOOK_SECRET,
  });
  assert.equal(blocked.status, 204);
  for (const g of gateways) assert.equal(await chat(g, secret), 402);
  const lifted = await billing.sendWebhook('wallet.balance_changed', subject, {
    url: `${sidecars[1]!.url}/internal/billing/webhook`,
    secret: WEBHOOK_SECRET,
  });
  assert.equal(lifted.status, 204);
  for (const g of gateways) assert.equal(await chat(g, secret), 200);
});

test('kill -9 of one sidecar and a restart of one primary mid-run: every served request billed exactly once', async () => {
  await waitUntil(async () => (await streamLengths()) === 0, 'earlier events delivered', 20_000);
  const before = new Set(billing.events.map((e) => e.external_event_id));
  const served: string[] = [];
  let n = 0;
  const run = async (count: number) => {
    for (let i = 0; i < count; i++) {
      const rid = `cl-run-${n++}`;
      // The master key: requests keep being served while the state slot's node restarts.
      if ((await chat(gateways[n % 2]!, MASTER_KEY, rid)) === 200) served.push(rid);
    }
  };
  // Held by the sidecars against a hanging billing service, then one of them is killed.
  billing.setFailure('hang');
  await run(40);
  const victim = sidecars[0]!;
  victim.child.kill('SIGKILL');
  await victim.exited;
  billing.setFailure('none');
  await run(40);
  // Requests keep coming while the primary is down and rejoins.
  await Promise.all([run(40), cluster.restart(1)]);
  sidecars[0] = await spawnSidecar();
  await run(40);

  assert.ok(served.length >= 100, `${served.length} of 160 served`);
  await waitUntil(
    () => served.every((rid) => billing.events.some((e) => e.external_event_id === rid)),
    'every served request billed',
    30_000,
  );
  await waitUntil(async () => (await streamLengths()) === 0, 'every shard drained', 20_000);
  const mine = billing.events.map((e) => e.external_event_id).filter((id) => !before.has(id));
  assert.equal(new Set(mine).size, mine.length, 'no event accepted twice');
  for (const rid of served) assert.equal(mine.filter((id) => id === rid).length, 1, `${rid} billed once`);
});
