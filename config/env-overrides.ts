// ROUTER_* environment variables, and the standard OTEL_* ones of OpenTelemetry, that override keys of the
// main file (env > file > default). Every name is listed in docs/configuration.md "Environment variables".
// An empty variable counts as unset, so `ROUTER_X=` in a container manifest never blanks a value by
// accident.

import { displayPath, pointerOf } from '../common/config-diagnostics.ts';
import type { ConfigDiagnostic } from '../common/config-types.ts';
import type { Env } from './interpolate.ts';

export interface EnvOverride {
  readonly name: string;
  /** Path of the key it sets, as snake_case segments of the main file. */
  readonly path: readonly string[];
  /**
   * `list`: comma-separated values (blanks around commas ignored). `pairs`: OpenTelemetry's
   * `key=value,key2=value2` (values percent-decoded), each merged over the file's mapping at `path`.
   */
  readonly kind: 'string' | 'boolean' | 'integer' | 'number' | 'list' | 'pairs';
}

/** `path` as the dotted key of the main file (`store.addr`). */
function env(name: string, kind: EnvOverride['kind'], path: string): EnvOverride {
  return { name, path: path.split('.'), kind };
}

export const ENV_OVERRIDES: readonly EnvOverride[] = [
  env('ROUTER_BILLING_ENABLED', 'boolean', 'billing.enabled'),
  env('ROUTER_BILLING_BASE_URL', 'string', 'billing.base_url'),
  env('ROUTER_BILLING_PROJECT_ID', 'string', 'billing.project_id'),
  env('ROUTER_BILLING_API_KEY', 'string', 'billing.api_key'),
  env('ROUTER_BILLING_EXTRACTOR_RULE_SET_ID', 'string', 'billing.extractor_rule_set_id'),
  env('ROUTER_BILLING_READ_API_KEY', 'string', 'billing.read_api_key'),
  env('ROUTER_BILLING_LEDGER_RETENTION_H', 'integer', 'billing.ledger_retention_h'),
  env('ROUTER_BILLING_BALANCE_ENABLED', 'boolean', 'billing.balance_enforcement.enabled'),
  env('ROUTER_BILLING_BALANCE_CURRENCY', 'string', 'billing.balance_enforcement.currency'),
  env('ROUTER_BILLING_BALANCE_FAILURE_MODE', 'string', 'billing.balance_enforcement.failure_mode'),
  env(
    'ROUTER_BILLING_BALANCE_REQUEST_TIMEOUT_MS',
    'integer',
    'billing.balance_enforcement.request_timeout_ms',
  ),
  env('ROUTER_BILLING_WEBHOOK_PATH', 'string', 'billing.balance_enforcement.webhook_path'),
  env('ROUTER_BILLING_WEBHOOK_SECRET', 'string', 'billing.balance_enforcement.webhook_secret'),
  env('ROUTER_STORE_ENABLED', 'boolean', 'store.enabled'),
  env('ROUTER_STORE_ADDR', 'string', 'store.addr'),
  env('ROUTER_STORE_CLUSTER', 'boolean', 'store.cluster'),
  env('ROUTER_STORE_BILLING_STREAM_SHARDS', 'integer', 'store.billing_stream_shards'),
  env('ROUTER_STORE_PASSWORD', 'string', 'store.password'),
  env('ROUTER_ACCESS_KEY_HASH_SECRET', 'string', 'store.access_key_hash_secret'),
  env('ROUTER_BILLING_OUTBOX_DIR', 'string', 'billing.outbox_dir'),
  env('ROUTER_BILLING_OUTBOX_FSYNC_INTERVAL_MS', 'integer', 'billing.outbox_fsync_interval_ms'),
  env('ROUTER_BILLING_STATE_DIR', 'string', 'billing.state_dir'),
  env('ROUTER_BILLING_LISTEN', 'string', 'billing.listen'),
  env('ROUTER_LISTEN', 'string', 'listen'),
  env('ROUTER_WORKERS', 'string', 'workers'),
  env('ROUTER_MASTER_KEY', 'string', 'master_key'),
  env('ROUTER_LOG_LEVEL', 'string', 'log.level'),
  env('ROUTER_STORE_USERNAME', 'string', 'store.username'),
  env('ROUTER_STORE_SENTINELS', 'list', 'store.sentinels'),
  env('ROUTER_STORE_SENTINEL_NAME', 'string', 'store.sentinel_name'),
  env('ROUTER_STORE_SENTINEL_PASSWORD', 'string', 'store.sentinel_password'),
  env('ROUTER_STORE_KEY_PREFIX', 'string', 'store.key_prefix'),
  env('ROUTER_STORE_TLS_CA_FILE', 'string', 'store.tls_ca_file'),
  env('ROUTER_STORE_TLS_CERT_FILE', 'string', 'store.tls_cert_file'),
  env('ROUTER_STORE_TLS_KEY_FILE', 'string', 'store.tls_key_file'),
  env('ROUTER_ACCESS_KEY_PREVIOUS_HASH_SECRET', 'string', 'store.previous_access_key_hash_secret'),
  // The general OTLP variables first: the traces-specific ones override them.
  env('OTEL_TRACES_EXPORTER', 'string', 'telemetry.traces.exporter'),
  env('OTEL_EXPORTER_OTLP_ENDPOINT', 'string', 'telemetry.traces.endpoint'),
  env('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', 'string', 'telemetry.traces.traces_endpoint'),
  env('OTEL_EXPORTER_OTLP_PROTOCOL', 'string', 'telemetry.traces.protocol'),
  env('OTEL_EXPORTER_OTLP_TRACES_PROTOCOL', 'string', 'telemetry.traces.protocol'),
  env('OTEL_EXPORTER_OTLP_HEADERS', 'pairs', 'telemetry.traces.headers'),
  env('OTEL_EXPORTER_OTLP_TRACES_HEADERS', 'pairs', 'telemetry.traces.headers'),
  env('OTEL_TRACES_SAMPLER', 'string', 'telemetry.traces.sampler'),
  env('OTEL_TRACES_SAMPLER_ARG', 'number', 'telemetry.traces.sampler_arg'),
  env('OTEL_BSP_SCHEDULE_DELAY', 'integer', 'telemetry.traces.export_delay_ms'),
  env('OTEL_SERVICE_NAME', 'string', 'telemetry.traces.service_name'),
  env('OTEL_RESOURCE_ATTRIBUTES', 'pairs', 'telemetry.traces.resource_attributes'),
];

