// Usage reporting (onComplete): once the reply is over, build the usage event (spec 2.3) from the
// request's metered facts and hand it to the queue (the outbox file, or the Redis stream in shared-store
// mode). It runs after the client has its response, so billing never delays or alters a reply; a queue
// failure is logged and counted, and the response stands (spec 7).

import { buildUsageEvent, reportDecision } from '../../billing/event-builder.ts';
import type { ModelPrice, Pricing } from '../../billing/pricing.ts';
import type { BillingConfig } from '../../proxy/config/types.ts';
import type { GatewayMetrics } from '../../proxy/metrics.ts';
import { describeError } from '../../proxy/pipeline.ts';
import type { EventQueue } from '../../store/types.ts';
import type { Hook, RequestContext, Usage } from '../types.ts';

export interface BillingEnqueueDeps {
  readonly billing: BillingConfig;
  readonly pricing: Pricing;
  readonly queue: EventQueue;
  readonly metrics: GatewayMetrics;
}

const NO_USAGE: Usage = { inputTokens: 0, outputTokens: 0, totalTokens: 0 };

export function createBillingEnqueueHook(deps: BillingEnqueueDeps): Hook {
  const { billing, pricing, queue, metrics } = deps;
  return {
    name: 'billing-enqueue',
    async onComplete(ctx: RequestContext): Promise<void> {
      // Nothing was served: a request refused before reaching an upstream is not a model request.
      if (ctx.provider === undefined || ctx.status === 0) return;
      const subjectId = ctx.principal?.subjectId ?? billing.fallbackSubjectId;
      const decision = reportDecision({
        billingEnabled: billing.enabled,
        onlyBillableSuccess: billing.onlyBillableSuccess,
        status: ctx.status,
        subjectId,
      });
      if (decision !== 'report') {
        metrics.billingEnqueued.inc({ result: decision });
        if (decision === 'skip_no_subject') {
          ctx.log.warn(
            { provider: ctx.provider, status: ctx.status },
            'served request maps to no billing subject; not reported',
          );
        }
        return;
      }
      // A failed reply (reported because only_billable_success is off) consumed no tokens: it is
      // reported with zero usage, which charges nothing. Only a successful reply needs usage.
      const usage = ctx.usage ?? (ctx.status >= 400 ? NO_USAGE : undefined);
      if (usage === undefined) {
        metrics.unmeteredRequests.inc({ reason: 'no_usage' });
        ctx.log.warn({ provider: ctx.provider }, 'no usage could be metered; not reported');
        return;
      }
      const model = ctx.model ?? ctx.upstreamModel ?? '';
      let price: ModelPrice | undefined = pricing.lookup(
        ctx.provider,
        ctx.upstreamModel ?? model,
        ctx.channel,
      );
      if (price === undefined && ctx.upstreamModel !== undefined && ctx.upstreamModel !== model) {
        price = pricing.lookup(ctx.provider, model, ctx.channel);
      }
      if (price === undefined) metrics.unpricedModels.inc({ provider: ctx.provider });
      const event = buildUsageEvent({
        requestId: ctx.id,
        occurredAtMs: ctx.receivedAt,
        provider: ctx.provider,
        api: ctx.api,
        model,
        stream: ctx.stream,
        status: ctx.status,
        usage,
        usageStage: ctx.usageStage ?? 'upstream',
        subjectType: ctx.principal?.subjectType ?? billing.subjectType,
        subjectId,
        source: billing.source,
        completionStyle: ctx.clientFormat === 'openai',
        price,
      });
      try {
        await queue.enqueue(event);
        metrics.billingEnqueued.inc({ result: 'queued' });
      } catch (err) {
        metrics.billingEnqueued.inc({ result: 'queue_failed' });
        ctx.log.error({ err: describeError(err) }, 'usage event could not be queued');
      }
    },
  } satisfies Hook;
}
