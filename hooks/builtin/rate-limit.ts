// Rate limits per access key and per billing subject (docs/operations.md "Rate limits per key and
// subject"): the key's model list, then one admission against the key's and the subject's counters
// (requests, tokens, slots), before the balance check. A refusal is a 429 in the client's shape with the
// vendor's headers; an admitted request's replies carry the same headers, its tokens are settled to the
// metered usage and its slot released when it completes, and its slot's lease renewed while it runs.

import { randomBytes } from 'node:crypto';
import type { RateLimitsConfig } from '../../common/config-types.ts';
import { errorText, GatewayError } from '../../common/errors.ts';
import { globMatcher } from '../../common/glob.ts';
import {
  type Admission,
  type AdmitResult,
  type DimensionState,
  hasLimits,
  type LimitDimension,
  type RateLimitCounters,
  type RateLimits,
  type ScopeUse,
  type Settlement,
  type SubjectRef,
  withDefaults,
} from '../../common/rate-limit-types.ts';
import { RequestState } from '../../common/request-state.ts';
import type {
  Hook,
  MaybePromise,
  OnRequestResult,
  Principal,
  RequestContext,
  ResponseHead,
} from '../../common/types.ts';
import { CONTINUE, GENERATION_APIS, REALTIME_APIS } from '../../common/types.ts';
import {
  errorBody,
  isRateLimitHeader,
  rateLimitHeaders,
  telemetryOf,
  tokenCountOf,
} from '../families/index.ts';

/** Output counted at admission when a generation request sets no cap; settled to the metered count. */
export const DEFAULT_OUTPUT_TOKENS = 1024;

const REFUSAL_CODE = {
  requests: 'rate_limit_requests',
  tokens: 'rate_limit_tokens',
  concurrency: 'concurrency_limit',
} as const satisfies Record<LimitDimension, string>;

export interface RateLimitMetrics {
  /** A request refused by a limit, or admitted without the store (`store_unavailable`). */
  limited(limit: LimitDimension | 'model' | 'store_unavailable'): void;
  /** The remaining share of a dimension's limit after an admission (the gauge keeps the lowest). */
  remaining(dimension: LimitDimension, ratio: number): void;
}

export interface RateLimitOptions {
  readonly config: RateLimitsConfig;
  readonly counters: RateLimitCounters;
  /**
   * The counters' store can hold a subject's own limits (router-admin subject set-limits): every request
   * with a subject is admitted there, whatever the defaults say.
   */
  readonly storedSubjectLimits: boolean;
  readonly metrics?: RateLimitMetrics;
  readonly now?: () => number;
}

/** What an admitted request holds until it completes. */
interface Held {
  readonly key: string | undefined;
  readonly subject: SubjectRef;
  readonly lease: string;
  readonly second: number;
  readonly tokens: number;
  readonly counted: ScopeUse;
  /** Its admission's state and time, for the reply's rate-limit headers. */
  readonly state: AdmitResult;
  readonly at: number;
  /** Some limit applied (then the provider's own rate-limit headers are dropped). */
  readonly limited: boolean;
  readonly share: object | undefined;
}

export interface RateLimiter {
  readonly hook: Hook;
  /** A realtime session ended: its slot is released (its tokens were settled per response). */
  release(ctx: RequestContext): void;
  /** Throws model_not_allowed when the principal's model list does not allow the model. */
  checkModel(principal: Principal | undefined, model: string): void;
  /** The principal's model check, undefined when it may use every model. */
  modelsFor(principal: Principal | undefined): ((model: string) => boolean) | undefined;
  /** Stops renewing leases (the runtime is closing; requests still held are released by their completion). */
  close(): void;
}

/** Whether a principal may use a model (its list, else the default list; the master key: always). */
export function createModelCheck(
  config: RateLimitsConfig,
): (p: Principal | undefined, model: string) => boolean {
  const matchers = new WeakMap<readonly string[], (model: string) => boolean>();
  return (p, model) => {
    if (p === undefined || p.isMaster) return true;
    const list = p.models ?? config.perKey.models;
    if (list === undefined) return true;
    let match = matchers.get(list);
    if (match === undefined) {
      match = globMatcher(list);
      matchers.set(list, match);
    }
    return match(model);
  };
}

/** The provisional count: the body's bytes / 4 (a cheap bound for text) plus the output cap. */
export function provisionalTokens(ctx: RequestContext): number {
  const body = ctx.body;
  if (body === undefined) return GENERATION_APIS.has(ctx.api) ? DEFAULT_OUTPUT_TOKENS : 0;
  const output =
    telemetryOf(ctx.clientFormat)?.maxOutputTokens(body) ??
    (GENERATION_APIS.has(ctx.api) ? DEFAULT_OUTPUT_TOKENS : 0);
  return Math.ceil(ctx.rawBody.length / 4) + Math.floor(output);
}