/** OpenTelemetry's `key=value,key2=value2` list; undefined when an entry is malformed. */
export function parsePairs(text: string): [string, string][] | undefined {
  const out: [string, string][] = [];
  for (const item of text.split(',')) {
    if (item.trim() === '') continue;
    const eq = item.indexOf('=');
    if (eq <= 0) return undefined;
    try {
      out.push([decodeURIComponent(item.slice(0, eq).trim()), decodeURIComponent(item.slice(eq + 1).trim())]);
    } catch {
      return undefined;
    }
  }
  return out;
}

function parseBoolean(text: string): boolean | undefined {
  const lower = text.trim().toLowerCase();
  if (lower === 'true' || lower === '1') return true;
  if (lower === 'false' || lower === '0') return false;
  return undefined;
}

function parseInteger(text: string): number | undefined {
  const trimmed = text.trim();
  return /^(0|[1-9][0-9]*)$/.test(trimmed) && Number.isSafeInteger(Number(trimmed))
    ? Number(trimmed)
    : undefined;
}

/** Writes `value` at `path`, creating missing parents (a non-mapping parent is replaced). */
export function setPath(root: Record<string, unknown>, path: readonly string[], value: unknown): void {
  const leaf = path.at(-1);
  if (leaf === undefined) throw new Error('setPath needs a non-empty path');
  let node = root;
  for (const segment of path.slice(0, -1)) {
    const next = node[segment];
    if (typeof next === 'object' && next !== null && !Array.isArray(next))
      node = next as Record<string, unknown>;
    else {
      const created: Record<string, unknown> = {};
      node[segment] = created;
      node = created;
    }
  }
  node[leaf] = value;
}

