// The main file's shape after schema validation with defaults filled (snake_case, as written), and
// its mapping to the RouterConfig the processes use: paths resolved against the file's folder,
// defaults that depend on the environment applied.

import { availableParallelism, homedir } from 'node:os';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import type { FromSchema } from 'json-schema-to-ts';
import type {
  BillingConfig,
  HookConfig,
  KeysConfig,
  ListenAddress,
  ModelRegistryConfig,
  RateLimitsConfig,
  RouterConfig,
  StoreConfig,
  TracesConfig,
} from '../common/config-types.ts';
import { hookModulePath } from '../common/hook-module-path.ts';
import type { JsonValue } from '../common/types.ts';
import type { Env } from './interpolate.ts';
import { parseListenAddress } from './listen.ts';
import { toRateLimitFields } from './rate-limits.ts';
import type { ROUTER_CONFIG_SCHEMA } from './schema-const.ts';

/**
 * The main file after schema validation, defaults filled in, as a type derived from the JSON Schema
 * itself: a key the schema renames, removes or retypes is a type error in the mapping below.
 */
export type RawConfig = FromSchema<typeof ROUTER_CONFIG_SCHEMA>;

/** Module paths starting with `.` or `/` are files next to the configuration; others are packages. */
/** A module the loader cannot place (a `file:` URL of no local file) is kept: its import reports it. */
function hookModuleOf(module: string, file: string): string {
  try {
    return hookModulePath(module, file);
  } catch {
    return module;
  }
}

function optional(value: string | undefined): string | undefined {
  return value === undefined || value === '' ? undefined : value;
}

function fallbackListen(text: string): ListenAddress {
  return parseListenAddress(text) ?? { host: '127.0.0.1', port: 0 };
}

/**
 * Where file-mode data (outbox, subject state) lives when the configuration names no directory: the
 * user's state directory, never beside the configuration, which may sit in a source checkout.
 */
export function defaultDataDir(env: Env): string {
  const xdg = env.XDG_STATE_HOME;
  // The XDG base-directory rules ignore a relative value.
  if (xdg !== undefined && isAbsolute(xdg)) return join(xdg, 'llm-router');
  const home = env.HOME !== undefined && isAbsolute(env.HOME) ? env.HOME : homedir();
  return join(home, '.local', 'state', 'llm-router');
}

function toBilling(raw: RawConfig['billing'], dir: string, env: Env): BillingConfig {
  const balance = raw.balance_enforcement;
  return {
    enabled: raw.enabled,
    baseUrl: (raw.base_url ?? '').replace(/\/+$/, ''),
    projectId: raw.project_id ?? '',
    apiKey: raw.api_key ?? '',
    readApiKey: optional(raw.read_api_key) ?? raw.api_key ?? '',
    extractorRuleSetId: raw.extractor_rule_set_id ?? '',
    source: raw.source,
    outboxDir: resolve(dir, raw.outbox_dir ?? join(defaultDataDir(env), 'outbox')),
    outboxFsyncIntervalMs: raw.outbox_fsync_interval_ms,
    stateDir: resolve(dir, raw.state_dir ?? join(defaultDataDir(env), 'state')),
    requestTimeoutMs: raw.request_timeout_ms,
    retryIntervalMs: raw.retry_interval_ms,
    maxRetryIntervalMs: raw.max_retry_interval_ms,
    deliveryLingerMs: raw.delivery_linger_ms,
    maxAttempts: raw.max_attempts,
    ledgerRetentionH: raw.ledger_retention_h,
    onlyBillableSuccess: raw.only_billable_success,
    itemDetail: raw.item_detail,
    interruptedStream: raw.interrupted_stream,
    interruptedStreamMaxMs: raw.interrupted_stream_max_ms,
    subjectType: raw.subject_type,
    fallbackSubjectId: raw.fallback_subject_id,
    listen: fallbackListen(raw.listen),
    balanceEnforcement: {
      enabled: balance.enabled,
      currency: balance.currency,
      failureMode: balance.failure_mode,
      requestTimeoutMs: balance.request_timeout_ms,
      webhookPath: balance.webhook_path,
      webhookSecret: balance.webhook_secret ?? '',
      timestampToleranceS: balance.timestamp_tolerance_s,
      cacheTtlMs: balance.cache_ttl_ms,
      deniedCacheTtlMs: balance.denied_cache_ttl_ms,
      webhookMaxBodyBytes: balance.webhook_max_body_bytes,
    },
  };
}

