// Per-request state of a hook, kept on the request (docs/hooks.md "Per-request state"). In a WeakMap
// keyed by the request, which outlives many requests, an entry whose value refers back to its request (a
// translator's closure does) kept that request and all it held alive through V8's young-generation
// collections, so it was promoted to the old generation (docs/benchmarks.md section 10).

import type { RequestContext } from './types.ts';

/**
 * One hook's slot: create it with the hook (once per configuration), read and set it per request. The
 * first slot a request sets is kept in the request's own two fields; a map is made only for a second one
 * (most requests set one slot or none, and a map is the larger part of what one costs).
 */
export class RequestState<T> {
  get(ctx: RequestContext): T | undefined {
    if (ctx.hookSlot === this) return ctx.hookValue as T | undefined;
    return ctx.hookState?.get(this) as T | undefined;
  }

  set(ctx: RequestContext, value: T): void {
    if (ctx.hookSlot === undefined || ctx.hookSlot === this) {
      ctx.hookSlot = this;
      ctx.hookValue = value;
      return;
    }
    ctx.hookState ??= new Map();
    ctx.hookState.set(this, value);
  }
}
