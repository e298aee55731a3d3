// Per-request state of a hook, kept on the request (docs/hooks.md "Per-request state"). A WeakMap keyed
// by the request kept every request that had an entry, and all it held, alive through V8's
// young-generation collections until the next full one, since the map itself lives as long as its hook:
// each such request was promoted to the old generation (docs/benchmarks.md section 10).

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
