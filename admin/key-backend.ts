// Where `router-admin access-key` keeps keys: the shared store when `store.enabled` (only the HMAC of a
// secret is written, docs/operations.md "Keys in Redis"), else the keys file the main configuration names (a hash when
// store.access_key_hash_secret is set, else the plaintext value, which is all the file format allows
// without that secret: `secretStorage` says which, so that no message claims a secret is shown only once
// while it sits in the file). Both are behind one small interface so each command is written once.

import { randomBytes } from 'node:crypto';
import { readFile, rename, writeFile } from 'node:fs/promises';
import { UsageError } from 'clipanion';
import { dump as dumpYaml } from 'js-yaml';
import type { AccessKeyEntry, RouterConfig } from '../common/config-types.ts';
import { errorText } from '../common/errors.ts';
import { EXIT } from '../common/exit-codes.ts';
import { RATE_LIMIT_FIELDS, type RateLimits } from '../common/rate-limit-types.ts';
import type { StoredAccessKey } from '../common/store-types.ts';
import { isPlainObject, parseYaml } from '../common/yaml-source.ts';
import { parseIsoInstant } from '../config/keys.ts';
import { hashAccessKey, hashSecretId } from '../hooks/builtin/access-key-hash.ts';
import { limitsFrom } from '../store/redis-access-keys.ts';
import { redactAddr } from '../store/redis-client.ts';
import { AdminError } from './admin-error.ts';
import { applyKeyUpdate, type KeyUpdate } from './limit-flags.ts';
import { openAdminStores } from './store-connect.ts';

export interface AdminKey {
  readonly name: string;
  readonly subjectType: string;
  readonly subjectId: string;
  readonly status: 'active' | 'revoked' | 'disabled';
  /** ms since epoch. */
  readonly expiresAt: number | undefined;
  readonly createdAt: number | undefined;
  /**
   * Store mode: which hash secret the stored hash is under (`unknown`: written before records named it;
   * `other`: neither configured secret). Undefined in file mode.
   */
  readonly hashSecret?: HashSecretState;
  /** The key's own rate limits; absent: rate_limits.per_key applies. */
  readonly limits?: RateLimits;
  /** The client model ids (glob patterns) it may use; absent: rate_limits.per_key.models, else all. */
  readonly models?: readonly string[];
}

export type HashSecretState = 'current' | 'previous' | 'unknown' | 'other';

export interface NewKey {
  readonly name: string;
  readonly subjectType: string;
  readonly subjectId: string;
  readonly expiresAt: number | undefined;
  readonly limits?: RateLimits;
  readonly models?: readonly string[];
}

export type ImportOutcome = 'created' | 'unchanged' | 'conflict';

export interface KeyBackend {
  /** Human description for messages: `store redis://host:6379 (prefix router:)` or `keys file /x.yaml`. */
  readonly where: string;
  /** How running gateways learn of a change made here, for the command's output. */
  readonly pickup: string;
  /**
   * What is kept of a secret: its HMAC only (the store; the keys file with store.access_key_hash_secret
   * set), so it can be shown once only, or the secret itself in plain text (the keys file without it).
   */
  readonly secretStorage: 'hash' | 'plaintext';
  create(key: NewKey, secret: string): Promise<'created' | 'exists'>;
  list(): Promise<AdminKey[]>;
  revoke(name: string): Promise<AdminKey | undefined>;
  /** Undefined when there is no such key; throws AdminError when it cannot be rotated. */
  rotate(name: string, secret: string): Promise<AdminKey | undefined>;
  /** Changes the key's limits and models; undefined when there is no such key. */
  update(name: string, update: KeyUpdate): Promise<AdminKey | undefined>;
  /** Import one keys-file entry; `dryRun` decides without writing. */
  importKey(entry: AccessKeyEntry, dryRun: boolean): Promise<{ outcome: ImportOutcome; reason?: string }>;
  close(): Promise<void>;
}

/** `ak_` + base64url(32 random bytes) (docs/configuration.md "Keys file"). */
export function generateSecret(): string {
  return `ak_${randomBytes(32).toString('base64url')}`;
}

export function parseExpiry(text: string | undefined): number | undefined {
  if (text === undefined || text === '') return undefined;
  const ms = parseIsoInstant(text);
  if (ms === undefined)
    throw new UsageError(`--expires-at must be an ISO 8601 date or date-time with zone: ${text}`);
  return ms;
}

