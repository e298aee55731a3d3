// Billing on the gateway side, in file mode: pricing, the outbox writer and the enqueue hook. The
// sidecar (router-billing) delivers what this writes. Shared-store mode swaps the queue for the stream.

import type { Logger } from 'pino';
import { openSlottedWriter } from '../billing/outbox/slots.ts';
import { openOutboxStatus } from '../billing/outbox/status.ts';
import type { OutboxWriter } from '../billing/outbox/writer.ts';
import { pricingWarnings, unpricedModels } from '../billing/price-coverage.ts';
import { loadPricing } from '../billing/pricing.ts';
import type { RouterConfig } from '../common/config-types.ts';
import { errorText } from '../common/errors.ts';
import type { GatewayMetrics } from '../common/gateway-metrics.ts';
import { sharedByKey } from '../common/shared-by-key.ts';
import { createBillingEnqueueHook } from './enqueue-hook.ts';
import { type BillingSink, openRedisBillingSink } from './redis-queue.ts';
import { type BillingParts, storeError } from './runtime.ts';

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
  // The version every event of this configuration carries: an operator matches events to a price table.
  log.info({ priceVersion: pricing.version, prices: pricing.size }, 'pricing loaded');
  const unpriced = unpricedModels(config.models.entries, pricing);
  metrics.unpricedServedModels.set(unpriced.length);
  for (const warning of pricingWarnings(unpriced, pricing)) log.warn(warning);
  // The queue: the billing stream in shared-store mode (any sidecar of the group delivers it; what it
  // cannot take waits in a spool under the outbox directory), else the outbox file that this host's
  // sidecar delivers.
  const sink = config.store.enabled
    ? await openRedisBillingSink(config.store, {
        spoolRoot: config.billing.outboxDir,
        logger: log,
        onStoreError: storeError(metrics),
      })
    : await openOutboxSink(config.billing.outboxDir, config.billing.outboxFsyncIntervalMs, log);
  const hook = createBillingEnqueueHook({
    billing: config.billing,
    pricing,
    queue: sink.queue,
    metrics,
    log,
  });
  return {
    hooks: [hook],
    recorded: () => sink.queue.recorded?.(),
    readiness: () => sink.readiness(),
    ...(sink.health === undefined ? {} : { storeHealth: sink.health }),
    close: () => sink.close(),
  };
}

async function openOutboxSink(dir: string, fsyncIntervalMs: number, log: Logger): Promise<BillingSink> {
  const { value: writer, release } = await shareWriter(dir, log);
  // The writer outlives a reload (it holds the directory's lock): the reloaded setting applies to it.
  writer.setFsyncInterval(fsyncIntervalMs);
  if (writer.dir !== dir)
    log.info({ slot: writer.dir }, 'another gateway writes the outbox directory: writing a slot of it');
  const status = openOutboxStatus(writer.dir);
  return {
    queue: {
      enqueue: (event, traceparent) => writer.append(event, traceparent),
      enqueueTokens: (event, traceparent) => writer.appendTokens(event, traceparent),
      recorded: () => writer.recorded(),
    },
    async readiness() {
      const s = await status.read();
      return { pending: s.pendingEvents + writer.pending(), dead_letter: s.deadLettered };
    },
    close: release,
  };
}

/**
 * One outbox writer per directory and process. It holds the directory's lock, so the runtime built by a
 * reload (SIGHUP) shares the running one's writer instead of opening a second; the writer closes
 * (flushing what is queued) when the last runtime using it closes.
 */
const shareWriter = sharedByKey(
  (dir: string, log: Logger) =>
    openSlottedWriter(dir, {
      onError: (err) => log.error({ err: errorText(err) }, 'outbox write failed'),
    }),
  (writer: OutboxWriter) => writer.close(),
);
