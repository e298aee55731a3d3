// Where `router-admin dead-letter` finds dead letters: the `<stream>:dead-letter` stream in shared-store
// mode, `<outbox_dir>/dead-letter.jsonl` in file mode. Replay is exactly once in both:
// - store: one Lua script moves each entry (XADD to the billing stream, XDEL from the dead letter)
//   atomically, so a second or concurrent replay finds it gone;
// - file: the record is marked for replay by the holder of the outbox's reader.lock (the running
//   sidecar over its loopback listener, else this command while holding the lock itself), and the
//   sidecar delivers it, then removes it (sidecar/dead-letter-file.ts).

import { request } from 'undici';
import { READER_LOCK } from '../../../billing/outbox/layout.ts';
import { acquirePidLock, OutboxLockedError } from '../../../billing/outbox/lock.ts';
import { outboxDirs, slotDeadLetterId, slotOfDeadLetterId } from '../../../billing/outbox/slots.ts';
import type { RouterConfig } from '../../../common/config-types.ts';
import { errorText } from '../../../common/errors.ts';
import { EXIT } from '../../../common/exit-codes.ts';
import { loopbackUrl } from '../../../common/internal-notify.ts';
import {
  DeadLetterFile,
  type DeadLetterRecord,
  deadLetterId,
  type ReplayReport,
  readDeadLetters,
} from '../../../sidecar/dead-letter-file.ts';
import { REPLAY_PATH } from '../../../sidecar/dead-letter-route.ts';
import { closeRedisClient, defineScript, redactAddr } from '../../../store/redis-client.ts';
import { AdminError } from '../../admin-error.ts';
import { configuredStoreSide, connectStore } from '../../store-connect.ts';

export interface DeadLetterEntry {
  readonly id: string;
  readonly requestId: string;
  readonly subject: string;
  readonly attempts: number;
  readonly errorCode: string;
  readonly deadLetteredAt: string;
  /** File mode: `queued` once marked for replay and until the sidecar delivers it. */
  readonly state: 'dead' | 'queued';
  /** The whole record: the stream entry's fields (payload parsed) or the file's JSON record. */
  readonly record: Record<string, unknown>;
}

export interface ReplayResult {
  readonly id: string;
  readonly outcome: 'queued' | 'already_queued' | 'not_found';
  readonly requestId?: string;
  /** Store mode: the entry id on the billing stream. */
  readonly newId?: string;
}

export interface DeadLetterBackend {
  readonly where: string;
  /** What happens to queued events next, for the replay message. */
  readonly pickup: string;
  list(): Promise<DeadLetterEntry[]>;
  /** `ids` undefined: every dead letter. */
  replay(ids: readonly string[] | undefined, dryRun: boolean): Promise<ReplayResult[]>;
  close(): Promise<void>;
}

export interface BackendOptions {
  /** File mode: the running sidecar's address (default from billing.listen). */
  readonly sidecarUrl?: string;
}

export function openDeadLetterBackend(
  config: RouterConfig,
  opts: BackendOptions = {},
): Promise<DeadLetterBackend> {
  return config.store.enabled ? openStoreBackend(config) : Promise.resolve(openFileBackend(config, opts));
}

function eventFields(event: unknown): { requestId: string; subject: string } {
  const e = event as { external_event_id?: unknown; subject_type?: unknown; subject_id?: unknown } | null;
  return {
    requestId: typeof e?.external_event_id === 'string' ? e.external_event_id : '-',
    subject:
      typeof e?.subject_type === 'string' && typeof e?.subject_id === 'string'
        ? `${e.subject_type}:${e.subject_id}`
        : '-',
  };
}

// KEYS: dead letter, billing stream. ARGV: dry run ('1'/'0'), ids. Per id: the new stream id, 'dry', or
// '' when the entry is not (or no longer) in the dead letter.
const REPLAY = defineScript(`
local out = {}
for i = 2, #ARGV do
  local e = redis.call('XRANGE', KEYS[1], ARGV[i], ARGV[i])
  local payload = nil
  if #e > 0 then
    local f = e[1][2]
    for j = 1, #f, 2 do if f[j] == 'payload' then payload = f[j + 1] end end
  end
  if payload == nil then
    out[#out + 1] = ''
  elseif ARGV[1] == '1' then
    out[#out + 1] = 'dry'
  else
    out[#out + 1] = redis.call('XADD', KEYS[2], '*', 'payload', payload)
    redis.call('XDEL', KEYS[1], ARGV[i])
  end
end
return out
`);

