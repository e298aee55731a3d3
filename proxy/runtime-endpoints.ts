// The gateway's own HTTP endpoints that the runtime answers: /readyz's report, the sidecar's subject
// state notice and billing webhooks forwarded to the sidecar.

import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { RouterConfig } from '../common/config-types.ts';
import type { StoreHealth } from '../common/store-types.ts';
import type { JsonValue } from '../common/types.ts';
import type { SidecarStatus } from './sidecar-status.ts';
import { forwardToSidecar } from './webhook-forward.ts';
import type { ClusterLink } from './workers/worker-link.ts';

export interface ReadyReport {
  ready: boolean;
  providers: number;
  billing: { configured: boolean; enabled: boolean; pending?: number; dead_letter?: number };
  store: { enabled: boolean; connected?: boolean; required?: boolean; reason?: string };
  [key: string]: JsonValue;
}

/** What billing contributes to the endpoints (BillingParts of proxy/runtime.ts). */
export interface EndpointBilling {
  readiness(): Promise<{ pending: number; dead_letter: number } | undefined>;
  readonly stateNotice?: (req: IncomingMessage, res: ServerResponse) => Promise<void>;
}

export interface RuntimeEndpoints {
  readiness(): Promise<ReadyReport>;
  stateNotice(req: IncomingMessage, res: ServerResponse): Promise<void>;
  forwardWebhook(req: IncomingMessage, res: ServerResponse): Promise<void>;
}

export function createEndpoints(deps: {
  readonly config: RouterConfig;
  readonly log: Logger;
  readonly providerCount: number;
  readonly billing: EndpointBilling | undefined;
  /** The shared store's health (any store this runtime opened on it); undefined in file mode. */
  readonly storeHealth: (() => Promise<StoreHealth>) | undefined;
  readonly sidecar: SidecarStatus | undefined;
  readonly cluster: ClusterLink | undefined;
}): RuntimeEndpoints {
  const { config, log, billing, storeHealth, sidecar, cluster } = deps;
  const needsStore = storeNeed(config);
  return {
    async readiness() {
      const counts = billing === undefined ? undefined : await billing.readiness().catch(() => undefined);
      const state = sidecar?.supervised === true ? sidecar.state : undefined;
      // Reported, not required: while one worker restarts, the others serve.
      const workers = cluster === undefined ? undefined : await cluster.workers().catch(() => undefined);
      const health =
        storeHealth === undefined
          ? undefined
          : await storeHealth().catch((): StoreHealth => ({ connected: false }));
      // Every instance shares the one store: not ready only when requests would fail without it.
      const storeDown = needsStore !== undefined && health?.connected === false;
      return {
        ready: deps.providerCount > 0 && (state === undefined || state === 'up') && !storeDown,
        providers: deps.providerCount,
        ...(state === undefined ? {} : { sidecar: { supervised: true, state } }),
        ...(workers === undefined ? {} : { workers: { ...workers } }),
        billing: {
          configured: config.billing.enabled && config.billing.baseUrl !== '',
          enabled: config.billing.enabled,
          ...(counts === undefined ? {} : { pending: counts.pending, dead_letter: counts.dead_letter }),
        },
        store: {
          enabled: config.store.enabled,
          ...(health === undefined ? {} : storeReadiness(health)),
          ...(needsStore === undefined ? {} : { required: true }),
          ...(storeDown ? { reason: needsStore } : {}),
        },
      };
    },
    async stateNotice(req, res) {
      if (billing?.stateNotice !== undefined) return billing.stateNotice(req, res);
      req.resume();
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end('{"error":{"message":"Unknown endpoint","type":"invalid_request_error","code":"not_found"}}');
    },
    async forwardWebhook(req, res) {
      await forwardToSidecar(config, req, res, log, sidecar);
    },
  };
}

/**
 * Why requests fail while the shared store is away, when they do: access keys looked up in it
 * (redis_only, redis_preferred), or balance checks that refuse without subject state (failure_mode
 * closed). Otherwise (file_only keys, enforcement off or open) requests are served without it.
 */
export function storeNeed(config: RouterConfig): string | undefined {
  if (!config.store.enabled) return undefined;
  const mode = config.store.accessKeyMode;
  if (mode !== 'file_only')
    return `shared store unreachable: access_key_mode ${mode} looks access keys up in it, so requests are refused with 503 authentication_unavailable`;
  const enforcement = config.billing.balanceEnforcement;
  if (config.billing.enabled && enforcement.enabled && enforcement.failureMode === 'closed')
    return 'shared store unreachable: balance_enforcement.failure_mode closed refuses requests with 503 billing_unavailable without the subject state it holds';
  return undefined;
}

/** The store block of /readyz: connected, and the view cache's state in Redis mode. */
function storeReadiness(health: StoreHealth): Record<string, unknown> {
  if (health.viewCache === undefined) return { connected: health.connected };
  return {
    connected: health.connected,
    view_cache: {
      live: health.viewCache.live,
      entries: health.viewCache.entries,
      invalidations: health.viewCache.invalidations,
    },
  };
}
