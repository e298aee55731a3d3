// The billing stream as the ledger of what was served (shared-store mode, docs/billing.md "The ledger"):
// with billing.ledger_retention_h the sidecar acknowledges a delivered entry without deleting it, so the
// stream holds both the entries still to deliver and, behind the group's position, the delivered ones.
// Two things follow, both here: how many entries are still to deliver (the stream's length no longer
// says), and trimming the delivered entries by age without ever dropping one still to deliver.

import { defineScript, type Redis } from './redis-client.ts';

/** The commands read here: a client of one endpoint or of a cluster. */
type StreamReader = Pick<Redis, 'xinfo' | 'xlen' | 'xrange'>;

/** Entries counted one by one when Redis cannot tell a group's lag (at most this many). */
const LAG_SCAN = 10_000;

function fieldsOf(flat: unknown): Map<string, unknown> {
  const out = new Map<string, unknown>();
  if (!Array.isArray(flat)) return out;
  for (let i = 0; i + 1 < flat.length; i += 2) out.set(String(flat[i]), flat[i + 1]);
  return out;
}

export interface GroupPosition {
  /** Entries up to this id were read by the group: each is acknowledged (delivered) or pending. */
  readonly lastDelivered: string;
  /** Entries after lastDelivered (undefined: Redis cannot tell, after a deletion beyond it). */
  readonly lag: number | undefined;
  /** Entries read by a consumer and not yet acknowledged. */
  readonly pending: number;
}

/** The group's position on the stream; undefined when the stream or the group does not exist. */
export async function groupPosition(
  client: Pick<Redis, 'xinfo'>,
  stream: string,
  group: string,
): Promise<GroupPosition | undefined> {
  let groups: unknown;
  try {
    groups = await client.xinfo('GROUPS', stream);
  } catch (err) {
    if (err instanceof Error && /no such key/i.test(err.message)) return undefined;
    throw err;
  }
  for (const flat of Array.isArray(groups) ? groups : []) {
    const f = fieldsOf(flat);
    if (f.get('name') !== group) continue;
    const lag = f.get('lag');
    return {
      lastDelivered: String(f.get('last-delivered-id') ?? '0-0'),
      lag: lag === null || lag === undefined ? undefined : Number(lag),
      pending: Number(f.get('pending') ?? 0),
    };
  }
  return undefined;
}

/**
 * Entries of the stream still to deliver: not yet read by the group plus read and not acknowledged. A
 * stream without the group (no sidecar ever read it) is all backlog. When Redis cannot tell the lag,
 * the entries after the group's position are counted (up to LAG_SCAN).
 */
export async function streamBacklog(client: StreamReader, stream: string, group: string): Promise<number> {
  const at = await groupPosition(client, stream, group);
  if (at === undefined) return client.xlen(stream);
  if (at.lag !== undefined) return at.lag + at.pending;
  const after = await client.xrange(stream, `(${at.lastDelivered}`, '+', 'COUNT', LAG_SCAN);
  return after.length + at.pending;
}

/** a > b for stream ids (`<ms>-<seq>`). */
function idAfter(a: string, b: string): boolean {
  const [am = 0, as = 0] = a.split('-').map(Number);
  const [bm = 0, bs = 0] = b.split('-').map(Number);
  return am !== bm ? am > bm : as > bs;
}

/**
 * Whether an entry of the stream is still to deliver, as the group stands now: not yet read by it, or
 * read and not acknowledged. Without the group every entry is.
 */
export async function toDeliverTest(
  client: Pick<Redis, 'xinfo' | 'xpending'>,
  stream: string,
  group: string,
): Promise<(id: string) => boolean> {
  const at = await groupPosition(client, stream, group);
  if (at === undefined) return () => true;
  const held = new Set<string>();
  if (at.pending > 0) {
    const pel = (await client.xpending(stream, group, '-', '+', at.pending)) as [string, ...unknown[]][];
    for (const [id] of pel) held.add(id);
  }
  return (id) => idAfter(id, at.lastDelivered) || held.has(id);
}

// Trims delivered entries older than a cutoff, never one still to deliver: the cutoff is lowered to the
// oldest pending entry and to the first entry after the group's position. KEYS: stream. ARGV: group,
// cutoff id. Returns the entries removed (0 without the group: nothing was delivered).
const TRIM = defineScript(`
local function older(a, b)
  local am, as = string.match(a, '^(%d+)-(%d+)$')
  local bm, bs = string.match(b, '^(%d+)-(%d+)$')
  am, as, bm, bs = tonumber(am), tonumber(as), tonumber(bm), tonumber(bs)
  if am ~= bm then return am < bm end
  return as < bs
end
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local last = nil
for _, g in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
  local name, id = nil, nil
  for i = 1, #g, 2 do
    if g[i] == 'name' then name = g[i + 1] elseif g[i] == 'last-delivered-id' then id = g[i + 1] end
  end
  if name == ARGV[1] then last = id end
end
if last == nil then return 0 end
local min = ARGV[2]
local p = redis.call('XPENDING', KEYS[1], ARGV[1])
if p[2] and older(p[2], min) then min = p[2] end
local after = redis.call('XRANGE', KEYS[1], '(' .. last, '+', 'COUNT', 1)
if #after > 0 and older(after[1][1], min) then min = after[1][1] end
return redis.call('XTRIM', KEYS[1], 'MINID', min)
`);

/**
 * Removes delivered entries added before `cutoffMs`, never an entry still to deliver (nor any after it).
 * Returns how many it removed. Exact trimming: it runs once a minute, and its cost is the entries removed.
 */
export async function trimDelivered(
  client: Redis,
  stream: string,
  group: string,
  cutoffMs: number,
): Promise<number> {
  return Number(await TRIM.run(client, [stream], [group, `${Math.max(0, Math.floor(cutoffMs))}-0`]));
}
