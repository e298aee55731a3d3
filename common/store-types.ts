// The one store interface (docs/architecture.md): access keys, subject state, webhook ids and the balance
// cache (the usage-event queue's is billing/event/event-queue.ts). File mode and Redis mode are two
// adapters of it; nothing above an adapter knows which one it has. Key layout of the Redis adapter:
// docs/operations.md "Keys in Redis".

import type { RateLimitCounters, RateLimits, SubjectLimitStore } from './rate-limit-types.ts';
import type { ResponseStore } from './response-store-types.ts';

export interface SubjectRef {
  readonly type: string;
  readonly id: string;
}

/** Subject state driven by billing webhooks (docs/billing.md "Webhooks"). */
export interface SubjectState {
  readonly blocked: boolean;
  /** Type of the webhook event that last changed the state. */
  readonly lastEvent: string;
  readonly lastEventId: string;
  /** ms since epoch. */
  readonly updatedAt: number;
  /** Set by `wallet.available_balance.threshold_crossed` (recorded only). */
  readonly thresholdCrossedAt?: number;
  /** Balance as the webhook reported it, informational (decisions use the realtime lookup). */
  readonly balance?: string;
}

/** A cached answer of the balance pre-check. `allowed` = balance strictly greater than zero. */
export interface BalanceDecision {
  readonly allowed: boolean;
  readonly balance: string;
  readonly currency: string;
  /** ms since epoch. */
  readonly fetchedAt: number;
  /** Refused because the subject has no wallet (not because its balance is spent). */
  readonly noWallet?: boolean;
}

export type StoredKeyStatus = 'active' | 'revoked';

/** An access key in the shared store: only the HMAC of the secret is kept. */
export interface StoredAccessKey {
  readonly name: string;
  /** base64url(HMAC-SHA256(access_key_hash_secret, secret)). */
  readonly secretHash: string;
  readonly status: StoredKeyStatus;
  readonly subjectType: string;
  readonly subjectId: string;
  /** ms since epoch. */
  readonly createdAt: number;
  readonly expiresAt: number | undefined;
  /** Incremented by rotate and revoke. */
  readonly version: number;
  /**
   * Which hash secret made secretHash: a short HMAC of a fixed label under it (hashSecretId in
   * hooks/builtin/auth.ts), never the secret. Absent on records written before it was recorded.
   */
  readonly hashSecretId?: string;
  /** The key's own rate limits (field `limits`, JSON); rate_limits.per_key fills what it leaves out. */
  readonly limits?: RateLimits;
  /** Glob patterns of the client model ids it may use (field `models`, JSON); absent = per_key.models. */
  readonly models?: readonly string[];
}

export interface RehashedKey {
  readonly key: StoredAccessKey;
  /** Whether this call moved it. */
  readonly moved: boolean;
}

/**
 * What one request needs, read in ONE round trip (Redis: one pipelined script call). `null` means
 * "asked and absent"; `undefined` means "not asked".
 */
export interface RequestView {
  readonly key?: StoredAccessKey | null;
  readonly subject?: SubjectState | null;
  readonly balance?: BalanceDecision | null;
}

export interface RequestViewQuery {
  /** Look the key up by its secret hash (shared-store access keys). */
  readonly keyHash?: string;
  /** Subject to read state and cached balance for; when a key is found, its own subject is used. */
  readonly subject?: SubjectRef;
  /** Currency of the cached balance to read; omit to skip the balance. */
  readonly currency?: string;
}

export interface StoreHealth {
  readonly connected: boolean;
  readonly viewCache?: { readonly live: boolean; readonly entries: number; readonly invalidations: number };
}

/** Raised by adapters when the store cannot answer (connection down, timeout). */
export class StoreUnavailableError extends Error {
  readonly operation: string;
  constructor(operation: string, cause?: unknown) {
    super(`store unavailable during ${operation}`, { cause });
    this.name = 'StoreUnavailableError';
    this.operation = operation;
  }
}

export interface StateStore {
  readonly kind: 'file' | 'redis';
  /** The hot-path read; throws StoreUnavailableError when the store is down. */
  view(query: RequestViewQuery): Promise<RequestView>;
  /** The answer `view` would give from the store's in-process copy, when it holds one (no wait). */
  peekView?(query: RequestViewQuery): RequestView | undefined;
  getSubject(subject: SubjectRef): Promise<SubjectState | undefined>;
  setSubject(subject: SubjectRef, state: SubjectState): Promise<void>;
  /**
   * Record a webhook id before its state change (SET NX with TTL in Redis; persisted in file mode, so it
   * survives restarts). False when the id was already claimed: the duplicate is dropped.
   */
  claimWebhook(id: string, ttlMs: number): Promise<boolean>;
  /** Undo a claim whose state change failed, so the sender's retry is processed. */
  releaseWebhook(id: string): Promise<void>;
  putBalance(subject: SubjectRef, decision: BalanceDecision, ttlMs: number): Promise<void>;
  invalidateBalance(subject: SubjectRef): Promise<void>;
  /**
   * Single flight across instances: true when the caller should refresh the balance now; false when
   * another caller holds the refresh (then wait for its result or use the last one).
   */
  tryRefreshLock(subject: SubjectRef, currency: string, ttlMs: number): Promise<boolean>;
  /**
   * Hash-secret rotation: moves the key indexed under `fromHash` (the previous secret's) to `toHash`
   * (the current one's) in one atomic step, only while its record is active and still has `fromHash`.
   * Answers the record as it then stands (moved by this call, left in place because it is revoked, or
   * already moved by another instance); null when neither hash names a key. Only stores that hold
   * access keys have it.
   */
  rehashAccessKey?(fromHash: string, toHash: string, hashSecretId: string): Promise<RehashedKey | null>;
  /** Subjects' own rate limits, where the store keeps them (Redis; file mode has router.yaml's). */
  readonly subjectLimits?: SubjectLimitStore;
  /** Rate-limit counters shared by every instance (Redis); file mode counts in process. */
  readonly rateLimits?: RateLimitCounters;
  /** Stored responses shared by every instance (Redis); file mode keeps them in memory. */
  readonly responses?: ResponseStore;
  /** Store health for /readyz (Redis: with the state of the gateway's view cache when it has one). */
  health(): Promise<StoreHealth>;
  close(): Promise<void>;
}

export interface AccessKeyStore {
  create(key: StoredAccessKey): Promise<'created' | 'exists'>;
  get(name: string): Promise<StoredAccessKey | undefined>;
  list(): Promise<StoredAccessKey[]>;
  /** Mark revoked; every instance refuses it at its next request. */
  revoke(name: string): Promise<StoredAccessKey | undefined>;
  /** Replace the secret hash (old secret refused at once). */
  rotate(name: string, secretHash: string, hashSecretId?: string): Promise<StoredAccessKey | undefined>;
  /**
   * Change a live key's limits and model list (null clears one, undefined leaves it); every instance
   * applies them at its next request. Undefined when there is no such key.
   */
  update(name: string, change: AccessKeyChange): Promise<StoredAccessKey | undefined>;
}

export interface AccessKeyChange {
  readonly limits?: RateLimits | null;
  readonly models?: readonly string[] | null;
}