/** The store's TLS files, by key of the `store` block. */
export const STORE_TLS_FILES = ['tls_ca_file', 'tls_cert_file', 'tls_key_file'] as const;
export type StoreTlsFile = (typeof STORE_TLS_FILES)[number];

/** The store's TLS files that are set, resolved against the configuration's folder. */
export function storeTlsPaths(raw: RawConfig['store'], dir: string): Partial<Record<StoreTlsFile, string>> {
  const paths: Partial<Record<StoreTlsFile, string>> = {};
  for (const key of STORE_TLS_FILES) {
    const path = raw[key];
    if (path !== undefined) paths[key] = resolve(dir, path);
  }
  return paths;
}

/** Store TLS options: the contents of the files storeTlsPaths names, read by the loader. */
export type StoreTlsContents = Partial<Record<StoreTlsFile, Buffer>>;

function toStore(raw: RawConfig['store'], tlsFiles: StoreTlsContents): StoreConfig {
  const addr = raw.addr ?? '';
  const { tls_ca_file: tlsCa, tls_cert_file: tlsCert, tls_key_file: tlsKey } = tlsFiles;
  return {
    enabled: raw.enabled,
    addr,
    cluster: raw.cluster,
    billingStreamShards: raw.billing_stream_shards,
    sentinels: raw.sentinels.map((hostPort) => {
      const colon = hostPort.lastIndexOf(':');
      return { host: hostPort.slice(0, colon), port: Number(hostPort.slice(colon + 1)) };
    }),
    sentinelName: raw.sentinel_name,
    sentinelPassword: optional(raw.sentinel_password),
    username: optional(raw.username),
    password: optional(raw.password),
    tls: storeTlsOn(raw),
    ...(tlsCa === undefined ? {} : { tlsCa }),
    ...(tlsCert === undefined || tlsKey === undefined ? {} : { tlsCert, tlsKey }),
    keyPrefix: raw.key_prefix,
    operationTimeoutMs: raw.operation_timeout_ms,
    viewCacheMs: raw.view_cache_ms,
    accessKeyMode: raw.access_key_mode,
    billingStream: raw.billing_stream,
    billingConsumerGroup: raw.billing_consumer_group,
    billingConsumerName: raw.billing_consumer_name,
    billingMaxAttempts: raw.billing_max_attempts,
    billingWaitReplicas: raw.billing_wait_replicas,
    accessKeyHashSecret: raw.access_key_hash_secret ?? '',
    previousAccessKeyHashSecret: raw.previous_access_key_hash_secret ?? '',
    reclaimIdleMs: raw.reclaim_idle_ms,
  };
}

/** TLS is on with store.tls or a rediss:// address (the first one's, for the seeds of a cluster). */
export function storeTlsOn(raw: RawConfig['store']): boolean {
  return raw.tls || (raw.addr ?? '').startsWith('rediss://');
}

