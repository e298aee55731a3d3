// Shared-store mode end to end: one real redis-server, two gateways (in this process), two billing
// sidecars (child processes, so one can be killed -9), the upstream and billing simulators. Steps run in
// order against the same stack; each asserts one behaviour of docs/operations.md "Several instances on Redis".

import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { after, before, test } from 'node:test';
import { runAdmin } from '../../admin/cli.ts';
import { type RunningGateway, startGateway } from '../../proxy/gateway.ts';
import { type BillingSim, startBillingSim } from '../../sim/billing/server.ts';
import { startUpstreamSim, type UpstreamSim } from '../../sim/upstream/server.ts';
import { streamBacklog } from '../../store/stream-ledger.ts';
import {
  type ChildGateway,
  capturingLogger,
  eventFor,
  type LogLine,
  spawnLogged,
  waitUntil,
} from '../support/billing-stack.ts';
import { type RedisServer, startRedis } from '../support/redis.ts';
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

const BILLING_KEY = 'sk_billing_multi_secret';
const PROJECT = 'proj_multi';
const WEBHOOK_SECRET = 'whsec_multi_instance';
const PREFIX = 'mi:';
const STREAM = `${PREFIX}billing:events`;

let redis: RedisServer;
let upstream: UpstreamSim;
let billing: BillingSim;
let dir: string;
let configFile: string;
let env: Record<string, string>;
const logs: LogLine[] = [];
const gateways: RunningGateway[] = [];
const sidecars: ChildGateway[] = [];
/** The i-th instance of the pair started in before(). */
const gatewayAt = (i: number): RunningGateway => {
  const g = gateways[i];
  assert.ok(g, `gateway ${i} is running`);
  return g;
};
const sidecarAt = (i: number): ChildGateway => {
  const s = sidecars[i];
  assert.ok(s, `sidecar ${i} is running`);
  return s;
};
let secret = '';

before(async () => {
  redis = await startRedis();
  upstream = await startUpstreamSim();
  billing = await startBillingSim({
    apiKey: BILLING_KEY,
    projectId: PROJECT,
    ruleSets: { rs_router: 'published' },
    wallets: {
      'api_key:shared-a': '1000',
      'api_key:shared-b': '1000',
      'api_key:client_a': '1000',
      'api_key:master-fallback': '1000',
    },
  });
  dir = await mkdtemp(join(tmpdir(), 'router-multi-'));
  configFile = join(dir, 'router.yaml');
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
      `  addr: ${redis.url}`,
      `  key_prefix: "${PREFIX}"`,
      '  access_key_hash_secret: multi-instance-hash-secret',
      '  access_key_mode: redis_preferred',
      '  operation_timeout_ms: 300',
      // Entries leave the view cache by invalidation only here (the hot-path test counts reads).
      '  view_cache_ms: 600000',
      '  billing_max_attempts: 3',
      '  reclaim_idle_ms: 600',
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
  for (let i = 0; i < 2; i++) {
    sidecars.push(
      await spawnLogged('bin/sidecar-main.ts', ['-c', configFile], env, 'router-billing listening'),
    );
  }
});

after(async () => {
  for (const s of sidecars)
    if (s.child.exitCode === null && s.child.signalCode === null) s.child.kill('SIGKILL');
  await Promise.all(sidecars.map((s) => s.exited));
  for (const g of gateways) await g.close();
  await upstream.close();
  await billing.close();
  await redis.close();
  await rm(dir, { recursive: true, force: true });
});

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

