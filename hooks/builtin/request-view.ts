// One store read per request. The auth hook reads the key record, and with it the key's subject state and
// cached balance (StateStore.view: one EVALSHA in Redis mode); the balance hook, which runs next, asks
// for that subject's state and balance and gets the same answer instead of a second round trip. When
// the store's in-process copy holds the answer (Redis mode's view cache), both take it without a wait
// (peekRequestView). The read or the answer is kept on the request context (`storeView`), so it goes
// away with the request; a WeakMap keyed by the context cost an ephemeron entry per request.

import type { RequestView, RequestViewQuery, StateStore, SubjectRef } from '../../common/store-types.ts';
import type { RequestContext } from '../../common/types.ts';

interface Memo {
  readonly query: RequestViewQuery;
  /** The read, or else the answer that came without a wait (StateStore.peekView). */
  readonly promise?: Promise<RequestView>;
  readonly view?: RequestView;
}

/** The subject a view was read for: the found key's own subject, else the one asked for. */
export function viewSubject(query: RequestViewQuery, view: RequestView): SubjectRef | undefined {
  if (view.key) return { type: view.key.subjectType, id: view.key.subjectId };
  return query.subject;
}

function sameSubject(a: SubjectRef | undefined, b: SubjectRef | undefined): boolean {
  return a !== undefined && b !== undefined && a.type === b.type && a.id === b.id;
}

/** Whether an earlier view answers `query` completely. */
function covers(earlier: RequestViewQuery, view: RequestView, query: RequestViewQuery): boolean {
  if (query.keyHash !== undefined && query.keyHash !== earlier.keyHash) return false;
  if (query.subject !== undefined) {
    if (!sameSubject(viewSubject(earlier, view), query.subject) || view.subject === undefined) return false;
  }
  if (query.currency !== undefined && (query.currency !== earlier.currency || view.balance === undefined))
    return false;
  return true;
}

/** The part of an earlier view that answers `query`. */
function project(view: RequestView, query: RequestViewQuery): RequestView {
  return {
    ...(query.keyHash === undefined ? {} : { key: view.key }),
    ...(query.subject === undefined && query.keyHash === undefined ? {} : { subject: view.subject }),
    ...(query.currency === undefined ? {} : { balance: view.balance }),
  };
}

/**
 * StateStore.view, at most once per request for what an earlier call already read. A failed earlier read
 * is not reused: the caller asks again (and applies its own failure policy).
 */
export function requestView(
  ctx: RequestContext,
  store: StateStore,
  query: RequestViewQuery,
): Promise<RequestView> {
  const earlier = ctx.storeView as Memo | undefined;
  if (earlier === undefined) {
    const promise = store.view(query);
    ctx.storeView = { query, promise } satisfies Memo;
    return promise;
  }
  if (earlier.view !== undefined) {
    if (covers(earlier.query, earlier.view, query)) return Promise.resolve(project(earlier.view, query));
    return store.view(query);
  }
  return reuse(earlier.promise!, earlier.query, store, query);
}

/**
 * The view without a wait, when this request's earlier view or the store's in-process copy holds it
 * (then kept for the request's later hooks); undefined when only a read can tell.
 */
export function peekRequestView(
  ctx: RequestContext,
  store: StateStore,
  query: RequestViewQuery,
): RequestView | undefined {
  const earlier = ctx.storeView as Memo | undefined;
  if (earlier !== undefined) {
    if (earlier.view === undefined || !covers(earlier.query, earlier.view, query)) return undefined;
    return project(earlier.view, query);
  }
  const view = store.peekView?.(query);
  if (view !== undefined) ctx.storeView = { query, view } satisfies Memo;
  return view;
}

async function reuse(
  earlier: Promise<RequestView>,
  earlierQuery: RequestViewQuery,
  store: StateStore,
  query: RequestViewQuery,
): Promise<RequestView> {
  const view = await earlier.catch(() => undefined);
  if (view !== undefined && covers(earlierQuery, view, query)) return project(view, query);
  return store.view(query);
}
