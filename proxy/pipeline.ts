// Stage runners: one named runner per stage, each with its rule stated once (like yarn berry's
// triggerHook / reduceHook / firstHook). The server calls these; nothing else iterates hooks.

import { errorText } from '../common/errors.ts';
import type {
  Hook,
  OnRequestResult,
  RequestContext,
  ResponseHead,
  ResponsePart,
  TargetChoice,
  UpstreamRequest,
} from '../common/types.ts';
import { CONTINUE } from '../common/types.ts';

/**
 * Most hooks answer synchronously: their result is used as it is, since awaiting a plain value still
 * costs a turn of the microtask queue per hook and request.
 */
function isPromise<T>(value: T | Promise<T>): value is Promise<T> {
  return typeof (value as { then?: unknown } | undefined)?.then === 'function';
}

/**
 * authenticate: in order, before the body is parsed, so that nothing of an unauthenticated request's
 * body is interpreted; the first `respond` answers the client and stops the chain.
 */
export async function runAuthenticate(hooks: readonly Hook[], ctx: RequestContext): Promise<OnRequestResult> {
  for (const hook of hooks) {
    if (hook.authenticate === undefined) continue;
    const pending = hook.authenticate(ctx);
    const result = isPromise(pending) ? await pending : pending;
    if (result.kind === 'respond') return result;
  }
  return CONTINUE;
}

/** onRequest: in order; the first `respond` answers the client and stops the chain. */
export async function runOnRequest(hooks: readonly Hook[], ctx: RequestContext): Promise<OnRequestResult> {
  for (const hook of hooks) {
    if (hook.onRequest === undefined) continue;
    const pending = hook.onRequest(ctx);
    const result = isPromise(pending) ? await pending : pending;
    if (result.kind === 'respond') return result;
  }
  return CONTINUE;
}

/** Both request stages, for a request without a body (a realtime session and its re-checks). */
export async function runRequestStages(
  hooks: readonly Hook[],
  ctx: RequestContext,
): Promise<OnRequestResult> {
  const auth = await runAuthenticate(hooks, ctx);
  return auth.kind === 'respond' ? auth : runOnRequest(hooks, ctx);
}

/** selectTarget: the first hook that returns a choice wins. */
export async function runSelectTarget(
  hooks: readonly Hook[],
  ctx: RequestContext,
): Promise<TargetChoice | undefined> {
  for (const hook of hooks) {
    if (hook.selectTarget === undefined) continue;
    const pending = hook.selectTarget(ctx);
    const choice = isPromise(pending) ? await pending : pending;
    if (choice !== undefined) return choice;
  }
  return undefined;
}

/** rewriteBody: reduce; each hook receives the previous hook's request. */
export async function runRewriteBody(
  hooks: readonly Hook[],
  ctx: RequestContext,
  req: UpstreamRequest,
): Promise<UpstreamRequest> {
  let current = req;
  for (const hook of hooks) {
    if (hook.rewriteBody === undefined) continue;
    const pending = hook.rewriteBody(ctx, current);
    current = isPromise(pending) ? await pending : pending;
  }
  return current;
}

/** onResponseHead: reduce over status and headers, before anything reaches the client. */
export function runResponseHead(
  hooks: readonly Hook[],
  ctx: RequestContext,
  head: ResponseHead,
): ResponseHead {
  let current = head;
  for (const hook of hooks) {
    if (hook.onResponseHead !== undefined) current = hook.onResponseHead(ctx, current);
  }
  return current;
}

/** onResponseChunk from hook index `from` on: reduce; synchronous so bytes keep their order. */
export function runResponseChunk(
  hooks: readonly Hook[],
  ctx: RequestContext,
  parts: readonly ResponsePart[],
  from = 0,
): readonly ResponsePart[] {
  let current = parts;
  for (let i = from; i < hooks.length && current.length > 0; i++) {
    const hook = hooks[i]!;
    if (hook.onResponseChunk !== undefined) current = hook.onResponseChunk(ctx, current);
  }
  return current;
}

/**
 * onResponseEnd: each hook's trailing parts flow through the hooks after it (so a translator's final
 * events still pass later transforms), and are returned in order.
 */
export function runResponseEnd(hooks: readonly Hook[], ctx: RequestContext): ResponsePart[] {
  const out: ResponsePart[] = [];
  for (let i = 0; i < hooks.length; i++) {
    const hook = hooks[i]!;
    if (hook.onResponseEnd === undefined) continue;
    const parts = hook.onResponseEnd(ctx);
    if (parts.length > 0) out.push(...runResponseChunk(hooks, ctx, parts, i + 1));
  }
  return out;
}

/** onComplete: run all; each isolated, so one failure reaches neither the others nor the client. */
export async function runOnComplete(hooks: readonly Hook[], ctx: RequestContext): Promise<void> {
  for (const hook of hooks) {
    if (hook.onComplete === undefined) continue;
    try {
      const pending = hook.onComplete(ctx);
      if (isPromise(pending)) await pending;
    } catch (err) {
      ctx.log.error({ hook: hook.name, err: errorText(err) }, 'onComplete hook failed');
    }
  }
}
