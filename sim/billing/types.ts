// Public types of the billing service simulator (a stand-in for the billing service, docs/billing.md).

import type { UsageEvent } from '../../billing/event/usage-event.ts';

export type RuleSetStatus = 'published' | 'draft';
/**
 * What the rule set charges: `items` every x-billing item with a pricing hint; `spec` only
 * prompt_tokens and completion_tokens, as a rule set written to the specification does.
 */
export type RuleSetMode = 'items' | 'spec';

/**
 * Failure modes that affect ingest. `slow:<ms>` delays the answer; `error500-times:<n>` fails n calls;
 * `reset` drops every API connection (any route) with no answer.
 */
export type IngestFailureMode = 'error500' | 'hang' | 'reset' | `slow:${number}` | `error500-times:${number}`;
/** Failure modes that affect the balance lookup endpoint. */
export type LookupFailureMode = 'lookup-error' | 'lookup-hang';
export type FailureMode = 'none' | IngestFailureMode | LookupFailureMode;

/** The webhook kinds of docs/billing.md "Webhooks". Tests may send any other string too (sendWebhook). */
export type WebhookType =
  | 'wallet.insufficient_balance'
  | 'wallet.balance_changed'
  | 'wallet.available_balance.threshold_crossed'
  | 'usage_limit.exhausted';

export interface Subject {
  subject_type: string;
  subject_id: string;
}

export interface BillingSimOptions {
  /** Default 127.0.0.1. */
  host?: string;
  /** 0 (default) picks a free port. */
  port?: number;
  /** Port of the "portal" listener that answers an HTML 404 to everything. 0 (default) picks a free port. */
  portalPort?: number;
  /** Required Bearer token on every /v1 call. */
  apiKey: string;
  /** Default `proj_local`. */
  projectId?: string;
  /** Extractor rule sets of the project. Default `{ rs_router: 'published' }`. */
  ruleSets?: Record<string, RuleSetStatus>;
  /** What every rule set charges (debits, details' amounts, summaries). Default `items`. */
  ruleSetMode?: RuleSetMode;
  /** Where signed webhooks go. Without it webhooks are only recorded. */
  webhook?: { url: string; secret: string };
  /** Initial wallets, keyed `<subject_type>:<subject_id>`, decimal balance strings, in `currency`. */
  wallets?: Record<string, string>;
  /** Default `USD`. */
  currency?: string;
  /** Balances (decimal strings) whose downward crossing sends `wallet.available_balance.threshold_crossed`. */
  thresholds?: string[];
  /** false: count accepted events without keeping them (benchmarks). Default true. */
  keepEvents?: boolean;
  /**
   * GET /usage/events/details ignores `offset` and answers the newest events every time, as a service
   * without paging would (tests of the reconcile command's refusal). Default false: `offset` skips that
   * many of the newest.
   */
  detailsIgnoreOffset?: boolean;
  /** Largest ingest body in bytes (default 1 MiB). */
  ingestBodyLimitBytes?: number;
  /**
   * A larger ingest body: `reset` (default) drops the connection mid-upload, as a body-limit guard that
   * closes the socket does; `413` reads the body to its end and answers 413 `body_too_large`.
   */
  oversize?: 'reset' | '413';
  /** Webhook delivery attempts in total (default 3) and the delay between them (default 50 ms). */
  webhookAttempts?: number;
  webhookRetryDelayMs?: number;
  /** Clock in milliseconds; default Date.now. Used for webhook timestamps and received_at. */
  now?: () => number;
}

export interface WebhookAttempt {
  /** HTTP status, or undefined when the request failed (network error, timeout). */
  status: number | undefined;
  error?: string;
}

/** One webhook the simulator sent (or recorded, when no webhook URL is configured). */
export interface WebhookDelivery {
  id: string;
  type: string;
  subject: Subject;
  /** The exact bytes sent (as UTF-8 text) and the headers, so tests can replay them. */
  body: string;
  headers: Record<string, string>;
  url: string | undefined;
  attempts: WebhookAttempt[];
  /** Status of the last attempt; undefined while pending, when no attempt was made, or on network failure. */
  status: number | undefined;
  /** True once the receiver answered 2xx. */
  delivered: boolean;
  /** True once delivery finished (delivered, attempts exhausted, or nothing to send to). */
  settled: boolean;
}

