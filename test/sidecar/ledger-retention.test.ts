// billing.ledger_retention_h: delivered events stay as the gateway's ledger instead of being deleted,
// and the sidecar trims them by age without ever dropping one still to deliver. File mode: delivered
// segments stay, the pending count ignores them, trim() removes those older than the retention. Shared-
// store mode (real redis-server): acknowledged entries stay, the backlog counts only entries still to
// deliver, and the trim keeps every entry not yet delivered however old it is.

import assert from 'node:assert/strict';
import { mkdtemp, readdir, rm, utimes } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { migrateStore } from '../../admin/store-migration.ts';
import type { IngestResult } from '../../billing/billing-client.ts';
import { readOutboxLedger } from '../../billing/outbox/ledger.ts';
import { openOutboxReader } from '../../billing/outbox/reader.ts';
import { openOutboxWriter } from '../../billing/outbox/writer.ts';
import { startDeliveryWorker } from '../../sidecar/delivery-worker.ts';
import { startStreamConsumer } from '../../sidecar/stream-consumer.ts';
import { createKeyLayout } from '../../store/redis-client.ts';
import { streamBacklog, trimDelivered } from '../../store/stream-ledger.ts';
import { startRedis, testStoreConfig } from '../support/redis.ts';
import { makeEvent } from '../support/usage-events.ts';

const OK: IngestResult = { kind: 'ok', status: 202 };

test('file mode: delivered segments stay as the ledger until trimmed by age', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'ledger-retention-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const writer = await openOutboxWriter(dir, { maxSegmentBytes: 2048 });
  for (let i = 0; i < 60; i++) await writer.append(makeEvent(i));
  await writer.close();
  const sealed = (await readdir(dir)).filter((n) => n.startsWith('segment-'));
  assert.ok(sealed.length >= 3, `several sealed segments (${sealed.length})`);

  const sent: string[] = [];
  const worker = await startDeliveryWorker({
    config: {
      outboxDir: dir,
      retryIntervalMs: 10,
      maxRetryIntervalMs: 10,
      maxAttempts: 3,
      ledgerRetentionH: 1,
    },
    client: {
      ingest: async (e) => {
        sent.push(e.external_event_id);
        return OK;
      },
      probe: async () => true,
    },
    watch: false,
    pollIntervalMs: 20,
  });
  await worker.waitForDrain();
  assert.equal(sent.length, 60);
  assert.equal(await worker.pending(), 0, 'kept segments are not pending');
  await worker.stop();
  assert.deepEqual(
    (await readdir(dir)).filter((n) => n.startsWith('segment-')),
    sealed,
    'delivered segments kept',
  );
  const ledger = await readOutboxLedger(dir, { since: 0, until: 2 ** 31 });
  assert.equal(ledger.events.length, 60);
  assert.ok(ledger.events.every((e) => !e.pending));
  assert.ok(ledger.beginsAt !== undefined);

  // Two segments written two hours ago: trimmed; the rest (younger than an hour) stay.
  const old = new Date(Date.now() - 2 * 3_600_000);
  for (const name of sealed.slice(0, 2)) await utimes(join(dir, name), old, old);
  const reader = await openOutboxReader(dir, { retentionMs: 3_600_000 });
  t.after(() => reader.close());
  assert.equal(await reader.trim(), 2);
  assert.deepEqual(
    (await readdir(dir)).filter((n) => n.startsWith('segment-')),
    sealed.slice(2),
  );
  assert.equal((await readOutboxLedger(dir, { since: 0, until: 2 ** 31 })).events.length < 60, true);
});

test('shared-store mode: acknowledged entries stay; the backlog and the trim count only what is delivered', async (t) => {
  const redis = await startRedis();
  t.after(() => redis.close());
  const store = testStoreConfig(redis.url, { keyPrefix: `ledger${process.pid}:` });
  const keys = createKeyLayout(store).shards[0]!;
  const group = store.billingConsumerGroup;
  // Five entries added "three hours ago" (explicit ids), then five now.
  const past = Date.now() - 3 * 3_600_000;
  for (let i = 0; i < 5; i++)
    await redis.admin.xadd(keys.stream, `${past + i}-0`, 'payload', JSON.stringify(makeEvent(i)));
  for (let i = 5; i < 10; i++)
    await redis.admin.xadd(keys.stream, '*', 'payload', JSON.stringify(makeEvent(i)));
  assert.equal(await streamBacklog(redis.admin, keys.stream, group), 10, 'no group yet: all of it');

  // Nothing delivered yet: a trim removes nothing, however old the entries.
  await redis.admin.xgroup('CREATE', keys.stream, group, '0');
  assert.equal(await trimDelivered(redis.admin, keys.stream, group, Date.now() - 3_600_000), 0);

  let fail = new Set<string>(['req-1']);
  const consumer = await startStreamConsumer({
    store,
    billing: { retryIntervalMs: 10, maxRetryIntervalMs: 20, ledgerRetentionH: 1 },
    client: {
      ingest: async (e) =>
        fail.has(e.external_event_id)
          ? { kind: 'retryable', status: 500, code: 'http_500', message: 'x', unavailable: true }
          : OK,
      probe: async () => true,
    },
    blockMs: 50,
  });
  t.after(() => consumer.stop({ abort: true }));
  // Nine delivered, req-1 (an old entry) keeps failing.
  for (;;) {
    if (consumer.counters().delivered >= 9 && (await streamBacklog(redis.admin, keys.stream, group)) === 1)
      break;
    await new Promise((r) => setImmediate(r));
  }
  assert.equal(await redis.admin.xlen(keys.stream), 10, 'delivered entries kept');
  assert.equal((await consumer.status()).pending, 1);
  // The trim stops before req-1, still to deliver: only req-0, older and delivered, goes.
  assert.equal(await trimDelivered(redis.admin, keys.stream, group, Date.now() - 3_600_000), 1);
  const ids = (await redis.admin.xrange(keys.stream, '-', '+')).map(
    ([, f]) => JSON.parse(f[1]!).external_event_id,
  );
  assert.deepEqual(ids.slice(0, 2), ['req-1', 'req-2'], 'only req-0 went: req-1 is still to deliver');
  fail = new Set();
  for (;;) {
    if ((await streamBacklog(redis.admin, keys.stream, group)) === 0) break;
    await new Promise((r) => setImmediate(r));
  }
  assert.equal(await redis.admin.xlen(keys.stream), 9);
  // Delivered now: the old ones go, the recent ones (younger than the retention) stay.
  assert.equal(await trimDelivered(redis.admin, keys.stream, group, Date.now() - 3_600_000), 4);
  assert.equal(await redis.admin.xlen(keys.stream), 5);

  // `store migrate --include-events` moves what is still to deliver, not the ledger.
  await consumer.stop();
  await redis.admin.xadd(keys.stream, '*', 'payload', JSON.stringify(makeEvent(10)));
  const target = testStoreConfig(redis.url, { keyPrefix: `ledger-target${process.pid}:` });
  const r = await migrateStore(
    { client: redis.admin, keys: createKeyLayout(store) },
    { client: redis.admin, keys: createKeyLayout(target) },
    { dryRun: false, includeEvents: true, group },
  );
  assert.deepEqual(r.events, { moved: 1, left: 0 });
  assert.equal(await redis.admin.xlen(keys.stream), 5, 'the delivered entries stay at the source');
  assert.equal(await redis.admin.xlen(createKeyLayout(target).shards[0]!.stream), 1);
});