export async function openKeyBackend(config: RouterConfig): Promise<KeyBackend> {
  return config.store.enabled ? openStoreBackend(config) : openFileBackend(config);
}

/** The optional limits and models of a key, present only when set. */
function limitFields(k: {
  readonly limits?: RateLimits | undefined;
  readonly models?: readonly string[] | undefined;
}): Pick<AdminKey, 'limits' | 'models'> {
  return {
    ...(k.limits === undefined || Object.keys(k.limits).length === 0 ? {} : { limits: k.limits }),
    ...(k.models === undefined ? {} : { models: k.models }),
  };
}

function fromStored(k: StoredAccessKey, secretIds: { current: string; previous?: string }): AdminKey {
  const id = k.hashSecretId;
  return {
    name: k.name,
    subjectType: k.subjectType,
    subjectId: k.subjectId,
    status: k.status,
    expiresAt: k.expiresAt,
    createdAt: k.createdAt,
    hashSecret:
      id === undefined
        ? 'unknown'
        : id === secretIds.current
          ? 'current'
          : id === secretIds.previous
            ? 'previous'
            : 'other',
    ...limitFields(k),
  };
}

async function openStoreBackend(config: RouterConfig): Promise<KeyBackend> {
  const store = config.store;
  const where = `store ${redactAddr(store.addr, store)} (prefix ${store.keyPrefix})`;
  if (store.accessKeyHashSecret === '')
    throw new AdminError('store.access_key_hash_secret is empty; it is needed to hash keys', EXIT.usage);
  const stores = await openAdminStores(store, where);
  const keys = stores.accessKeys;
  const hash = (secret: string): string => hashAccessKey(store.accessKeyHashSecret, secret);
  const secretIds = {
    current: hashSecretId(store.accessKeyHashSecret),
    ...(store.previousAccessKeyHashSecret === ''
      ? {}
      : { previous: hashSecretId(store.previousAccessKeyHashSecret) }),
  };
  const toAdmin = (k: StoredAccessKey): AdminKey => fromStored(k, secretIds);
  const previousHash = (secret: string): string | undefined =>
    store.previousAccessKeyHashSecret === ''
      ? undefined
      : hashAccessKey(store.previousAccessKeyHashSecret, secret);
  return {
    where,
    pickup: 'every gateway instance applies it at its next request',
    secretStorage: 'hash',
    create: (key, secret) =>
      keys.create({
        ...key,
        ...limitFields(key),
        secretHash: hash(secret),
        status: 'active',
        createdAt: Date.now(),
        version: 1,
        hashSecretId: secretIds.current,
      }),
    list: async () => (await keys.list()).map(toAdmin),
    revoke: async (name) => {
      const k = await keys.revoke(name);
      return k === undefined ? undefined : toAdmin(k);
    },
    rotate: async (name, secret) => {
      const existing = await keys.get(name);
      if (existing === undefined) return undefined;
      if (existing.status !== 'active')
        throw new AdminError(`key ${name} is ${existing.status}`, EXIT.failed);
      const k = await keys.rotate(name, hash(secret), secretIds.current);
      return k === undefined ? undefined : toAdmin(k);
    },
    update: async (name, update) => {
      // Read first for the limits a partial update keeps; another admin's update in between is lost.
      const existing = await keys.get(name);
      if (existing === undefined) return undefined;
      const k = await keys.update(name, applyKeyUpdate(existing, update));
      return k === undefined ? undefined : toAdmin(k);
    },
    async importKey(entry, dryRun) {
      const secretHash = entry.hash ?? (entry.value === undefined ? undefined : hash(entry.value));
      if (secretHash === undefined) return { outcome: 'conflict', reason: 'no value or hash' };
      const existing = await keys.get(entry.name);
      if (existing !== undefined) {
        if (existing.secretHash === secretHash) return { outcome: 'unchanged' };
        // Same secret, still under the previous hash secret: moved now, as a gateway would on its use.
        if (entry.value !== undefined && existing.secretHash === previousHash(entry.value)) {
          if (!dryRun)
            await stores.state.rehashAccessKey?.(existing.secretHash, secretHash, secretIds.current);
          return { outcome: 'unchanged' };
        }
        return { outcome: 'conflict', reason: 'a key of this name exists with a different secret' };
      }
      const record: StoredAccessKey = {
        name: entry.name,
        secretHash,
        status: entry.status === 'active' ? 'active' : 'revoked',
        subjectType: entry.subjectType ?? config.billing.subjectType,
        subjectId: entry.subjectId ?? entry.name,
        createdAt: entry.createdAt ?? Date.now(),
        expiresAt: entry.expiresAt,
        version: 1,
        // A keys-file hash is under store.access_key_hash_secret too (docs/configuration.md).
        hashSecretId: secretIds.current,
        ...limitFields(entry),
      };
      if (dryRun) {
        const owner = (await keys.list()).find((k) => k.secretHash === secretHash);
        return owner === undefined
          ? { outcome: 'created' }
          : { outcome: 'conflict', reason: `same secret as key ${owner.name}` };
      }
      try {
        return (await keys.create(record)) === 'created'
          ? { outcome: 'created' }
          : { outcome: 'conflict', reason: 'created concurrently by someone else' };
      } catch (err) {
        return { outcome: 'conflict', reason: errorText(err) };
      }
    },
    close: () => stores.close(),
  };
}

