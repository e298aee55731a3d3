// The Redis adapter of the store interface (common/store-types.ts): access keys, subject state, webhook ids and
// the balance cache, shared by every instance. Key layout: docs/operations.md "Keys in Redis", built by
// createKeyLayout. The hot-path read (`view`) is ONE EVALSHA: index hash -> name, the key record, the
// subject state and the cached balance, so a request costs one round trip however much it needs.
//
// Records: access keys are hashes (operators can read them with HGETALL); subject state and cached
// balances are JSON strings. Only the HMAC of a secret is ever written.

import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import type { StoreConfig } from '../common/config-types.ts';
import {
  type AccessKeyStore,
  type BalanceDecision,
  type RequestView,
  type RequestViewQuery,
  type StateStore,
  type StoredAccessKey,
  StoreUnavailableError,
  type SubjectState,
} from '../common/store-types.ts';
import {
  closeRedisClient,
  createKeyLayout,
  createRedisClient,
  isConnectionError,
  type KeyLayout,
  type Redis,
  waitReady,
} from './redis-client.ts';
import { invalidateLocally, openViewCache, type ViewCache, viewCacheKey } from './view-cache.ts';

/** A Lua script run by EVALSHA; loaded on first use and again after a server restart (NOSCRIPT). */
export interface LuaScript {
  run(client: Redis, keys: readonly string[], args: readonly (string | number)[]): Promise<unknown>;
}

export function defineScript(lua: string): LuaScript {
  const sha = createHash('sha1').update(lua).digest('hex');
  return {
    async run(client, keys, args) {
      try {
        return await client.evalsha(sha, keys.length, ...keys, ...args);
      } catch (err) {
        if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
        // EVAL runs it and caches it server-side: the next call is an EVALSHA hit again.
        return await client.eval(lua, keys.length, ...keys, ...args);
      }
    },
  };
}

// ARGV: prefix, key hash ('' = no key lookup), subject type, subject id, read subject ('1'/'0'), currency.
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

// KEYS: record, index. ARGV: secret hash, name, then field/value pairs of the record.
const CREATE_LUA = `
if redis.call('EXISTS', KEYS[1]) == 1 then return 'exists' end
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then return 'hash_taken' end
redis.call('HSET', KEYS[1], unpack(ARGV, 3))
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
return 'created'
`;

// KEYS: record. The index entry stays, so a revoked key is refused rather than looked up elsewhere.
const REVOKE_LUA = `
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
redis.call('HSET', KEYS[1], 'status', 'revoked')
redis.call('HINCRBY', KEYS[1], 'version', 1)
return redis.call('HGETALL', KEYS[1])
`;

// KEYS: record, index. ARGV: new hash, name, hash secret id ('' = unknown).
const ROTATE_LUA = `
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then return 'hash_taken' end
local old = redis.call('HGET', KEYS[1], 'secret_hash')
if old then redis.call('HDEL', KEYS[2], old) end
redis.call('HSET', KEYS[1], 'secret_hash', ARGV[1])
if ARGV[3] ~= '' then
  redis.call('HSET', KEYS[1], 'hash_secret_id', ARGV[3])
else
  redis.call('HDEL', KEYS[1], 'hash_secret_id')
end
redis.call('HINCRBY', KEYS[1], 'version', 1)
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
return redis.call('HGETALL', KEYS[1])
`;

// KEYS: index. ARGV: prefix, from hash, to hash, hash secret id. The record must still carry the hash
// it is indexed under, so a rotate or a move by another instance in between wins; a revoked key stays
// where it is. Returns {moved 0/1, record (flat HGETALL)} or false.
const REHASH_LUA = `
local idx, p, from, to = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
local name = redis.call('HGET', idx, from)
if name then
  local rk = p .. 'access_key:' .. name
  if redis.call('HGET', rk, 'secret_hash') ~= from then return false end
  if redis.call('HGET', rk, 'status') ~= 'active' then return {0, redis.call('HGETALL', rk)} end
  local owner = redis.call('HGET', idx, to)
  if owner and owner ~= name then return false end
  redis.call('HDEL', idx, from)
  redis.call('HSET', idx, to, name)
  redis.call('HSET', rk, 'secret_hash', to, 'hash_secret_id', ARGV[4])
  return {1, redis.call('HGETALL', rk)}
end
name = redis.call('HGET', idx, to)
if not name then return false end
local rk = p .. 'access_key:' .. name
if redis.call('HGET', rk, 'secret_hash') ~= to then return false end
return {0, redis.call('HGETALL', rk)}
`;

