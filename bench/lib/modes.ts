// The gateway modes the paired benches compare (bench/ab.ts, bench/instructions.ts): what each needs
// started beside it, and the gateway variant each runs as.

import { type GatewayVariant, startRedis, type Workspace } from './peers.ts';
import { startRedisCluster } from './redis-cluster.ts';

// `outbox`: billing on, no sidecar (events stay in the outbox): the serving path's own share of billing,
// without the delivering process on the same cores.
// `limited`: `redis` with every key limited (rate_limits.per_key) by limits the load never reaches.
// `sigv4`: `off` with the chat provider's requests signed with AWS SigV4 (service bedrock) instead of
// carrying its key: what cloud signing costs per request.
export type Mode = 'off' | 'billing' | 'outbox' | 'redis' | 'limited' | 'cluster' | 'traced' | 'sigv4';
export const MODES: readonly Mode[] = [
  'off',
  'billing',
  'outbox',
  'redis',
  'limited',
  'cluster',
  'traced',
  'sigv4',
];

export function billed(mode: Mode): boolean {
  return (
    mode === 'billing' || mode === 'outbox' || mode === 'redis' || mode === 'limited' || mode === 'cluster'
  );
}

export interface ModeStores {
  redisUrl?: string;
  clusterSeeds?: string;
}

/** A redis-server when a mode is `redis`, a 3-primary cluster when one is `cluster`; stops go to `stops`. */
export async function startModeStores(
  ws: Workspace,
  modes: readonly Mode[],
  stops: (() => Promise<void>)[],
): Promise<ModeStores> {
  const stores: ModeStores = {};
  if (modes.includes('redis') || modes.includes('limited')) {
    const redis = await startRedis(ws);
    if (!('service' in redis)) throw new Error(`redis-server: ${redis.reason}`);
    stops.push(() => redis.service.stop());
    stores.redisUrl = redis.url;
  }
  if (modes.includes('cluster')) {
    const cluster = await startRedisCluster(ws);
    if (!('seeds' in cluster)) throw new Error(`redis cluster: ${cluster.reason}`);
    stops.push(() => cluster.stop());
    stores.clusterSeeds = cluster.seeds;
  }
  return stores;
}

/**
 * The gateway variant of a mode. `name` keeps the key prefixes of two Redis-mode gateways apart;
 * `operationTimeoutMs` is for gateways too slow for the store's default (under valgrind).
 */
export function modeVariant(
  mode: Mode,
  name: string,
  peers: ModeStores & {
    billingUrl?: string;
    tracesUrl?: string;
    tracesSampler?: string;
    operationTimeoutMs?: number;
  },
): GatewayVariant {
  const timeout =
    peers.operationTimeoutMs === undefined ? {} : { operationTimeoutMs: peers.operationTimeoutMs };
  return {
    ...(billed(mode) ? { billing: { url: peers.billingUrl! } } : {}),
    ...(mode === 'outbox' ? { noSidecar: true } : {}),
    ...(mode === 'redis' || mode === 'limited' ? { redisUrl: peers.redisUrl!, store: timeout } : {}),
    ...(mode === 'limited' ? { rateLimits: true } : {}),
    ...(mode === 'sigv4' ? { sigv4: true } : {}),
    ...(mode === 'cluster'
      ? { redisUrl: peers.clusterSeeds!, store: { cluster: true, shards: 4, ...timeout } }
      : {}),
    ...(mode === 'traced'
      ? {
          tracesUrl: peers.tracesUrl!,
          ...(peers.tracesSampler ? { tracesSampler: peers.tracesSampler } : {}),
        }
      : {}),
    id:
      mode === 'redis' || mode === 'limited' || mode === 'cluster'
        ? (`gateway-${mode}-${name}` as GatewayVariant['id'])
        : 'gateway',
  };
}