const BATCH = 100;

async function openStoreBackend(config: RouterConfig): Promise<DeadLetterBackend> {
  const store = config.store;
  const where = `store ${redactAddr(store.addr, store)} (the dead letters of ${store.billingStreamShards} billing stream shard${store.billingStreamShards === 1 ? '' : 's'})`;
  const readyTimeoutMs = Math.max(2000, store.operationTimeoutMs * 4);
  const { client, keys } = await connectStore(store, configuredStoreSide(store, where), {
    connectionName: 'router-admin',
    readyTimeoutMs,
  });

  function toStoreEntry([id, flat]: [string, string[]]): DeadLetterEntry {
    const fields: Record<string, unknown> = {};
    for (let i = 0; i + 1 < flat.length; i += 2) fields[flat[i]!] = flat[i + 1];
    let event: unknown = fields.payload;
    try {
      event = JSON.parse(String(fields.payload));
    } catch {
      // kept as text: an entry that was never a usage event (invalid_payload)
    }
    return {
      id,
      ...eventFields(event),
      attempts: Number(fields.attempts ?? 0),
      errorCode: String(fields.error_code ?? '-'),
      deadLetteredAt: String(fields.dead_lettered_at ?? '-'),
      state: 'dead',
      record: { ...fields, payload: event },
    };
  }

  // Entry ids are per stream: those of shard k > 0 carry the shard (`<k>/<id>`), as outbox slots do.
  const qualify = (shard: number, id: string) => (shard === 0 ? id : `${shard}/${id}`);
  const unqualify = (id: string): { shard: number; id: string } | undefined => {
    const m = /^(?:([1-9][0-9]*)\/)?(\d+-\d+)$/.exec(id);
    if (m === null) return undefined;
    const shard = m[1] === undefined ? 0 : Number(m[1]);
    return shard < keys.shards.length ? { shard, id: m[2]! } : undefined;
  };

  async function list(): Promise<DeadLetterEntry[]> {
    const perShard = await Promise.all(
      keys.shards.map(async (shard, k) =>
        (await client.xrange(shard.deadLetter, '-', '+')).map((e) => {
          const entry = toStoreEntry(e);
          return { ...entry, id: qualify(k, entry.id) };
        }),
      ),
    );
    return perShard.flat();
  }

  /** The entries of these ids that are in the dead letter now (for their request ids). */
  async function entries(ids: readonly string[]): Promise<Map<string, DeadLetterEntry>> {
    const out = new Map<string, DeadLetterEntry>();
    await Promise.all(
      ids.map(async (id) => {
        const where = unqualify(id);
        if (where === undefined) return;
        const found = (await client.xrange(keys.shards[where.shard]!.deadLetter, where.id, where.id))[0];
        if (found !== undefined) out.set(id, { ...toStoreEntry(found), id });
      }),
    );
    return out;
  }

  async function replay(ids: readonly string[] | undefined, dryRun: boolean): Promise<ReplayResult[]> {
    const known = ids === undefined ? new Map((await list()).map((e) => [e.id, e])) : undefined;
    const wanted = [...new Set(ids ?? known?.keys() ?? [])];
    const valid = wanted.filter((id) => unqualify(id) !== undefined);
    const found = known ?? (await entries(valid));
    const moved = new Map<string, string>();
    // Back onto the stream of the same shard (one script per shard: its two keys share a slot).
    for (let k = 0; k < keys.shards.length; k++) {
      const mine = valid.filter((id) => unqualify(id)?.shard === k);
      for (let i = 0; i < mine.length; i += BATCH) {
        const batch = mine.slice(i, i + BATCH);
        const reply = (await REPLAY.run(
          client,
          [keys.shards[k]!.deadLetter, keys.shards[k]!.stream],
          [dryRun ? '1' : '0', ...batch.map((id) => unqualify(id)!.id)],
        )) as string[] | null;
        batch.forEach((id, j) => {
          moved.set(id, reply?.[j] ?? '');
        });
      }
    }
    return wanted.map((id): ReplayResult => {
      const r = moved.get(id) ?? '';
      if (r === '') return { id, outcome: 'not_found' };
      const requestId = found.get(id)?.requestId;
      return {
        id,
        outcome: 'queued',
        ...(requestId === undefined ? {} : { requestId }),
        ...(r === 'dry' ? {} : { newId: r }),
      };
    });
  }

  return {
    where,
    pickup: 'any sidecar of the consumer group delivers them',
    list,
    replay,
    close: () => closeRedisClient(client),
  };
}

