// The ledgers reconcile reads, and what it calls pending: in the file outbox the lines after the reader's
// checkpoint; in the billing stream (real redis-server) the entries the group has not read or a consumer
// holds unacknowledged. Dead-lettered events are in the ledger, not pending.

import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { readStreamLedger } from '../../../admin/commands/billing/stream-ledger-read.ts';
import { ACTIVE_FILE, listOutbox, writeCheckpoint } from '../../../billing/outbox/layout.ts';
import { readOutboxLedger, snapshotOutboxLedger } from '../../../billing/outbox/ledger.ts';
import { openOutboxWriter } from '../../../billing/outbox/writer.ts';
import { createKeyLayout } from '../../../store/redis-client.ts';
import { startRedis, testStoreConfig } from '../../support/redis.ts';
import { makeEvent } from '../../support/usage-events.ts';

const ALL = { since: 0, until: 2 ** 31 };

test('file outbox: events before the checkpoint are delivered, after it pending; the window filters', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'ledger-read-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const writer = await openOutboxWriter(dir);
  for (let i = 0; i < 6; i++) await writer.append({ ...makeEvent(i), occurred_at: 1000 + i });
  await writer.close();
  // The checkpoint after the third event line (the header is the first line).
  const text = await readFile(join(dir, ACTIVE_FILE), 'utf8');
  const lines = text.split('\n');
  const offset = Buffer.byteLength(`${lines.slice(0, 4).join('\n')}\n`);
  const seq = (JSON.parse(lines[0]!) as { outbox_segment: number }).outbox_segment;
  await writeCheckpoint(dir, { version: 1, segment: seq, offset, attempts: {} });
  const read = await readOutboxLedger(dir, ALL);
  assert.deepEqual(
    read.events.map((e) => [e.event.external_event_id, e.pending]),
    [
      ['req-0', false],
      ['req-1', false],
      ['req-2', false],
      ['req-3', true],
      ['req-4', true],
      ['req-5', true],
    ],
  );
  assert.ok(read.beginsAt !== undefined);
  const window = await readOutboxLedger(dir, { since: 1002, until: 1004 });
  assert.deepEqual(
    window.events.map((e) => e.event.external_event_id),
    ['req-2', 'req-3'],
  );
});

test('file outbox: events written after the snapshot are pending, even once delivered and rotated away', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'ledger-snapshot-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  let writer = await openOutboxWriter(dir, { maxSegmentBytes: 1500 });
  for (let i = 0; i < 3; i++) await writer.append(makeEvent(i));
  await writer.close();
  const snapshot = await snapshotOutboxLedger(dir);
  // After the snapshot: more events, several rotations, and a checkpoint past all of them.
  writer = await openOutboxWriter(dir, { maxSegmentBytes: 1500 });
  for (let i = 3; i < 12; i++) await writer.append(makeEvent(i));
  await writer.close();
  const listing = await listOutbox(dir);
  assert.ok(listing.segments.length >= 3, 'rotated');
  await writeCheckpoint(dir, { version: 1, segment: (listing.activeSeq ?? 0) + 1, offset: 0, attempts: {} });
  const read = await snapshot.read(ALL);
  const pending = new Map(read.events.map((e) => [e.event.external_event_id, e.pending]));
  assert.equal(pending.size, 12);
  for (let i = 0; i < 3; i++) assert.equal(pending.get(`req-${i}`), true, 'no checkpoint at the snapshot');
  for (let i = 3; i < 12; i++)
    assert.equal(pending.get(`req-${i}`), true, `req-${i} came after the snapshot`);
  assert.ok(
    (await readOutboxLedger(dir, ALL)).events.every((e) => !e.pending),
    'a new snapshot sees them delivered',
  );
});

test('billing stream: unread and unacknowledged entries are pending, delivered and dead-lettered ones not', async (t) => {
  const redis = await startRedis();
  t.after(() => redis.close());
  const store = testStoreConfig(redis.url, { keyPrefix: `ledger-read${process.pid}:` });
  const layout = createKeyLayout(store);
  const shard = layout.shards[0]!;
  const group = store.billingConsumerGroup;
  const add = (i: number) => redis.admin.xadd(shard.stream, '*', 'payload', JSON.stringify(makeEvent(i)));
  for (let i = 0; i < 4; i++) await add(i);
  await redis.admin.xgroup('CREATE', shard.stream, group, '0');
  // req-0..2 read by a consumer; req-0 and req-1 acknowledged (delivered, kept), req-2 held; req-3 unread.
  const read = (await redis.admin.xreadgroup(
    'GROUP',
    group,
    'c1',
    'COUNT',
    3,
    'STREAMS',
    shard.stream,
    '>',
  )) as [string, [string, string[]][]][];
  const ids = read[0]![1].map(([id]) => id);
  await redis.admin.xack(shard.stream, group, ids[0]!, ids[1]!);
  await redis.admin.xadd(shard.deadLetter, '*', 'payload', JSON.stringify(makeEvent(9)), 'attempts', '10');
  const ledger = await readStreamLedger(redis.admin, layout, group, ALL);
  assert.deepEqual(ledger.events.map((e) => [e.event.external_event_id, e.pending]).sort(), [
    ['req-0', false],
    ['req-1', false],
    ['req-2', true],
    ['req-3', true],
    ['req-9', false],
  ]);
  assert.ok(ledger.beginsAt !== undefined && Math.abs(ledger.beginsAt - Date.now() / 1000) < 60);
});