/** One access_keys item of the keys file, as written. */
interface RawKey {
  name: string;
  value?: string;
  hash?: string;
  subject_type?: string;
  subject_id?: string;
  status?: 'active' | 'revoked' | 'disabled';
  expires_at?: string;
  created_at?: string;
  limits?: Record<string, number>;
  models?: string[];
}

/** A key's limits as the keys file writes them (snake_case). */
function rawLimits(limits: RateLimits): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [field, wire] of Object.entries(RATE_LIMIT_FIELDS)) {
    const value = limits[field as keyof RateLimits];
    if (value !== undefined) out[wire] = value;
  }
  return out;
}

/** The limits and models fields of a keys-file entry, present only when set. */
function rawLimitFields(k: {
  readonly limits?: RateLimits | undefined;
  readonly models?: readonly string[] | undefined;
}): Pick<RawKey, 'limits' | 'models'> {
  const { limits, models } = limitFields(k);
  return {
    ...(limits === undefined ? {} : { limits: rawLimits(limits) }),
    ...(models === undefined ? {} : { models: [...models] }),
  };
}

/** What proxy/keys-watch.ts does with the keys file; docs/operations.md "Reload and drain". */
export const FILE_PICKUP =
  'a running gateway applies it from the keys file within about 0.1 s, without a reload ' +
  '(it logs "access keys reloaded from the keys file" and counts router_access_keys_reloads_total{result="applied"})';

function iso(ms: number | undefined): string | undefined {
  return ms === undefined ? undefined : new Date(ms).toISOString().replace('.000Z', 'Z');
}

