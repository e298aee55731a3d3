// Per-request state of a hook, kept on the request (docs/hooks.md "Per-request state"). In a WeakMap
// keyed by the request, which outlives many requests, an entry whose value refers back to its request (a
// translator's closure does) kept that request and all it held alive through V8's young-generation
// collections, so it was promoted to the old generation (docs/benchmarks.md section 10).

import type { RequestContext } from './types.ts';

/** One hook's slot: create it with the hook (once per configuration), read and set it per request. */
export class RequestState<T> {
  get(ctx: RequestContext): T | undefined {
    return ctx.hookState?.get(this) as T | undefined;
  }

  set(ctx: RequestContext, value: T): void {
    ctx.hookState ??= new Map();
    ctx.hookState.set(this, value);
  }
}
