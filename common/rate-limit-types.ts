// Rate limits on traffic per access key and per billing subject (docs/operations.md "Rate limits per key
// and subject"). They hold no money: the billing service's own usage limits act through its webhooks.
// Two adapters keep the counters: the Redis store (exact across instances) and the in-process counter
// of file mode (exact across one host's workers, through the primary).

/** A billing subject (as common/store-types.ts names it; spelled out here so neither imports the other). */
export interface SubjectRef {
  readonly type: string;
  readonly id: string;
}

/** Limits of one scope (a key or a subject); an absent field is no limit. */
export interface RateLimits {
  readonly requestsPerMinute?: number;
  readonly tokensPerMinute?: number;
  readonly maxConcurrent?: number;
}

/** The three limits as their wire and configuration names say them. */
export const RATE_LIMIT_FIELDS = {
  requestsPerMinute: 'requests_per_minute',
  tokensPerMinute: 'tokens_per_minute',
  maxConcurrent: 'max_concurrent',
} as const satisfies Record<keyof RateLimits, string>;

export type LimitDimension = 'requests' | 'tokens' | 'concurrency';

/** One dimension's state after an admission, the tightest of the key's and the subject's. */
export interface DimensionState {
  readonly limit: number;
  readonly remaining: number;
  /** ms until the window has room again (its oldest second leaves it); 0 when it is empty. */
  readonly resetMs: number;
}

export interface Admission {
  /** The key's effective limits (its own, else rate_limits.per_key); undefined for a key-less subject. */
  readonly key: { readonly name: string; readonly limits: RateLimits } | undefined;
  readonly subject: SubjectRef;
  /** rate_limits.per_subject, or the file's `subjects` entry; the Redis store's own record overrides it. */
  readonly subjectLimits: RateLimits;
  /** The admission's lease id: unique per admission, held in the concurrency sets until released. */
  readonly lease: string;
  /** Counted in requests_per_minute (false for token counts and a realtime session's later turns). */
  readonly countRequest: boolean;
  /** Provisional tokens counted where a tokens_per_minute limit applies. */
  readonly tokens: number;
  /** Whether to take a concurrency slot (false when the request takes none). */
  readonly holdSlot: boolean;
}

export interface AdmitResult {
  readonly admitted: boolean;
  /** The limit that refused (the one whose room comes back last). */
  readonly refusedBy?: LimitDimension;
  /** When refused: ms until a retry can pass. */
  readonly retryAfterMs: number;
  /** The counters' second (in the store's clock) the request was counted in, for settling its tokens. */
  readonly second: number;
  readonly requests?: DimensionState;
  readonly tokens?: DimensionState;
  readonly concurrency?: DimensionState;
  /** Which scopes the admission counted tokens in and took a slot of (settlement undoes exactly those). */
  readonly counted: ScopeUse;
  /** The slot's lease when the counters chose it (an instance's share hands out its own); else the admission's. */
  readonly lease?: string;
  /** The instance share that admitted it, handed back with its settlement (opaque to the hook). */
  readonly share?: object;
}

export interface ScopeUse {
  readonly subjectTokens: boolean;
  readonly subjectSlot: boolean;
  readonly keyTokens: boolean;
  readonly keySlot: boolean;
}

export const NOTHING_COUNTED: ScopeUse = Object.freeze({
  subjectTokens: false,
  subjectSlot: false,
  keyTokens: false,
  keySlot: false,
});

/** What completion tells the counters about an admitted request. */
export interface Settlement {
  readonly key: string | undefined;
  readonly subject: SubjectRef;
  readonly lease: string;
  /** The second its tokens were counted in; -1 adds them to the current one (a realtime response). */
  readonly second: number;
  /** Metered tokens less the provisional count (0: nothing to change). */
  readonly tokenDelta: number;
  readonly counted: ScopeUse;
  /** The admission's `share`, if any: the settlement goes back to it while it lasts. */
  readonly share?: object;
}

/** A held slot, as the renewal names it. */
export interface HeldSlot {
  readonly key: string | undefined;
  readonly subject: SubjectRef;
  readonly lease: string;
  readonly counted: ScopeUse;
}

/** The counters; both adapters are exact for what they share (docs/scaling.md). */
export interface RateLimitCounters {
  /** An answer at once when the instance could decide alone (docs/operations.md "Instance shares"). */
  admit(admission: Admission, leaseMs: number): AdmitResult | Promise<AdmitResult>;
  /** Settles the request's tokens and releases its slot; undefined when that was done at once. */
  finish(settlement: Settlement): Promise<void> | undefined;
  /** Extends the leases of slots still held (every lease_s / 3). */
  renew(slots: readonly HeldSlot[], leaseMs: number): Promise<void>;
}

/** A subject's own limits, kept by the shared store (router-admin subject set-limits). */
export interface SubjectLimitStore {
  getSubjectLimits(subject: SubjectRef): Promise<RateLimits | undefined>;
  /** undefined clears them (the defaults apply again). */
  setSubjectLimits(subject: SubjectRef, limits: RateLimits | undefined): Promise<void>;
}

/** The Redis keys of one subject's counters share this hash tag (docs/operations.md "Keys in Redis"). */
export function rateLimitTag(subject: SubjectRef): string {
  return `{rl:${subject.type}:${subject.id}}`;
}

/** Whether any limit is set. */
export function hasLimits(limits: RateLimits | undefined): boolean {
  return (
    limits !== undefined &&
    (limits.requestsPerMinute !== undefined ||
      limits.tokensPerMinute !== undefined ||
      limits.maxConcurrent !== undefined)
  );
}

/** `own` field by field, else `defaults`. */
export function withDefaults(own: RateLimits | undefined, defaults: RateLimits): RateLimits {
  if (own === undefined) return defaults;
  return {
    requestsPerMinute: own.requestsPerMinute ?? defaults.requestsPerMinute,
    tokensPerMinute: own.tokensPerMinute ?? defaults.tokensPerMinute,
    maxConcurrent: own.maxConcurrent ?? defaults.maxConcurrent,
  };
}