async function chat(
  gateway: RunningGateway,
  key: string,
  requestId?: string,
): Promise<{ status: number; body: { error?: { code?: string } } }> {
  const res = await fetch(`${gateway.url}/v1/chat/completions`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${key}`,
      'content-type': 'application/json',
      ...(requestId === undefined ? {} : { 'x-router-request-id': requestId }),
    },
    body: JSON.stringify({ model: 'gpt-5.4-mini', messages: [{ role: 'user', content: 'hi' }] }),
  });
  return { status: res.status, body: (await res.json()) as { error?: { code?: string } } };
}

async function sidecarReady(
  s: ChildGateway,
): Promise<{ delivery?: { pending: number; dead_lettered: number } }> {
  return (await (await fetch(`${s.url}/readyz`)).json()) as {
    delivery?: { pending: number; dead_lettered: number };
  };
}

test('a key made with router-admin works on both instances', async () => {
  const created = await admin('access-key', 'create', '--name', 'shared-a');
  assert.equal(created.code, 0);
  secret = created.out.trim();
  for (const g of gateways) assert.equal((await chat(g, secret)).status, 200);
  await billing.waitForEvents(2, 10_000);
  assert.deepEqual(
    billing.events.map((e) => e.subject_id),
    ['shared-a', 'shared-a'],
  );
});

async function invalidationsOf(g: RunningGateway): Promise<number> {
  const ready = (await (await fetch(`${g.url}/readyz`)).json()) as {
    store: { view_cache?: { live: boolean; invalidations: number } };
  };
  assert.equal(ready.store.view_cache?.live, true, 'the view cache is on');
  return ready.store.view_cache?.invalidations ?? 0;
}

test('hot path: one XADD per request; the key, subject state and balance are read in one round trip, then held until Redis reports a change', async () => {
  const g = gatewayAt(0);
  assert.equal((await chat(g, secret)).status, 200); // balance now cached for this subject
  const accepted = billing.accepted;
  await billing.waitForEvents(accepted, 10_000);
  const mine = await redis.clientAddrs('router-gateway');
  assert.ok(mine.size >= 2, 'gateway connections are named');
  let monitor = await redis.monitor(mine);
  assert.equal((await chat(g, secret, 'hot-path-1')).status, 200);
  await waitUntil(() => billing.events.some((e) => e.external_event_id === 'hot-path-1'), 'hot-path event');
  assert.deepEqual(
    (await monitor.stop()).map((c) => c[0]),
    ['xadd'],
  );
  // A change to the subject's state by anyone drops the gateway's copy: the next request reads the
  // store again, in one round trip. The test waits for the gateway to have received Redis's message
  // (its /readyz counts them): the message and the writer's reply travel separately.
  const heard = await invalidationsOf(g);
  await redis.admin.set(
    `${PREFIX}subject:api_key:shared-a`,
    JSON.stringify({ blocked: false, lastEvent: 'test', lastEventId: 'hot-path', updatedAt: Date.now() }),
  );
  await waitUntil(async () => (await invalidationsOf(g)) > heard, 'the invalidation at the gateway');
  monitor = await redis.monitor(mine);
  assert.equal((await chat(g, secret, 'hot-path-2')).status, 200);
  await waitUntil(() => billing.events.some((e) => e.external_event_id === 'hot-path-2'), 'hot-path event');
  assert.deepEqual(
    (await monitor.stop()).map((c) => c[0]),
    ['evalsha', 'xadd'],
  );
});

test('a key revoked through one instance is refused by the other on its next request', async () => {
  const created = await admin('access-key', 'create', '--name', 'shared-b');
  const other = created.out.trim();
  assert.equal((await chat(gatewayAt(0), other)).status, 200);
  assert.equal((await chat(gatewayAt(1), other)).status, 200);
  assert.equal((await admin('access-key', 'revoke', '--name', 'shared-b')).code, 0);
  const refused = await chat(gatewayAt(1), other);
  assert.equal(refused.status, 401);
  assert.equal(refused.body.error?.code, 'invalid_api_key');
  assert.equal((await chat(gatewayAt(0), other)).status, 401);
  // Rotation: the old secret is refused everywhere at once, the new one accepted.
  const rotated = await admin('access-key', 'rotate', '--name', 'shared-a');
  const fresh = rotated.out.trim();
  for (const g of gateways) {
    assert.equal((await chat(g, secret)).status, 401);
    assert.equal((await chat(g, fresh)).status, 200);
  }
  secret = fresh;
});

test('a webhook received by one instance blocks the subject on both, and a credit unblocks it', async () => {
  const subject = { subject_type: 'api_key', subject_id: 'shared-a' };
  const url = `${sidecarAt(0).url}/internal/billing/webhook`;
  const blocked = await billing.sendWebhook('wallet.insufficient_balance', subject, {
    url,
    secret: WEBHOOK_SECRET,
  });
  assert.equal(blocked.status, 204);
  for (const g of gateways) {
    const r = await chat(g, secret);
    assert.equal(r.status, 402);
    assert.equal(r.body.error?.code, 'insufficient_balance');
  }
  // The same webhook id again (a retry, to the other sidecar) is a duplicate and changes nothing.
  const again = await billing.replayWebhook({
    ...blocked,
    url: `${sidecarAt(1).url}/internal/billing/webhook`,
  });
  assert.equal(again.status, 204);
  const lifted = await billing.sendWebhook('wallet.balance_changed', subject, {
    url: `${sidecarAt(1).url}/internal/billing/webhook`,
    secret: WEBHOOK_SECRET,
  });
  assert.equal(lifted.status, 204);
  for (const g of gateways) assert.equal((await chat(g, secret)).status, 200);
});

test('killing one sidecar mid-delivery leaves its entries to the other; each event billed once', async () => {
  await waitUntil(
    async () => (await streamBacklog(redis.admin, STREAM, 'router-billing')) === 0,
    'earlier events delivered',
  );
  const before = billing.accepted;
  billing.setFailure('hang');
  const ids = Array.from({ length: 8 }, (_, i) => `kill-${i}`);
  for (const [i, id] of ids.entries()) assert.equal((await chat(gatewayAt(i % 2), secret, id)).status, 200);
  // Every entry is held (pending, in flight against the hanging billing service); the sidecar holding
  // the most is killed (consumer names are <hostname>-<pid>).
  let holders: [string, string][] = [];
  await waitUntil(async () => {
    const p = (await redis.admin.xpending(STREAM, 'router-billing')) as [
      number,
      string,
      string,
      [string, string][] | null,
    ];
    holders = p[3] ?? [];
    return p[0] === ids.length;
  }, 'all entries held by sidecars');
  holders.sort((a, b) => Number(b[1]) - Number(a[1]));
  const victimIndex = sidecars.findIndex((s) => `${hostname()}-${s.child.pid}` === holders[0]?.[0]);
  assert.ok(victimIndex >= 0, 'the holder is one of our sidecars');
  const victim = sidecarAt(victimIndex);
  victim.child.kill('SIGKILL');
  await victim.exited;
  billing.setFailure('none');
  await waitUntil(
    () => ids.every((id) => billing.events.some((e) => e.external_event_id === id)),
    'every event delivered by the surviving sidecar',
    20_000,
  );
  await waitUntil(
    async () => (await streamBacklog(redis.admin, STREAM, 'router-billing')) === 0,
    'stream drained',
  );
  for (const id of ids) {
    assert.equal(billing.events.filter((e) => e.external_event_id === id).length, 1, `${id} billed once`);
  }
  assert.equal(billing.accepted, before + ids.length);
  // The survivor now owns everything; restart a second sidecar for the later steps.
  sidecars[victimIndex] = await spawnLogged(
    'bin/sidecar-main.ts',
    ['-c', configFile],
    env,
    'router-billing listening',
  );
});

test('poison events are dead-lettered after billing_max_attempts; /readyz shows the counts', async () => {
  billing.setFailure('error500');
  assert.equal((await chat(gatewayAt(0), secret, 'poison-1')).status, 200);
  await waitUntil(async () => (await redis.admin.xlen(`${STREAM}:dead-letter`)) === 1, 'dead letter', 20_000);
  billing.setFailure('none');
  const [entry] = await redis.admin.xrange(`${STREAM}:dead-letter`, '-', '+');
  assert.ok(entry);
  const fields = entry[1];
  assert.equal(fields[fields.indexOf('attempts') + 1], '3');
  assert.equal(JSON.parse(fields[fields.indexOf('payload') + 1]!).external_event_id, 'poison-1');
  for (const s of sidecars) {
    const ready = await sidecarReady(s);
    assert.equal(ready.delivery?.dead_lettered, 1);
    assert.equal(ready.delivery?.pending, 0);
  }
  const gw = (await (await fetch(`${gatewayAt(1).url}/readyz`)).json()) as {
    billing: { dead_letter?: number; pending?: number };
    store: { connected?: boolean };
  };
  assert.equal(gw.billing.dead_letter, 1);
  assert.equal(gw.store.connected, true);
});

test('store outage: 503 authentication_unavailable; balance asked directly (open); usage event spooled, response kept', async () => {
  await redis.stop();
  try {
    for (const g of gateways) {
      const r = await chat(g, secret);
      assert.equal(r.status, 503);
      assert.equal(r.body.error?.code, 'authentication_unavailable');
      // redis_preferred: a keys-file key is refused too while the store cannot be asked.
      assert.equal((await chat(g, ACCESS_KEY)).status, 503);
    }
    // The master key needs no store; it bills the fallback subject. The subject state and cached balance
    // cannot be read: failure_mode open asks billing directly (and caches nothing), and the response is
    // kept; its usage event waits in the gateway's spool until the stream takes it.
    const logged = logs.length;
    const lookups = billing.lookups;
    const master = await chat(gatewayAt(0), MASTER_KEY, 'outage-master');
    assert.equal(master.status, 200, 'the response is kept');
    assert.equal(billing.lookups, lookups + 1, 'balance asked directly');
    await waitUntil(
      () =>
        logs
          .slice(logged)
          .some((l) => l.msg === 'billing stream unavailable: usage events go to the local spool'),
      'the spooled event is logged',
    );
    const ready = (await (await fetch(`${gatewayAt(0).url}/readyz`)).json()) as {
      store: { connected?: boolean };
    };
    assert.equal(ready.store.connected, false);
  } finally {
    await redis.start();
  }
  // Back: the store restarted empty (no persistence), so only the keys file's key works. Each instance
  // reconnects on its own backoff (up to 2 s apart).
  for (const g of gateways) {
    await waitUntil(async () => (await chat(g, ACCESS_KEY)).status === 200, 'recovery', 10_000);
  }
  await eventFor(billing, 'outage-master', 15_000);
});
