// The validated, normalized configuration. The YAML files use snake_case keys (docs/configuration.md);
// the loader (config/load.ts) validates them with the published JSON Schema, applies `${ENV}`
// interpolation and the ROUTER_* environment overrides, and produces these camelCase objects once per
// load. Nothing reads YAML or the environment after that.

import type { RateLimits } from './rate-limit-types.ts';
import type { JsonValue } from './types.ts';

export interface ListenAddress {
  readonly host: string;
  readonly port: number;
}

export interface LimitsConfig {
  /** Largest request body accepted; larger gets 413. */
  readonly maxBodyBytes: number;
  readonly upstreamConnectTimeoutMs: number;
  /** Time until upstream response headers; exceeded -> 504. */
  readonly upstreamHeadersTimeoutMs: number;
  /** Longest silence between two upstream body chunks; exceeded -> 504 (or a stream error event). */
  readonly upstreamBodyTimeoutMs: number;
  /** Further providers tried after the first on connect error, 429 or 5xx before any byte was sent. */
  readonly maxRetries: number;
  /**
   * How long after asking the serving provider's count (alongside the generation) an Anthropic client's
   * translated stream waits for it before message_start states the estimate (0: never asked).
   */
  readonly earlyCountWaitMs: number;
  /** Longest a realtime session may last, in seconds (0: no limit). */
  readonly realtimeMaxSessionS: number;
  readonly realtimeMaxMessageBytes: number;
  /** Time in-flight requests get to finish on SIGTERM. */
  readonly drainTimeoutMs: number;
  /** Time a client gets to send a request's headers; exceeded -> 408. */
  readonly clientHeaderTimeoutMs: number;
  /** Longest silence between two chunks of a request body; exceeded -> 408. */
  readonly clientBodyTimeoutMs: number;
  /** Idle time of a keep-alive client connection between requests. */
  readonly keepAliveTimeoutMs: number;
  /** Open client connections per process (the idle ones are shed first at the cap). */
  readonly maxConnections: number;
  /** Largest request line plus headers; larger -> 431 (414 for a long URL). */
  readonly maxHeaderBytes: number;
  /** Deepest nesting accepted in a JSON request body; deeper -> 400. */
  readonly maxJsonDepth: number;
}

export interface HookConfig {
  /** Module path, resolved relative to the main configuration file. */
  readonly module: string;
  readonly options: Readonly<Record<string, JsonValue>>;
}

export interface BalanceEnforcementConfig {
  readonly enabled: boolean;
  readonly currency: string;
  readonly failureMode: 'closed' | 'open';
  readonly requestTimeoutMs: number;
  readonly webhookPath: string;
  readonly webhookSecret: string;
  readonly timestampToleranceS: number;
  /** How long an allowed (balance > 0) answer is cached. */
  readonly cacheTtlMs: number;
  /** How long a denied (balance <= 0) answer is cached. */
  readonly deniedCacheTtlMs: number;
  /** Largest webhook body accepted. */
  readonly webhookMaxBodyBytes: number;
}

/**
 * `spec`: prompt_tokens and completion_tokens cover all tokens (the specification's two charge items);
 * `detailed`: cache and audio tokens are items of their own.
 */
export type ItemDetail = 'spec' | 'detailed';

/**
 * What an interrupted stream is billed for (docs/billing.md "Interrupted streams"): `bill_delivered` what
 * reached the client; `finish_upstream` the provider's final usage, the upstream read on after the client
 * left for at most interruptedStreamMaxMs; `void` nothing (no event).
 */
export type InterruptedStreamPolicy = 'bill_delivered' | 'finish_upstream' | 'void';