export interface SendWebhookOptions {
  /** Event id; default `evt_<n>`. Reuse an id to test deduplication. */
  id?: string;
  /** Unix seconds put in the header and the body; default now. Use an old value to test staleness. */
  timestamp?: number;
  /** Signing secret; default the configured one. A different secret forges the signature. */
  secret?: string;
  /** Exact signature header value, overriding the computed one (e.g. a list `v1=a,v1=b`). */
  signature?: string;
  /** Leave out the signature / timestamp header. */
  omitSignature?: boolean;
  omitTimestamp?: boolean;
  /** Exact body text, overriding the generated JSON (it is still signed unless `signature` is given). */
  rawBody?: string;
  /** Fields merged into `data` (e.g. balance, threshold). */
  data?: Record<string, unknown>;
  /** Target; default the configured webhook URL. */
  url?: string;
  /** Attempts in total; default 1 for test-sent webhooks. */
  attempts?: number;
}

export interface BillingSimState {
  accepted: number;
  ingestCalls: number;
  duplicates: number;
  lookups: number;
  webhooks: number;
  failure: { ingest: FailureMode; lookup: FailureMode };
  wallets: Array<{ subject_type: string; subject_id: string; currency: string; balance: string }>;
}

export interface BillingSim {
  /** Base URL of the API listener, e.g. http://127.0.0.1:41234 (no trailing slash). */
  readonly url: string;
  /** Base URL of the portal listener (HTML 404 to everything). */
  readonly portalUrl: string;
  readonly projectId: string;
  /** Accepted events in order of acceptance (empty when keepEvents is false). Raw bodies are not kept. */
  readonly events: readonly UsageEvent[];
  /** Number of accepted (first-seen) events, also with keepEvents false. */
  readonly accepted: number;
  /** Every request that reached the ingest route, whatever its outcome (duplicates, failures included). */
  readonly ingestCalls: number;
  /** Ingests answered 202 as a duplicate of an already accepted idempotency key. */
  readonly duplicates: number;
  /** Accepted ingests that had no `Idempotency-Key` header. */
  readonly missingIdempotencyHeader: number;
  /** Every request that reached the balance lookup route. */
  readonly lookups: number;
  readonly webhooksSent: readonly WebhookDelivery[];
  /** Current balance as a decimal string; throws when the subject has no wallet in that currency. */
  balance(subjectType: string, subjectId: string, currency?: string): string;
  /** Credits a wallet (creating it at 0) like POST .../wallets/credit; returns the new balance. */
  credit(subjectType: string, subjectId: string, amount: string, currency?: string): string;
  /** Sets a balance without sending webhooks (test setup). */
  setWallet(subjectType: string, subjectId: string, balance: string, currency?: string): void;
  setRuleSet(ruleSetId: string, status: RuleSetStatus): void;
  /** Ingest modes and lookup modes are independent slots; `none` clears both. Throws on an unknown mode. */
  setFailure(mode: FailureMode): void;
  /** Sends a signed webhook now (also forged / stale / replayed ones, see options). */
  sendWebhook(
    type: WebhookType | string,
    subject: Subject,
    opts?: SendWebhookOptions,
  ): Promise<WebhookDelivery>;
  /** Sends the exact body and headers of an earlier delivery again (one attempt). */
  replayWebhook(delivery: WebhookDelivery): Promise<WebhookDelivery>;
  /**
   * Test only (also POST /_sim/events/delete {"request_ids": [...]}): forgets accepted events as if the
   * service had lost them; their idempotency keys are free again, so a re-send is accepted. Wallets are
   * not credited back. Returns how many were found.
   */
  deleteEvents(requestIds: readonly string[]): number;
  /** Turns BillingSimOptions.detailsIgnoreOffset on or off. */
  setDetailsIgnoreOffset(ignore: boolean): void;
  /** Resolves once at least n events were accepted; rejects after timeoutMs. */
  waitForEvents(n: number, timeoutMs: number): Promise<void>;
  /** Resolves with the first n settled deliveries once n webhooks have settled; rejects after timeoutMs. */
  waitForWebhooks(n: number, timeoutMs: number): Promise<WebhookDelivery[]>;
  state(): BillingSimState;
  /** Back to the start: events, counters, wallets, webhooks, failure modes; held requests are dropped. */
  reset(): void;
  close(): Promise<void>;
}
