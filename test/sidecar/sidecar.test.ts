import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { UsageEvent } from '../../billing/event/usage-event.ts';
import { openOutboxWriter } from '../../billing/outbox/writer.ts';
import type { BillingConfig } from '../../common/config-types.ts';
import { startSidecar } from '../../sidecar/sidecar.ts';
import { startBillingSim } from '../../sim/billing/server.ts';
import { startRedis, testStoreConfig } from '../support/redis.ts';
import { makeEvent as makeEventWithAliases } from '../support/usage-events.ts';

function makeEvent(i: number): UsageEvent {
  return makeEventWithAliases(i, { aliases: true });
}

function billingConfig(over: Partial<BillingConfig>): BillingConfig {
  return {
    enabled: true,
    baseUrl: 'http://127.0.0.1:9',
    projectId: 'proj_test',
    apiKey: 'sk-billing-secret',
    readApiKey: 'sk-billing-secret',
    extractorRuleSetId: 'rs_router',
    source: 'router',
    outboxDir: '/nonexistent',
    outboxFsyncIntervalMs: 20,
    stateDir: '/nonexistent',
    requestTimeoutMs: 3000,
    retryIntervalMs: 10,
    maxRetryIntervalMs: 50,
    deliveryLingerMs: 0,
    maxAttempts: 10,
    ledgerRetentionH: 72,
    onlyBillableSuccess: false,
    itemDetail: 'spec',
    interruptedStream: 'bill_delivered',
    interruptedStreamMaxMs: 30000,
    subjectType: 'api_key',
    fallbackSubjectId: '',
    listen: { host: '127.0.0.1', port: 0 },
    balanceEnforcement: {
      enabled: false,
      currency: 'USD',
      failureMode: 'closed',
      requestTimeoutMs: 1000,
      webhookPath: '/internal/billing/webhook',
      webhookSecret: '',
      timestampToleranceS: 300,
      cacheTtlMs: 5000,
      deniedCacheTtlMs: 1000,
      webhookMaxBodyBytes: 1048576,
    },
    ...over,
  };
}

type Cleanup = (fn: () => unknown) => void;

/** Cleanups run last-registered first (t.after runs in registration order), so the dir goes last. */
function cleanups(t: { after: (fn: () => Promise<void>) => void }): Cleanup {
  const fns: (() => unknown)[] = [];
  t.after(async () => {
    for (const fn of fns.reverse()) await fn();
  });
  return (fn) => {
    fns.push(fn);
  };
}

