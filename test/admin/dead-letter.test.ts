// `router-admin dead-letter list|show|replay` against real parts: a real sidecar and the billing
// simulator in file mode, a real redis-server and stream consumer in shared-store mode. Dead letters are
// made the way they happen in production: a draft rule set (409) refuses every event until it is
// published; then the events are replayed, each exactly once, also when replay runs twice at once.

import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { after, before, test } from 'node:test';
import { runAdmin } from '../../admin/cli.ts';
import { createBillingClient } from '../../billing/billing-client.ts';
import { openOutboxWriter } from '../../billing/outbox/writer.ts';
import { loadConfig } from '../../config/load.ts';
import { type StreamConsumer, startStreamConsumer } from '../../sidecar/stream-consumer.ts';
import { startBillingSim } from '../../sim/billing/server.ts';
import { createKeyLayout } from '../../store/redis-client.ts';
import { BILLING_RULE_SET, startBillingStack, waitUntil } from '../support/billing-stack.ts';
import { type RedisServer, startRedis } from '../support/redis.ts';
import { makeEvent } from '../support/usage-events.ts';

let redis: RedisServer;
let dir: string;
before(async () => {
  redis = await startRedis();
  dir = await mkdtemp(join(tmpdir(), 'router-admin-dl-'));
});
after(async () => {
  await redis.close();
  await rm(dir, { recursive: true, force: true });
});

function sink(): { stream: Writable; text(): string } {
  const chunks: string[] = [];
  return {
    stream: new Writable({
      write(chunk: Buffer, _enc, done) {
        chunks.push(chunk.toString());
        done();
      },
    }),
    text: () => chunks.join(''),
  };
}

async function admin(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  const out = sink();
  const err = sink();
  const code = await runAdmin(argv, { stdout: out.stream, stderr: err.stream });
  return { code, out: out.text(), err: err.text() };
}

const idsOf = (listOut: string): string[] =>
  listOut
    .trim()
    .split('\n')
    .slice(1)
    .map((l) => l.split(/\s+/)[0]!);

test('file mode: list, show, dry run, replay through the running sidecar exactly once (also twice at once)', async (t) => {
  const stack = await startBillingStack({
    gateway: false,
    sidecar: false,
    billing: { max_attempts: 2, retry_interval_ms: 5, max_retry_interval_ms: 20 },
  });
  t.after(() => stack.close());
  stack.billing.setRuleSet(BILLING_RULE_SET, 'draft');
  const writer = await openOutboxWriter(stack.outboxDir);
  await Promise.all([0, 1, 2].map((i) => writer.append(makeEvent(i))));
  await writer.close();
  const sidecar = await stack.startSidecar();
  await waitUntil(() => sidecar.worker?.counters().deadLettered === 3, 'three dead letters');
  const cfg = ['--config', stack.configFile, '--sidecar-url', sidecar.url];

  const listed = await admin('dead-letter', 'list', ...cfg);
  assert.equal(listed.code, 0, listed.err);
  assert.match(listed.out, /^ID\s+REQUEST_ID\s+SUBJECT\s+ATTEMPTS\s+ERROR\s+DEAD_LETTERED_AT\s+STATE/);
  assert.match(listed.out, /req-0\s+api_key:client-a\s+2\s+rule_set_not_published\s+\S+\s+dead/);
  const ids = idsOf(listed.out);
  assert.equal(ids.length, 3);

  const shown = await admin('dead-letter', 'show', ...cfg, ids[1]!);
  assert.equal(shown.code, 0, shown.err);
  const record = JSON.parse(shown.out);
  assert.equal(record.event.idempotency_key, 'router:req-1');
  assert.equal(record.last_error.status, 409);
  assert.equal((await admin('dead-letter', 'show', ...cfg, '9:9')).code, 1);

  stack.billing.setRuleSet(BILLING_RULE_SET, 'published'); // the cause is fixed
  const before = await readFile(join(stack.outboxDir, 'dead-letter.jsonl'), 'utf8');
  const dry = await admin('dead-letter', 'replay', ...cfg, '--all', '--dry-run');
  assert.equal(dry.code, 0, dry.err);
  assert.equal(dry.out.match(/^would queue /gm)?.length, 3);
  assert.equal(
    await readFile(join(stack.outboxDir, 'dead-letter.jsonl'), 'utf8'),
    before,
    'dry run: unchanged',
  );
  assert.equal(stack.billing.ingestCalls, 6, 'dry run: nothing sent');

  // Twice at once: one of them queues it, the other finds it queued (or already delivered and gone).
  const [a, b] = await Promise.all([
    admin('dead-letter', 'replay', ...cfg, ids[0]!),
    admin('dead-letter', 'replay', ...cfg, ids[0]!),
  ]);
  const outcomes = [a.out, b.out].map((o) => o.split(' ')[0] + (o.startsWith('already') ? ' queued' : ''));
  assert.equal(outcomes.filter((o) => o === 'queued').length, 1, `${a.out} / ${b.out}`);
  await stack.billing.waitForEvents(1, 10_000);
  await waitUntil(
    async () => idsOf((await admin('dead-letter', 'list', ...cfg)).out).length === 2,
    'record removed',
  );
  const again = await admin('dead-letter', 'replay', ...cfg, ids[0]!);
  assert.equal(again.code, 1);
  assert.match(again.out, /^not found /);

  const rest = await admin('dead-letter', 'replay', ...cfg, '--all');
  assert.equal(rest.code, 0, rest.err);
  await stack.billing.waitForEvents(3, 10_000);
  await waitUntil(
    async () => (await admin('dead-letter', 'list', ...cfg)).out.startsWith('no dead letters'),
    'empty',
  );
  assert.equal(stack.billing.accepted, 3);
  assert.equal(stack.billing.duplicates, 0, 'each replayed event sent once');
  assert.deepEqual(stack.billing.events.map((e) => e.external_event_id).sort(), ['req-0', 'req-1', 'req-2']);
});

