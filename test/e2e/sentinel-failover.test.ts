// Shared-store mode through Redis Sentinel with a gateway and its sidecar (a child process), against a
// real primary, replica and Sentinel: a failover in the middle of a run of chat requests (half of them
// streamed) loses and duplicates nothing. Every request the gateway served is billed exactly once, the
// new primary's streams drain, and a key made with router-admin before the failover still works after it.

import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { after, before, test } from 'node:test';
import { Decimal } from 'decimal.js';
import { runAdmin } from '../../admin/cli.ts';
import { type RunningGateway, startGateway } from '../../proxy/gateway.ts';
import { type BillingSim, startBillingSim } from '../../sim/billing/server.ts';
import { startUpstreamSim, type UpstreamSim } from '../../sim/upstream/server.ts';
import { streamBacklog } from '../../store/stream-ledger.ts';
import {
  type ChildGateway,
  capturingLogger,
  type LogLine,
  spawnLogged,
  waitUntil,
} from '../support/billing-stack.ts';
import { SENTINEL_NAME, type SentinelSetup, startSentinelSetup } from '../support/redis-sentinel.ts';
import {
  envName,
  MODELS_FILE,
  PRICING_FILE,
  PROVIDERS_DIR,
  SHIPPED_PROVIDERS,
  TRUST_LOOPBACK_IDS,
} from '../support/stack.ts';
import { chargeOf } from '../support/usage-events.ts';

const BILLING_KEY = 'sk_billing_sentinel_secret';
const PROJECT = 'proj_sentinel';
const PREFIX = 'sn:';

let setup: SentinelSetup;
let upstream: UpstreamSim;
let billing: BillingSim;
let dir: string;
let configFile: string;
let env: Record<string, string>;
let gateway: RunningGateway;
let sidecar: ChildGateway;
const logs: LogLine[] = [];

before(async () => {
  setup = await startSentinelSetup();
  upstream = await startUpstreamSim();
  billing = await startBillingSim({
    apiKey: BILLING_KEY,
    projectId: PROJECT,
    ruleSets: { rs_router: 'published' },
    wallets: { 'api_key:sn-a': '1000' },
  });
  dir = await mkdtemp(join(tmpdir(), 'router-sentinel-e2e-'));
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
      'store:',
      '  enabled: true',
      `  sentinels: ["127.0.0.1:${setup.sentinelPort}"]`,
      `  sentinel_name: ${SENTINEL_NAME}`,
      `  key_prefix: "${PREFIX}"`,
      '  access_key_hash_secret: sentinel-hash-secret',
      '  operation_timeout_ms: 500',
      '  reclaim_idle_ms: 600',
      // A batch the replica has not taken goes to the local spool, which moves it to the new primary.
      '  billing_wait_replicas: 1',
      '',
    ].join('\n'),
  );
  env = {};
  for (const p of SHIPPED_PROVIDERS) {
    env[`ROUTER_PROVIDER_${envName(p)}_BASE_URL`] = upstream.url;
    env[`ROUTER_PROVIDER_${envName(p)}_API_KEY`] = `sim-${p}-key`;
  }
  gateway = await startGateway(configFile, { env, sidecar: false, logger: capturingLogger(logs) });
  sidecar = await spawnLogged('bin/sidecar-main.ts', ['-c', configFile], env, 'router-billing listening');
});

after(async () => {
  if (sidecar !== undefined && sidecar.child.exitCode === null && sidecar.child.signalCode === null)
    sidecar.child.kill('SIGKILL');
  await sidecar?.exited;
  await gateway?.close();
  await upstream?.close();
  await billing?.close();
  await setup?.close();
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
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

/** The status, after the whole body was read (a cut stream counts as not served). */
async function chat(key: string, requestId: string, stream: boolean): Promise<number> {
  try {
    const res = await fetch(`${gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${key}`,
        'content-type': 'application/json',
        'x-router-request-id': requestId,
      },
      body: JSON.stringify({
        model: 'gpt-5.4-mini',
        stream,
        ...(stream ? { stream_options: { include_usage: true } } : {}),
        messages: [{ role: 'user', content: 'hi' }],
      }),
    });
    const text = await res.text();
    if (stream && res.status === 200 && !text.includes('[DONE]')) return 0;
    return res.status;
  } catch {
    return 0;
  }
}

test('a Sentinel failover mid-run: every served request billed exactly once; keys made before it still work', async (t) => {
  const created = await admin('access-key', 'create', '--name', 'sn-a');
  assert.equal(created.code, 0);
  const secret = created.out.trim();

  const served: string[] = [];
  const refused: number[] = [];
  let n = 0;
  const run = async (count: number): Promise<void> => {
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        for (let i = 0; i < count / 8; i++) {
          const rid = `sn-run-${n++}`;
          const status = await chat(secret, rid, n % 2 === 0);
          if (status === 200) served.push(rid);
          else refused.push(status);
        }
      }),
    );
  };
  await run(80);
  assert.equal(served.length, 80, 'all served before the failover');
  await Promise.all([run(160), setup.failover()]);
  await run(80);

  // While the gateway's store connection switches primaries a key lookup can fail: such a request is
  // refused (503 store_unavailable), never served unbilled. The runs before and after are all served.
  t.diagnostic(`${served.length} of 320 served; ${refused.length} refused while the primary switched`);
  assert.ok(served.length >= 160, `${served.length} of 320 served`);
  for (const status of refused) assert.equal(status, 503);
  assert.equal(await setup.primaryPort(), setup.replica.port);

  await waitUntil(
    () => served.every((rid) => billing.events.some((e) => e.external_event_id === rid)),
    'every served request billed',
    30_000,
  );
  const stream = `${PREFIX}billing:events`;
  await waitUntil(
    async () => (await streamBacklog(setup.replica.admin, stream, 'router-billing')) === 0,
    'the stream drained',
    20_000,
  );
  const ids = billing.events.map((e) => e.external_event_id);
  assert.equal(new Set(ids).size, ids.length, 'no event accepted twice');
  const unserved = ids.filter((id) => !served.includes(id));
  assert.deepEqual(unserved, [], 'no refused request billed');
  const charged = billing.events.reduce((sum, e) => sum.plus(chargeOf(e)), new Decimal(0));
  assert.ok(charged.gt(0));
  assert.ok(
    new Decimal(1000).minus(billing.balance('api_key', 'sn-a')).eq(charged),
    'the wallet debited once per event',
  );

  // The key made before the failover works after it, on the new primary.
  assert.equal(await chat(secret, 'sn-after', false), 200);
});
