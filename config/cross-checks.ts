// Checks the JSON Schema cannot express: between fields of the main file, between the main file
// and the keys file, and of the store's TLS files. Each problem is reported where the operator can fix
// it: the variable that set the value, else its place in the file.

import { X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createSecureContext } from 'node:tls';
import { childPointer, displayPath } from '../common/config-diagnostics.ts';
import type { ConfigDiagnostic, KeysConfig } from '../common/config-types.ts';
import type { YamlFile } from '../common/yaml-source.ts';
import { parseListenAddress } from './listen.ts';
import { EMPTY_MODELS } from './rate-limits.ts';
import {
  type RawConfig,
  STORE_TLS_FILES,
  type StoreTlsContents,
  type StoreTlsFile,
  storeTlsOn,
  storeTlsPaths,
} from './raw-config.ts';
import { parseSource } from './source-address.ts';
import { malformedUserinfo, parseStoreUrl, storeUrlCredentials } from './store-url.ts';
import type { Origins } from './validate.ts';

/** Reports at a pointer: the variable that set it, else its place in the file, else `fallback`'s. */
export function reporter(yaml: YamlFile, origins: Origins, diagnostics: ConfigDiagnostic[]) {
  return function report(pointer: string, message: string, fallback?: string, part?: 'key'): void {
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
        diagnostics.push(yaml.at(candidate, message, candidate === pointer ? part : undefined));
        return;
      }
    }
    diagnostics.push(yaml.at(pointer, message, part));
  };
}

function empty(value: string | undefined): boolean {
  return value === undefined || value.trim() === '';
}

export function checkCrossFields(raw: RawConfig, report: ReturnType<typeof reporter>): void {
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
    if (empty(store.addr) && store.sentinels.length === 0)
      report(
        '/store/addr',
        'store.addr is empty (required when store.enabled is true, unless store.sentinels are given)',
        '/store/enabled',
      );
    checkStoreAddr(store, report);
    if (store.cluster && store.sentinels.length > 0)
      report(
        '/store/cluster',
        'store.cluster and store.sentinels exclude each other: a Redis Cluster fails over by itself',
        '/store/sentinels',
      );
    if (!store.cluster && (store.addr ?? '').includes(','))
      report(
        '/store/addr',
        'store.addr lists several addresses: set store.cluster: true for the seed nodes of a Redis Cluster, or give one endpoint',
        '/store/cluster',
      );
    if (store.cluster && store.billing_wait_replicas > 0)
      report(
        '/store/billing_wait_replicas',
        'store.billing_wait_replicas is not supported with store.cluster yet: set it to 0 (cluster replicas fail over by themselves; a failover may lose the last unreplicated batch)',
        '/store/cluster',
      );
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
    if (!storeTlsOn(store)) {
      for (const key of STORE_TLS_FILES) {
        if (store[key] !== undefined)
          report(
            `/store/${key}`,
            `store.${key} is set but TLS is off: set store.tls: true or use a rediss:// address`,
          );
      }
    }
    if ((store.tls_cert_file === undefined) !== (store.tls_key_file === undefined)) {
      const [set, unset] =
        store.tls_cert_file === undefined
          ? (['tls_key_file', 'tls_cert_file'] as const)
          : (['tls_cert_file', 'tls_key_file'] as const);
      report(
        `/store/${set}`,
        `store.${set} is set without store.${unset}: a client certificate needs both (set both, or neither)`,
      );
    }
  }
  if (raw.rate_limits.per_key.models?.length === 0)
    report('/rate_limits/per_key/models', `rate_limits.per_key.${EMPTY_MODELS}`);
  const traces = raw.telemetry.traces;
  for (const key of ['endpoint', 'traces_endpoint'] as const) {
    const url = traces[key];
    if (url !== undefined && !isHttpUrl(url))
      report(
        `/telemetry/traces/${key}`,
        `telemetry.traces.${key} must be an http:// or https:// URL of an OTLP/HTTP receiver (a collector listens on port 4318; gRPC is not supported)`,
      );
  }
}

/** Each address of store.addr is a URL, and the credentials the client takes from it decode. */
function checkStoreAddr(store: RawConfig['store'], report: ReturnType<typeof reporter>): void {
  const urls = (store.addr ?? '')
    .split(',')
    .map((a) => a.trim())
    .filter((a) => a !== '')
    .map(parseStoreUrl);
  const invalid = urls.indexOf(undefined);
  if (invalid >= 0) {
    const which = urls.length > 1 ? ` (address ${invalid + 1} of ${urls.length})` : '';
    report('/store/addr', `store.addr is not a valid URL${which}`);
    return;
  }
  // Only the first address's credentials are used (for every seed of a cluster).
  const first = urls[0];
  if (first === undefined) return;
  // As config/raw-config.ts maps them: an empty value is unset.
  const overrides = {
    username: store.username === '' ? undefined : store.username,
    password: store.password === '' ? undefined : store.password,
  };
  for (const part of storeUrlCredentials(first, overrides).malformed)
    report('/store/addr', malformedUserinfo(part));
}