const NO_KEY: Promise<null> = Promise.resolve(null);

const VIEW = defineScript(VIEW_LUA);
const CREATE = defineScript(CREATE_LUA);
const REVOKE = defineScript(REVOKE_LUA);
const ROTATE = defineScript(ROTATE_LUA);
const REHASH = defineScript(REHASH_LUA);

/** The record fields as stored (docs/operations.md "Keys in Redis"). */
export function accessKeyFields(key: StoredAccessKey): string[] {
  const fields = [
    'name',
    key.name,
    'secret_hash',
    key.secretHash,
    'status',
    key.status,
    'subject_type',
    key.subjectType,
    'subject_id',
    key.subjectId,
    'created_at',
    String(key.createdAt),
    'expires_at',
    key.expiresAt === undefined ? '' : String(key.expiresAt),
    'version',
    String(key.version),
  ];
  if (key.hashSecretId !== undefined) fields.push('hash_secret_id', key.hashSecretId);
  return fields;
}

export function parseAccessKey(flat: unknown): StoredAccessKey | undefined {
  if (!Array.isArray(flat) || flat.length === 0) return undefined;
  const f = new Map<string, string>();
  for (let i = 0; i + 1 < flat.length; i += 2) f.set(String(flat[i]), String(flat[i + 1]));
  const name = f.get('name');
  const secretHash = f.get('secret_hash');
  if (name === undefined || secretHash === undefined) return undefined;
  const expires = f.get('expires_at');
  const hashSecretId = f.get('hash_secret_id');
  return {
    name,
    secretHash,
    status: f.get('status') === 'active' ? 'active' : 'revoked',
    subjectType: f.get('subject_type') ?? '',
    subjectId: f.get('subject_id') ?? name,
    createdAt: Number(f.get('created_at') ?? 0),
    expiresAt: expires === undefined || expires === '' ? undefined : Number(expires),
    version: Number(f.get('version') ?? 1),
    ...(hashSecretId === undefined || hashSecretId === '' ? {} : { hashSecretId }),
  };
}

function parseJson<T>(text: unknown): T | null {
  if (typeof text !== 'string') return null;
  try {
    return JSON.parse(text) as T;
  } catch {
    return null;
  }
}

export interface RedisStoreOptions {
  readonly logger?: Logger;
  /**
   * Currencies whose cached balances invalidateBalance clears (the interface names no currency). The
   * configured enforcement currency; currencies seen by putBalance are added.
   */
  readonly currencies?: readonly string[];
  /** How long open waits for the first connection (default 4 x operation_timeout_ms, at least 1 s). */
  readonly readyTimeoutMs?: number;
  readonly connectionName?: string;
  /**
   * Keep request views in process for up to this many ms, invalidated by Redis (store/view-cache.ts).
   * 0 or absent: every view reads Redis. Only processes that serve requests want it.
   */
  readonly viewCacheMs?: number;
}

export interface RedisStores {
  readonly state: StateStore;
  readonly accessKeys: AccessKeyStore;
  readonly client: Redis;
  readonly keys: KeyLayout;
  /** The in-process view cache, when viewCacheMs > 0. */
  readonly viewCache: ViewCache | undefined;
  /** Whether the first connection came up within readyTimeoutMs (it keeps trying either way). */
  readonly connected: boolean;
  close(): Promise<void>;
}