export interface BillingConfig {
  readonly enabled: boolean;
  readonly baseUrl: string;
  readonly projectId: string;
  readonly apiKey: string;
  /** Key with read access to usage events (router-admin billing reconcile); billing.api_key when unset. */
  readonly readApiKey: string;
  readonly extractorRuleSetId: string;
  /** Value of the event's `source` field. */
  readonly source: string;
  /** Absolute path; holds events.jsonl and the delivery state (file mode). */
  readonly outboxDir: string;
  /** Least time between two fdatasync() calls of the outbox file (file mode). */
  readonly outboxFsyncIntervalMs: number;
  /** Absolute path; holds subjects.json and webhook-ids.jsonl (file mode, balance enforcement). */
  readonly stateDir: string;
  readonly requestTimeoutMs: number;
  readonly retryIntervalMs: number;
  /** Upper bound of the retry backoff. */
  readonly maxRetryIntervalMs: number;
  /** Idle sidecar: wait this long after new events appear before reading them (batching). */
  readonly deliveryLingerMs: number;
  /** Attempts before an event is dead-lettered (file mode; store mode uses store.billingMaxAttempts). */
  readonly maxAttempts: number;
  /**
   * Hours delivered events stay in the outbox segments / the stream as the ledger of what was served
   * (docs/billing.md "The ledger"); 0 deletes them once delivered.
   */
  readonly ledgerRetentionH: number;
  readonly onlyBillableSuccess: boolean;
  /** How token usage is itemised in x-billing (docs/billing.md "Charge items"). */
  readonly itemDetail: ItemDetail;
  readonly interruptedStream: InterruptedStreamPolicy;
  /** finish_upstream: longest time a stream is read on after its client left. */
  readonly interruptedStreamMaxMs: number;
  readonly subjectType: string;
  readonly fallbackSubjectId: string;
  /** Where the sidecar listens (health, webhooks); env ROUTER_BILLING_LISTEN. */
  readonly listen: ListenAddress;
  readonly balanceEnforcement: BalanceEnforcementConfig;
}

export type AccessKeyMode = 'redis_preferred' | 'redis_only' | 'file_only';

export interface StoreConfig {
  readonly enabled: boolean;
  /** redis:// or rediss:// URL; with sentinels, only its credentials, database and TLS are used. */
  readonly addr: string;
  /** A Redis Cluster: `addr` lists seed nodes (comma-separated URLs). */
  readonly cluster: boolean;
  /** Usage-event streams (docs/operations.md "Keys in Redis"). */
  readonly billingStreamShards: number;
  /** Sentinels of a failover setup; empty = connect to addr directly. */
  readonly sentinels: readonly { readonly host: string; readonly port: number }[];
  readonly sentinelName: string;
  readonly sentinelPassword: string | undefined;
  readonly username: string | undefined;
  readonly password: string | undefined;
  readonly tls: boolean;
  /** PEM CA certificate(s) trusted instead of Node's default roots (store.tls_ca_file). */
  readonly tlsCa?: Buffer;
  /** PEM client certificate and its key (store.tls_cert_file, store.tls_key_file): both or neither. */
  readonly tlsCert?: Buffer;
  readonly tlsKey?: Buffer;
  readonly keyPrefix: string;
  readonly operationTimeoutMs: number;
  /** Upper bound on the gateway's in-process copy of request views (store/view-cache.ts); 0 = off. */
  readonly viewCacheMs: number;
  readonly accessKeyMode: AccessKeyMode;
  readonly billingStream: string;
  readonly billingConsumerGroup: string;
  /** Empty: generated from hostname and pid. */
  readonly billingConsumerName: string;
  readonly billingMaxAttempts: number;
  /** Replicas that must acknowledge a batch of usage events before it counts as recorded (0 = off). */
  readonly billingWaitReplicas: number;
  readonly accessKeyHashSecret: string;
  /** The hash secret being rotated away from ('' = no rotation under way). */
  readonly previousAccessKeyHashSecret: string;
  /** Idle time after which another consumer reclaims a pending entry. */
  readonly reclaimIdleMs: number;
}

export interface SidecarConfig {
  /** Whether `router` starts `router-billing` as a supervised child (`--no-sidecar` turns it off). */
  readonly enabled: boolean;
  /** How long a webhook on the gateway's port waits for a starting supervised sidecar. */
  readonly webhookWaitMs: number;
}

export interface AccessKeyEntry {
  readonly name: string;
  /** Plaintext secret (keys file) ... */
  readonly value: string | undefined;
  /** ... or base64url(HMAC-SHA256(access_key_hash_secret, secret)). */
  readonly hash: string | undefined;
  readonly subjectType: string | undefined;
  readonly subjectId: string | undefined;
  readonly status: 'active' | 'revoked' | 'disabled';
  /** ms since epoch; undefined = never expires. */
  readonly expiresAt: number | undefined;
  readonly createdAt: number | undefined;
  /** The key's own rate limits (rate_limits.per_key fills the fields it leaves out). */
  readonly limits?: RateLimits;
  /** Glob patterns of the client model ids the key may use; undefined = rate_limits.per_key.models. */
  readonly models?: readonly string[];
}

/** An upstream credential ("channel"); pricing may override per channel (`openai/key1`). */
export interface UpstreamKey {
  readonly name: string;
  readonly value: string;
}

/** AWS credentials for SigV4 (`providers.<name>.aws`, or AWS_ACCESS_KEY_ID ...). */
export interface AwsCredentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken?: string | undefined;
}

