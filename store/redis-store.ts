// The Redis adapter of the store interface (common/store-types.ts): access keys, subject state, webhook ids and
// the balance cache, shared by every instance. Key layout: docs/operations.md "Keys in Redis", built by
// createKeyLayout. The hot-path read (`view`) is ONE EVALSHA: index hash -> name, the key record, the
// subject state and the cached balance, so a request costs one round trip however much it needs.
//
// Records: access keys are hashes (operators can read them with HGETALL); subject state and cached
// balances are JSON strings. Only the HMAC of a secret is ever written.

import type { Logger } from 'pino';
import type { StoreConfig } from '../common/config-types.ts';
import {
  RATE_LIMIT_FIELDS,
  type RateLimits,
  type SubjectLimitStore,
  type SubjectRef,
} from '../common/rate-limit-types.ts';
import {
  type AccessKeyChange,
  type AccessKeyStore,
  type StateStore,
  type StoredAccessKey,
  StoreUnavailableError,
  type SubjectState,
} from '../common/store-types.ts';
import {
  accessKeyFields,
  CREATE,
  encodeLimits,
  parseAccessKey,
  REHASH,
  REVOKE,
  ROTATE,
  UPDATE,
} from './redis-access-keys.ts';
import {
  closeRedisClient,
  connectRedis,
  isConnectionError,
  type KeyLayout,
  type Redis,
} from './redis-client.ts';
import { createRedisRateLimits } from './redis-rate-limits.ts';
import { createRedisResponses } from './redis-response-store.ts';
import { cachedView, flatten, parseJson, view } from './redis-view.ts';
import { invalidateLocally, openViewCache, type ViewCache } from './view-cache.ts';

const NO_KEY: Promise<null> = Promise.resolve(null);

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
  /**
   * Told of every failed store operation, once, by a bounded name (`view`, `rehashAccessKey`,
   * `rateLimits`, `responses`, `getSubject`, ...): the gateway counts them in router_store_errors_total.
   */
  readonly onStoreError?: (operation: string) => void;
}

export interface RedisStores {
  readonly state: StateStore;
  readonly accessKeys: AccessKeyStore;
  /** Subjects' own rate limits (router-admin subject set-limits); the limiter's script reads the same hash. */
  readonly subjectLimits: SubjectLimitStore;
  readonly client: Redis;
  readonly keys: KeyLayout;
  /** The in-process view cache, when viewCacheMs > 0. */
  readonly viewCache: ViewCache | undefined;
  /** Whether the first connection came up within readyTimeoutMs (it keeps trying either way). */
  readonly connected: boolean;
  close(): Promise<void>;
}

/** A subject's own limits: the hash `<key_prefix>{rl:<type>:<id>}:limits`, which the admission script reads. */
export function subjectLimitsKey(k: KeyLayout, subject: SubjectRef): string {
  return `${k.rateLimit(subject.type, subject.id)}:limits`;
}

/** A `:limits` hash as read: a field that is not a positive integer counts as unset. */
export function parseSubjectLimits(hash: Record<string, string>): RateLimits | undefined {
  const out: { -readonly [K in keyof RateLimits]: number } = {};
  for (const [field, wire] of Object.entries(RATE_LIMIT_FIELDS)) {
    const text = hash[wire];
    if (text === undefined || !/^[1-9][0-9]{0,15}$/.test(text)) continue;
    out[field as keyof RateLimits] = Number(text);
  }
  return Object.keys(out).length === 0 ? undefined : out;
}

/** AccessKeyChange as UPDATE's field/value pairs ('' deletes the field). */
function changeFields(change: AccessKeyChange): string[] {
  const fields: string[] = [];
  if (change.limits !== undefined)
    fields.push('limits', change.limits === null ? '' : encodeLimits(change.limits));
  if (change.models !== undefined)
    fields.push('models', change.models === null ? '' : JSON.stringify(change.models));
  return fields;
}

/** Runs one store operation: a failure is counted, and a connection failure becomes StoreUnavailableError. */
type Guard = <T>(operation: string, fn: () => Promise<T>) => Promise<T>;

/** The guard's mapping for a caller that batches its own calls (the rate limiter's lanes). */
type StoreFailure = (operation: string) => (err: unknown) => unknown;