export function toConfig(
  raw: RawConfig,
  file: string,
  keys: KeysConfig,
  models: ModelRegistryConfig,
  env: Env,
  storeTls: StoreTlsContents = {},
): RouterConfig {
  const dir = dirname(file);
  const pricing =
    raw.pricing === undefined ? [] : typeof raw.pricing === 'string' ? [raw.pricing] : raw.pricing;
  const hooks: HookConfig[] = raw.hooks.map((hook) => ({
    module: hookModuleOf(hook.module, file),
    // YAML gives JSON values only; the schema leaves the options of a hook open.
    options: hook.options as Readonly<Record<string, JsonValue>>,
  }));
  return {
    file,
    listen: fallbackListen(raw.listen),
    workers: workerCount(raw.workers),
    providersDir: resolve(dir, raw.providers_dir),
    masterKey: optional(raw.master_key),
    limits: {
      maxBodyBytes: raw.limits.max_body_bytes,
      upstreamConnectTimeoutMs: raw.limits.upstream_connect_timeout_ms,
      upstreamHeadersTimeoutMs: raw.limits.upstream_headers_timeout_ms,
      upstreamBodyTimeoutMs: raw.limits.upstream_body_timeout_ms,
      maxRetries: raw.limits.max_retries,
      earlyCountWaitMs: raw.limits.early_count_wait_ms,
      realtimeMaxSessionS: raw.limits.realtime_max_session_s,
      realtimeMaxMessageBytes: raw.limits.realtime_max_message_bytes,
      drainTimeoutMs: raw.limits.drain_timeout_ms,
      clientHeaderTimeoutMs: raw.limits.client_header_timeout_ms,
      clientBodyTimeoutMs: raw.limits.client_body_timeout_ms,
      keepAliveTimeoutMs: raw.limits.keepalive_timeout_ms,
      maxConnections: raw.limits.max_connections,
      maxHeaderBytes: raw.limits.max_header_bytes,
      maxJsonDepth: raw.limits.max_json_depth,
    },
    requestId: { trustedSources: raw.request_id.trusted_sources },
    log: { level: raw.log.level },
    telemetry: { traces: toTraces(raw.telemetry.traces) },
    hooks,
    sidecar: { enabled: raw.sidecar.enabled, webhookWaitMs: raw.sidecar.webhook_wait_ms },
    billing: toBilling(raw.billing, dir, env),
    store: toStore(raw.store, storeTls),
    keys,
    models,
    pricing: { files: pricing.map((path) => resolve(dir, path)) },
    rateLimits: toRateLimits(raw.rate_limits),
    responses: { storeTtlS: raw.responses.store_ttl_s, storeMaxBytes: raw.responses.store_max_bytes },
  };
}

/** Fields left out stay absent (no limit); perKey.models absent = every model. */
function toRateLimits(raw: RawConfig['rate_limits']): RateLimitsConfig {
  const { models } = raw.per_key;
  return {
    perKey: { ...toRateLimitFields(raw.per_key), ...(models === undefined ? {} : { models }) },
    perSubject: toRateLimitFields(raw.per_subject),
    failureMode: raw.failure_mode,
    leaseMs: Math.round(raw.lease_s * 1000),
    subjects: new Map(Object.entries(raw.subjects).map(([name, own]) => [name, toRateLimitFields(own)])),
  };
}

/** Where spans go: traces_endpoint as given, else endpoint + /v1/traces; exporter none turns it off. */
function toTraces(raw: RawConfig['telemetry']['traces']): TracesConfig {
  let url: string | undefined;
  if (raw.exporter !== 'none') {
    if (optional(raw.traces_endpoint) !== undefined) url = raw.traces_endpoint;
    else if (optional(raw.endpoint) !== undefined) url = `${raw.endpoint!.replace(/\/+$/, '')}/v1/traces`;
    else if (raw.exporter === 'otlp') url = 'http://localhost:4318/v1/traces';
  }
  return {
    url,
    protocol: raw.protocol,
    headers: raw.headers,
    sampler: raw.sampler,
    samplerArg: raw.sampler_arg,
    exportDelayMs: raw.export_delay_ms,
    serviceName: raw.service_name,
    resourceAttributes: raw.resource_attributes,
  };
}

/** `workers` as a number: "auto" is one per core this process may use. */
function workerCount(raw: number | string): number {
  if (raw === 'auto') return availableParallelism();
  return Number(raw);
}
