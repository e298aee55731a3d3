// The keys file (client access keys, upstream provider keys) plus the environment forms of both:
//   ROUTER_ACCESS_KEY_<NAME>=<secret>          access key `<name>` (lower-cased, `_` kept), no limits or
//                                              models of its own (rate_limits.per_key applies)
//   ROUTER_PROVIDER_<NAME>_API_KEY=<secret>    the provider's only upstream key, channel `env`
// Environment wins over the file, as everywhere in the configuration. Diagnostics name keys by name
// and position, never by secret.

import { dirname, resolve } from 'node:path';
import type { FromSchema } from 'json-schema-to-ts';
import { childPointer, displayPath } from '../common/config-diagnostics.ts';
import type {
  AccessKeyEntry,
  CloudCredentials,
  ConfigDiagnostic,
  KeysConfig,
  UpstreamKey,
} from '../common/config-types.ts';
import { providerKeyEnvName } from '../common/provider-key-env.ts';
import { isPlainObject, parseYaml, readYaml, type YamlFile } from '../common/yaml-source.ts';
import { type Env, interpolateDocument } from './interpolate.ts';
import schema from './keys.schema.json' with { type: 'json' };
import { EMPTY_MODELS, toRateLimitFields } from './rate-limits.ts';
import type { KEYS_SCHEMA } from './schema-const.ts';
import { compileSchema } from './validate.ts';

const ACCESS_KEY_ENV = /^ROUTER_ACCESS_KEY_([A-Za-z0-9][A-Za-z0-9_]*)$/;
const PROVIDER_KEY_ENV = /^ROUTER_PROVIDER_([A-Za-z0-9][A-Za-z0-9_]*)_API_KEY$/;
/** Same prefix as the access-key form, but store settings. */
const RESERVED_ENV = new Set(['ROUTER_ACCESS_KEY_HASH_SECRET', 'ROUTER_ACCESS_KEY_PREVIOUS_HASH_SECRET']);
/** Name of the upstream key that ROUTER_PROVIDER_<NAME>_API_KEY defines. */
export const ENV_UPSTREAM_KEY_NAME = 'env';
/** Name of the upstream key that the `api_key:` short form defines. */
export const DEFAULT_UPSTREAM_KEY_NAME = 'default';

const ISO_DATE =
  /^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(\.\d{1,9})?)?([Zz]|[+-]\d{2}:?\d{2}))?$/;

/**
 * Parses the ISO 8601 forms the keys file accepts: a date (midnight UTC) or a date-time with an
 * explicit zone. A zone-less time would depend on the host's time zone, so it is refused.
 */
export function parseIsoInstant(text: string): number | undefined {
  const match = ISO_DATE.exec(text.trim());
  if (match === null) return undefined;
  const [, year, month, day, hour, minute, second, fraction, zone] = match;
  const date = new Date(Date.UTC(Number(year), Number(month) - 1, Number(day)));
  // Date.UTC rolls 2027-02-30 over into March; refuse instead.
  if (date.getUTCMonth() !== Number(month) - 1 || date.getUTCDate() !== Number(day)) return undefined;
  if (hour === undefined) return date.getTime();
  // ISO_DATE makes the zone mandatory once a time is present.
  const tz = zone!;
  if (Number(hour) > 23 || Number(minute) > 59 || Number(second ?? 0) > 59) return undefined;
  const normalizedZone = tz.length === 5 ? `${tz.slice(0, 3)}:${tz.slice(3)}` : tz.toUpperCase();
  const millis = fraction === undefined ? '' : fraction.slice(0, 4);
  const iso = `${year}-${month}-${day}T${hour}:${minute}:${second ?? '00'}${millis}${normalizedZone}`;
  const ms = Date.parse(iso);
  return Number.isNaN(ms) ? undefined : ms;
}

/** The environment variable that defines access key `name` (the reverse of the lower-casing). */
export function accessKeyEnvName(name: string): string {
  return `ROUTER_ACCESS_KEY_${name.toUpperCase()}`;
}

/** The keys file after schema validation, as a type derived from keys.schema.json. */
type KeysData = FromSchema<typeof KEYS_SCHEMA>;

/** Where an access key came from, for diagnostics. */
interface Located {
  entry: AccessKeyEntry;
  pointer: string | undefined;
  envName: string | undefined;
}

