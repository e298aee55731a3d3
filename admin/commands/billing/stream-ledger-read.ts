// The shared ledger of shared-store mode, read for `router-admin billing reconcile`: the billing stream's
// entries (delivered ones stay, acknowledged, for billing.ledger_retention_h: store/stream-ledger.ts)
// and the dead letter's, of every shard. Read-only: XRANGE, XINFO and XPENDING.

import { takeTraceparent, type UsageEvent } from '../../../billing/event/usage-event.ts';
import { isUsageEvent } from '../../../billing/outbox/layout.ts';
import type {
  LedgerEvent,
  LedgerRead,
  LedgerSnapshot,
  LedgerWindow,
} from '../../../billing/outbox/ledger.ts';
import type { KeyLayout, Redis } from '../../../store/redis-client.ts';
import { toDeliverTest } from '../../../store/stream-ledger.ts';

const BATCH = 1000;

type Entries = [id: string, fields: string[]][];

function payloadEvent(fields: readonly string[]): UsageEvent | undefined {
  for (let i = 0; i + 1 < fields.length; i += 2) {
    if (fields[i] !== 'payload') continue;
    try {
      const value: unknown = JSON.parse(fields[i + 1]!);
      if (!isUsageEvent(value)) return undefined;
      takeTraceparent(value as unknown as Record<string, unknown>);
      return value;
    } catch {
      return undefined;
    }
  }
  return undefined;
}

async function* range(client: Redis, key: string, start: string): AsyncGenerator<Entries> {
  let from = start;
  for (;;) {
    const batch = (await client.xrange(key, from, '+', 'COUNT', BATCH)) as Entries;
    if (batch.length > 0) yield batch;
    if (batch.length < BATCH) return;
    from = `(${batch[batch.length - 1]![0]}`;
  }
}

/**
 * The window's events of every shard's stream and dead letter. An entry is pending while the group had
 * not read it or a consumer held it unacknowledged when the snapshot was taken (before the billing
 * service was read: billing/outbox/ledger.ts LedgerSnapshot); dead-lettered events are not pending (they
 * were given up on). The ledger begins with the oldest entry every shard still has.
 */
export async function snapshotStreamLedger(
  client: Redis,
  keys: KeyLayout,
  group: string,
): Promise<LedgerSnapshot> {
  const toDeliver = await Promise.all(keys.shards.map((shard) => toDeliverTest(client, shard.stream, group)));
  return {
    async read(window) {
      const events: LedgerEvent[] = [];
      let beginsAt: number | undefined;
      for (const [k, shard] of keys.shards.entries()) {
        const first = (await client.xrange(shard.stream, '-', '+', 'COUNT', 1)) as Entries;
        if (first[0] !== undefined) {
          const at = Math.floor(Number(first[0][0].split('-')[0]) / 1000);
          beginsAt = beginsAt === undefined ? at : Math.max(beginsAt, at);
        }
        // An entry is added when its request completes, after it occurred: none before --since is of
        // the window.
        for await (const batch of range(client, shard.stream, `${window.since * 1000}-0`)) {
          for (const [id, fields] of batch) {
            const event = payloadEvent(fields);
            if (event === undefined || event.occurred_at < window.since || event.occurred_at >= window.until)
              continue;
            events.push({ event, pending: toDeliver[k]!(id) });
          }
        }
        for await (const batch of range(client, shard.deadLetter, '-')) {
          for (const [, fields] of batch) {
            const event = payloadEvent(fields);
            if (event === undefined || event.occurred_at < window.since || event.occurred_at >= window.until)
              continue;
            events.push({ event, pending: false });
          }
        }
      }
      return { events, beginsAt };
    },
  };
}

/** snapshotStreamLedger and its read at once. */
export async function readStreamLedger(
  client: Redis,
  keys: KeyLayout,
  group: string,
  window: LedgerWindow,
): Promise<LedgerRead> {
  return (await snapshotStreamLedger(client, keys, group)).read(window);
}