/** The tokens a completed request used, as metered (what its usage event carries). */
function meteredTokens(ctx: RequestContext, provisional: number): number {
  const u = ctx.usage;
  if (u !== undefined) return u.inputTokens + u.outputTokens;
  // No usage: nothing reached a model, or a reply the gateway could not meter (kept as counted).
  return ctx.provider === undefined || ctx.status >= 400 ? 0 : provisional;
}

function gauge(metrics: RateLimitMetrics, d: LimitDimension, state: DimensionState | undefined): void {
  if (state !== undefined && state.limit > 0) metrics.remaining(d, state.remaining / state.limit);
}

function retryHeaders(ms: number): Record<string, string> {
  const seconds = Math.min(60, Math.max(1, Math.ceil(ms / 1000)));
  return { 'retry-after': String(seconds), 'retry-after-ms': String(Math.max(1, Math.ceil(ms))) };
}

export function createRateLimiter(opts: RateLimitOptions): RateLimiter {
  const { config, counters, metrics } = opts;
  const now = opts.now ?? Date.now;
  const held = new RequestState<Held>();
  const inFlight = new Map<string, Held>();
  // Realtime sessions by their request id, for the responses that settle their tokens.
  const sessions = new Map<string, Held>();
  // A lease of its own per admission: a request id can repeat (a trusted caller's), a lease must not.
  const leasePrefix = `${randomBytes(6).toString('base64url')}:`;
  let leases = 0;
  const allowed = createModelCheck(config);
  const defaultsSet = hasLimits(config.perKey) || hasLimits(config.perSubject) || config.subjects.size > 0;
  const leaseMs = config.leaseMs;
  const timer = setInterval(
    () => {
      if (inFlight.size === 0) return;
      const slots = [...inFlight.values()].filter((h) => h.counted.keySlot || h.counted.subjectSlot);
      if (slots.length > 0) counters.renew(slots, leaseMs).catch(() => undefined);
    },
    Math.max(1000, Math.floor(leaseMs / 3)),
  );
  timer.unref();

  function checkModel(p: Principal | undefined, model: string): void {
    if (allowed(p, model)) return;
    metrics?.limited('model');
    throw new GatewayError(
      'model_not_allowed',
      `This access key may not use the model '${model.slice(0, 200)}'; ask the operator for access or use another model`,
    );
  }

  function subjectLimitsOf(subject: SubjectRef): RateLimits {
    if (config.subjects.size === 0) return config.perSubject;
    return config.subjects.get(`${subject.type}:${subject.id}`) ?? config.perSubject;
  }

  function refuse(ctx: RequestContext, result: AdmitResult, dimension: LimitDimension): OnRequestResult {
    metrics?.limited(dimension);
    const err = new GatewayError(REFUSAL_CODE[dimension]);
    err.retryAfterMs = result.retryAfterMs;
    return {
      kind: 'respond',
      status: err.status,
      body: errorBody(ctx.clientFormat, err, ctx.id),
      headers: {
        ...retryHeaders(result.retryAfterMs),
        ...rateLimitHeaders(ctx.clientFormat, result, now()),
      },
    };
  }

  function admitted(ctx: RequestContext, a: Admission, result: AdmitResult): OnRequestResult {
    if (metrics !== undefined) {
      gauge(metrics, 'requests', result.requests);
      gauge(metrics, 'tokens', result.tokens);
      gauge(metrics, 'concurrency', result.concurrency);
    }
    const h: Held = {
      key: a.key?.name,
      subject: a.subject,
      lease: result.lease ?? a.lease,
      second: result.second,
      tokens: a.tokens,
      counted: result.counted,
      state: result,
      at: now(),
      limited:
        result.requests !== undefined || result.tokens !== undefined || result.concurrency !== undefined,
      share: result.share,
    };
    held.set(ctx, h);
    inFlight.set(h.lease, h);
    if (REALTIME_APIS.has(ctx.api)) sessions.set(ctx.id, h);
    return CONTINUE;
  }

  function decide(ctx: RequestContext, a: Admission, result: AdmitResult): OnRequestResult {
    if (!result.admitted) return refuse(ctx, result, result.refusedBy ?? 'requests');
    return admitted(ctx, a, result);
  }

  function onRequest(ctx: RequestContext): MaybePromise<OnRequestResult> {
    const p = ctx.principal;
    // A realtime session's re-check: the session was counted once, at its upgrade.
    if (p === undefined || p.isMaster || ctx.sessionId !== undefined) return CONTINUE;
    if (ctx.model !== undefined) checkModel(p, ctx.model);
    // Nothing to count: no limit of its own, no defaults, no subject limits in the store.
    if (p.limits === undefined && !defaultsSet && !opts.storedSubjectLimits) return CONTINUE;
    // Token counts are not model calls: they neither count nor take a slot.
    if (tokenCountOf(ctx.api) !== undefined) return CONTINUE;
    const keyLimits = p.keyName === undefined ? undefined : withDefaults(p.limits, config.perKey);
    const subject = { type: p.subjectType, id: p.subjectId !== '' ? p.subjectId : (p.keyName ?? '') };
    const subjectLimits = subjectLimitsOf(subject);
    const keyLimited = hasLimits(keyLimits);
    if (!keyLimited && !hasLimits(subjectLimits) && !opts.storedSubjectLimits) return CONTINUE;
    const a: Admission = {
      key: keyLimited && p.keyName !== undefined ? { name: p.keyName, limits: keyLimits! } : undefined,
      subject,
      subjectLimits,
      lease: `${leasePrefix}${++leases}`,
      countRequest: true,
      tokens: provisionalTokens(ctx),
      holdSlot: true,
    };
    const answer = counters.admit(a, leaseMs);
    if (!(answer instanceof Promise)) return decide(ctx, a, answer);
    return answer.then(
      (result) => decide(ctx, a, result),
      (err: unknown) => {
        if (config.failureMode === 'closed') {
          ctx.log.warn(
            { err: errorText(err) },
            'rate limits unavailable: request refused (failure_mode closed)',
          );
          throw new GatewayError('rate_limit_unavailable');
        }
        metrics?.limited('store_unavailable');
        return CONTINUE;
      },
    );
  }

  const hook: Hook = {
    name: 'rate-limit',
    responseMode: 'observe',
    onRequest,
    onResponseHead(ctx: RequestContext, head: ResponseHead): ResponseHead {
      const h = held.get(ctx);
      if (h === undefined || !h.limited) return head;
      // The provider's own headers describe the operator's shared account, not this client's limits.
      for (const name in head.headers) if (isRateLimitHeader(name)) delete head.headers[name];
      rateLimitHeaders(ctx.clientFormat, h.state, h.at, head.headers);
      return head;
    },
    onComplete(ctx: RequestContext): MaybePromise<void> {
      if (ctx.sessionId !== undefined) return settleResponse(ctx, ctx.sessionId);
      return release(ctx);
    },
  };

  function finish(ctx: RequestContext, s: Settlement): Promise<void> | undefined {
    return counters.finish(s)?.catch((err: unknown) => {
      // A slot frees itself when its lease runs out.
      ctx.log.warn({ err: errorText(err) }, 'rate limits: settling a request failed');
    });
  }

  /** The request's tokens settled to its metered usage and its slot released. */
  function release(ctx: RequestContext): Promise<void> | undefined {
    const h = held.get(ctx);
    if (h === undefined || !inFlight.delete(h.lease)) return undefined;
    const realtime = REALTIME_APIS.has(ctx.api);
    if (realtime && sessions.get(ctx.id) === h) sessions.delete(ctx.id);
    const c = h.counted;
    if (!c.keySlot && !c.subjectSlot && !c.keyTokens && !c.subjectTokens) return undefined;
    // A realtime session's tokens were settled response by response.
    const tokenDelta = realtime ? 0 : meteredTokens(ctx, h.tokens) - h.tokens;
    return finish(ctx, {
      key: h.key,
      subject: h.subject,
      lease: h.lease,
      second: h.second,
      tokenDelta,
      counted: c,
      share: h.share,
    });
  }

  /** One realtime response's tokens, counted in the current second; the session keeps its slot. */
  function settleResponse(ctx: RequestContext, sessionId: string): Promise<void> | undefined {
    const h = sessions.get(sessionId);
    const u = ctx.usage;
    if (h === undefined || u === undefined || !(h.counted.keyTokens || h.counted.subjectTokens))
      return undefined;
    const counted = { ...h.counted, keySlot: false, subjectSlot: false };
    return finish(ctx, { ...h, second: -1, tokenDelta: u.inputTokens + u.outputTokens, counted });
  }

  return {
    hook,
    release: (ctx) => void release(ctx),
    checkModel,
    modelsFor(p) {
      if (p === undefined || p.isMaster || (p.models ?? config.perKey.models) === undefined) return undefined;
      return (model) => allowed(p, model);
    },
    close() {
      clearInterval(timer);
    },
  };
}
