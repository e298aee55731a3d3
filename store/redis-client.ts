// The Redis connection of shared-store mode, built from the `store` block (docs/configuration.md): one endpoint,
// redis:// or rediss:// (TLS, optionally with a private CA and a client certificate), optional ACL user
// and password, `operation_timeout_ms` on every command and reconnection with capped, jittered backoff.
// Every key the adapters touch goes through `createKeyLayout`, so `key_prefix` is applied in exactly one
// place (docs/operations.md "Keys in Redis").
//
// Commands fail fast while the connection is down (no offline queue, no resend after reconnect): the hot
// path must answer 503 within the operation timeout instead of queueing behind an outage, and a write
// that was reported as failed must not be replayed later behind the caller's back.

import { createHash } from 'node:crypto';
import { isIP } from 'node:net';
import { hostname } from 'node:os';
import type { ConnectionOptions } from 'node:tls';
import { Cluster, Command, Redis, type RedisOptions, ReplyError } from 'ioredis';
import type { Logger } from 'pino';
import { backoffDelay } from '../common/backoff.ts';
import type { StoreConfig } from '../common/config-types.ts';
import { errorText } from '../common/errors.ts';
import { malformedUserinfo, parseStoreUrl, storeUrlCredentials } from '../config/store-url.ts';

export type { Redis } from 'ioredis';

export interface RedisClientOptions {
  /** Overrides operation_timeout_ms (the stream consumer's blocking reads need more). */
  readonly commandTimeoutMs?: number;
  /** Shown by CLIENT LIST. */
  readonly connectionName?: string;
  readonly logger?: Logger;
  /**
   * A connection that will SUBSCRIBE: no auto-pipelining, and no automatic re-subscription after a
   * reconnect (its owner re-establishes what it needs, in order, on each 'ready').
   */
  readonly subscriber?: boolean;
  /**
   * Write each command at once instead of auto-pipelining (which defers the write to the next check
   * phase): for a connection whose owner batches by itself and needs the write done when it returns.
   */
  readonly writeAtOnce?: boolean;
  /**
   * No timer per command (commandTimeout): the owner bounds its commands itself. ioredis sets and
   * clears a timer for each command, a large share of what a command costs on a connection that sends
   * one per event-loop turn; the billing queue keeps one timer for all it has in flight instead.
   */
  readonly ownTimeouts?: boolean;
}

/** Reconnect delay: exponential from 50 ms, capped at 2 s, with up to 25% jitter so instances spread. */
export function reconnectDelay(times: number, random: () => number = Math.random): number {
  return Math.round(backoffDelay(times, 50, 2000) * (0.75 + random() * 0.25));
}

/**
 * ioredis options for the store block; the address URL supplies host, port, db and credentials. With
 * sentinels, the sentinels name the primary (and a new one after a failover) and the URL's host is unused.
 */
export function redisOptions(config: StoreConfig, opts: RedisClientOptions = {}): RedisOptions {
  const url = storeUrl(config.addr === '' ? 'redis://localhost' : config.addr);
  const tls = url.protocol === 'rediss:' || config.tls;
  const db = url.pathname.length > 1 ? Number(url.pathname.slice(1)) : 0;
  const fromUrl = storeUrlCredentials(url, config);
  const malformed = fromUrl.malformed[0];
  if (malformed !== undefined) throw new Error(malformedUserinfo(malformed));
  const username = config.username ?? fromUrl.username;
  const password = config.password ?? fromUrl.password;
  return {
    host: url.hostname.replace(/^\[|\]$/g, ''),
    port: url.port === '' ? 6379 : Number(url.port),
    db: Number.isInteger(db) ? db : 0,
    ...(username === undefined || username === '' ? {} : { username }),
    ...(password === undefined || password === '' ? {} : { password }),
    ...(tls ? { tls: tlsOptions(config, url.hostname) } : {}),
    ...(opts.ownTimeouts ? {} : { commandTimeout: opts.commandTimeoutMs ?? config.operationTimeoutMs }),
    connectTimeout: Math.max(1000, config.operationTimeoutMs * 4),
    retryStrategy: (times: number) => reconnectDelay(times),
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    // A primary demoted by a failover answers READONLY: reconnect, which finds the new primary (through
    // the sentinels, or the endpoint's DNS on managed services). The failed command is not resent.
    reconnectOnError: (err: Error) => err.message.startsWith('READONLY'),
    autoResendUnfulfilledCommands: false,
    // Commands issued in the same tick (concurrent requests' lookups and XADDs) go out in one write.
    enableAutoPipelining: true,
    // The store holds shared state only; RESP2-shaped replies keep the parsing below simple.
    protocol: 2,
    ...(opts.connectionName === undefined ? {} : { connectionName: opts.connectionName }),
    ...(opts.subscriber ? { enableAutoPipelining: false, autoResubscribe: false } : {}),
    ...(opts.writeAtOnce ? { enableAutoPipelining: false } : {}),
    ...(config.sentinels.length === 0 ? {} : sentinelOptions(config, tls)),
  };
}