async function tempDir(defer: Cleanup): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'sidecar-test-'));
  defer(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

async function getJson(url: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(url);
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

test('health and readiness with billing disabled; routes are extensible', async (t) => {
  const sidecar = await startSidecar(
    { kind: 'billing-only', billing: billingConfig({ enabled: false }) },
    {
      routes: [
        [
          'POST /internal/billing/webhook',
          (_req, res) => {
            res.writeHead(204).end();
          },
        ],
      ],
    },
  );
  t.after(() => sidecar.close());
  assert.equal(sidecar.worker, undefined);
  assert.deepEqual(await getJson(`${sidecar.url}/healthz`), { status: 200, body: { status: 'ok' } });
  assert.deepEqual(await getJson(`${sidecar.url}/readyz`), {
    status: 200,
    body: { status: 'ready', billing: { enabled: false, configured: false } },
  });
  assert.equal((await fetch(`${sidecar.url}/nope`)).status, 404);
  assert.equal((await fetch(`${sidecar.url}/internal/billing/webhook`, { method: 'POST' })).status, 204);
});

test('end to end with the billing simulator: gateway writer -> sidecar -> ingest, once per event', async (t) => {
  const defer = cleanups(t);
  const dir = await tempDir(defer);
  const sim = await startBillingSim({ apiKey: 'sk-billing-secret', projectId: 'proj_test' });
  defer(() => sim.close());
  const writer = await openOutboxWriter(dir);
  defer(() => writer.close());
  await Promise.all(Array.from({ length: 200 }, (_, i) => writer.append(makeEvent(i))));
  const sidecar = await startSidecar({
    kind: 'billing-only',
    billing: billingConfig({ baseUrl: sim.url, outboxDir: dir }),
  });
  defer(() => sidecar.close());
  await sidecar.worker!.waitForDrain();
  assert.equal(sim.accepted, 200);
  assert.equal(sim.duplicates, 0);
  assert.equal(sim.missingIdempotencyHeader, 0);
  assert.deepEqual(sim.events[0], makeEvent(0));
  const ready = await getJson(`${sidecar.url}/readyz`);
  assert.equal(ready.status, 200);
  assert.deepEqual(ready.body.billing, { enabled: true, configured: true });
  assert.deepEqual(ready.body.delivery, {
    pending: 0,
    dead_lettered: 0,
    quarantined: 0,
    delivered: 200,
    failed_attempts: 0,
    in_flight: 0,
    last_error_code: null,
    last_error_at: null,
  });
});

test('shared-store mode: events a stopped gateway left in its spool are moved to the stream and delivered', async (t) => {
  const defer = cleanups(t);
  const dir = await tempDir(defer);
  const redis = await startRedis();
  defer(() => redis.close());
  const sim = await startBillingSim({ apiKey: 'sk-billing-secret', projectId: 'proj_test' });
  defer(() => sim.close());
  // What a gateway leaves when Redis was away until it stopped: a spool slot nobody writes any more.
  const gone = await openOutboxWriter(join(dir, 'spool', '0'));
  await Promise.all(Array.from({ length: 20 }, (_, i) => gone.append(makeEvent(i))));
  await gone.close();
  const sidecar = await startSidecar({
    kind: 'billing-only',
    billing: billingConfig({ baseUrl: sim.url, outboxDir: dir }),
    store: testStoreConfig(redis.url),
  });
  defer(() => sidecar.close());
  await sim.waitForEvents(20, 30_000);
  assert.deepEqual(
    sim.events.map((e) => e.external_event_id).sort(),
    Array.from({ length: 20 }, (_, i) => `req-${i}`).sort(),
  );
  assert.equal(sim.duplicates, 0);
});

test('the portal address: HTML 404 fails permanently, with a hint, and dead-letters', async (t) => {
  const defer = cleanups(t);
  const dir = await tempDir(defer);
  const sim = await startBillingSim({ apiKey: 'sk-billing-secret', projectId: 'proj_test' });
  defer(() => sim.close());
  const writer = await openOutboxWriter(dir);
  defer(() => writer.close());
  await writer.append(makeEvent(1));
  const sidecar = await startSidecar(
    {
      kind: 'billing-only',
      billing: billingConfig({ baseUrl: sim.portalUrl, outboxDir: dir, maxAttempts: 2 }),
    },
    { worker: { random: () => 0 } },
  );
  defer(() => sidecar.close());
  await sidecar.worker!.waitForDrain();
  const ready = await getJson(`${sidecar.url}/readyz`);
  const delivery = ready.body.delivery as Record<string, unknown>;
  assert.equal(delivery.last_error_code, 'portal_html_404');
  assert.equal(delivery.dead_lettered, 1);
  assert.equal(delivery.delivered, 0);
  assert.equal(sim.ingestCalls, 0);
});

const sidecarModule = fileURLToPath(new URL('../../sidecar/sidecar.ts', import.meta.url));
const binFile = fileURLToPath(new URL('../../bin/router-billing.js', import.meta.url));

/** A sidecar in a child process; resolves with its URL once it listens. */
function spawnSidecar(billing: BillingConfig): Promise<{ child: ChildProcess; url: string }> {
  const script = `
    import { startSidecar } from ${JSON.stringify(sidecarModule)};
    const sc = await startSidecar({ kind: 'billing-only', billing: ${JSON.stringify(billing)} }, { worker: { window: 4 } });
    process.on('SIGTERM', () => sc.close().then(() => process.exit(0)));
    process.stdout.write(JSON.stringify({ url: sc.url }) + '\\n');
  `;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    child.stdout!.once('data', (d: Buffer) => resolve({ child, url: JSON.parse(d.toString()).url }));
    child.once('exit', (code) => reject(new Error(`sidecar child exited with ${code}`)));
  });
}

function exitOf(child: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  if (child.exitCode !== null || child.signalCode !== null) {
    return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
  }
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
}

