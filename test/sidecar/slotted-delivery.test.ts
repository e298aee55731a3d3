// Several writers of one outbox directory on a host (docs/billing.md "Queue layout for several writers"):
// the first writes the directory, the others take slots; the sidecar's delivery reads them all, each
// event once, a slot created after it started included, and one replay finds a dead letter in any slot.

import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type { IngestResult } from '../../billing/billing-client.ts';
import { openSlottedWriter, outboxDirs, SLOTS_DIR } from '../../billing/outbox/slots.ts';
import { startSlottedDelivery } from '../../sidecar/slotted-delivery.ts';
import { waitUntil } from '../support/billing-stack.ts';
import { makeEvent } from '../support/usage-events.ts';

const OK: IngestResult = { kind: 'ok', status: 202 };

test('the first writer takes the directory, the next ones slots; every event of every slot is delivered once', async (t) => {
  const root = await mkdtemp(join(tmpdir(), 'slotted-outbox-'));
  t.after(() => rm(root, { recursive: true, force: true }));
  const first = await openSlottedWriter(root);
  const second = await openSlottedWriter(root);
  assert.equal(first.dir, root);
  assert.equal(second.dir, join(root, SLOTS_DIR, '1'));
  for (let i = 0; i < 50; i++) await (i % 2 === 0 ? first : second).append(makeEvent(i));

  const seen: string[] = [];
  const delivery = await startSlottedDelivery({
    config: { outboxDir: root, retryIntervalMs: 100, maxRetryIntervalMs: 1000, maxAttempts: 5 },
    client: {
      ingest: async (e) => {
        seen.push(e.external_event_id);
        return OK;
      },
    },
    scanIntervalMs: 50,
  });
  try {
    await delivery.waitForDrain();
    assert.equal(seen.length, 50);
    assert.equal(new Set(seen).size, 50, 'none twice');

    // A gateway that starts later writes the next free slot; the delivery finds it.
    const third = await openSlottedWriter(root);
    assert.equal(third.dir, join(root, SLOTS_DIR, '2'));
    for (let i = 50; i < 60; i++) await third.append(makeEvent(i));
    await delivery.waitForDrain();
    assert.deepEqual([...seen].sort(), Array.from({ length: 60 }, (_, i) => `req-${i}`).sort());
    assert.deepEqual(delivery.dirs(), await outboxDirs(root));
    assert.equal(delivery.counters().delivered, 60);
    assert.equal(await delivery.pending(), 0);
    assert.equal((await delivery.status.read()).pendingEvents, 0);
    await third.close();
  } finally {
    await delivery.stop();
    await first.close();
    await second.close();
  }
});

test('a dead letter in a slot is listed in the status and replayed by the one replay call', async (t) => {
  const root = await mkdtemp(join(tmpdir(), 'slotted-outbox-'));
  t.after(() => rm(root, { recursive: true, force: true }));
  const first = await openSlottedWriter(root);
  const second = await openSlottedWriter(root);
  await second.append(makeEvent(7));
  let reject = true;
  const delivery = await startSlottedDelivery({
    config: { outboxDir: root, retryIntervalMs: 10, maxRetryIntervalMs: 10, maxAttempts: 1 },
    client: {
      ingest: async () => (reject ? { kind: 'permanent', status: 409, code: 'rejected', message: 'no' } : OK),
    },
  });
  try {
    await delivery.waitForDrain();
    assert.equal((await delivery.status.read()).deadLettered, 1);
    reject = false;
    // Ids are positions within a directory; the slot's carry its number.
    const all = await delivery.replayDeadLetters(undefined, true);
    assert.equal(all.results.length, 1);
    const id = all.results[0]!.id;
    assert.match(id, /^1\/\d+:\d+$/);
    assert.equal(all.results[0]!.request_id, 'req-7');
    const report = await delivery.replayDeadLetters([id, id.replace(/^1\//, ''), '9/1:0'], false);
    assert.deepEqual(
      report.results.map((r) => [r.id, r.outcome]),
      [
        [id, 'queued'],
        [id.replace(/^1\//, ''), 'not_found'],
        ['9/1:0', 'not_found'],
      ],
    );
    // The slot's worker takes the replayed record on its next pass.
    delivery.wake();
    await waitUntil(async () => delivery.counters().delivered === 1, 'the replayed dead letter is delivered');
  } finally {
    await delivery.stop();
    await first.close();
    await second.close();
  }
});