/** One address of store.addr; the configuration checks report what this refuses. */
function storeUrl(text: string): URL {
  const url = parseStoreUrl(text);
  if (url === undefined) throw new Error('store.addr is not a valid URL');
  return url;
}

/**
 * TLS options of every connection to a Redis node: the trusted CA and the client certificate of the
 * store block (contents read by the loader). Cluster nodes take them from the cluster's redisOptions,
 * a primary found by the sentinels with enableTLSForSentinelMode.
 */
function tlsOptions(config: StoreConfig, host: string): ConnectionOptions {
  return {
    // SNI names a host, never an IP address (Node warns about one: DEP0123).
    ...(isIP(host.replace(/^\[|\]$/g, '')) === 0 ? { servername: host } : {}),
    ...(config.tlsCa === undefined ? {} : { ca: config.tlsCa }),
    ...(config.tlsCert === undefined || config.tlsKey === undefined
      ? {}
      : { cert: config.tlsCert, key: config.tlsKey }),
  };
}

function sentinelOptions(config: StoreConfig, tls: boolean): RedisOptions {
  return {
    sentinels: config.sentinels.map(({ host, port }) => ({ host, port })),
    name: config.sentinelName,
    ...(config.sentinelPassword === undefined ? {} : { sentinelPassword: config.sentinelPassword }),
    ...(tls ? { enableTLSForSentinelMode: true } : {}),
    // Learns of a failover from the sentinels' +switch-master at once, not at the next failed command.
    failoverDetector: true,
    sentinelRetryStrategy: (times: number) => reconnectDelay(times),
  };
}

/**
 * A client that reconnects forever. Connection errors are logged once per outage (ioredis emits one per
 * attempt), never with the password. Wait for `waitReady` before relying on it: commands fail while down.
 */
export function createRedisClient(config: StoreConfig, opts: RedisClientOptions = {}): Redis {
  const client = config.cluster ? createClusterClient(config, opts) : new Redis(redisOptions(config, opts));
  const log = opts.logger;
  let down = false;
  client.on('error', (err: Error) => {
    if (down) return;
    down = true;
    log?.warn(
      { err: errorText(err), addr: redactAddr(config.addr, config) },
      'store connection failed; reconnecting',
    );
  });
  client.on('ready', () => {
    if (down) log?.info({ addr: redactAddr(config.addr, config) }, 'store connection restored');
    down = false;
  });
  return client;
}

/** The seed nodes of `addr` (comma-separated URLs) as host and port. */
export function clusterSeeds(addr: string): { host: string; port: number }[] {
  return addr
    .split(',')
    .map((a) => a.trim())
    .filter((a) => a !== '')
    .map((a) => {
      const url = storeUrl(a);
      return { host: url.hostname.replace(/^\[|\]$/g, ''), port: url.port === '' ? 6379 : Number(url.port) };
    });
}

/**
 * An ioredis Cluster client with the same per-node options as a single endpoint (credentials and TLS of
 * the first seed URL). It answers the commands the adapters use with the same shapes; every command or
 * script of theirs touches keys of one hash slot (KeyLayout), which is all a cluster client can route.
 */
function createClusterClient(config: StoreConfig, opts: RedisClientOptions): Redis {
  const first = config.addr.split(',')[0]?.trim() ?? '';
  const {
    host: _h,
    port: _p,
    db: _db,
    retryStrategy: _r,
    enableOfflineQueue: _o,
    ...perNode
  } = redisOptions({ ...config, addr: first, sentinels: [] }, opts);
  const cluster = new Cluster(clusterSeeds(config.addr), {
    redisOptions: perNode,
    enableOfflineQueue: false,
    clusterRetryStrategy: (times: number) => reconnectDelay(times),
    enableAutoPipelining: perNode.enableAutoPipelining,
    // Reads go to primaries: a replica may not have the latest key revocation yet.
    scaleReads: 'master',
    slotsRefreshTimeout: Math.max(1000, config.operationTimeoutMs * 2),
  });
  // Same command surface; the adapters never use what differs (db selection, MONITOR, SUBSCRIBE).
  return cluster as unknown as Redis;
}