async function openFileBackend(config: RouterConfig): Promise<KeyBackend> {
  const file = config.keys.file;
  if (file === undefined)
    throw new AdminError(
      'store.enabled is false and the configuration names no keys file (`keys:`); nowhere to keep keys',
      EXIT.usage,
    );
  const where = `keys file ${file}`;
  const hashSecret = config.store.accessKeyHashSecret;

  async function load(): Promise<{ doc: Record<string, unknown>; keys: RawKey[] }> {
    let text = '';
    try {
      text = await readFile(file as string, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    // An empty file (or one of comments only) is a keys file without keys, as the gateway reads it.
    const parsed = parseYaml(text, file as string);
    const problem = parsed.diagnostics[0];
    if (problem !== undefined)
      throw new AdminError(`${problem.file}:${problem.line}:${problem.col}: ${problem.message}`, EXIT.usage);
    const doc = parsed.yaml?.value ?? {};
    if (!isPlainObject(doc))
      throw new AdminError(
        `${file}: a keys file must be a mapping with "access_keys" and/or "providers"`,
        EXIT.usage,
      );
    const keys = Array.isArray(doc.access_keys) ? (doc.access_keys as RawKey[]) : [];
    return { doc, keys };
  }

  async function save(doc: Record<string, unknown>, keys: RawKey[]): Promise<void> {
    doc.access_keys = keys;
    const text = `# Access keys are edited by router-admin (comments are not kept).\n${dumpYaml(doc, { lineWidth: 120 })}`;
    const tmp = `${file}.${process.pid}.tmp`;
    await writeFile(tmp, text, { mode: 0o600 });
    await rename(tmp, file as string);
  }

  function secretFields(secret: string): Pick<RawKey, 'value' | 'hash'> {
    return hashSecret === '' ? { value: secret } : { hash: hashAccessKey(hashSecret, secret) };
  }

  function toAdmin(k: RawKey): AdminKey {
    return {
      name: k.name,
      subjectType: k.subject_type ?? config.billing.subjectType,
      subjectId: k.subject_id ?? k.name,
      status: k.status ?? 'active',
      expiresAt: k.expires_at === undefined ? undefined : parseIsoInstant(String(k.expires_at)),
      createdAt: k.created_at === undefined ? undefined : parseIsoInstant(String(k.created_at)),
      ...limitFields({
        limits: limitsFrom(k.limits),
        models: Array.isArray(k.models) ? k.models.map(String) : undefined,
      }),
    };
  }

  function sameSecret(k: RawKey, entry: AccessKeyEntry): boolean {
    if (entry.value !== undefined && k.value !== undefined) return k.value === entry.value;
    if (hashSecret === '') return k.hash !== undefined && k.hash === entry.hash;
    const mine = k.hash ?? (k.value === undefined ? undefined : hashAccessKey(hashSecret, k.value));
    const theirs =
      entry.hash ?? (entry.value === undefined ? undefined : hashAccessKey(hashSecret, entry.value));
    return mine !== undefined && mine === theirs;
  }

  return {
    where,
    pickup: FILE_PICKUP,
    secretStorage: hashSecret === '' ? 'plaintext' : 'hash',
    async create(key, secret) {
      const { doc, keys } = await load();
      if (keys.some((k) => k.name === key.name)) return 'exists';
      keys.push({
        name: key.name,
        ...secretFields(secret),
        subject_type: key.subjectType,
        subject_id: key.subjectId,
        status: 'active',
        ...(key.expiresAt === undefined ? {} : { expires_at: iso(key.expiresAt) }),
        created_at: iso(Date.now()),
        ...rawLimitFields(key),
      });
      await save(doc, keys);
      return 'created';
    },
    list: async () => (await load()).keys.map(toAdmin),
    async revoke(name) {
      const { doc, keys } = await load();
      const k = keys.find((x) => x.name === name);
      if (k === undefined) return undefined;
      k.status = 'revoked';
      await save(doc, keys);
      return toAdmin(k);
    },
    async rotate(name, secret) {
      const { doc, keys } = await load();
      const k = keys.find((x) => x.name === name);
      if (k === undefined) return undefined;
      if ((k.status ?? 'active') !== 'active')
        throw new AdminError(`key ${name} is ${k.status}`, EXIT.failed);
      delete k.value;
      delete k.hash;
      Object.assign(k, secretFields(secret));
      await save(doc, keys);
      return toAdmin(k);
    },
    async update(name, update) {
      const { doc, keys } = await load();
      const k = keys.find((x) => x.name === name);
      if (k === undefined) return undefined;
      const { limits, models } = toAdmin(k);
      const change = applyKeyUpdate({ limits, models }, update);
      if (change.limits === null) delete k.limits;
      else if (change.limits !== undefined) k.limits = rawLimits(change.limits);
      if (change.models === null) delete k.models;
      else if (change.models !== undefined) k.models = [...change.models];
      await save(doc, keys);
      return toAdmin(k);
    },
    async importKey(entry, dryRun) {
      const { doc, keys } = await load();
      const existing = keys.find((k) => k.name === entry.name);
      if (existing !== undefined) {
        return sameSecret(existing, entry)
          ? { outcome: 'unchanged' }
          : { outcome: 'conflict', reason: 'a key of this name exists with a different secret' };
      }
      if (entry.value === undefined && entry.hash !== undefined && hashSecret === '')
        return { outcome: 'conflict', reason: 'hashed key, but store.access_key_hash_secret is empty' };
      if (!dryRun) {
        keys.push({
          name: entry.name,
          ...(entry.value !== undefined ? secretFields(entry.value) : { hash: entry.hash }),
          ...(entry.subjectType === undefined ? {} : { subject_type: entry.subjectType }),
          ...(entry.subjectId === undefined ? {} : { subject_id: entry.subjectId }),
          status: entry.status,
          ...(entry.expiresAt === undefined ? {} : { expires_at: iso(entry.expiresAt) }),
          created_at: iso(entry.createdAt ?? Date.now()),
          ...rawLimitFields(entry),
        });
        await save(doc, keys);
      }
      return { outcome: 'created' };
    },
    close: async () => {},
  };
}
