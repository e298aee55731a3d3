// A process-local copy of request views (hooks/builtin/request-view.ts) in Redis mode, kept exact by Redis
// itself: server-assisted client-side caching (CLIENT TRACKING, broadcast mode). A dedicated connection
// turns tracking on for the prefixes a view reads (access keys, subject state, cached balances), redirected
// to itself, and subscribes to `__redis__:invalidate`; from then on Redis pushes the name of every such
// key that anyone changes, expires or evicts, and the entries that read it are dropped. Without it every
// request paid an EVALSHA round trip for data that changes a few times a day (bench: about a third of
// Redis mode's cost).
//
// Why it stays correct (a key revoked on one instance is refused by all of them at once):
// - Redis queues the invalidation to this connection while it executes the write and sends it in the
//   same turn of its event loop as the writer's reply: every instance hears of a revoke or a block within
//   microseconds of the writer itself (not strictly before it: Redis may flush the writer's reply first).
// - A read that was in flight when an invalidation arrived is not kept (epoch check): its answer may
//   predate the write, and its own invalidation may already have passed.
// - The cache serves only while the tracking connection is up. Any disconnect clears it and bypasses it
//   until tracking is re-established on the new connection (invalidations sent in between are lost).
// - Entries live at most `maxAgeMs` (a bound if anything above fails silently), and a cached balance no
//   longer than its remaining TTL in Redis.
// - Writes made by this process drop the entries they touch in every cache of the process right away
//   (`invalidateLocally`), instead of waiting for their own invalidation to come back.
// Misses are cached too (an unknown key hash, no subject state), so the entry count is capped; the oldest
// entries go first.

import type { Cluster } from 'ioredis';
import type { Logger } from 'pino';
import type { StoreConfig } from '../common/config-types.ts';
import { errorText } from '../common/errors.ts';
import type { RequestView } from '../common/store-types.ts';
import { createNodeClient, createRedisClient, type Redis } from './redis-client.ts';

export interface ViewCacheOptions {
  /** Longest life of an entry, ms. */
  readonly maxAgeMs: number;
  /** Entry cap; the oldest entries are dropped beyond it. */
  readonly maxEntries?: number;
  /** Key prefixes to track (each key a view reads starts with one of them). */
  readonly prefixes: readonly string[];
  readonly logger?: Logger;
  readonly now?: () => number;
}

interface Entry {
  readonly view: RequestView;
  readonly deps: readonly string[];
  readonly expiresAt: number;
}

/** A store read for the cache: the view, the keys it read, and how long it may be kept (ms). */
export interface LoadedView {
  readonly view: RequestView;
  readonly deps: readonly string[];
  readonly ttlMs: number;
}

export interface ViewCache {
  /** Whether the cache serves (tracking is on). */
  readonly live: boolean;
  /** A fresh entry, or undefined. */
  get(cacheKey: string): RequestView | undefined;
  /** Taken before a store read; `put` keeps the answer only if no invalidation arrived since. */
  epoch(): number;
  put(cacheKey: string, since: number, view: RequestView, deps: readonly string[], ttlMs: number): void;
  /**
   * A miss: `read` from the store and `put` the answer. Misses of one key that come while its read is
   * on its way, with no invalidation since it began, share that read: when an entry of a busy key
   * expires, every request in flight misses at once.
   */
  load(cacheKey: string, read: () => Promise<LoadedView>): Promise<RequestView>;
  /** Drops the entries that read these keys (this process wrote them). */
  invalidate(keys: readonly string[]): void;
  /** Entry count (metrics, tests). */
  readonly size: number;
  /** Invalidation messages received from Redis since start (readiness, tests). */
  readonly invalidations: number;
  close(): Promise<void>;
}

export const INVALIDATE_CHANNEL = '__redis__:invalidate';

// Every open cache of this process: a write through one store (the balance check's) must drop the copies
// another store of the same process holds (the authenticator's) at once, not when Redis's message comes.
const openCaches = new Set<ViewCache>();

/** Drops the entries that read these keys in every view cache of this process. */
export function invalidateLocally(keys: readonly string[]): void {
  for (const cache of openCaches) cache.invalidate(keys);
}

export function viewCacheKey(keyHash?: string, type?: string, id?: string, currency?: string): string {
  return `${keyHash ?? ''}\n${type ?? ''}\n${id ?? ''}\n${currency ?? ''}`;
}