function toEntry(r: DeadLetterRecord): DeadLetterEntry {
  return {
    id: deadLetterId(r),
    ...eventFields(r.event),
    attempts: r.attempts,
    errorCode: r.last_error?.code ?? '-',
    deadLetteredAt: r.dead_lettered_at,
    state: r.replay === undefined ? 'dead' : 'queued',
    record: r as unknown as Record<string, unknown>,
  };
}

function fromReport(report: ReplayReport): ReplayResult[] {
  return report.results.map((r) => ({
    id: r.id,
    outcome: r.outcome,
    ...(r.request_id === undefined ? {} : { requestId: r.request_id }),
  }));
}

function openFileBackend(config: RouterConfig, opts: BackendOptions): DeadLetterBackend {
  const dir = config.billing.outboxDir;
  const sidecarUrl = opts.sidecarUrl ?? loopbackUrl(config.billing.listen.host, config.billing.listen.port);
  let pickup = 'the running sidecar delivers them';

  /**
   * The directory's records and every slot's (other gateways of the host write slots). The sidecar is
   * not running: each slot's reader lock is taken while its file is marked.
   */
  async function replayOffline(ids: readonly string[] | undefined, dryRun: boolean): Promise<ReplayResult[]> {
    const wanted = new Map<string, string[] | undefined>();
    for (const slotDir of await outboxDirs(dir)) wanted.set(slotDir, ids === undefined ? undefined : []);
    for (const id of ids ?? []) {
      const at = slotOfDeadLetterId(dir, id);
      wanted.get(at.dir)?.push(at.id);
    }
    const found = new Map<string, ReplayResult>();
    const all: ReplayResult[] = [];
    for (const [slotDir, local] of wanted) {
      if (local !== undefined && local.length === 0) continue;
      const slotLock =
        slotDir === dir
          ? undefined
          : await acquirePidLock(slotDir, READER_LOCK, 'router-admin', { waitMs: 0 });
      try {
        for (const r of fromReport(await new DeadLetterFile(slotDir).markForReplay(local, dryRun))) {
          const qualified = { ...r, id: slotDeadLetterId(dir, slotDir, r.id) };
          found.set(qualified.id, qualified);
          all.push(qualified);
        }
      } finally {
        await slotLock?.release();
      }
    }
    return ids === undefined ? all : ids.map((id) => found.get(id) ?? { id, outcome: 'not_found' });
  }

  async function replay(ids: readonly string[] | undefined, dryRun: boolean): Promise<ReplayResult[]> {
    let lock: Awaited<ReturnType<typeof acquirePidLock>> | undefined;
    try {
      lock = await acquirePidLock(dir, READER_LOCK, 'router-admin dead-letter replay', { waitMs: 0 });
    } catch (err) {
      if (!(err instanceof OutboxLockedError)) throw err;
    }
    if (lock !== undefined) {
      // No sidecar runs: mark the records here; the next sidecar delivers them when it starts.
      pickup = 'router-billing delivers them when it starts (none is running now)';
      try {
        return await replayOffline(ids, dryRun);
      } finally {
        await lock.release();
      }
    }
    let status: number;
    let text: string;
    try {
      const res = await request(`${sidecarUrl}${REPLAY_PATH}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ ...(ids === undefined ? {} : { ids }), dry_run: dryRun }),
        headersTimeout: 10_000,
        bodyTimeout: 10_000,
      });
      status = res.statusCode;
      text = await res.body.text();
    } catch (err) {
      throw new AdminError(
        `a sidecar holds the outbox ${dir} but does not answer at ${sidecarUrl} ` +
          `(${errorText(err)}); pass --sidecar-url`,
        EXIT.unavailable,
      );
    }
    if (status !== 200)
      throw new AdminError(`the sidecar refused the replay (${status}): ${text}`, EXIT.failed);
    return fromReport(JSON.parse(text) as ReplayReport);
  }

  return {
    where: `dead letter ${dir}/dead-letter.jsonl`,
    get pickup() {
      return pickup;
    },
    list: async () => {
      const entries: DeadLetterEntry[] = [];
      for (const slotDir of await outboxDirs(dir)) {
        for (const r of await readDeadLetters(slotDir)) {
          const entry = toEntry(r);
          entries.push({ ...entry, id: slotDeadLetterId(dir, slotDir, entry.id) });
        }
      }
      return entries;
    },
    replay,
    close: async () => {},
  };
}