const validator = compileSchema(schema, { redactUnknownKeys: true });
const PROVIDER_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

function fileAccessKeys(yaml: YamlFile, data: KeysData, diagnostics: ConfigDiagnostic[]): Located[] {
  const out: Located[] = [];
  (data.access_keys ?? []).forEach((raw, index) => {
    const pointer = childPointer('/access_keys', index);
    const label = `${displayPath(pointer)} (${raw.name})`;
    if ((raw.value === undefined) === (raw.hash === undefined)) {
      diagnostics.push(yaml.at(pointer, `${label} needs exactly one of "value" or "hash"`, 'key'));
      return;
    }
    const instant = (field: 'expires_at' | 'created_at'): number | undefined => {
      const text = raw[field];
      if (text === undefined) return undefined;
      const parsed = parseIsoInstant(text);
      if (parsed === undefined) {
        diagnostics.push(
          yaml.at(
            childPointer(pointer, field),
            `${label}: ${field} must be an ISO 8601 date (2027-01-01) or date-time with zone (2027-01-01T00:00:00Z)`,
          ),
        );
      }
      return parsed;
    };
    if (raw.models?.length === 0)
      diagnostics.push(yaml.at(childPointer(pointer, 'models'), `${label}: ${EMPTY_MODELS}`));
    const limits = raw.limits === undefined ? undefined : toRateLimitFields(raw.limits);
    out.push({
      entry: {
        name: raw.name,
        value: raw.value,
        hash: raw.hash,
        subjectType: raw.subject_type,
        subjectId: raw.subject_id,
        status: raw.status,
        expiresAt: instant('expires_at'),
        createdAt: instant('created_at'),
        // Absent rather than undefined, so entries without limits compare as before.
        ...(limits === undefined || Object.keys(limits).length === 0 ? {} : { limits }),
        ...(raw.models === undefined ? {} : { models: raw.models }),
      },
      pointer,
      envName: undefined,
    });
  });
  return out;
}

/** Names of the access keys that ROUTER_ACCESS_KEY_<NAME> variables of `env` define. */
export function envAccessKeyNames(env: Env): string[] {
  const names: string[] = [];
  for (const [variable, secret] of Object.entries(env)) {
    const match = ACCESS_KEY_ENV.exec(variable);
    if (match === null || RESERVED_ENV.has(variable) || secret === undefined || secret === '') continue;
    names.push(match[1]!.toLowerCase());
  }
  return names.sort();
}

/** Applies ROUTER_ACCESS_KEY_<NAME>: a new active key, or the secret of the file's key of that name. */
function applyAccessKeyEnv(keys: Located[], env: Env): Located[] {
  const out = [...keys];
  for (const [variable, secret] of Object.entries(env)) {
    const match = ACCESS_KEY_ENV.exec(variable);
    if (match === null || RESERVED_ENV.has(variable) || secret === undefined || secret === '') continue;
    const name = match[1]!.toLowerCase();
    const index = out.findIndex((located) => located.entry.name === name);
    if (index === -1) {
      out.push({
        entry: {
          name,
          value: secret,
          hash: undefined,
          subjectType: undefined,
          subjectId: undefined,
          status: 'active',
          expiresAt: undefined,
          createdAt: undefined,
        },
        pointer: undefined,
        envName: variable,
      });
    } else {
      const existing = out[index]!;
      out[index] = {
        entry: { ...existing.entry, value: secret, hash: undefined },
        pointer: existing.pointer,
        envName: variable,
      };
    }
  }
  return out;
}

function checkAccessKeys(
  keys: readonly Located[],
  file: string,
  yaml: YamlFile | undefined,
  diagnostics: ConfigDiagnostic[],
): void {
  const names = new Map<string, Located>();
  const secrets = new Map<string, Located>();
  const describe = (located: Located): string =>
    located.envName !== undefined
      ? `${located.envName}`
      : `${displayPath(located.pointer ?? '')} (${located.entry.name})`;
  const report = (located: Located, message: string, field: string): void => {
    if (located.envName === undefined && located.pointer !== undefined && yaml !== undefined) {
      diagnostics.push(yaml.at(childPointer(located.pointer, field), message, 'key'));
    } else diagnostics.push({ file, line: 0, col: 0, message });
  };
  for (const located of keys) {
    const earlier = names.get(located.entry.name);
    if (earlier !== undefined) {
      report(
        located,
        `${describe(located)}: access key name "${located.entry.name}" is already used by ${describe(earlier)}`,
        'name',
      );
    } else names.set(located.entry.name, located);
    const secret = located.entry.value !== undefined ? `v:${located.entry.value}` : `h:${located.entry.hash}`;
    const same = secrets.get(secret);
    if (same !== undefined) {
      report(
        located,
        `${describe(located)}: same secret as ${describe(same)}; every access key needs its own secret`,
        located.entry.value !== undefined ? 'value' : 'hash',
      );
    } else secrets.set(secret, located);
  }
}