test('kill -9 of the sidecar mid-delivery: after restart every event is billed exactly once', async (t) => {
  const defer = cleanups(t);
  const dir = await tempDir(defer);
  const n = 300;
  const heldKey = 'router:req-150';
  // A billing service that charges on receipt and deduplicates on Idempotency-Key. It never answers the
  // first request for heldKey: the charge happened, the acknowledgement is lost with the killed sidecar.
  const charges = new Map<string, number>();
  const received = new Map<string, number>();
  let held: ServerResponse | undefined;
  let onHeld: () => void = () => {};
  const heldPromise = new Promise<void>((r) => {
    onHeld = r;
  });
  let onAll: () => void = () => {};
  const allCharged = new Promise<void>((r) => {
    onAll = r;
  });
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const key = String(req.headers['idempotency-key']);
      received.set(key, (received.get(key) ?? 0) + 1);
      if (!charges.has(key)) charges.set(key, 1);
      if (charges.size === n) onAll();
      if (key === heldKey && received.get(key) === 1) {
        held = res;
        onHeld();
        return;
      }
      res.writeHead(202, { 'content-type': 'application/json' }).end('{"accepted":true}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  defer(async () => {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  });
  const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const writer = await openOutboxWriter(dir);
  defer(() => writer.close());
  for (let i = 0; i < n; i++) await writer.append(makeEvent(i));

  const billing = billingConfig({ baseUrl, outboxDir: dir, requestTimeoutMs: 60_000 });
  const first = await spawnSidecar(billing);
  defer(() => {
    first.child.kill('SIGKILL');
  });
  await heldPromise;
  first.child.kill('SIGKILL');
  assert.deepEqual(await exitOf(first.child), { code: null, signal: 'SIGKILL' });
  held?.destroy();

  const second = await spawnSidecar(billing);
  defer(() => {
    second.child.kill('SIGKILL');
  });
  await allCharged;
  const ready = await getJson(`${second.url}/readyz`);
  assert.equal(ready.status, 200);
  second.child.kill('SIGTERM');
  assert.deepEqual(await exitOf(second.child), { code: 0, signal: null });

  assert.equal(charges.size, n);
  for (let i = 0; i < n; i++) assert.equal(charges.get(`router:req-${i}`), 1);
  assert.ok((received.get(heldKey) ?? 0) >= 2, 'the event in flight at the kill was delivered again');
  // After the graceful stop the checkpoint is at the end: nothing is pending any more.
  const cp = JSON.parse(await readFile(join(dir, 'checkpoint.json'), 'utf8'));
  assert.equal(cp.offset, (await readFile(join(dir, 'events.jsonl'))).length);
});

test('bin/router-billing.js -c <config>: delivers, answers /readyz, exits 0 on SIGTERM, logs no secrets', async (t) => {
  const defer = cleanups(t);
  const dir = await tempDir(defer);
  const sim = await startBillingSim({ apiKey: 'sk-billing-secret', projectId: 'proj_test' });
  defer(() => sim.close());
  await mkdir(join(dir, 'providers'));
  await writeFile(
    join(dir, 'router.yaml'),
    [
      'listen: 127.0.0.1:0',
      'providers_dir: ./providers',
      'billing:',
      '  enabled: true',
      `  base_url: ${sim.url}`,
      '  project_id: proj_test',
      '  api_key: sk-billing-secret',
      '  extractor_rule_set_id: rs_router',
      '  outbox_dir: ./outbox',
      '  listen: 127.0.0.1:0',
      '',
    ].join('\n'),
  );
  const writer = await openOutboxWriter(join(dir, 'outbox'));
  defer(() => writer.close());
  for (let i = 0; i < 20; i++) await writer.append(makeEvent(i));

  const child = spawn(process.execPath, [binFile, '-c', join(dir, 'router.yaml')], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { PATH: process.env.PATH ?? '' },
  });
  defer(() => {
    child.kill('SIGKILL');
  });
  let logs = '';
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout!.on('data', (d: Buffer) => {
      logs += d.toString();
      const m = /"url":"([^"]+)"/.exec(logs);
      if (m) resolve(m[1]!);
    });
    child.stderr!.on('data', (d: Buffer) => {
      logs += d.toString();
    });
    child.once('exit', (code) => reject(new Error(`router-billing exited with ${code}: ${logs}`)));
  });
  await sim.waitForEvents(20, 20_000);
  assert.equal((await getJson(`${url}/healthz`)).status, 200);
  child.kill('SIGTERM');
  assert.deepEqual(await exitOf(child), { code: 0, signal: null });
  assert.equal(sim.accepted, 20);
  assert.doesNotMatch(logs, /sk-billing-secret/);
  assert.match(logs, /router-billing stopped/);
});