/**
 * Applies the ROUTER_* overrides to the parsed main file. Returns the pointers it set, mapped to the
 * variable name, so later validation errors name the variable instead of a file position. Malformed
 * booleans and integers are diagnostics naming the variable; the value itself is never echoed.
 */
export function applyEnvOverrides(
  root: Record<string, unknown>,
  environment: Env,
  file: string,
  diagnostics: ConfigDiagnostic[],
): Map<string, string> {
  const origins = new Map<string, string>();
  for (const override of ENV_OVERRIDES) {
    const text = environment[override.name];
    if (text === undefined || text === '') continue;
    let value: unknown = text;
    if (override.kind === 'boolean') {
      value = parseBoolean(text);
      if (value === undefined) {
        diagnostics.push({ file, line: 0, col: 0, message: `${override.name} must be true, false, 1 or 0` });
        continue;
      }
    } else if (override.kind === 'list') {
      value = text
        .split(',')
        .map((item) => item.trim())
        .filter((item) => item !== '');
    } else if (override.kind === 'pairs') {
      const pairs = parsePairs(text);
      if (pairs === undefined) {
        diagnostics.push({
          file,
          line: 0,
          col: 0,
          message: `${override.name} must be a list of key=value pairs separated by commas`,
        });
        continue;
      }
      for (const [key, item] of pairs) {
        setPath(root, [...override.path, key], item);
        origins.set(pointerOf([...override.path, key]), `environment variable ${override.name}`);
      }
      continue;
    } else if (override.kind === 'number') {
      value = Number(text.trim());
      if (text.trim() === '' || !Number.isFinite(value)) {
        diagnostics.push({ file, line: 0, col: 0, message: `${override.name} must be a number` });
        continue;
      }
    } else if (override.kind === 'integer') {
      value = parseInteger(text);
      if (value === undefined) {
        diagnostics.push({
          file,
          line: 0,
          col: 0,
          message: `${override.name} must be a non-negative integer`,
        });
        continue;
      }
    }
    setPath(root, override.path, value);
    origins.set(pointerOf(override.path), `environment variable ${override.name}`);
  }
  return origins;
}

/** Overrides given by the caller (CLI flags): a nested object of snake_case keys, merged over the file. */
export type ConfigOverrides = { readonly [key: string]: unknown };

/** Deep-merges `overrides` (mappings merge, anything else replaces) and records their origins. */
export function applyObjectOverrides(
  root: Record<string, unknown>,
  overrides: ConfigOverrides,
  origins: Map<string, string>,
): void {
  function merge(target: Record<string, unknown>, source: ConfigOverrides, path: string[]): void {
    for (const [key, value] of Object.entries(source)) {
      if (value === undefined) continue;
      const here = [...path, key];
      const isMapping = typeof value === 'object' && value !== null && !Array.isArray(value);
      if (isMapping && Object.keys(value).length > 0) {
        // Merge leaf by leaf so each overridden key has its own origin.
        const existing = target[key];
        const child =
          typeof existing === 'object' && existing !== null && !Array.isArray(existing)
            ? (existing as Record<string, unknown>)
            : {};
        target[key] = child;
        merge(child, value as ConfigOverrides, here);
        continue;
      }
      target[key] = isMapping || Array.isArray(value) ? structuredClone(value) : value;
      origins.set(pointerOf(here), `override ${displayPath(pointerOf(here))}`);
    }
  }
  merge(root, overrides, []);
}
