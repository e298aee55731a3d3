// `router-admin store migrate`: copy what a store holds from one Redis to the configured one, from the
// source's key layout to the target's (docs/operations.md "Redis Cluster": moving a single endpoint's
// data into a cluster). Idempotent: what is already there is left alone; an access key present under the
// same name with another secret is a conflict. Cached balances are not copied (they are refetched).
// Usage events still queued at the source are moved only when asked (`--include-events`): a sidecar
// still consuming the source would deliver them too (the billing service counts a doubled event once,
// by its idempotency key, but it is better not to).

import type { StoredAccessKey } from '../common/store-types.ts';
import { accessKeyFields, CREATE, parseAccessKey } from '../store/redis-access-keys.ts';
import type { KeyLayout, Redis } from '../store/redis-client.ts';
import { flatten } from '../store/redis-view.ts';
import { streamBacklog, toDeliverTest } from '../store/stream-ledger.ts';

export interface MigrationSide {
  readonly client: Redis;
  readonly keys: KeyLayout;
}

export interface MigrationReport {
  readonly accessKeys: { created: number; unchanged: number; conflicts: string[] };
  readonly subjects: { copied: number; kept: number };
  readonly webhookIds: { copied: number; kept: number };
  /** Queued usage events and dead letters: moved, or left at the source. */
  readonly events: { moved: number; left: number };
}

const BATCH = 200;

export async function migrateStore(
  from: MigrationSide,
  to: MigrationSide,
  /** group: the billing consumer group, whose delivered entries stay at the source. */
  opts: { dryRun: boolean; includeEvents: boolean; group?: string },
): Promise<MigrationReport> {
  return {
    accessKeys: await copyAccessKeys(from, to, opts.dryRun),
    subjects: await copyStrings(from, to, 'subject:', false, opts.dryRun),
    webhookIds: await copyStrings(from, to, 'webhook:', true, opts.dryRun),
    events: await moveEvents(from, to, opts),
  };
}

async function copyAccessKeys(
  from: MigrationSide,
  to: MigrationSide,
  dryRun: boolean,
): Promise<MigrationReport['accessKeys']> {
  const report = { created: 0, unchanged: 0, conflicts: [] as string[] };
  const names = [...new Set(await from.client.hvals(from.keys.accessKeyIndex))].sort();
  for (const name of names) {
    const key = parseAccessKey(flatten(await from.client.hgetall(from.keys.accessKey(name))));
    if (key === undefined) continue;
    const present = parseAccessKey(flatten(await to.client.hgetall(to.keys.accessKey(name))));
    if (present !== undefined) {
      if (present.secretHash === key.secretHash) report.unchanged++;
      else report.conflicts.push(name);
      continue;
    }
    if (dryRun) {
      report.created++;
      continue;
    }
    const result = await create(to, key);
    if (result === 'created') report.created++;
    else report.conflicts.push(name);
  }
  return report;
}

function create(to: MigrationSide, key: StoredAccessKey): Promise<unknown> {
  return CREATE.run(
    to.client,
    [to.keys.accessKey(key.name), to.keys.accessKeyIndex],
    [key.secretHash, key.name, ...accessKeyFields(key)],
  );
}

/** String keys under `<state prefix><kind>` (subjects, webhook ids), copied unless present; TTLs kept. */
async function copyStrings(
  from: MigrationSide,
  to: MigrationSide,
  kind: string,
  withTtl: boolean,
  dryRun: boolean,
): Promise<{ copied: number; kept: number }> {
  const report = { copied: 0, kept: 0 };
  const head = `${from.keys.prefix}${kind}`;
  let cursor = '0';
  do {
    const [next, found] = await from.client.scan(cursor, 'MATCH', `${escapeGlob(head)}*`, 'COUNT', BATCH);
    cursor = next;
    for (const key of found) {
      const value = await from.client.get(key);
      if (value === null) continue;
      const target = `${to.keys.prefix}${kind}${key.slice(head.length)}`;
      const ttl = withTtl ? await from.client.pttl(key) : -1;
      if (withTtl && ttl === -2) continue;
      if (dryRun) {
        if ((await to.client.exists(target)) === 1) report.kept++;
        else report.copied++;
        continue;
      }
      const written =
        ttl > 0
          ? await to.client.set(target, value, 'PX', ttl, 'NX')
          : await to.client.set(target, value, 'NX');
      if (written === 'OK') report.copied++;
      else report.kept++;
    }
  } while (cursor !== '0');
  return report;
}

function escapeGlob(text: string): string {
  return text.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
}

/**
 * The source's stream (its shard 0: a single endpoint of earlier versions had one) and its dead letter,
 * moved to the target's shard 0 entry by entry (XADD there, then XDEL here), or counted as left. Stream
 * entries the consumer group already delivered (kept as the ledger, billing.ledger_retention_h) are
 * neither: they stay at the source and are not sent again.
 */
async function moveEvents(
  from: MigrationSide,
  to: MigrationSide,
  opts: { dryRun: boolean; includeEvents: boolean; group?: string },
): Promise<{ moved: number; left: number }> {
  let moved = 0;
  let left = 0;
  const target = to.keys.shards[0]!;
  for (const shard of from.keys.shards) {
    for (const [source, dest] of [
      [shard.stream, target.stream],
      [shard.deadLetter, target.deadLetter],
    ] as const) {
      const isStream = source === shard.stream && opts.group !== undefined;
      const length = isStream
        ? await streamBacklog(from.client, source, opts.group!)
        : await from.client.xlen(source);
      if (!opts.includeEvents || opts.dryRun) {
        if (opts.includeEvents) moved += length;
        else left += length;
        continue;
      }
      const toDeliver = isStream ? await toDeliverTest(from.client, source, opts.group!) : () => true;
      let start = '-';
      for (;;) {
        const entries = await from.client.xrange(source, start, '+', 'COUNT', BATCH);
        if (entries.length === 0) break;
        for (const [id, fields] of entries) {
          if (!toDeliver(id)) continue;
          await to.client.xadd(dest, '*', ...fields);
          await from.client.xdel(source, id);
          moved++;
        }
        start = `(${entries[entries.length - 1]![0]}`;
      }
    }
  }
  return { moved, left };
}