/**
 * The guard and the failure mapping of one set of stores, telling `onStoreError` of every failed
 * operation once: an error several callers of one operation share (a view read shared by concurrent
 * misses, a rate-limit call batching several requests) or that passes through two guards counts once.
 */
function guards(onStoreError?: (operation: string) => void): { guard: Guard; storeFailure: StoreFailure } {
  // The operations each error was counted for (one error may end calls of several operations when a
  // connection drops).
  const counted = new WeakMap<object, Set<string>>();
  const count = (operation: string, err: unknown): void => {
    if (onStoreError === undefined) return;
    if (typeof err !== 'object' || err === null) {
      onStoreError(operation);
      return;
    }
    let ops = counted.get(err);
    if (ops === undefined) {
      ops = new Set();
      counted.set(err, ops);
    }
    if (ops.has(operation)) return;
    ops.add(operation);
    onStoreError(operation);
  };
  const failed = (operation: string, err: unknown): unknown => {
    count(operation, err);
    if (!isConnectionError(err)) return err;
    const mapped = new StoreUnavailableError(operation, err);
    counted.set(mapped, new Set([operation]));
    return mapped;
  };
  return {
    async guard(operation, fn) {
      try {
        return await fn();
      } catch (err) {
        throw failed(operation, err);
      }
    },
    storeFailure: (operation) => (err) => failed(operation, err),
  };
}

export async function openRedisStores(
  config: StoreConfig,
  opts: RedisStoreOptions = {},
): Promise<RedisStores> {
  const {
    client,
    keys: k,
    connected,
  } = await connectRedis(config, {
    logger: opts.logger,
    connectionName: opts.connectionName ?? 'router-store',
    ...(opts.readyTimeoutMs === undefined ? {} : { readyTimeoutMs: opts.readyTimeoutMs }),
  });
  if (!connected) opts.logger?.warn('store not reachable at start; requests needing it fail until it is');
  const { guard, storeFailure } = guards(opts.onStoreError);
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

  const subjectLimits = redisSubjectLimits(client, k, guard);

  const state: StateStore = {
    kind: 'redis',
    view: (query) => {
      // A hit, the common case with the cache on, skips the guard's and the read's async frames.
      const hit = cachedView(cache, query);
      if (hit !== undefined) return Promise.resolve(hit);
      return guard('view', () => view(client, k, cache, maxAgeMs, query));
    },
    peekView: (query) => cachedView(cache, query),
    subjectLimits,
    rateLimits: createRedisRateLimits(client, k, { failure: storeFailure('rateLimits') }),
    responses: createRedisResponses(client, k, { failure: storeFailure('responses') }),
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

  const accessKeys = redisAccessKeys(client, k, wrote, guard);

  return {
    state,
    accessKeys,
    subjectLimits,
    client,
    keys: k,
    viewCache: cache,
    connected,
    close,
  };
}

/** Subjects' own limits: replaced whole, so the admission script never sees half an update. */
function redisSubjectLimits(client: Redis, k: KeyLayout, guard: Guard): SubjectLimitStore {
  return {
    getSubjectLimits: (subject) =>
      guard('getSubjectLimits', async () =>
        parseSubjectLimits(await client.hgetall(subjectLimitsKey(k, subject))),
      ),
    setSubjectLimits: (subject, limits) =>
      guard('setSubjectLimits', async () => {
        const key = subjectLimitsKey(k, subject);
        const fields: string[] = [];
        for (const [field, wire] of Object.entries(RATE_LIMIT_FIELDS)) {
          const value = limits?.[field as keyof RateLimits];
          if (value !== undefined) fields.push(wire, String(value));
        }
        // Replaced whole, in one step: the admission script never sees half of an update.
        const tx = client.multi().del(key);
        if (fields.length > 0) tx.hset(key, ...fields);
        for (const [err] of (await tx.exec()) ?? []) if (err) throw err;
      }),
  };
}

/** Access-key records: each change in one script, dropped from this process's view cache around it. */
function redisAccessKeys(
  client: Redis,
  k: KeyLayout,
  wrote: (...keys: string[]) => void,
  guard: Guard,
): AccessKeyStore {
  return {
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
    update: (name, change) =>
      guard('updateAccessKey', async () => {
        const key = k.accessKey(name);
        wrote(key);
        const result = parseAccessKey(await UPDATE.run(client, [key], changeFields(change)));
        wrote(key);
        return result;
      }),
  };
}
