// Balance pre-check (onRequest, after auth; docs/billing.md "The pre-check"): a best-effort check of the payer wallet
// before a request is served. It reserves nothing, so concurrent requests can briefly overspend
// (docs/billing.md). Order of answers:
//   1. no subject (master key or fallback '' subject) or enforcement off -> skip;
//   2. subject blocked by a webhook -> 402 insufficient_balance;
//   3. a cached decision (allowed for cache_ttl_ms, denied for denied_cache_ttl_ms) -> use it;
//   4. otherwise one realtime lookup per subject, currency and state version (single flight: a burst
//      shares one lookup; across instances StateStore.tryRefreshLock elects one refresher), compared
//      exactly (decimal.js, balance > 0), bounded by request_timeout_ms.
// A lookup failure is never cached: failure_mode closed answers 503 billing_unavailable, open serves
// the request and logs a warning. "This subject has no wallet" (404 wallet_not_found) is read as
// docs/billing.md "The pre-check" says: closed treats it as an empty wallet (402, not a 503 an SDK
// retries forever), open as a lookup failure (served). Either way the answer is cached like a denial, so a
// subject without a wallet costs one lookup per denied_cache_ttl_ms, not one per request.

import { Decimal } from 'decimal.js';
import { setBounded } from '../../common/bounded-map.ts';
import type { BalanceEnforcementConfig } from '../../common/config-types.ts';
import { errorText, GatewayError } from '../../common/errors.ts';
import type { GatewayMetrics } from '../../common/gateway-metrics.ts';
import type { BalanceDecision, StateStore, SubjectRef, SubjectState } from '../../common/store-types.ts';
import {
  CONTINUE,
  type Hook,
  type MaybePromise,
  type OnRequestResult,
  type RequestContext,
} from '../../common/types.ts';
import { peekRequestView, requestView } from './request-view.ts';

/** The realtime wallet amount (BillingClient.getBalance). Must honour the signal. */
export type BalanceLookup = (
  subjectType: string,
  subjectId: string,
  currency: string,
  signal: AbortSignal,
) => Promise<{ balance: string; currency: string; noWallet?: true }>;

export type BalanceCheckResult =
  | 'skipped'
  | 'blocked'
  | 'cached_allowed'
  | 'cached_denied'
  | 'allowed'
  | 'denied'
  | 'no_wallet'
  | 'no_wallet_open'
  | 'error_closed'
  | 'error_open';

export interface BalanceCheckOptions {
  readonly config: Pick<
    BalanceEnforcementConfig,
    'enabled' | 'currency' | 'failureMode' | 'requestTimeoutMs' | 'cacheTtlMs' | 'deniedCacheTtlMs'
  >;
  readonly store: StateStore;
  readonly lookup: BalanceLookup;
  readonly metrics?: Pick<GatewayMetrics, 'balanceChecks'>;
  /** Clock in ms (tests). */
  readonly now?: () => number;
  /** How often to look for another instance's result while it holds the refresh lock (default 20 ms). */
  readonly lockPollMs?: number;
}

/** Exact decimal comparison: served only when the balance is strictly greater than zero. */
export function isPositiveBalance(balance: string): boolean {
  return new Decimal(balance).greaterThan(0);
}

/** Identifies the subject state a decision was made under; a webhook changes it. */
function stateVersion(state: SubjectState | null | undefined): string {
  return state == null ? '-' : `${state.lastEventId}@${state.updatedAt}`;
}

/** Subjects a no-wallet warning was logged for, at most this many remembered at once. */
const MAX_WARNED_SUBJECTS = 10_000;

class LookupTimeoutError extends Error {
  constructor(ms: number) {
    super(`balance lookup gave no answer within ${ms} ms`);
    this.name = 'LookupTimeoutError';
  }
}