/** The cloud credentials of the file's provider entries; a relative service_account_file is the file's. */
function fileCloudCredentials(file: string | undefined, data: KeysData): Map<string, CloudCredentials> {
  const out = new Map<string, CloudCredentials>();
  for (const [provider, raw] of Object.entries(data.providers ?? {})) {
    if (!PROVIDER_NAME.test(provider)) continue;
    const { aws, entra, service_account_file: saFile } = raw;
    if (aws === undefined && entra === undefined && saFile === undefined) continue;
    out.set(provider, {
      aws:
        aws === undefined
          ? undefined
          : {
              accessKeyId: aws.access_key_id,
              secretAccessKey: aws.secret_access_key,
              sessionToken: aws.session_token,
            },
      serviceAccountFile:
        saFile === undefined ? undefined : resolve(file === undefined ? '.' : dirname(file), saFile),
      entra:
        entra === undefined
          ? undefined
          : { tenantId: entra.tenant_id, clientId: entra.client_id, clientSecret: entra.client_secret },
    });
  }
  return out;
}

function fileProviderKeys(
  yaml: YamlFile,
  data: KeysData,
  diagnostics: ConfigDiagnostic[],
): Map<string, UpstreamKey[]> {
  const providers = new Map<string, UpstreamKey[]>();
  for (const [provider, raw] of Object.entries(data.providers ?? {})) {
    const pointer = childPointer('/providers', provider);
    if (!PROVIDER_NAME.test(provider)) {
      diagnostics.push(
        yaml.at(pointer, `${displayPath(pointer)}: provider names are letters, digits, '.', '_', '-'`, 'key'),
      );
      continue;
    }
    const cloud = raw.aws !== undefined || raw.entra !== undefined || raw.service_account_file !== undefined;
    if (raw.api_key !== undefined && raw.keys !== undefined) {
      diagnostics.push(
        yaml.at(pointer, `${displayPath(pointer)} needs exactly one of "api_key" or "keys"`, 'key'),
      );
      continue;
    }
    if (raw.api_key === undefined && raw.keys === undefined) {
      if (!cloud) {
        diagnostics.push(
          yaml.at(
            pointer,
            `${displayPath(pointer)} needs "api_key" or "keys" (or cloud credentials: "aws", "service_account_file", "entra")`,
            'key',
          ),
        );
      }
      continue;
    }
    if (raw.api_key !== undefined) {
      providers.set(provider, [{ name: DEFAULT_UPSTREAM_KEY_NAME, value: raw.api_key }]);
      continue;
    }
    const keys: UpstreamKey[] = [];
    const names = new Set<string>();
    const values = new Set<string>();
    (raw.keys ?? []).forEach((key, index) => {
      const at = childPointer(childPointer(pointer, 'keys'), index);
      if (names.has(key.name)) {
        diagnostics.push(
          yaml.at(childPointer(at, 'name'), `${displayPath(at)}: key name "${key.name}" is used twice`),
        );
      } else if (values.has(key.value)) {
        diagnostics.push(
          yaml.at(
            childPointer(at, 'value'),
            `${displayPath(at)} (${key.name}): same secret as an earlier key`,
            'key',
          ),
        );
      } else keys.push({ name: key.name, value: key.value });
      names.add(key.name);
      values.add(key.value);
    });
    providers.set(provider, keys);
  }
  return providers;
}