function isHttpUrl(text: string): boolean {
  try {
    const url = new URL(text);
    return url.protocol === 'http:' || url.protocol === 'https:';
  } catch {
    return false;
  }
}

/** Checks that need both the main file and the keys file. */
export function checkKeysAgainstConfig(
  raw: RawConfig,
  keys: KeysConfig,
  report: ReturnType<typeof reporter>,
): void {
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
  // Without the store every key is known here, so a subject type no key has is a typo that would
  // silently leave the subject unlimited.
  if (!raw.store.enabled) {
    const types = new Set([raw.billing.subject_type]);
    for (const key of keys.accessKeys) if (key.subjectType !== undefined) types.add(key.subjectType);
    const known = [...types].map((type) => `"${type}"`).join(', ');
    for (const name of Object.keys(raw.rate_limits.subjects)) {
      const type = name.slice(0, name.indexOf(':'));
      if (!types.has(type))
        report(
          childPointer('/rate_limits/subjects', name),
          `rate_limits.subjects: no access key has subject type "${type}" (key "${name}"); the types in use are ${known} (billing.subject_type, or subject_type on a key)`,
          undefined,
          'key',
        );
    }
  }
}

const PEM_BLOCK = /-----BEGIN ([A-Z0-9 ]+)-----([\s\S]*?)-----END \1-----/g;

/** What a TLS file lacks or holds wrongly, as the end of a sentence; undefined when usable. */
function pemProblem(key: StoreTlsFile, text: string): string | undefined {
  const blocks = [...text.matchAll(PEM_BLOCK)].map((m) => ({ label: m[1]!, pem: m[0], body: m[2]! }));
  if (key === 'tls_key_file') {
    const keys = blocks.filter((b) => b.label.endsWith('PRIVATE KEY'));
    if (keys.length === 0) return 'holds no PEM private key (no "-----BEGIN PRIVATE KEY-----" block)';
    if (keys.some((b) => b.label === 'ENCRYPTED PRIVATE KEY' || b.body.includes('Proc-Type: 4,ENCRYPTED')))
      return 'holds an encrypted private key: there is no passphrase option, give the key unencrypted (openssl pkey -in <file> -out <new file>)';
    return undefined;
  }
  const certificates = blocks.filter((b) => b.label === 'CERTIFICATE');
  if (certificates.length === 0) return 'holds no PEM certificate (no "-----BEGIN CERTIFICATE-----" block)';
  for (const [i, block] of certificates.entries()) {
    try {
      new X509Certificate(block.pem);
    } catch (error) {
      return `holds a certificate that cannot be parsed (block ${i + 1}: ${opensslReason(error)})`;
    }
  }
  return undefined;
}

/** OpenSSL's short reason ("key values mismatch"); never part of a file's contents. */
function opensslReason(error: unknown): string {
  const { reason, code, message } = error as { reason?: unknown; code?: unknown; message?: unknown };
  const text = typeof reason === 'string' ? reason : typeof message === 'string' ? message : 'invalid';
  return typeof code === 'string' ? `${text}, ${code}` : text;
}

function readFailure(error: unknown): string {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === 'ENOENT') return 'file not found';
  if (code === 'EACCES' || code === 'EPERM') return `permission denied (${code})`;
  if (code === 'EISDIR') return 'it is a directory';
  return code ?? 'unreadable';
}

/**
 * Reads the store's TLS files (with store.enabled), once per load: their contents go to StoreConfig, so
 * a connection never reads the disk. Problems name the key and the resolved path, never the contents.
 */
export async function readStoreTlsFiles(
  raw: RawConfig,
  dir: string,
  report: ReturnType<typeof reporter>,
): Promise<StoreTlsContents> {
  const contents: StoreTlsContents = {};
  if (!raw.store.enabled) return contents;
  const paths = storeTlsPaths(raw.store, dir);
  for (const key of STORE_TLS_FILES) {
    const path = paths[key];
    if (path === undefined) continue;
    let data: Buffer;
    try {
      data = await readFile(path);
    } catch (error) {
      report(`/store/${key}`, `store.${key}: cannot read ${path}: ${readFailure(error)}`);
      continue;
    }
    const problem = pemProblem(key, data.toString('latin1'));
    if (problem === undefined) contents[key] = data;
    else report(`/store/${key}`, `store.${key}: ${path} ${problem}`);
  }
  const { tls_cert_file: cert, tls_key_file: key } = contents;
  if (cert !== undefined && key !== undefined) {
    try {
      createSecureContext({ cert, key });
    } catch (error) {
      report(
        '/store/tls_key_file',
        `store.tls_key_file (${paths.tls_key_file}) cannot be used with store.tls_cert_file (${paths.tls_cert_file}): ${opensslReason(error)}; give the certificate and the key it was issued for`,
      );
    }
  }
  return contents;
}
