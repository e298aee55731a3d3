// Usage reporting (onComplete): when the reply is complete, just before its last byte, build the usage
// event (docs/billing.md "The usage event") from the request's metered facts and hand it to the queue
// (the outbox file, or the Redis stream in shared-store mode). The last byte then waits only for the
// queue's write of the current event-loop turn, never for the network, an fsync or the billing service;
// a queue failure is logged and counted, and the response stands (docs/lifecycle.md).

import type { Logger } from 'pino';
import type { EventQueue } from '../billing/event/event-queue.ts';
import {
  buildTokenEvent,
  buildUsageEvent,
  reportDecision,
  type UsageEventInput,
} from '../billing/event-builder.ts';
import type { ModelPrice, Pricing } from '../billing/price-types.ts';
import type { BillingConfig } from '../common/config-types.ts';
import { errorText } from '../common/errors.ts';
import type { GatewayMetrics } from '../common/gateway-metrics.ts';
import type { Hook, RequestContext, Usage } from '../common/types.ts';
import { completionStyleUsage, tokenCountOf } from '../hooks/families/index.ts';

export interface BillingEnqueueDeps {
  readonly billing: BillingConfig;
  readonly pricing: Pricing;
  readonly queue: EventQueue;
  readonly metrics: GatewayMetrics;
  /** Process logger (not the request's: the outcome arrives after the request is gone). */
  readonly log: Logger;
}

const NO_USAGE: Usage = { inputTokens: 0, outputTokens: 0, totalTokens: 0 };