/** Runs one store operation; connection failures become StoreUnavailableError. */
async function guard<T>(operation: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (isConnectionError(err)) throw new StoreUnavailableError(operation, err);
    throw err;
  }
}

export async function openRedisStores(
  config: StoreConfig,
  opts: RedisStoreOptions = {},
): Promise<RedisStores> {
  const client = createRedisClient(config, {
    logger: opts.logger,
    connectionName: opts.connectionName ?? 'router-store',
  });
  const connected = await waitReady(
    client,
    opts.readyTimeoutMs ?? Math.max(1000, config.operationTimeoutMs * 4),
  );
  if (!connected) opts.logger?.warn('store not reachable at start; requests needing it fail until it is');
  const k = createKeyLayout(config);
  const currencies = new Set(opts.currencies ?? []);
  const maxAgeMs = opts.viewCacheMs ?? 0;
  const cache =
    maxAgeMs > 0
      ? openViewCache(config, {
          maxAgeMs,
          prefixes: [`${k.prefix}access_key:`, `${k.prefix}subject:`, `${k.prefix}balance:`],
          logger: opts.logger,
        })
      : undefined;
  /**
   * This process's own writes drop what they change at once (the invalidation message follows). Called
   * before a write (a read in flight is then not kept) and after it (drops what was read in between).
   */
  const wrote = (...keys: string[]): void => invalidateLocally(keys);
  async function close(): Promise<void> {
    await cache?.close();
    await closeRedisClient(client);
  }

  const state: StateStore = {
    kind: 'redis',
    view: (query) => guard('view', () => view(client, k, cache, maxAgeMs, query)),
    getSubject: (subject) =>
      guard('getSubject', async () => {
        const text = await client.get(k.subject(subject.type, subject.id));
        return parseJson<SubjectState>(text) ?? undefined;
      }),
    setSubject: (subject, s) =>
      guard('setSubject', async () => {
        const key = k.subject(subject.type, subject.id);
        wrote(key);
        await client.set(key, JSON.stringify(s));
        wrote(key);
      }),
    claimWebhook: (id, ttlMs) =>
      guard('claimWebhook', async () => {
        const ok = await client.set(k.webhook(id), String(Date.now()), 'PX', Math.max(1, ttlMs), 'NX');
        return ok === 'OK';
      }),
    releaseWebhook: (id) =>
      guard('releaseWebhook', async () => {
        await client.del(k.webhook(id));
      }),
    putBalance: (subject, decision, ttlMs) =>
      guard('putBalance', async () => {
        currencies.add(decision.currency);
        const key = k.balance(subject.type, subject.id, decision.currency);
        wrote(key);
        await client
          .multi()
          .set(key, JSON.stringify(decision), 'PX', Math.max(1, ttlMs))
          .del(k.balanceLock(subject.type, subject.id, decision.currency))
          .exec();
        wrote(key);
      }),
    invalidateBalance: (subject) =>
      guard('invalidateBalance', async () => {
        if (currencies.size === 0) return;
        const keys: string[] = [];
        for (const c of currencies) keys.push(k.balance(subject.type, subject.id, c));
        wrote(...keys);
        await client.del(...keys);
        wrote(...keys);
      }),
    tryRefreshLock: (subject, currency, ttlMs) =>
      guard('tryRefreshLock', async () => {
        const ok = await client.set(
          k.balanceLock(subject.type, subject.id, currency),
          '1',
          'PX',
          Math.max(1, ttlMs),
          'NX',
        );
        return ok === 'OK';
      }),
    rehashAccessKey: (fromHash, toHash, hashSecretId) => {
      // "Under neither hash" is kept like a view miss (until the index changes), so a wrong key, or a
      // keys-file key in redis_preferred mode, costs no round trip during a rotation window either.
      const missKey = `rehash\n${fromHash}\n${toHash}`;
      if (cache?.live && cache.get(missKey) !== undefined) return NO_KEY;
      return guard('rehashAccessKey', async () => {
        const since = cache?.epoch();
        const reply = await REHASH.run(
          client,
          [k.accessKeyIndex],
          [k.prefix, fromHash, toHash, hashSecretId],
        );
        const key = Array.isArray(reply) ? parseAccessKey(reply[1]) : undefined;
        if (key === undefined) {
          if (since !== undefined) cache?.put(missKey, since, { key: null }, [k.accessKeyIndex], maxAgeMs);
          return null;
        }
        const moved = (reply as unknown[])[0] === 1;
        // After the write only: a read that raced it is then not kept (view-cache.ts, epoch check).
        if (moved) wrote(k.accessKeyIndex, k.accessKey(key.name));
        return { key, moved };
      });
    },
    async health() {
      // A PING, not the client's status: right after the server dies the socket may not have
      // noticed yet, and /readyz must not report a store that cannot answer.
      const connected =
        client.status === 'ready' &&
        (await client.ping().then(
          () => true,
          () => false,
        ));
      if (cache === undefined) return { connected };
      return {
        connected,
        viewCache: { live: cache.live, entries: cache.size, invalidations: cache.invalidations },
      };
    },
    close,
  } satisfies StateStore;

  const accessKeys: AccessKeyStore = {
    create: (key) =>
      guard('createAccessKey', async () => {
        const result = await CREATE.run(
          client,
          [k.accessKey(key.name), k.accessKeyIndex],
          [key.secretHash, key.name, ...accessKeyFields(key)],
        );
        if (result === 'hash_taken') throw new Error(`another key already has this secret (${key.name})`);
        return result === 'exists' ? 'exists' : 'created';
      }),
    get: (name) =>
      guard('getAccessKey', async () =>
        parseAccessKey(await client.hgetall(k.accessKey(name)).then(flatten)),
      ),
    list: () =>
      guard('listAccessKeys', async () => {
        const names = [...new Set(await client.hvals(k.accessKeyIndex))].sort();
        if (names.length === 0) return [];
        const pipe = client.pipeline();
        for (const name of names) pipe.hgetall(k.accessKey(name));
        const replies = (await pipe.exec()) ?? [];
        const out: StoredAccessKey[] = [];
        for (const [err, value] of replies) {
          if (err) throw err;
          const key = parseAccessKey(flatten(value));
          if (key !== undefined) out.push(key);
        }
        return out;
      }),
    revoke: (name) =>
      guard('revokeAccessKey', async () => parseAccessKey(await REVOKE.run(client, [k.accessKey(name)], []))),
    rotate: (name, secretHash, hashSecretId) =>
      guard('rotateAccessKey', async () => {
        const result = await ROTATE.run(
          client,
          [k.accessKey(name), k.accessKeyIndex],
          [secretHash, name, hashSecretId ?? ''],
        );
        if (result === 'hash_taken') throw new Error(`another key already has this secret (${name})`);
        return parseAccessKey(result);
      }),
  } satisfies AccessKeyStore;

  return {
    state,
    accessKeys,
    client,
    keys: k,
    viewCache: cache,
    connected,
    close,
  };
}

/** HGETALL answers an object in ioredis; the parser takes the flat form the Lua scripts return. */
function flatten(value: unknown): string[] {
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
    [],
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

/** StateStore.view: from the view cache when it holds the answer, else one EVALSHA (kept if it may be). */
async function view(
  client: Redis,
  k: KeyLayout,
  cache: ViewCache | undefined,
  maxAgeMs: number,
  query: RequestViewQuery,
): Promise<RequestView> {
  if (cache === undefined || !cache.live) return (await readView(client, k, query)).view;
  const cacheKey = viewCacheKey(query.keyHash, query.subject?.type, query.subject?.id, query.currency);
  const hit = cache.get(cacheKey);
  if (hit !== undefined) return hit;
  const since = cache.epoch();
  const read = await readView(client, k, query);
  const ttl = read.balanceTtlMs >= 0 ? Math.min(read.balanceTtlMs, maxAgeMs) : maxAgeMs;
  cache.put(cacheKey, since, read.view, read.deps, ttl);
  return read.view;
}
