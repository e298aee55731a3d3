// Loads the main configuration file into a RouterConfig, once per start or reload:
//   YAML (with positions) -> ${ENV} interpolation -> ROUTER_* overrides -> caller overrides
//   -> JSON Schema (defaults filled) -> cross-field checks -> paths resolved -> models and keys files.
// Every problem is a ConfigDiagnostic (`file:line:col: message`) and none of them prints a value, so
// the output of `router -t` is safe to paste into a ticket.

import { readFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { displayPath } from '../../common/config-diagnostics.ts';
import type {
  AccessKeyMode,
  BillingConfig,
  ConfigDiagnostic,
  HookConfig,
  KeysConfig,
  ListenAddress,
  ModelRegistryConfig,
  RouterConfig,
  StoreConfig,
} from '../../common/config-types.ts';
import type { JsonValue } from '../../common/types.ts';
import { isPlainObject, parseYaml, type YamlFile } from '../../common/yaml-source.ts';
import { parseSource } from '../request-id.ts';
import { applyEnvOverrides, applyObjectOverrides, type ConfigOverrides } from './env-overrides.ts';
import { type Env, interpolateDocument } from './interpolate.ts';
import { loadKeysFile } from './keys.ts';
import { parseListenAddress } from './listen.ts';
import { loadModelsFile } from './models.ts';
import schema from './schema.json' with { type: 'json' };
import { compileSchema, type Origins } from './validate.ts';

export type { ConfigOverrides } from './env-overrides.ts';

export interface LoadConfigOptions {
  /** Environment for `${ENV}` and the ROUTER_* overrides; default process.env. */
  readonly env?: Env;
  /** Highest-precedence values (CLI flags), snake_case like the file: `{ sidecar: { enabled: false } }`. */
  readonly overrides?: ConfigOverrides;
}

export interface LoadConfigResult {
  /** Undefined whenever diagnostics is not empty. */
  readonly config: RouterConfig | undefined;
  readonly diagnostics: ConfigDiagnostic[];
}

// The shape of the main file after schema validation with defaults filled in.
interface RawConfig {
  listen: string;
  providers_dir: string;
  models?: string;
  keys?: string;
  pricing?: string | string[];
  master_key?: string;
  limits: {
    max_body_bytes: number;
    upstream_connect_timeout_ms: number;
    upstream_headers_timeout_ms: number;
    upstream_body_timeout_ms: number;
    max_retries: number;
    drain_timeout_ms: number;
    client_header_timeout_ms: number;
    client_body_timeout_ms: number;
    keepalive_timeout_ms: number;
    max_connections: number;
    max_header_bytes: number;
    max_json_depth: number;
  };
  request_id: { trusted_sources: string[] };
  log: { level: RouterConfig['log']['level'] };
  hooks: { module: string; options: Record<string, JsonValue> }[];
  sidecar: { enabled: boolean; webhook_wait_ms: number };
  billing: {
    enabled: boolean;
    base_url?: string;
    project_id?: string;
    api_key?: string;
    extractor_rule_set_id?: string;
    source: string;
    outbox_dir?: string;
    state_dir?: string;
    request_timeout_ms: number;
    retry_interval_ms: number;
    max_retry_interval_ms: number;
    delivery_linger_ms: number;
    max_attempts: number;
    only_billable_success: boolean;
    subject_type: string;
    fallback_subject_id: string;
    listen: string;
    balance_enforcement: {
      enabled: boolean;
      currency: string;
      failure_mode: 'closed' | 'open';
      request_timeout_ms: number;
      webhook_path: string;
      webhook_secret?: string;
      timestamp_tolerance_s: number;
      cache_ttl_ms: number;
      denied_cache_ttl_ms: number;
      webhook_max_body_bytes: number;
    };
  };
  store: {
    enabled: boolean;
    addr?: string;
    username?: string;
    password?: string;
    tls: boolean;
    key_prefix: string;
    operation_timeout_ms: number;
    view_cache_ms: number;
    access_key_mode: AccessKeyMode;
    billing_stream: string;
    billing_consumer_group: string;
    billing_consumer_name: string;
    billing_max_attempts: number;
    access_key_hash_secret?: string;
    previous_access_key_hash_secret?: string;
    reclaim_idle_ms: number;
  };
}

const validator = compileSchema(schema);

/** Reports at a pointer: the variable that set it, else its place in the file, else `fallback`'s. */
function reporter(yaml: YamlFile, origins: Origins, diagnostics: ConfigDiagnostic[]) {
  return function report(pointer: string, message: string, fallback?: string): void {
    for (const candidate of fallback === undefined ? [pointer] : [pointer, fallback]) {
      const origin = origins.get(candidate);
      if (origin !== undefined) {
        diagnostics.push({
          file: yaml.file,
          line: 0,
          col: 0,
          message: `${message} (${displayPath(candidate)} set by ${origin})`,
        });
        return;
      }
      if (yaml.has(candidate)) {
        diagnostics.push(yaml.at(candidate, message));
        return;
      }
    }
    diagnostics.push(yaml.at(pointer, message));
  };
}

function empty(value: string | undefined): boolean {
  return value === undefined || value.trim() === '';
}

function checkCrossFields(raw: RawConfig, report: ReturnType<typeof reporter>): void {
  raw.request_id.trusted_sources.forEach((text, i) => {
    if (parseSource(text) === undefined) {
      report(
        `/request_id/trusted_sources/${i}`,
        `request_id.trusted_sources[${i}] must be an IP address or CIDR range (e.g. "10.0.0.0/8")`,
      );
    }
  });
  for (const [pointer, text] of [
    ['/listen', raw.listen],
    ['/billing/listen', raw.billing.listen],
  ] as const) {
    if (parseListenAddress(text) === undefined)
      report(pointer, `${displayPath(pointer)} has a port above 65535`);
  }
  const main = parseListenAddress(raw.listen);
  const sidecar = parseListenAddress(raw.billing.listen);
  if (raw.sidecar.enabled && main !== undefined && sidecar !== undefined && main.port !== 0) {
    if (main.port === sidecar.port && main.host === sidecar.host) {
      report('/billing/listen', 'billing.listen must differ from listen (the sidecar needs its own port)');
    }
  }

  const billing = raw.billing;
  if (billing.enabled) {
    for (const key of ['base_url', 'project_id', 'api_key', 'extractor_rule_set_id'] as const) {
      if (empty(billing[key])) {
        report(
          `/billing/${key}`,
          `billing.${key} is empty (required when billing.enabled is true)`,
          '/billing/enabled',
        );
      }
    }
  }
  if (!empty(billing.base_url)) {
    let protocol: string | undefined;
    try {
      protocol = new URL(billing.base_url ?? '').protocol;
    } catch {
      protocol = undefined;
    }
    if (protocol !== 'http:' && protocol !== 'https:') {
      report('/billing/base_url', 'billing.base_url must be an http:// or https:// URL');
    }
  }
  if (billing.max_retry_interval_ms < billing.retry_interval_ms) {
    report(
      '/billing/max_retry_interval_ms',
      'billing.max_retry_interval_ms must be at least billing.retry_interval_ms',
    );
  }
  const balance = billing.balance_enforcement;
  if (balance.enabled) {
    if (!billing.enabled) {
      report(
        '/billing/balance_enforcement/enabled',
        'billing.balance_enforcement.enabled requires billing.enabled to be true',
      );
    }
    if (empty(balance.webhook_secret)) {
      report(
        '/billing/balance_enforcement/webhook_secret',
        'billing.balance_enforcement.webhook_secret is empty (required when balance enforcement is enabled)',
        '/billing/balance_enforcement/enabled',
      );
    }
  }

  const store = raw.store;
  if (store.enabled) {
    if (empty(store.addr))
      report('/store/addr', 'store.addr is empty (required when store.enabled is true)', '/store/enabled');
    if (empty(store.access_key_hash_secret)) {
      report(
        '/store/access_key_hash_secret',
        'store.access_key_hash_secret is empty (required when store.enabled is true)',
        '/store/enabled',
      );
    }
    if (
      !empty(store.previous_access_key_hash_secret) &&
      store.previous_access_key_hash_secret === store.access_key_hash_secret
    ) {
      report(
        '/store/previous_access_key_hash_secret',
        'store.previous_access_key_hash_secret equals store.access_key_hash_secret (the new secret goes in access_key_hash_secret)',
      );
    }
  }
}

/** Module paths starting with `.` or `/` are files next to the configuration; others are packages. */
function resolveModule(dir: string, module: string): string {
  return module.startsWith('.') || isAbsolute(module) ? resolve(dir, module) : module;
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
    extractorRuleSetId: raw.extractor_rule_set_id ?? '',
    source: raw.source,
    outboxDir: resolve(dir, raw.outbox_dir ?? join(defaultDataDir(env), 'outbox')),
    stateDir: resolve(dir, raw.state_dir ?? join(defaultDataDir(env), 'state')),
    requestTimeoutMs: raw.request_timeout_ms,
    retryIntervalMs: raw.retry_interval_ms,
    maxRetryIntervalMs: raw.max_retry_interval_ms,
    deliveryLingerMs: raw.delivery_linger_ms,
    maxAttempts: raw.max_attempts,
    onlyBillableSuccess: raw.only_billable_success,
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

function toStore(raw: RawConfig['store']): StoreConfig {
  const addr = raw.addr ?? '';
  return {
    enabled: raw.enabled,
    addr,
    username: optional(raw.username),
    password: optional(raw.password),
    tls: raw.tls || addr.startsWith('rediss://'),
    keyPrefix: raw.key_prefix,
    operationTimeoutMs: raw.operation_timeout_ms,
    viewCacheMs: raw.view_cache_ms,
    accessKeyMode: raw.access_key_mode,
    billingStream: raw.billing_stream,
    billingConsumerGroup: raw.billing_consumer_group,
    billingConsumerName: raw.billing_consumer_name,
    billingMaxAttempts: raw.billing_max_attempts,
    accessKeyHashSecret: raw.access_key_hash_secret ?? '',
    previousAccessKeyHashSecret: raw.previous_access_key_hash_secret ?? '',
    reclaimIdleMs: raw.reclaim_idle_ms,
  };
}

function toConfig(
  raw: RawConfig,
  file: string,
  keys: KeysConfig,
  models: ModelRegistryConfig,
  env: Env,
): RouterConfig {
  const dir = dirname(file);
  const pricing =
    raw.pricing === undefined ? [] : typeof raw.pricing === 'string' ? [raw.pricing] : raw.pricing;
  const hooks: HookConfig[] = raw.hooks.map((hook) => ({
    module: resolveModule(dir, hook.module),
    options: hook.options,
  }));
  return {
    file,
    listen: fallbackListen(raw.listen),
    providersDir: resolve(dir, raw.providers_dir),
    masterKey: optional(raw.master_key),
    limits: {
      maxBodyBytes: raw.limits.max_body_bytes,
      upstreamConnectTimeoutMs: raw.limits.upstream_connect_timeout_ms,
      upstreamHeadersTimeoutMs: raw.limits.upstream_headers_timeout_ms,
      upstreamBodyTimeoutMs: raw.limits.upstream_body_timeout_ms,
      maxRetries: raw.limits.max_retries,
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
    hooks,
    sidecar: { enabled: raw.sidecar.enabled, webhookWaitMs: raw.sidecar.webhook_wait_ms },
    billing: toBilling(raw.billing, dir, env),
    store: toStore(raw.store),
    keys,
    models,
    pricing: { files: pricing.map((path) => resolve(dir, path)) },
  };
}

/** Checks that need both the main file and the keys file. */
function checkKeysAgainstConfig(raw: RawConfig, keys: KeysConfig, report: ReturnType<typeof reporter>): void {
  const file = keys.file ?? '(environment)';
  const hashed = keys.accessKeys.find((key) => key.hash !== undefined);
  if (hashed !== undefined && empty(raw.store.access_key_hash_secret)) {
    report(
      '/store/access_key_hash_secret',
      `${file}: access key "${hashed.name}" is given as a hash, which needs store.access_key_hash_secret`,
      '/keys',
    );
  }
  if (!empty(raw.master_key)) {
    const clash = keys.accessKeys.find((key) => key.value === raw.master_key);
    if (clash !== undefined)
      report('/master_key', `master_key is also the secret of access key "${clash.name}"`);
  }
}

/**
 * Loads a main configuration from its text; `file` names it in diagnostics and anchors relative paths.
 * The models and keys files it names are read from disk.
 */
export async function loadConfigFromString(
  source: string,
  file: string,
  opts: LoadConfigOptions = {},
): Promise<LoadConfigResult> {
  const path = resolve(file);
  const env = opts.env ?? process.env;
  const parsed = parseYaml(source, path);
  const diagnostics = parsed.diagnostics;
  const yaml = parsed.yaml;
  if (yaml === undefined) return { config: undefined, diagnostics };
  const root = yaml.value ?? {};
  if (!isPlainObject(root)) {
    diagnostics.push(
      yaml.at('', 'the configuration must be a mapping of keys (listen, billing, store, ...)'),
    );
    return { config: undefined, diagnostics };
  }

  validator.coerceInterpolated(root, interpolateDocument(yaml, root, env, diagnostics));
  const origins = applyEnvOverrides(root, env, path, diagnostics);
  if (opts.overrides !== undefined) applyObjectOverrides(root, opts.overrides, origins);
  const schemaDiagnostics = validator.validate(root, yaml, origins);
  diagnostics.push(...schemaDiagnostics);
  const report = reporter(yaml, origins, diagnostics);
  const raw = root as unknown as RawConfig;
  if (schemaDiagnostics.length === 0) checkCrossFields(raw, report);

  // The companion files are checked even when the main file has errors, so one run shows everything.
  const dir = dirname(path);
  const modelsPath =
    typeof root.models === 'string' && root.models !== '' ? resolve(dir, root.models) : undefined;
  const keysPath = typeof root.keys === 'string' && root.keys !== '' ? resolve(dir, root.keys) : undefined;
  const models: { models: ModelRegistryConfig; diagnostics: ConfigDiagnostic[] } =
    modelsPath === undefined
      ? { models: { file: undefined, entries: [] }, diagnostics: [] }
      : await loadModelsFile(modelsPath, env);
  const keys = await loadKeysFile(keysPath, env);
  diagnostics.push(...models.diagnostics, ...keys.diagnostics);
  if (schemaDiagnostics.length === 0) checkKeysAgainstConfig(raw, keys.keys, report);

  if (diagnostics.length > 0) return { config: undefined, diagnostics };
  return { config: toConfig(raw, path, keys.keys, models.models, env), diagnostics };
}

/** Loads and validates the main configuration file and the models and keys files it names. */
export async function loadConfig(file: string, opts: LoadConfigOptions = {}): Promise<LoadConfigResult> {
  const path = resolve(file);
  let source: string;
  try {
    source = await readFile(path, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const reason = code === 'ENOENT' ? 'file not found' : (code ?? 'unreadable');
    return {
      config: undefined,
      diagnostics: [{ file: path, line: 0, col: 0, message: `cannot read configuration: ${reason}` }],
    };
  }
  return loadConfigFromString(source, path, opts);
}
