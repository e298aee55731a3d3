// A realtime session's steps as requests of their own: a model response's usage through the rule's
// onComplete hooks (billing among them), and the context of a re-check (realtime-relay.ts).

import type { RequestContext, Usage } from '../common/types.ts';
import { runOnComplete } from './pipeline.ts';
import type { Context } from './request-context.ts';
import type { RuleHooks, Runtime } from './runtime.ts';

/**
 * One model response's usage through the rule's onComplete hooks (billing among them), as a request of
 * its own whose id is the session's request id and the response id; the promise that its event is on
 * record, when the queue batches.
 */
export function record(
  rt: Runtime,
  ctx: Context,
  hooks: RuleHooks,
  responseId: string,
  usage: Usage,
  stage: 'upstream' | 'estimated',
): Promise<void> | undefined {
  const step = sessionContext(ctx, `${ctx.id}:${responseId}`, usage, stage);
  // Served as a request of its own (router_requests_total), as billing counts it.
  rt.metrics.observeSessionResponse(step);
  const done = runOnComplete(hooks.complete, step);
  const recorded = rt.recorded();
  return recorded === undefined ? done : Promise.all([done, recorded]).then(() => undefined);
}

/**
 * A request context of its own for one step of the session (a response's usage, a re-check): the
 * session's facts, a fresh identity (per-request memos start empty), this id and usage.
 */
export function sessionContext(
  ctx: Context,
  id: string,
  usage: Usage | undefined,
  stage?: 'upstream' | 'estimated',
): RequestContext {
  return {
    id,
    sessionId: ctx.id,
    correlationId: ctx.correlationId,
    api: ctx.api,
    clientFormat: ctx.clientFormat,
    method: ctx.method,
    path: ctx.path,
    query: ctx.query,
    headers: ctx.headers,
    receivedAt: ctx.receivedAt,
    startedAt: ctx.startedAt,
    signal: ctx.signal,
    log: ctx.log,
    body: undefined,
    rawBody: ctx.rawBody,
    model: ctx.model,
    stream: true,
    principal: ctx.principal,
    provider: ctx.provider,
    upstreamModel: ctx.upstreamModel,
    channel: ctx.channel,
    upstreamTtfbMs: undefined,
    status: 200,
    usage,
    usageStage: stage,
    responseStarted: true,
    clientAborted: false,
    deliveredText: [],
    error: undefined,
  };
}