/** A plain client of one node of a cluster, with the credentials and TLS of the first seed URL. */
export function createNodeClient(
  config: StoreConfig,
  host: string,
  port: number,
  opts: RedisClientOptions = {},
): Redis {
  const first = new URL(config.addr.split(',')[0]?.trim() ?? 'redis://localhost');
  first.hostname = host.includes(':') ? `[${host}]` : host;
  first.port = String(port);
  return createRedisClient({ ...config, cluster: false, sentinels: [], addr: first.toString() }, opts);
}

/** Whether a client made by createRedisClient talks to a cluster. */
export function isClusterClient(client: Redis): boolean {
  return (client as unknown) instanceof Cluster;
}

/** Resolves true once the client is ready, false after `timeoutMs` (the client keeps trying). */
export function waitReady(client: Redis, timeoutMs: number): Promise<boolean> {
  if (client.status === 'ready') return Promise.resolve(true);
  return new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => finish(false), timeoutMs);
    function finish(ok: boolean): void {
      clearTimeout(timer);
      client.off('ready', onReady);
      client.off('end', onEnd);
      resolve(ok);
    }
    function onReady(): void {
      finish(true);
    }
    function onEnd(): void {
      finish(false);
    }
    client.on('ready', onReady);
    client.on('end', onEnd);
  });
}

/**
 * A client, its key layout, and whether it became ready within `readyTimeoutMs` (by default four
 * operation timeouts, at least 1 s). Not ready is not fatal: the client keeps reconnecting.
 */
export async function connectRedis(
  config: StoreConfig,
  opts: RedisClientOptions & { readyTimeoutMs?: number } = {},
): Promise<{ client: Redis; keys: KeyLayout; connected: boolean }> {
  const client = createRedisClient(config, opts);
  const connected = await waitReady(
    client,
    opts.readyTimeoutMs ?? Math.max(1000, config.operationTimeoutMs * 4),
  );
  return { client, keys: createKeyLayout(config), connected };
}

/** How long a close waits for the server to answer QUIT before it drops the connection. */
export const QUIT_TIMEOUT_MS = 1000;

/**
 * Close without waiting for a dead server: a connection that is not up (the server is gone, the client
 * reconnects) is dropped at once; otherwise QUIT is sent and waited for at most `quitTimeoutMs`
 * (QUIT_TIMEOUT_MS by default, whatever the client's command timeout: a server that stopped answering
 * without closing its socket never answers it), then the connection is dropped either way.
 */
export async function closeRedisClient(client: Redis, quitTimeoutMs = QUIT_TIMEOUT_MS): Promise<void> {
  if (client.status === 'end') return;
  if (client.status !== 'ready') {
    client.disconnect();
    return;
  }
  try {
    await withTimeout(client.quit(), quitTimeoutMs);
  } catch {
    // disconnect() below
  }
  // After QUIT: with sentinels, ioredis's failover detector keeps its own connections to them open
  // until disconnect() (an idle socket that would keep the process alive).
  client.disconnect();
}

/** The promise, or a rejection once `ms` have passed without it settling. */
export function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('Command timed out')), ms);
  });
  return Promise.race([promise, expired]).finally(() => clearTimeout(timer));
}

/** Addresses may carry credentials (redis://user:pass@host); logs get host and port only. */
export function redactAddr(addr: string, config?: Pick<StoreConfig, 'sentinels' | 'sentinelName'>): string {
  if (config !== undefined && config.sentinels.length > 0) {
    return `sentinel ${config.sentinelName}@${config.sentinels.map((s) => `${s.host}:${s.port}`).join(',')}`;
  }
  return addr
    .split(',')
    .map((one) => {
      try {
        const url = new URL(one.trim());
        return `${url.protocol}//${url.host}`;
      } catch {
        return '(invalid address)';
      }
    })
    .join(',');
}

/** Consumer name when billing_consumer_name is empty: unique per process. */
export function defaultConsumerName(): string {
  return `${hostname()}-${process.pid}`;
}

/** One usage-event stream and the keys that go with it (one hash slot in a cluster). */
export interface StreamShardKeys {
  readonly stream: string;
  /** stream entry id -> counted delivery attempts. */
  readonly attempts: string;
  readonly deadLetter: string;
}

/**
 * The key layout (docs/operations.md "Keys in Redis"), all under key_prefix. In a cluster every key a
 * request reads (access keys, subjects, balances, webhook ids) carries the hash tag `{state}`, so one
 * script reads them all on one node, and each stream shard has a tag of its own, so shards spread over
 * slots.
 */