test('file mode, no sidecar running: replay marks the records under the reader lock; the next sidecar delivers them once', async (t) => {
  const stack = await startBillingStack({
    gateway: false,
    sidecar: false,
    billing: { max_attempts: 1, retry_interval_ms: 5, max_retry_interval_ms: 20 },
  });
  t.after(() => stack.close());
  stack.billing.setRuleSet(BILLING_RULE_SET, 'draft');
  const writer = await openOutboxWriter(stack.outboxDir);
  await Promise.all([0, 1].map((i) => writer.append(makeEvent(i))));
  await writer.close();
  const first = await stack.startSidecar();
  await waitUntil(() => first.worker?.counters().deadLettered === 2, 'two dead letters');
  await stack.stopSidecar();
  stack.billing.setRuleSet(BILLING_RULE_SET, 'published');

  const cfg = ['--config', stack.configFile];
  const replayed = await admin('dead-letter', 'replay', ...cfg, '--all');
  assert.equal(replayed.code, 0, replayed.err);
  assert.equal(replayed.out.match(/^queued /gm)?.length, 2);
  assert.match(replayed.err, /when it starts/);
  const twice = await admin('dead-letter', 'replay', ...cfg, '--all');
  assert.equal(twice.out.match(/^already queued /gm)?.length, 2, twice.out);
  assert.match((await admin('dead-letter', 'list', ...cfg)).out, /queued\n.*queued\n?$/);

  await stack.startSidecar();
  await stack.billing.waitForEvents(2, 10_000);
  await waitUntil(
    async () => (await admin('dead-letter', 'list', ...cfg)).out.startsWith('no dead letters'),
    'empty',
  );
  assert.equal(stack.billing.accepted, 2);
  assert.equal(stack.billing.duplicates, 0);
});

