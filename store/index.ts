// Opening the state store for a process: the file adapter when the shared store is off (file mode, one
// gateway and its sidecar on one host), the Redis adapter otherwise. Callers get the StateStore
// interface and never learn which one they have.

import type { Logger } from 'pino';
import type { RouterConfig } from '../common/config-types.ts';
import type { StateStore } from '../common/store-types.ts';
import { openFileStore } from './file-store.ts';
import { openRedisStores } from './redis-store.ts';

export interface OpenStateStoreOptions {
  /**
   * The sidecar writes subject state and webhook ids; the gateway reads them (file mode: it follows
   * the sidecar's files; Redis mode: no difference).
   */
  readonly role: 'gateway' | 'sidecar';
  /** Clock in ms (tests). */
  readonly now?: () => number;
  /** Background failures (file mode: a reload after fs.watch failed). */
  readonly onError?: (err: unknown) => void;
  /** Redis mode: connection loss and recovery are logged here. */
  readonly logger?: Logger;
  /** Redis mode: every failed store operation, once, by its bounded name (router_store_errors_total). */
  readonly onStoreError?: (operation: string) => void;
}

export async function openStateStore(config: RouterConfig, opts: OpenStateStoreOptions): Promise<StateStore> {
  if (config.store.enabled) {
    const stores = await openRedisStores(config.store, {
      logger: opts.logger,
      currencies: [config.billing.balanceEnforcement.currency],
      connectionName: `router-${opts.role}`,
      // Only the serving path reads views per request; the sidecar's writes need no cache.
      viewCacheMs: opts.role === 'gateway' ? config.store.viewCacheMs : 0,
      ...(opts.onStoreError === undefined ? {} : { onStoreError: opts.onStoreError }),
    });
    return stores.state;
  }
  return openFileStore({
    dir: config.billing.stateDir,
    role: opts.role === 'sidecar' ? 'writer' : 'reader',
    now: opts.now,
    onError: opts.onError,
  });
}