export interface KeyLayout {
  /** What every state key starts with: key_prefix, and in a cluster the `{state}` tag after it. */
  readonly prefix: string;
  accessKey(name: string): string;
  readonly accessKeyIndex: string;
  subject(type: string, id: string): string;
  webhook(id: string): string;
  balance(type: string, id: string, currency: string): string;
  /** Single-flight refresh lock of one cached balance. */
  balanceLock(type: string, id: string, currency: string): string;
  /** billing_stream_shards streams; shard 0 of a single endpoint is the stream of earlier versions. */
  readonly shards: readonly StreamShardKeys[];
  /**
   * What a subject's rate-limit keys start with (`<key_prefix>{rl:<type>:<id>}`): its own limits
   * (`:limits`), its counters and those of its keys, all in one hash slot of their own.
   */
  rateLimit(type: string, id: string): string;
  /**
   * What a subject's stored responses start with (`<key_prefix>{resp:<type>:<id>}`): records `:r:<id>`
   * and the item index `:i:<item id>`, in one hash slot of their own (store/redis-response-store.ts).
   */
  responses(type: string, id: string): string;
}

export function createKeyLayout(
  config: Pick<StoreConfig, 'keyPrefix' | 'billingStream'> &
    Partial<Pick<StoreConfig, 'cluster' | 'billingStreamShards'>>,
): KeyLayout {
  const cluster = config.cluster === true;
  const p = cluster ? `${config.keyPrefix}{state}` : config.keyPrefix;
  const shardCount = Math.max(1, config.billingStreamShards ?? 1);
  const base = config.billingStream;
  const shards = Array.from({ length: shardCount }, (_, k) => {
    const stream = cluster
      ? `${config.keyPrefix}{${base}:${k}}`
      : k === 0
        ? `${config.keyPrefix}${base}`
        : `${config.keyPrefix}${base}:${k}`;
    return { stream, attempts: `${stream}:attempts`, deadLetter: `${stream}:dead-letter` };
  });
  return {
    prefix: p,
    accessKey: (name) => `${p}access_key:${name}`,
    accessKeyIndex: `${p}access_key:index`,
    subject: (type, id) => `${p}subject:${type}:${id}`,
    webhook: (id) => `${p}webhook:${id}`,
    balance: (type, id, currency) => `${p}balance:${type}:${id}:${currency}`,
    balanceLock: (type, id, currency) => `${p}balance:${type}:${id}:${currency}:lock`,
    shards,
    rateLimit: (type, id) => `${config.keyPrefix}{rl:${type}:${id}}`,
    responses: (type, id) => `${config.keyPrefix}{resp:${type}:${id}}`,
  };
}

/** The hash slot of a key, as a cluster client computes it. */
export function keySlot(key: string): number {
  return new Command('get', [key]).getSlot();
}

/**
 * A command whose key's hash slot the caller computed once (keySlot): a cluster client routes it
 * without hashing the key again, which ioredis otherwise does for every command it sends. A single
 * endpoint ignores the slot. Send it with `client.sendCommand(command)`; `command.promise` answers.
 */
export class SlotCommand extends Command {
  readonly #slot: number;

  constructor(name: string, args: (string | number | Buffer)[], slot: number) {
    super(name, args);
    this.#slot = slot;
  }

  override getSlot(): number {
    return this.#slot;
  }
}

/**
 * A SlotCommand whose bytes on the wire the caller encoded (RESP), for a hot command whose encoding the
 * caller can do in one pass. `args` name the command in ioredis's debug log only.
 */
export class EncodedCommand extends SlotCommand {
  readonly #bytes: Buffer;

  constructor(name: string, args: string[], slot: number, bytes: Buffer) {
    super(name, args, slot);
    this.#bytes = bytes;
  }

  override toWritable(): Buffer {
    return this.#bytes;
  }
}

/** Connection-level failures (down, timed out, closed) as opposed to a command the server refused. */
export function isConnectionError(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  if (err instanceof ReplyError) return /^(LOADING|BUSY|MASTERDOWN|TRYAGAIN)/.test(err.message);
  return true;
}

/** A Lua script run by EVALSHA; loaded on first use and again after a server restart (NOSCRIPT). */
export interface LuaScript {
  run(client: Redis, keys: readonly string[], args: readonly (string | number)[]): Promise<unknown>;
  /**
   * Run on one key whose slot the caller computed (keySlot), written at once: auto-pipelining would
   * wrap a caller that already batches in a pipeline of one.
   */
  send(client: Redis, key: string, slot: number, args: readonly string[]): Promise<unknown>;
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
    async send(client, key, slot, args) {
      const command = new SlotCommand('evalsha', [sha, 1, key, ...args], slot);
      client.sendCommand(command);
      try {
        return await command.promise;
      } catch (err) {
        if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
        return await client.eval(lua, 1, key, ...args);
      }
    },
  };
}