test('store mode: list, show, dry run, atomic replay (twice at once queues once), delivered once', async (t) => {
  const prefix = `dl${process.pid}:`;
  const configFile = join(dir, 'store.yaml');
  await writeFile(
    configFile,
    [
      'store:',
      '  enabled: true',
      `  addr: ${redis.url}`,
      `  key_prefix: "${prefix}"`,
      '  access_key_hash_secret: dead-letter-test-hash-secret',
      '  billing_max_attempts: 2',
      '',
    ].join('\n'),
  );
  const loaded = await loadConfig(configFile);
  assert.ok(loaded.config, JSON.stringify(loaded.diagnostics));
  const store = loaded.config.store;
  const keys = createKeyLayout(store);
  const sim = await startBillingSim({ apiKey: 'sk-test', ruleSets: { rs_router: 'draft' } });
  const client = createBillingClient({
    baseUrl: sim.url,
    projectId: sim.projectId,
    apiKey: 'sk-test',
    extractorRuleSetId: 'rs_router',
    requestTimeoutMs: 2000,
  });
  let consumer: StreamConsumer | undefined;
  t.after(async () => {
    await consumer?.stop({ abort: true });
    await client.close();
    await sim.close();
  });
  const billing = { retryIntervalMs: 5, maxRetryIntervalMs: 20 };
  for (const i of [0, 1, 2])
    await redis.admin.xadd(keys.shards[0]!.stream, '*', 'payload', JSON.stringify(makeEvent(i)));
  consumer = await startStreamConsumer({ store, billing, client });
  await waitUntil(
    async () => (await redis.admin.xlen(keys.shards[0]!.deadLetter)) === 3,
    'three dead letters',
  );
  await consumer.stop();
  consumer = undefined;

  const cfg = ['--config', configFile];
  const listed = await admin('dead-letter', 'list', ...cfg);
  assert.equal(listed.code, 0, listed.err);
  assert.match(listed.out, /req-2\s+api_key:client-a\s+2\s+rule_set_not_published/);
  const ids = idsOf(listed.out);
  assert.equal(ids.length, 3);
  const shown = JSON.parse((await admin('dead-letter', 'show', ...cfg, ids[0]!)).out);
  const firstRequest = listed.out.trim().split('\n')[1]?.split(/\s+/)[1];
  assert.equal(shown.payload.idempotency_key, `router:${firstRequest}`);
  assert.equal(shown.error_code, 'rule_set_not_published');

  const dry = await admin('dead-letter', 'replay', ...cfg, '--all', '--dry-run');
  assert.equal(dry.out.match(/^would queue /gm)?.length, 3);
  assert.equal(await redis.admin.xlen(keys.shards[0]!.deadLetter), 3);
  assert.equal(await redis.admin.xlen(keys.shards[0]!.stream), 0);

  const [a, b] = await Promise.all([
    admin('dead-letter', 'replay', ...cfg, ids[0]!),
    admin('dead-letter', 'replay', ...cfg, ids[0]!),
  ]);
  assert.deepEqual([a.code, b.code].sort(), [0, 1], `${a.out} / ${b.out}`);
  assert.equal(await redis.admin.xlen(keys.shards[0]!.stream), 1, 'queued once');
  assert.equal(await redis.admin.xlen(keys.shards[0]!.deadLetter), 2);

  const rest = await admin('dead-letter', 'replay', ...cfg, '--all');
  assert.equal(rest.code, 0, rest.err);
  assert.match(rest.out, /^queued \S+ \(request req-\d\) -> \d+-\d+$/m);
  assert.equal(await redis.admin.xlen(keys.shards[0]!.stream), 3);
  assert.equal(await redis.admin.xlen(keys.shards[0]!.deadLetter), 0);
  assert.equal((await admin('dead-letter', 'replay', ...cfg, ids[1]!)).code, 1, 'gone: not found');

  sim.setRuleSet('rs_router', 'published');
  consumer = await startStreamConsumer({ store, billing, client });
  await sim.waitForEvents(3, 10_000);
  await waitUntil(async () => (await redis.admin.xlen(keys.shards[0]!.stream)) === 0, 'delivered');
  assert.equal(sim.duplicates, 0);
  assert.deepEqual(sim.events.map((e) => e.external_event_id).sort(), ['req-0', 'req-1', 'req-2']);
});
