// The hot-path read of the Redis store: one EVALSHA returns the key record, the subject state and the
// cached balance, and the view cache keeps the answer while none of the keys it read has changed.

import { setBounded } from '../common/bounded-map.ts';
import type { BalanceDecision, RequestView, RequestViewQuery, SubjectState } from '../common/store-types.ts';
import { parseAccessKey } from './redis-access-keys.ts';
import { defineScript, type KeyLayout, type Redis } from './redis-client.ts';
import { type ViewCache, viewCacheKey } from './view-cache.ts';

// KEYS: the access-key index (routing). ARGV: prefix, key hash ('' = no key lookup), subject type, subject id, read subject ('1'/'0'), currency.
// Returns {record (flat HGETALL) | false, subject json | false, balance json | false, balance PTTL,
// key name | false, subject type, subject id} (the last ones say which keys were read, for the view cache).
const VIEW_LUA = `
local p = ARGV[1]
local rec, name = false, false
local st, sid, wantSubject = ARGV[3], ARGV[4], ARGV[5] == '1'
if ARGV[2] ~= '' then
  name = redis.call('HGET', p .. 'access_key:index', ARGV[2])
  if name then
    local flat = redis.call('HGETALL', p .. 'access_key:' .. name)
    if #flat > 0 then
      rec = flat
      wantSubject = true
      for i = 1, #flat, 2 do
        if flat[i] == 'subject_type' then st = flat[i + 1] elseif flat[i] == 'subject_id' then sid = flat[i + 1] end
      end
    end
  end
end
local subject, balance, pttl = false, false, -2
if wantSubject then
  subject = redis.call('GET', p .. 'subject:' .. st .. ':' .. sid)
  if ARGV[6] ~= '' then
    local bk = p .. 'balance:' .. st .. ':' .. sid .. ':' .. ARGV[6]
    balance = redis.call('GET', bk)
    if balance then pttl = redis.call('PTTL', bk) end
  end
end
return {rec, subject, balance, pttl, name, st, sid}
`;

const VIEW = defineScript(VIEW_LUA);

export function parseJson<T>(text: unknown): T | null {
  if (typeof text !== 'string') return null;
  try {
    return JSON.parse(text) as T;
  } catch {
    return null;
  }
}

/** HGETALL answers an object in ioredis; the parser takes the flat form the Lua scripts return. */
export function flatten(value: unknown): string[] {
  if (Array.isArray(value)) return value.map(String);
  if (value === null || typeof value !== 'object') return [];
  const out: string[] = [];
  for (const [f, v] of Object.entries(value as Record<string, unknown>)) out.push(f, String(v));
  return out;
}

interface ReadView {
  readonly view: RequestView;
  /** The keys the answer depends on (the view cache drops it when one of them changes). */
  readonly deps: string[];
  /** Remaining TTL of the cached balance in Redis, ms (-1 none, -2 not read). */
  readonly balanceTtlMs: number;
}

async function readView(client: Redis, k: KeyLayout, query: RequestViewQuery): Promise<ReadView> {
  const subject = query.subject;
  const reply = (await VIEW.run(
    client,
    // Declared for routing only: in a cluster it sends the script to the node of the state slot, where
    // every key the script builds lives (KeyLayout's `{state}` tag).
    [k.accessKeyIndex],
    [
      k.prefix,
      query.keyHash ?? '',
      subject?.type ?? '',
      subject?.id ?? '',
      subject === undefined ? '0' : '1',
      query.currency ?? '',
    ],
  )) as [unknown, unknown, unknown, number, unknown, string, string];
  const key = query.keyHash === undefined ? undefined : (parseAccessKey(reply[0]) ?? null);
  const readSubject = subject !== undefined || (key !== undefined && key !== null);
  const deps: string[] = [];
  if (query.keyHash !== undefined) deps.push(k.accessKeyIndex);
  if (typeof reply[4] === 'string') deps.push(k.accessKey(reply[4]));
  if (readSubject) {
    deps.push(k.subject(reply[5], reply[6]));
    if (query.currency !== undefined) deps.push(k.balance(reply[5], reply[6], query.currency));
  }
  return {
    view: {
      ...(key === undefined ? {} : { key }),
      ...(readSubject ? { subject: parseJson<SubjectState>(reply[1]) } : {}),
      ...(readSubject && query.currency !== undefined
        ? { balance: parseJson<BalanceDecision>(reply[2]) }
        : {}),
    },
    deps,
    balanceTtlMs: Number(reply[3]),
  };
}

// The auth hook's queries (a key hash, and the gateway's currency) bring the same key-hash string each
// time, from the hasher's memo: their cache keys are remembered by it, so that a hit builds and hashes
// no new string.
const keyQueryKeys = new Map<string, Map<string, string>>();
const MAX_KEY_QUERIES = 10_000;

function cacheKeyOf(query: RequestViewQuery): string {
  const { keyHash, subject, currency } = query;
  if (keyHash === undefined || subject !== undefined)
    return viewCacheKey(keyHash, subject?.type, subject?.id, currency);
  let byHash = keyQueryKeys.get(currency ?? '');
  if (byHash === undefined) {
    byHash = new Map();
    setBounded(keyQueryKeys, currency ?? '', byHash, 16);
  }
  let key = byHash.get(keyHash);
  if (key === undefined) {
    key = viewCacheKey(keyHash, undefined, undefined, currency);
    setBounded(byHash, keyHash, key, MAX_KEY_QUERIES);
  }
  return key;
}

/** The view cache's answer, when it holds one: no round trip, nothing to wait for. */
export function cachedView(cache: ViewCache | undefined, query: RequestViewQuery): RequestView | undefined {
  if (cache === undefined || !cache.live) return undefined;
  return cache.get(cacheKeyOf(query));
}

/** StateStore.view: from the view cache when it holds the answer, else one EVALSHA (kept if it may be, shared by concurrent misses). */
export async function view(
  client: Redis,
  k: KeyLayout,
  cache: ViewCache | undefined,
  maxAgeMs: number,
  query: RequestViewQuery,
): Promise<RequestView> {
  if (cache === undefined || !cache.live) return (await readView(client, k, query)).view;
  const cacheKey = cacheKeyOf(query);
  const hit = cache.get(cacheKey);
  if (hit !== undefined) return hit;
  return cache.load(cacheKey, async () => {
    const read = await readView(client, k, query);
    const ttlMs = read.balanceTtlMs >= 0 ? Math.min(read.balanceTtlMs, maxAgeMs) : maxAgeMs;
    return { view: read.view, deps: read.deps, ttlMs };
  });
}
