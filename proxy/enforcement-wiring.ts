// Balance enforcement on the gateway side: the state store (file mode: a reader of the sidecar's state
// files), the balance pre-check hook with its billing client, and the handler of the sidecar's subject
// state notice (common/internal-notify.ts). Plugged into the runtime as extra billing parts, so the
// pre-check runs right after auth (proxy/runtime.ts requestHooks).

import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { createBillingClient } from '../billing/billing-client.ts';
import type { RouterConfig } from '../common/config-types.ts';
import { errorText } from '../common/errors.ts';
import type { GatewayMetrics } from '../common/gateway-metrics.ts';
import { createNoticeHandler } from '../common/internal-notify.ts';
import type { StateStore, SubjectRef } from '../common/store-types.ts';
import type { Hook } from '../common/types.ts';
import { type BalanceLookup, createBalanceCheckHook } from '../hooks/builtin/balance-check.ts';
import { openStateStore } from '../store/index.ts';
import { type BillingParts, type BuildOptions, storeError } from './runtime.ts';

export interface EnforcementParts {
  readonly hook: Hook;
  readonly store: StateStore;
  /** POST /internal/router/subject-state: apply a state change before the sidecar answers its webhook. */
  handleNotice(req: IncomingMessage, res: ServerResponse): Promise<void>;
  /** What the notice does, for a notice relayed by the primary: reload the state, drop the cached balance. */
  applyState(subject: SubjectRef): Promise<void>;
  close(): Promise<void>;
}

export interface EnforcementDeps {
  /** Replaces the store opened from configuration (tests); then not closed by close(). */
  readonly store?: StateStore;
  /** Replaces the billing client's realtime lookup (tests). */
  readonly lookup?: BalanceLookup;
}

/** A store that can re-read persisted state (the file adapter); Redis reads are always current. */
function reloadable(store: StateStore): { reload(): Promise<unknown> } | undefined {
  const candidate = store as StateStore & { reload?: unknown };
  return typeof candidate.reload === 'function' ? (candidate as { reload(): Promise<unknown> }) : undefined;
}

export async function createEnforcementParts(
  config: RouterConfig,
  log: Logger,
  metrics: GatewayMetrics,
  deps: EnforcementDeps = {},
): Promise<EnforcementParts> {
  const enforcement = config.billing.balanceEnforcement;
  const store =
    deps.store ??
    (await openStateStore(config, {
      role: 'gateway',
      onError: (err) => log.error({ err: errorText(err) }, 'subject state reload failed'),
      onStoreError: storeError(metrics),
    }));
  const client =
    deps.lookup === undefined
      ? createBillingClient(config.billing, { connections: 8, logger: log })
      : undefined;
  const lookup: BalanceLookup =
    deps.lookup ?? ((type, id, currency, signal) => client!.getBalance(type, id, currency, signal));
  const hook = createBalanceCheckHook({ config: enforcement, store, lookup, metrics });
  const applyState = (via: 'notice' | 'relay') => async (subject: SubjectRef) => {
    await reloadable(store)?.reload();
    await store.invalidateBalance(subject);
    metrics.subjectStateNotices.inc({ via });
  };
  const handleNotice = createNoticeHandler({
    secret: enforcement.webhookSecret,
    log,
    apply: applyState('notice'),
  });
  return {
    hook,
    store,
    handleNotice,
    applyState: applyState('relay'),
    async close() {
      await client?.close();
      if (deps.store === undefined) await store.close();
    },
  };
}

type BillingBuilder = NonNullable<BuildOptions['billing']>;

/**
 * Wrap the billing builder: when balance enforcement is on, its pre-check hook comes first among the
 * billing hooks and the subject state notice is served; otherwise the base parts are returned as-is.
 */
export function withBalanceEnforcement(base: BillingBuilder): BillingBuilder {
  return async function buildBillingWithEnforcement(config, log, metrics): Promise<BillingParts | undefined> {
    const parts = await base(config, log, metrics);
    if (!config.billing.enabled || !config.billing.balanceEnforcement.enabled) return parts;
    let enforcement: EnforcementParts;
    try {
      enforcement = await createEnforcementParts(config, log, metrics);
    } catch (err) {
      await parts?.close();
      throw err;
    }
    return {
      ...parts,
      hooks: [enforcement.hook, ...(parts?.hooks ?? [])],
      readiness: parts?.readiness ?? (async () => undefined),
      storeHealth: parts?.storeHealth ?? (() => enforcement.store.health()),
      stateNotice: enforcement.handleNotice,
      applySubjectState: enforcement.applyState,
      async close() {
        await enforcement.close();
        await parts?.close();
      },
    };
  };
}
