// Billing on the gateway side, in file mode: pricing, the outbox writer and the enqueue hook. The
// sidecar (router-billing) delivers what this writes. Shared-store mode swaps the queue for the stream.

import type { Logger } from 'pino';
import { openOutboxStatus } from '../billing/outbox/status.ts';
import { openOutboxWriter } from '../billing/outbox-writer.ts';
import { loadPricing } from '../billing/pricing.ts';
import { createBillingEnqueueHook } from '../hooks/builtin/billing-enqueue.ts';
import type { RouterConfig } from './config/types.ts';
import type { GatewayMetrics } from './metrics.ts';
import type { BillingParts } from './runtime.ts';

export async function createBillingParts(
  config: RouterConfig,
  log: Logger,
  metrics: GatewayMetrics,
): Promise<BillingParts> {
  const { pricing, diagnostics } = await loadPricing(config.pricing.files, {
    onMissingPrice(provider, model) {
      log.warn(
        { provider, model },
        'model has no price: requests are metered and reported without pricing hints',
      );
    },
  });
  for (const d of diagnostics) log.error({ file: d.file, line: d.line, col: d.col }, d.message);
  const writer = await openOutboxWriter(config.billing.outboxDir, {
    onError: (err) =>
      log.error({ err: err instanceof Error ? err.message : String(err) }, 'outbox write failed'),
  });
  const status = openOutboxStatus(config.billing.outboxDir);
  const hook = createBillingEnqueueHook({
    billing: config.billing,
    pricing,
    queue: { enqueue: (event) => writer.append(event) },
    metrics,
  });
  return {
    hooks: [hook],
    async readiness() {
      const s = await status.read();
      return { pending: s.pendingEvents + writer.pending(), dead_letter: s.deadLettered };
    },
    close: () => writer.close(),
  };
}