/** A Microsoft Entra ID application (client-credentials grant). */
export interface EntraCredentials {
  readonly tenantId: string;
  readonly clientId: string;
  readonly clientSecret: string;
}

/** The cloud credentials the keys file gives one provider (the environment's are merged per provider). */
export interface CloudCredentials {
  readonly aws?: AwsCredentials | undefined;
  /** Absolute path of a Google service account key file. */
  readonly serviceAccountFile?: string | undefined;
  readonly entra?: EntraCredentials | undefined;
}

export interface KeysConfig {
  readonly file: string | undefined;
  readonly accessKeys: readonly AccessKeyEntry[];
  /** provider name -> its upstream keys (round robin). Includes ROUTER_PROVIDER_<NAME>_API_KEY. */
  readonly providerKeys: ReadonlyMap<string, readonly UpstreamKey[]>;
  /** provider name -> the keys file's cloud credentials (never the environment's: cloudCredentialsOf). */
  readonly cloudCredentials?: ReadonlyMap<string, CloudCredentials>;
}

export interface ModelRoute {
  readonly provider: string;
  /** Upstream model name; undefined = the requested name. */
  readonly model: string | undefined;
}

export interface ModelEntry {
  /** Exact id, or a pattern with one trailing `*` (`gpt-*`). */
  readonly id: string;
  readonly routes: readonly ModelRoute[];
  readonly strategy: 'round_robin' | 'priority';
  readonly ownedBy: string | undefined;
  /** Listed by GET /v1/models (patterns never are). */
  readonly listed: boolean;
}

export interface ModelRegistryConfig {
  readonly file: string | undefined;
  readonly entries: readonly ModelEntry[];
}

export interface PricingConfig {
  readonly files: readonly string[];
}

export type TraceSampler =
  | 'always_on'
  | 'always_off'
  | 'traceidratio'
  | 'parentbased_always_on'
  | 'parentbased_always_off'
  | 'parentbased_traceidratio';

/** `telemetry.traces` with the OTEL_* variables applied; `url` undefined means tracing is off. */
export interface TracesConfig {
  readonly url: string | undefined;
  readonly protocol: 'http/protobuf' | 'http/json';
  /** Secret (a collector's API key may be among them). */
  readonly headers: Readonly<Record<string, string>>;
  readonly sampler: TraceSampler;
  readonly samplerArg: number;
  /** Longest wait before buffered spans are exported. */
  readonly exportDelayMs: number;
  readonly serviceName: string;
  readonly resourceAttributes: Readonly<Record<string, string>>;
}

export interface RouterConfig {
  /** Absolute path of the main file. */
  readonly file: string;
  readonly listen: ListenAddress;
  /** Serving processes on the listen address (`auto` resolved); more than 1 runs a primary. */
  readonly workers: number;
  /** Absolute path of the folder with one `<provider>.conf` per provider. */
  readonly providersDir: string;
  readonly masterKey: string | undefined;
  readonly limits: LimitsConfig;
  readonly requestId: { readonly trustedSources: readonly string[] };
  readonly log: { readonly level: 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal' | 'silent' };
  readonly telemetry: { readonly traces: TracesConfig };
  readonly hooks: readonly HookConfig[];
  readonly sidecar: SidecarConfig;
  readonly billing: BillingConfig;
  readonly store: StoreConfig;
  readonly keys: KeysConfig;
  readonly models: ModelRegistryConfig;
  readonly pricing: PricingConfig;
  readonly rateLimits: RateLimitsConfig;
  readonly responses: ResponsesConfig;
}

/** `responses` (docs/configuration.md): stored Responses API replies. */
export interface ResponsesConfig {
  /** 0: nothing is stored. */
  readonly storeTtlS: number;
  readonly storeMaxBytes: number;
}

/** `rate_limits` (docs/configuration.md): traffic limits per key and per subject. */
export interface RateLimitsConfig {
  /** Limits of keys that set none (field by field), and the model list of keys without one. */
  readonly perKey: RateLimits & { readonly models?: readonly string[] };
  readonly perSubject: RateLimits;
  /** Without the store's answer: admit (and count it) or refuse with 503. */
  readonly failureMode: 'open' | 'closed';
  /** A slot not renewed for this long is free (an instance that died holds none past it). */
  readonly leaseMs: number;
  /** File mode: one subject's own limits, by `<subject type>:<subject id>`. */
  readonly subjects: ReadonlyMap<string, RateLimits>;
}

/** A configuration problem, printed as `file:line:col: message` (line/col 0 when unknown). */
export interface ConfigDiagnostic {
  readonly file: string;
  readonly line: number;
  readonly col: number;
  readonly message: string;
}