export function openViewCache(config: StoreConfig, opts: ViewCacheOptions): ViewCache {
  const now = opts.now ?? Date.now;
  const maxEntries = opts.maxEntries ?? 100_000;
  const entries = new Map<string, Entry>();
  const byKey = new Map<string, Set<string>>();
  const loading = new Map<string, { readonly since: number; readonly promise: Promise<RequestView> }>();
  let epoch = 0;
  let invalidations = 0;
  let live = false;
  let closed = false;

  function remove(cacheKey: string): void {
    const entry = entries.get(cacheKey);
    if (entry === undefined) return;
    entries.delete(cacheKey);
    for (const dep of entry.deps) {
      const set = byKey.get(dep);
      if (set === undefined) continue;
      set.delete(cacheKey);
      if (set.size === 0) byKey.delete(dep);
    }
  }

  function clear(): void {
    epoch++;
    entries.clear();
    byKey.clear();
  }

  function dropKey(key: string): void {
    const set = byKey.get(key);
    if (set === undefined) return;
    for (const cacheKey of [...set]) remove(cacheKey);
  }

  function stop(): void {
    live = false;
    clear();
  }

  function onInvalidate(channel: Buffer, message: Buffer[] | Buffer | null): void {
    if (String(channel) !== INVALIDATE_CHANNEL) return;
    epoch++;
    invalidations++;
    // null: the server flushed a database (FLUSHDB / FLUSHALL); everything goes.
    if (message === null) {
      clear();
      return;
    }
    for (const key of Array.isArray(message) ? message : [message]) dropKey(key.toString());
  }

  // One tracking connection per server: the endpoint, or every node of a cluster (the node that holds
  // the state slot now, and any that may take it over). The cache serves only while all of them track.
  const trackers = new Map<string, { sub: Redis; live: boolean }>();
  const allLive = () => trackers.size > 0 && [...trackers.values()].every((t) => t.live);

  function addTracker(id: string, sub: Redis): void {
    const t = { sub, live: false };
    trackers.set(id, t);
    sub.on('messageBuffer', onInvalidate);
    // Any break of a connection loses invalidations: stop serving until tracking is on again.
    sub.on('close', () => {
      t.live = false;
      stop();
    });
    sub.on('ready', () => {
      void track(t);
    });
  }

  async function track(t: { sub: Redis; live: boolean }): Promise<void> {
    const sub = t.sub;
    try {
      const id = await sub.client('ID');
      const args: (string | number)[] = ['TRACKING', 'ON', 'REDIRECT', String(id), 'BCAST'];
      for (const prefix of opts.prefixes) args.push('PREFIX', prefix);
      await sub.call('CLIENT', ...args);
      await sub.subscribe(INVALIDATE_CHANNEL);
      if (closed || sub.status !== 'ready') return;
      t.live = true;
      if (allLive() && !live) {
        clear();
        live = true;
      }
    } catch (err) {
      // Older servers (< 6) or an ACL without CLIENT: the cache stays off and every view reads Redis.
      opts.logger?.warn(
        { err: errorText(err) },
        'store client-side caching unavailable; reading every request view from the store',
      );
    }
  }

  let topology: Cluster | undefined;
  if (config.cluster) {
    topology = createRedisClient(config, { connectionName: 'router-store-topology' }) as unknown as Cluster;
    const follow = (node: Redis) => {
      const { host, port } = node.options;
      const id = `${host}:${port}`;
      if (closed || trackers.has(id)) return;
      // A node joined: until it tracks too, the cache does not serve.
      stop();
      addTracker(
        id,
        createNodeClient(config, host ?? '127.0.0.1', port ?? 6379, {
          logger: opts.logger,
          connectionName: 'router-store-tracking',
          subscriber: true,
        }),
      );
    };
    topology.on('+node', follow);
    topology.on('-node', (node: Redis) => {
      const id = `${node.options.host}:${node.options.port}`;
      const t = trackers.get(id);
      if (t === undefined) return;
      trackers.delete(id);
      t.sub.disconnect();
    });
    topology.on('error', () => {});
  } else {
    addTracker(
      'endpoint',
      createRedisClient(config, {
        logger: opts.logger,
        connectionName: 'router-store-tracking',
        subscriber: true,
      }),
    );
  }

  const cache: ViewCache = {
    get live() {
      return live;
    },
    get size() {
      return entries.size;
    },
    get invalidations() {
      return invalidations;
    },
    get(cacheKey) {
      if (!live) return undefined;
      const entry = entries.get(cacheKey);
      if (entry === undefined) return undefined;
      if (entry.expiresAt <= now()) {
        remove(cacheKey);
        return undefined;
      }
      return entry.view;
    },
    epoch: () => epoch,
    put(cacheKey, since, view, deps, ttlMs) {
      if (!live || since !== epoch || ttlMs <= 0) return;
      remove(cacheKey);
      // The rule of common/bounded-map.ts, by hand: the dropped entry's dependency index must go too.
      if (entries.size >= maxEntries) {
        const oldest = entries.keys().next();
        if (!oldest.done) remove(oldest.value);
      }
      entries.set(cacheKey, { view, deps, expiresAt: now() + Math.min(ttlMs, opts.maxAgeMs) });
      for (const dep of deps) {
        let set = byKey.get(dep);
        if (set === undefined) {
          set = new Set();
          byKey.set(dep, set);
        }
        set.add(cacheKey);
      }
    },
    load(cacheKey, read) {
      const since = epoch;
      const shared = loading.get(cacheKey);
      // A read begun before an invalidation may answer from before the write: it is not shared.
      if (shared !== undefined && shared.since === since) return shared.promise;
      const promise = read().then((loaded) => {
        cache.put(cacheKey, since, loaded.view, loaded.deps, loaded.ttlMs);
        return loaded.view;
      });
      const entry = { since, promise };
      loading.set(cacheKey, entry);
      const settle = () => {
        if (loading.get(cacheKey) === entry) loading.delete(cacheKey);
      };
      promise.then(settle, settle);
      return promise;
    },
    invalidate(keys) {
      epoch++;
      for (const key of keys) dropKey(key);
    },
    async close() {
      closed = true;
      openCaches.delete(cache);
      stop();
      topology?.disconnect();
      for (const t of trackers.values()) t.sub.disconnect();
    },
  };
  openCaches.add(cache);
  return cache;
}