/** Applies ROUTER_PROVIDER_<NAME>_API_KEY: replaces that provider's keys by one key named `env`. */
function applyProviderKeyEnv(providers: Map<string, UpstreamKey[]>, env: Env): void {
  const byEnvName = new Map<string, string>();
  for (const provider of providers.keys()) byEnvName.set(providerKeyEnvName(provider), provider);
  for (const [variable, secret] of Object.entries(env)) {
    const match = PROVIDER_KEY_ENV.exec(variable);
    if (match === null || secret === undefined || secret === '') continue;
    // A provider the file names keeps its spelling; otherwise the conventional kebab-case name.
    const provider = byEnvName.get(variable) ?? match[1]!.toLowerCase().replaceAll('_', '-');
    providers.set(provider, [{ name: ENV_UPSTREAM_KEY_NAME, value: secret }]);
  }
}

function keysFrom(
  file: string | undefined,
  yaml: YamlFile | undefined,
  env: Env,
  diagnostics: ConfigDiagnostic[],
): KeysConfig {
  let data: KeysData = { access_keys: [], providers: {} };
  if (yaml !== undefined) {
    const value = yaml.value ?? {};
    if (!isPlainObject(value)) {
      diagnostics.push(yaml.at('', 'a keys file must be a mapping with "access_keys" and/or "providers"'));
    } else {
      validator.coerceInterpolated(value, interpolateDocument(yaml, value, env, diagnostics));
      const schemaDiagnostics = validator.validate(value, yaml);
      diagnostics.push(...schemaDiagnostics);
      if (schemaDiagnostics.length === 0) data = value as unknown as KeysData;
    }
  }
  const fromFile = yaml === undefined ? [] : fileAccessKeys(yaml, data, diagnostics);
  const accessKeys = applyAccessKeyEnv(fromFile, env);
  checkAccessKeys(accessKeys, file ?? '(environment)', yaml, diagnostics);
  const providerKeys =
    yaml === undefined ? new Map<string, UpstreamKey[]>() : fileProviderKeys(yaml, data, diagnostics);
  applyProviderKeyEnv(providerKeys, env);
  const cloudCredentials = fileCloudCredentials(file, data);
  return {
    file,
    accessKeys: accessKeys.map((located) => located.entry),
    providerKeys,
    ...(cloudCredentials.size > 0 ? { cloudCredentials } : {}),
  };
}

/** Parses keys file text (tests, `router-admin access-key migrate`). */
export function parseKeysSource(source: string, file: string, env: Env = {}): ParsedKeys {
  const { yaml, diagnostics } = parseYaml(source, file);
  return { keys: keysFrom(file, yaml, env, diagnostics), diagnostics };
}

export interface ParsedKeys {
  readonly keys: KeysConfig;
  readonly diagnostics: ConfigDiagnostic[];
}

/**
 * What the main configuration demands of the access keys (the loader checks the same against the main
 * file): hashed keys need the hash secret, and no key may share the master key's secret.
 */
export function keysConfigProblems(
  keys: KeysConfig,
  opts: { hashSecret: string; masterKey: string | undefined },
): ConfigDiagnostic[] {
  const file = keys.file ?? '(environment)';
  const problems: ConfigDiagnostic[] = [];
  const hashed = keys.accessKeys.find((key) => key.hash !== undefined);
  if (hashed !== undefined && opts.hashSecret === '') {
    problems.push({
      file,
      line: 1,
      col: 1,
      message: `access key "${hashed.name}" is given as a hash, which needs store.access_key_hash_secret`,
    });
  }
  const master = opts.masterKey;
  const clash =
    master === undefined || master === '' ? undefined : keys.accessKeys.find((k) => k.value === master);
  if (clash !== undefined)
    problems.push({
      file,
      line: 1,
      col: 1,
      message: `the master key is also the secret of access key "${clash.name}"`,
    });
  return problems;
}

/**
 * Loads the keys file (`file` absolute; undefined = environment only) and merges the ROUTER_ACCESS_KEY_*
 * and ROUTER_PROVIDER_*_API_KEY variables. Trust the result only when diagnostics is empty.
 */
export async function loadKeysFile(
  file: string | undefined,
  env: Env = {},
): Promise<{ keys: KeysConfig; diagnostics: ConfigDiagnostic[] }> {
  if (file === undefined) {
    const diagnostics: ConfigDiagnostic[] = [];
    return { keys: keysFrom(undefined, undefined, env, diagnostics), diagnostics };
  }
  const { yaml, diagnostics } = await readYaml(file, 'keys file');
  return { keys: keysFrom(file, yaml, env, diagnostics), diagnostics };
}
