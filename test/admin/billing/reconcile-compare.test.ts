// The reconcile command's paging of /usage/events/details (against the billing simulator, with and
// without `offset`) and its comparison of a window's ledger events with the billing service's.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  type BillingRecord,
  compareWindow,
  differenceCount,
  OffsetIgnoredError,
  readBillingWindow,
} from '../../../admin/commands/billing/compare.ts';
import { fetchUsageEventDetails } from '../../../billing/billing-client.ts';
import type { LedgerEvent } from '../../../billing/outbox/ledger.ts';
import { startBillingSim } from '../../../sim/billing/server.ts';
import { makeEvent } from '../../support/usage-events.ts';

const KEY = 'sk_read_test_key';
const PROJECT = 'proj_test';

function eventAt(i: number, occurredAt: number) {
  return { ...makeEvent(i), occurred_at: occurredAt };
}

async function ingestAll(url: string, events: ReturnType<typeof eventAt>[]): Promise<void> {
  for (const e of events) {
    const res = await fetch(`${url}/v1/projects/${PROJECT}/extractor-rule-sets/rs_router/events/ingest`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${KEY}`,
        'content-type': 'application/json',
        'idempotency-key': e.idempotency_key,
      },
      body: JSON.stringify(e),
    });
    assert.equal(res.status, 202);
  }
}

test('paging newest first with offset reads the whole window once; a service that ignores offset is refused', async (t) => {
  const sim = await startBillingSim({ apiKey: KEY, projectId: PROJECT });
  const deaf = await startBillingSim({ apiKey: KEY, projectId: PROJECT, detailsIgnoreOffset: true });
  t.after(async () => {
    await sim.close();
    await deaf.close();
  });
  const since = 1_800_000_000;
  // 25 old events (an hour before the window), then 40 in the window.
  const events = [
    ...Array.from({ length: 25 }, (_, i) => eventAt(i, since - 3600)),
    ...Array.from({ length: 40 }, (_, i) => eventAt(100 + i, since + i)),
  ];
  await ingestAll(sim.url, events);
  await ingestAll(deaf.url, events);
  const config = (url: string) => ({
    baseUrl: url,
    projectId: PROJECT,
    readApiKey: KEY,
    requestTimeoutMs: 2000,
  });

  const read = await readBillingWindow(
    (limit, offset) => fetchUsageEventDetails(config(sim.url), { limit, offset }),
    since,
    10,
  );
  // Four pages of the window, then a page wholly before since - 10 min ends the paging.
  assert.equal(read.pages, 5);
  assert.equal(new Set(read.records.map((r) => r.external_event_id)).size, 50);

  await assert.rejects(
    readBillingWindow(
      (limit, offset) => fetchUsageEventDetails(config(deaf.url), { limit, offset }),
      since,
      10,
    ),
    (err: unknown) => err instanceof OffsetIgnoredError && /ignores "offset"/.test(err.message),
  );
  // One page holds the whole window: no second page is needed, so nothing to refuse.
  const small = await readBillingWindow(
    (limit, offset) => fetchUsageEventDetails(config(deaf.url), { limit, offset }),
    since,
    100,
  );
  assert.equal(small.records.length, 65);

  // The test-only delete route forgets events; a re-send is then accepted again.
  const del = await fetch(`${sim.url}/_sim/events/delete`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ request_ids: [events[30]!.external_event_id, 'no-such-id'] }),
  });
  assert.deepEqual(await del.json(), { deleted: 1 });
  assert.equal(sim.events.length, 64);
  await ingestAll(sim.url, [events[30]!]);
  assert.equal(sim.events.length, 65);

  // A wrong key is named as a read-access problem, without the key.
  await assert.rejects(
    fetchUsageEventDetails({ ...config(sim.url), readApiKey: 'sk_wrong_secret' }, { limit: 1, offset: 0 }),
    (err: unknown) =>
      err instanceof Error && /read access/.test(err.message) && !err.message.includes('sk_wrong'),
  );
});

test('pages that shift while new events arrive are read without doubling the overlap', async () => {
  const all: BillingRecord[] = Array.from({ length: 30 }, (_, i) => ({
    external_event_id: `r${i}`,
    occurred_at: 100 + i,
    received_at: i,
  }));
  // Newest first; after the first page two newer events arrive, shifting the rest by two.
  const list = [...all].reverse();
  const read = await readBillingWindow(
    async (limit, offset) => {
      if (offset === limit)
        list.unshift(
          { external_event_id: 'n1', occurred_at: 200, received_at: 31 },
          { external_event_id: 'n2', occurred_at: 200, received_at: 30 },
        );
      return { records: list.slice(offset, offset + limit) };
    },
    100,
    10,
  );
  assert.deepEqual(
    read.records.map((r) => r.external_event_id).filter((id) => String(id).startsWith('r')).length,
    30,
  );
  assert.equal(new Set(read.records.map((r) => r.external_event_id)).size, read.records.length);
});

test('compare: missing, duplicate, phantom, unknown_source and pending', () => {
  const ev = (id: string, at: number, source = 'router') => ({
    ...makeEvent(0),
    external_event_id: id,
    idempotency_key: `router:${id}`,
    occurred_at: at,
    source,
  });
  const ledger: LedgerEvent[] = [
    { event: ev('a', 100), pending: false },
    { event: ev('b', 101), pending: false },
    { event: ev('c', 102), pending: true },
    { event: ev('d', 103), pending: false },
    { event: ev('outside', 50), pending: false },
  ];
  const billing: BillingRecord[] = [
    ev('a', 100),
    ev('d', 103),
    ev('d', 103),
    ev('ghost', 104),
    ev('other', 105, 'another-program'),
    ev('early', 20),
  ];
  const c = compareWindow({
    ledger,
    billing,
    since: 60,
    until: 200,
    beginsAt: 90,
    sources: new Set(['router']),
  });
  assert.deepEqual(
    c.missing.map((d) => d.request_id),
    ['b'],
  );
  assert.deepEqual(
    c.pending.map((d) => d.request_id),
    ['c'],
  );
  assert.deepEqual(
    c.duplicate.map((d) => [d.request_id, d.count]),
    [['d', 2]],
  );
  assert.deepEqual(
    c.phantom.map((d) => d.request_id),
    ['ghost'],
  );
  assert.deepEqual(
    c.unknown_source.map((d) => d.request_id),
    ['other'],
  );
  assert.equal(differenceCount(c), 3);
  // Before the ledgers begin, an unmatched event cannot be called a phantom.
  const late = compareWindow({
    ledger,
    billing,
    since: 60,
    until: 200,
    beginsAt: 104,
    sources: new Set(['router']),
  });
  assert.deepEqual(
    late.phantom.map((d) => d.request_id),
    ['ghost'],
  );
  const later = compareWindow({
    ledger,
    billing,
    since: 60,
    until: 200,
    beginsAt: 105,
    sources: new Set(['router']),
  });
  assert.deepEqual(later.phantom, []);
  assert.deepEqual(
    later.unknown_source.map((d) => d.request_id),
    ['ghost', 'other'],
  );
});