export function createBillingEnqueueHook(deps: BillingEnqueueDeps): Hook {
  const { billing, pricing, queue, metrics } = deps;
  const queued = metrics.billingEnqueued.series('queued');
  const queueFailed = metrics.billingEnqueued.series('queue_failed');
  const notBillable = metrics.billingEnqueued.series('not_billable');
  const voidInterrupted = metrics.billingEnqueued.series('void_interrupted');
  const voiding = billing.interruptedStream === 'void';
  const clientAborted = metrics.unmeteredRequests.series('client_aborted');
  const noUsage = metrics.unmeteredRequests.series('no_usage');
  let last: Outcome | undefined;
  // Providers are configured, so few: a series each, resolved once.
  const unpriced = new Map<string, { inc(by?: number): void }>();
  const unpricedSeries = (provider: string) => {
    let series = unpriced.get(provider);
    if (series === undefined) {
      series = metrics.unpricedModels.series(provider);
      unpriced.set(provider, series);
    }
    return series;
  };
  // Every request that reached a provider ends in exactly one count here (the served-billed gap of
  // docs/billing.md is 0): queued or queue_failed once its event's write settles, or the reason it has
  // no event.
  return {
    name: 'billing-enqueue',
    onComplete(ctx: RequestContext): void {
      // Nothing was served: a request refused before reaching an upstream is not a model request.
      if (ctx.provider === undefined) return;
      // Counting tokens is not a model call; providers do not charge for it either.
      if (tokenCountOf(ctx.api) !== undefined) {
        notBillable.inc();
        return;
      }
      // The client went away before the provider answered: no reply, no usage to report.
      if (ctx.status === 0) {
        clientAborted.inc();
        return;
      }
      const subjectId = ctx.principal?.subjectId ?? billing.fallbackSubjectId;
      const decision = reportDecision({
        billingEnabled: billing.enabled,
        onlyBillableSuccess: billing.onlyBillableSuccess,
        status: ctx.status,
        subjectId,
      });
      if (decision !== 'report') {
        metrics.billingEnqueued.series(decision).inc();
        if (decision === 'skip_no_subject') {
          ctx.log.warn(
            { provider: ctx.provider, status: ctx.status },
            'served request maps to no billing subject; not reported',
          );
        }
        return;
      }
      // billing.interrupted_stream: void: an interrupted stream is not charged (docs/billing.md).
      if (voiding && ctx.endReason !== undefined) {
        voidInterrupted.inc();
        return;
      }
      // A failed reply (reported because only_billable_success is off) consumed no tokens: it is
      // reported with zero usage, which charges nothing. Only a successful reply needs usage.
      const usage = ctx.usage ?? (ctx.status >= 400 ? NO_USAGE : undefined);
      if (usage === undefined) {
        noUsage.inc();
        ctx.log.warn({ provider: ctx.provider }, 'no usage could be metered; not reported');
        return;
      }
      let outcome: Promise<void>;
      try {
        outcome = enqueue(ctx, subjectId, usage);
      } catch (err) {
        // An event that cannot be built or handed over is lost like one the queue refused.
        queueFailed.inc();
        deps.log.error({ reqIds: [ctx.id], err: errorText(err) }, 'usage events could not be queued');
        return;
      }
      // A promise already counted (settled) is watched again: its callbacks have run.
      if (outcome !== last?.outcome || last.settled) last = watch(outcome);
      last.reqIds.push(ctx.id);
      metrics.billingInFlight.add(1);
    },
  } satisfies Hook;

  /** Builds the request's event and hands it to the queue: the promise that it is on record. */
  function enqueue(ctx: RequestContext, subjectId: string, usage: Usage): Promise<void> {
    const provider = ctx.provider ?? '';
    const model = ctx.model ?? ctx.upstreamModel ?? '';
    let price: ModelPrice | undefined = pricing.lookup(provider, ctx.upstreamModel ?? model, ctx.channel);
    if (price === undefined && ctx.upstreamModel !== undefined && ctx.upstreamModel !== model) {
      price = pricing.lookup(provider, model, ctx.channel);
    }
    if (price === undefined) unpricedSeries(provider).inc();
    const input: UsageEventInput = {
      requestId: ctx.id,
      correlationId: ctx.correlationId,
      occurredAtMs: ctx.receivedAt,
      provider,
      api: ctx.api,
      model,
      stream: ctx.stream,
      status: ctx.status,
      usage,
      usageStage: ctx.usageStage ?? 'upstream',
      subjectType: ctx.principal?.subjectType ?? billing.subjectType,
      subjectId,
      source: billing.source,
      completionStyle: completionStyleUsage(ctx.clientFormat),
      price,
      itemDetail: billing.itemDetail,
      priceVersion: pricing.version,
      endReason: ctx.endReason,
    };
    // Not awaited: the reply's last byte already waits for the queue's write of this turn
    // (endReply(), proxy/request-completion.ts), and waiting for the fsync or the Redis reply here would
    // keep the whole request (context, bodies) alive for that long, which showed up as old-space garbage
    // collection under load. The outcome is counted when it arrives, once per promise: events the
    // queue puts on record together share one.
    const tokens = queue.enqueueTokens === undefined ? undefined : buildTokenEvent(input);
    return tokens !== undefined && queue.enqueueTokens !== undefined
      ? queue.enqueueTokens(tokens, ctx.traceparent)
      : queue.enqueue(buildUsageEvent(input), ctx.traceparent);
  }

  function watch(outcome: Promise<void>): Outcome {
    const o: Outcome = { outcome, reqIds: [], settled: false };
    outcome.then(
      () => {
        o.settled = true;
        queued.inc(o.reqIds.length);
        metrics.billingInFlight.add(-o.reqIds.length);
      },
      (err: unknown) => {
        o.settled = true;
        queueFailed.inc(o.reqIds.length);
        metrics.billingInFlight.add(-o.reqIds.length);
        deps.log.error({ reqIds: o.reqIds, err: errorText(err) }, 'usage events could not be queued');
      },
    );
    return o;
  }
}

/**
 * Billing off: no event is made, and each request that reached a provider is still counted once
 * (skip_disabled, or not_billable for a token count), so served and accounted stay one number.
 */
export function createBillingOffHook(metrics: GatewayMetrics): Hook {
  const disabled = metrics.billingEnqueued.series('skip_disabled');
  const notBillable = metrics.billingEnqueued.series('not_billable');
  return {
    name: 'billing-off',
    onComplete(ctx: RequestContext): void {
      if (ctx.provider === undefined) return;
      (tokenCountOf(ctx.api) === undefined ? disabled : notBillable).inc();
    },
  };
}

/** The requests whose events wait on one promise of the queue. */
interface Outcome {
  readonly outcome: Promise<void>;
  readonly reqIds: string[];
  settled: boolean;
}