export function createBalanceCheckHook(opts: BalanceCheckOptions): Hook {
  const { config, store, lookup } = opts;
  const now = opts.now ?? Date.now;
  const pollMs = opts.lockPollMs ?? 20;
  const lockTtlMs = config.requestTimeoutMs + 500;
  const currency = config.currency;
  /** One lookup per subject, currency and state version at a time. */
  const inflight = new Map<string, Promise<BalanceDecision>>();
  /** Refresh locks this process took, until they expire: while held, this process may refresh again. */
  const ownLocks = new Map<string, number>();

  function count(result: BalanceCheckResult): void {
    opts.metrics?.balanceChecks.inc({ result });
  }

  /** When a no-wallet warning was last logged, per subject: once per denied_cache_ttl_ms. */
  const warnedNoWallet = new Map<string, number>();

  function insufficient(): GatewayError {
    return new GatewayError('insufficient_balance');
  }

  /** failure_mode open and a subject without a wallet: served, as after a failed lookup. */
  function servedWithoutWallet(ctx: RequestContext, subject: SubjectRef): OnRequestResult {
    count('no_wallet_open');
    const key = JSON.stringify([subject.type, subject.id]);
    const at = now();
    const last = warnedNoWallet.get(key);
    if (last === undefined || at - last >= config.deniedCacheTtlMs) {
      warnedNoWallet.delete(key);
      setBounded(warnedNoWallet, key, at, MAX_WARNED_SUBJECTS);
      ctx.log.warn(
        { subjectType: subject.type, subjectId: subject.id },
        'the billing service has no wallet for this subject; serving the request (failure_mode open)',
      );
    }
    return CONTINUE;
  }

  async function lookupOnce(subject: SubjectRef): Promise<BalanceDecision> {
    const ms = config.requestTimeoutMs;
    const signal = AbortSignal.timeout(ms);
    let timer: NodeJS.Timeout | undefined;
    // The lookup is bounded even if an implementation ignores its signal.
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new LookupTimeoutError(ms)), ms);
    });
    try {
      const answer = await Promise.race([lookup(subject.type, subject.id, currency, signal), deadline]);
      if (answer.noWallet === true) {
        return { allowed: false, balance: '0', currency, fetchedAt: now(), noWallet: true };
      }
      return {
        allowed: isPositiveBalance(answer.balance),
        balance: answer.balance,
        currency,
        fetchedAt: now(),
      };
    } finally {
      clearTimeout(timer);
    }
  }

  /** While another instance refreshes, wait for its cached answer (up to the lock's lifetime). */
  async function awaitOtherRefresher(subject: SubjectRef): Promise<BalanceDecision | undefined> {
    const until = now() + lockTtlMs;
    while (now() < until) {
      await new Promise((resolve) => setTimeout(resolve, pollMs));
      const v = await store.view({ subject, currency });
      if (v.balance) return v.balance;
    }
    return undefined;
  }

  async function refresh(subject: SubjectRef, version: string, key: string): Promise<BalanceDecision> {
    // A refresh that finished between this request's view and now has already cached its answer.
    const again = await store.view({ subject, currency }).catch(() => undefined);
    if (again?.balance && stateVersion(again.subject) === version) return again.balance;

    const acquired = await store.tryRefreshLock(subject, currency, lockTtlMs).catch(() => true);
    if (acquired) ownLocks.set(key, now() + lockTtlMs);
    else if ((ownLocks.get(key) ?? 0) <= now()) {
      // Another instance holds the lock (a lock of our own, e.g. left by a failed lookup, is ours to reuse).
      const theirs = await awaitOtherRefresher(subject).catch(() => undefined);
      if (theirs !== undefined) return theirs;
    }
    const decision = await lookupOnce(subject);
    // A webhook that changed the subject while we were asking makes this answer suspect: use it for the
    // requests that were waiting, but do not cache it over the invalidation.
    const after = await store.view({ subject }).catch(() => undefined);
    if (after !== undefined && stateVersion(after.subject) === version) {
      const ttl = decision.allowed ? config.cacheTtlMs : config.deniedCacheTtlMs;
      await store.putBalance(subject, decision, ttl).catch(() => undefined);
    }
    return decision;
  }

  function sharedRefresh(subject: SubjectRef, version: string): Promise<BalanceDecision> {
    const base = JSON.stringify([subject.type, subject.id, currency]);
    const key = `${base}#${version}`;
    let pending = inflight.get(key);
    if (pending === undefined) {
      pending = refresh(subject, version, base).finally(() => inflight.delete(key));
      inflight.set(key, pending);
    }
    return pending;
  }

  function onFailure(ctx: RequestContext, err: unknown, stage: 'store' | 'lookup'): OnRequestResult {
    const reason = errorText(err);
    if (config.failureMode === 'open') {
      count('error_open');
      ctx.log.warn({ stage, reason }, 'balance check failed; serving the request (failure_mode open)');
      return CONTINUE;
    }
    count('error_closed');
    ctx.log.warn({ stage, reason }, 'balance check failed; refusing the request (failure_mode closed)');
    throw new GatewayError('billing_unavailable');
  }

  /** The decision from the subject's state and cached balance; a refresh when there is no balance. */
  function decide(
    ctx: RequestContext,
    subject: SubjectRef,
    state: SubjectState | null | undefined,
    cached: BalanceDecision | null | undefined,
  ): MaybePromise<OnRequestResult> {
    if (state?.blocked === true) {
      count('blocked');
      throw insufficient();
    }
    if (cached) {
      if (cached.noWallet === true && config.failureMode === 'open') return servedWithoutWallet(ctx, subject);
      count(cached.allowed ? 'cached_allowed' : 'cached_denied');
      if (cached.allowed) return CONTINUE;
      throw insufficient();
    }
    return refreshed(ctx, subject, state);
  }

  async function refreshed(
    ctx: RequestContext,
    subject: SubjectRef,
    state: SubjectState | null | undefined,
  ): Promise<OnRequestResult> {
    let decision: BalanceDecision;
    try {
      decision = await sharedRefresh(subject, stateVersion(state));
    } catch (err) {
      return onFailure(ctx, err, 'lookup');
    }
    if (decision.noWallet === true && config.failureMode === 'open') return servedWithoutWallet(ctx, subject);
    count(decision.allowed ? 'allowed' : decision.noWallet === true ? 'no_wallet' : 'denied');
    if (decision.allowed) return CONTINUE;
    throw insufficient();
  }

  async function viewed(ctx: RequestContext, subject: SubjectRef): Promise<OnRequestResult> {
    let state: SubjectState | null | undefined;
    let cached: BalanceDecision | null | undefined;
    try {
      // Reuses the auth hook's read when it already fetched this subject (one round trip per request).
      const view = await requestView(ctx, store, { subject, currency });
      state = view.subject;
      cached = view.balance;
    } catch (err) {
      // Without the subject state a blocked subject cannot be told apart: the failure policy decides,
      // and `open` still asks billing directly (the cache is what failed).
      if (config.failureMode === 'closed') return onFailure(ctx, err, 'store');
      state = undefined;
      cached = undefined;
    }
    return decide(ctx, subject, state, cached);
  }

  return {
    name: 'balance-check',
    onRequest(ctx: RequestContext): MaybePromise<OnRequestResult> {
      if (!config.enabled) return CONTINUE;
      const principal = ctx.principal;
      if (principal === undefined || principal.subjectId === '') {
        count('skipped');
        return CONTINUE;
      }
      const subject: SubjectRef = { type: principal.subjectType, id: principal.subjectId };
      // Without a wait when the auth hook's answer or the store's copy holds the subject and balance.
      const known = peekRequestView(ctx, store, { subject, currency });
      if (known !== undefined) return decide(ctx, subject, known.subject, known.balance);
      return viewed(ctx, subject);
    },
  } satisfies Hook;
}
