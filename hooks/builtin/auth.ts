// Authentication (the authenticate stage, before the body is parsed): the presented secret is looked up
// by digest, so no plaintext is compared with a configured key, and the master key is compared with
// timingSafeEqual on digests of equal length.
// Digests of recently presented secrets are remembered (a bounded map keyed by the secret, as the store
// mode's HMAC memo is), which spares the hash on repeat requests.
// Accepted carriers (docs/configuration.md "Keys file"): `Authorization: Bearer`, then the headers and
// query parameters the wire families declare for their SDKs (hooks/families/index.ts).

import { hash, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { setBounded } from '../../common/bounded-map.ts';
import type { AccessKeyEntry, AccessKeyMode, KeysConfig } from '../../common/config-types.ts';
import { errorText, GatewayError } from '../../common/errors.ts';
import type {
  RehashedKey,
  RequestView,
  RequestViewQuery,
  StateStore,
  StoredAccessKey,
} from '../../common/store-types.ts';
import type { Hook, MaybePromise, OnRequestResult, Principal, RequestContext } from '../../common/types.ts';
import { CONTINUE } from '../../common/types.ts';
import { KEY_HEADERS, KEY_QUERY_PARAMS } from '../families/index.ts';
import { hashAccessKey, hashSecretId } from './access-key-hash.ts';
import { peekRequestView, requestView } from './request-view.ts';

export { hashAccessKey, hashSecretId };

export interface AuthOptions {
  readonly keys: KeysConfig;
  readonly masterKey: string | undefined;
  /** Default subject type for keys that name none (billing.subject_type). */
  readonly subjectType: string;
  /** Subject of master-key requests (billing.fallback_subject_id; '' = no subject). */
  readonly fallbackSubjectId: string;
  /** Needed to verify keys stored as hashes. */
  readonly hashSecret: string | undefined;
  readonly now?: () => number;
}

/** The secret a client presented, from whichever carrier it used. */
export function presentedSecret(headers: IncomingHttpHeaders, query: URLSearchParams): string | undefined {
  const auth = headers.authorization;
  if (auth !== undefined) {
    const match = /^Bearer\s+(.+)$/i.exec(auth);
    if (match !== null) return match[1]!.trim();
  }
  // The first carrier header present decides, even when it is empty.
  const header = KEY_HEADERS.find((name) => headers[name] !== undefined);
  const apiKey = header === undefined ? undefined : headers[header];
  if (typeof apiKey === 'string' && apiKey !== '') return apiKey;
  for (const name of KEY_QUERY_PARAMS) {
    const q = query.get(name);
    if (q !== null && q !== '') return q;
  }
  return undefined;
}

function sha256(value: string): Buffer {
  // One-shot digest: no Hash object per request (this runs on every request).
  return hash('sha256', value, 'buffer');
}

/** Longer secrets are derived every time: a memo of header-sized wrong keys held 10,000 of them. */
export const MAX_REMEMBERED_SECRET_LENGTH = 256;

/**
 * `derive` with a bounded memo keyed by the presented secret: clients present the same few secrets on
 * every request, and hashing them (HMAC in store mode, SHA-256 in file mode) was a visible share of a
 * small request's CPU. Oldest entries go first, so secrets nobody holds cannot grow it, and only secrets
 * of a key's length are kept, so neither can long ones. A lookup hashes the string with V8's seeded
 * string hash and compares contents only on a hash match, so its time says nothing useful about a stored
 * secret; the key tables still decide on every request.
 */
export function rememberBySecret<T>(
  derive: (secret: string) => T,
  maxEntries = 10_000,
): (secret: string) => T {
  const memo = new Map<string, T>();
  return (secret) => {
    if (secret.length > MAX_REMEMBERED_SECRET_LENGTH) return derive(secret);
    let value = memo.get(secret);
    if (value === undefined) {
      value = derive(secret);
      setBounded(memo, secret, value, maxEntries);
    }
    return value;
  };
}

/** hashAccessKey, remembered for recently presented secrets (the store decides validity every time). */
export function createKeyHasher(hashSecret: string, maxEntries = 10_000): (key: string) => string {
  return rememberBySecret((key) => hashAccessKey(hashSecret, key), maxEntries);
}

export interface Authenticator {
  /** The principal for a presented secret; throws GatewayError('invalid_api_key') otherwise. */
  authenticate(secret: string | undefined): Principal;
  readonly configured: boolean;
}

export function createAuthenticator(opts: AuthOptions): Authenticator {
  const byDigest = new Map<string, AccessKeyEntry>();
  const byHmac = new Map<string, AccessKeyEntry>();
  for (const entry of opts.keys.accessKeys) {
    if (entry.value !== undefined) byDigest.set(sha256(entry.value).toString('base64'), entry);
    if (entry.hash !== undefined) byHmac.set(entry.hash, entry);
  }
  const masterDigest =
    opts.masterKey === undefined || opts.masterKey === '' ? undefined : sha256(opts.masterKey);
  const now = opts.now ?? Date.now;
  const master: Principal = {
    keyName: undefined,
    isMaster: true,
    subjectType: opts.subjectType,
    subjectId: opts.fallbackSubjectId,
  };
  const principals = new WeakMap<AccessKeyEntry, Principal>();
  // The digest of each secret presented lately, and whether it is the master key's.
  const digestOf = rememberBySecret((secret) => {
    const digest = sha256(secret);
    return {
      key: digest.toString('base64'),
      master: masterDigest !== undefined && timingSafeEqual(digest, masterDigest),
    };
  });

  function principalOf(entry: AccessKeyEntry): Principal {
    let p = principals.get(entry);
    if (p === undefined) {
      p = {
        keyName: entry.name,
        isMaster: false,
        subjectType: entry.subjectType ?? opts.subjectType,
        subjectId: entry.subjectId ?? entry.name,
        limits: entry.limits,
        models: entry.models,
      };
      principals.set(entry, p);
    }
    return p;
  }

  return {
    configured: byDigest.size > 0 || byHmac.size > 0 || masterDigest !== undefined,
    authenticate(secret) {
      if (secret === undefined) throw new GatewayError('invalid_api_key', 'Missing access key');
      const digest = digestOf(secret);
      if (digest.master) return master;
      let entry = byDigest.get(digest.key);
      if (entry === undefined && byHmac.size > 0 && opts.hashSecret !== undefined) {
        entry = byHmac.get(hashAccessKey(opts.hashSecret, secret));
      }
      if (entry === undefined) throw new GatewayError('invalid_api_key', 'Invalid access key');
      if (entry.status !== 'active')
        throw new GatewayError('invalid_api_key', `Access key is ${entry.status}`);
      if (entry.expiresAt !== undefined && entry.expiresAt <= now()) {
        throw new GatewayError('invalid_api_key', 'Access key has expired');
      }
      return principalOf(entry);
    },
  };
}

export function createAuthHook(auth: Authenticator): Hook {
  return {
    name: 'auth',
    authenticate(ctx: RequestContext): OnRequestResult {
      ctx.principal = auth.authenticate(presentedSecret(ctx.headers, ctx.query));
      return CONTINUE;
    },
  } satisfies Hook;
}

export interface StoreAuthOptions {
  readonly store: StateStore;
  /** redis_preferred or redis_only (file_only never asks the store for keys). */
  readonly mode: AccessKeyMode;
  readonly hashSecret: string;
  /** The hash secret being rotated away from: keys still under it are re-hashed when used. */
  readonly previousHashSecret?: string;
  readonly masterKey: string | undefined;
  /** Default subject type for records that name none (billing.subject_type). */
  readonly subjectType: string;
  /**
   * Balance currency to read in the same round trip (balance enforcement on): the balance hook then
   * finds the key's subject state and cached balance already read (hooks/builtin/request-view.ts).
   */
  readonly currency: string | undefined;
  readonly now?: () => number;
}

/**
 * Shared-store authentication (docs/operations.md "Managing access keys"): the HMAC of the presented secret is looked up in the store;
 * redis_preferred falls back to the keys file (`file`) when the store has no such key; the store being
 * unreachable answers 503 authentication_unavailable whatever the mode (a revoked key must never pass
 * because the store was down). The master key is checked locally and needs no store.
 */
/** Shared-store authentication as a function of the secret and a way to read the store. */
export interface StoreAuthenticator {
  /** The principal at once when `peek` answers the key lookup without a wait. */
  authenticate(
    secret: string | undefined,
    view: (query: RequestViewQuery) => Promise<RequestView>,
    /** The request's logger, asked for only when there is something to log (making one costs). */
    log: () => RequestContext['log'],
    peek?: (query: RequestViewQuery) => RequestView | undefined,
  ): Principal | Promise<Principal>;
}

export function createStoreAuthenticator(file: Authenticator, opts: StoreAuthOptions): StoreAuthenticator {
  const masterDigest =
    opts.masterKey === undefined || opts.masterKey === '' ? undefined : sha256(opts.masterKey);
  const now = opts.now ?? Date.now;
  const keyHasher = createKeyHasher(opts.hashSecret);
  const previousHasher =
    opts.previousHashSecret === undefined || opts.previousHashSecret === ''
      ? undefined
      : createKeyHasher(opts.previousHashSecret);
  const currentSecretId = hashSecretId(opts.hashSecret);
  const rehash = opts.store.rehashAccessKey;

  function principalOf(key: StoredAccessKey): Principal {
    if (key.status !== 'active') throw new GatewayError('invalid_api_key', `Access key is ${key.status}`);
    if (key.expiresAt !== undefined && key.expiresAt <= now()) {
      throw new GatewayError('invalid_api_key', 'Access key has expired');
    }
    return {
      keyName: key.name,
      isMaster: false,
      subjectType: key.subjectType === '' ? opts.subjectType : key.subjectType,
      subjectId: key.subjectId,
      limits: key.limits,
      models: key.models,
    };
  }

  function unavailable(log: () => RequestContext['log'], err: unknown): GatewayError {
    log().warn({ err: errorText(err) }, 'access-key lookup failed: store unavailable');
    return new GatewayError('authentication_unavailable');
  }

  /**
   * Only reached when the current hash names no key, so keys already under the current secret pay
   * nothing for a rotation. One script call finds a key under the previous hash and moves it, or finds
   * it already moved: a move by another instance since this request's read must not refuse the key,
   * and the view cache may not have heard of that move yet.
   */
  async function underPreviousSecret(
    rehash: NonNullable<StateStore['rehashAccessKey']>,
    previousHash: string,
    currentHash: string,
    log: () => RequestContext['log'],
  ): Promise<StoredAccessKey | null> {
    let found: RehashedKey | null;
    try {
      found = await rehash.call(opts.store, previousHash, currentHash, currentSecretId);
    } catch (err) {
      throw unavailable(log, err);
    }
    if (found?.moved)
      log().info({ accessKey: found.key.name }, 'access key re-hashed with the current hash secret');
    return found?.key ?? null;
  }

  /** The principal once the key lookup has answered `key` (null: no key under the current hash). */
  function decide(
    secret: string,
    keyHash: string,
    key: StoredAccessKey | null | undefined,
    log: () => RequestContext['log'],
  ): Principal | Promise<Principal> {
    if (key) return principalOf(key);
    if (previousHasher !== undefined && rehash !== undefined) {
      return underPreviousSecret(rehash, previousHasher(secret), keyHash, log).then((moved) =>
        moved ? principalOf(moved) : otherwise(secret),
      );
    }
    return otherwise(secret);
  }

  function otherwise(secret: string): Principal {
    if (opts.mode === 'redis_preferred') return file.authenticate(secret);
    throw new GatewayError('invalid_api_key', 'Invalid access key');
  }

  async function lookUp(
    secret: string,
    query: RequestViewQuery & { keyHash: string },
    view: (query: RequestViewQuery) => Promise<RequestView>,
    log: () => RequestContext['log'],
  ): Promise<Principal> {
    let key: StoredAccessKey | null | undefined;
    try {
      key = (await view(query)).key;
    } catch (err) {
      throw unavailable(log, err);
    }
    return decide(secret, query.keyHash, key, log);
  }

  return {
    authenticate(secret, view, log, peek) {
      if (secret === undefined) throw new GatewayError('invalid_api_key', 'Missing access key');
      if (masterDigest !== undefined && timingSafeEqual(sha256(secret), masterDigest)) {
        return file.authenticate(secret);
      }
      const query = { keyHash: keyHasher(secret), currency: opts.currency };
      // Without a wait when the store's copy has the key: no async frames on the common path.
      const known = peek?.(query);
      if (known !== undefined) return decide(secret, query.keyHash, known.key, log);
      return lookUp(secret, query, view, log);
    },
  };
}

export function createStoreAuthHook(auth: StoreAuthenticator, store: StateStore): Hook {
  return {
    name: 'auth',
    authenticate(ctx: RequestContext): MaybePromise<OnRequestResult> {
      // The per-request view is memoized, so the balance hook reuses this same round trip.
      const principal = auth.authenticate(
        presentedSecret(ctx.headers, ctx.query),
        (query) => requestView(ctx, store, query),
        () => ctx.log,
        (query) => peekRequestView(ctx, store, query),
      );
      if (!(principal instanceof Promise)) {
        ctx.principal = principal;
        return CONTINUE;
      }
      return principal.then((p) => {
        ctx.principal = p;
        return CONTINUE;
      });
    },
  } satisfies Hook;
}
