// How `router-admin` connects to a Redis store and, when it cannot, says why and what to change: the
// address is unreachable (refused, unknown host, no answer), the credentials were refused (NOAUTH,
// WRONGPASS), or the TLS certificate was not accepted. Addresses are named without their credentials.

import type { StoreConfig } from '../common/config-types.ts';
import { EXIT } from '../common/exit-codes.ts';
import {
  closeRedisClient,
  createKeyLayout,
  createRedisClient,
  type KeyLayout,
  type Redis,
  redactAddr,
} from '../store/redis-client.ts';
import { openRedisStores, type RedisStores } from '../store/redis-store.ts';
import { AdminError } from './admin-error.ts';

export type StoreFailureKind = 'unreachable' | 'auth' | 'tls' | 'other';

export interface StoreFailure {
  readonly kind: StoreFailureKind;
  /** ECONNREFUSED, WRONGPASS, DEPTH_ZERO_SELF_SIGNED_CERT ...; undefined when nothing answered at all. */
  readonly code: string | undefined;
  /** The cause in a few words, never a credential. */
  readonly reason: string;
  /** ERR_TLS_CERT_ALTNAME_INVALID: the host asked for and the names the certificate holds. */
  readonly host?: string;
  readonly certNames?: string;
}

/** Network errors after which the address, not the credentials or the certificate, is the problem. */
const UNREACHABLE: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ETIMEDOUT: 'no answer (timed out)',
  ENOTFOUND: 'host not found',
  EAI_AGAIN: 'host name lookup failed',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  ECONNRESET: 'the server closed the connection',
  ECONNABORTED: 'connection aborted',
  EPIPE: 'the server closed the connection',
  EADDRNOTAVAIL: 'address not available',
};

/** Certificate verification codes of Node's TLS (OpenSSL's X509_V_ERR_* names) meaning "not trusted". */
const UNTRUSTED = new Set([
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_UNTRUSTED',
  'CERT_REJECTED',
  'CERT_SIGNATURE_FAILURE',
  'INVALID_CA',
]);
const EXPIRED = new Set(['CERT_HAS_EXPIRED', 'CERT_NOT_YET_VALID']);
/** The server's TLS 1.3 alert when it wants a client certificate and got none. */
const CERTIFICATE_REQUIRED = new Set(['ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED']);

interface ErrorShape {
  name?: unknown;
  message?: unknown;
  code?: unknown;
  host?: unknown;
  cert?: { subjectaltname?: unknown; subject?: { CN?: unknown } };
  errors?: unknown;
  lastNodeError?: unknown;
}

/** Node's TLS messages end with advice about --use-system-ca; the reason is what comes before. */
function firstClause(message: string): string {
  return message.split(';')[0]!.trim();
}

/**
 * What an error of an ioredis client (or of the socket under it) means for the operator. A cluster
 * client's "all nodes failed" carries the last node's error, a dual-stack connect an AggregateError:
 * both are looked through. `undefined` is "no error but not ready in time".
 */
export function classifyStoreError(err: unknown): StoreFailure {
  if (err === undefined || err === null) return { kind: 'unreachable', code: undefined, reason: 'no answer' };
  const e = err as ErrorShape;
  if (e.lastNodeError !== undefined && e.lastNodeError !== null) return classifyStoreError(e.lastNodeError);
  const message = typeof e.message === 'string' ? e.message : String(err);
  let code = typeof e.code === 'string' ? e.code : undefined;
  if (code === undefined && Array.isArray(e.errors) && e.errors.length > 0)
    return classifyStoreError(e.errors[0]);

  const auth = /\b(NOAUTH|WRONGPASS)\b/.exec(message);
  if (auth !== null) {
    const which = auth[1]!;
    return {
      kind: 'auth',
      code: which,
      reason:
        which === 'NOAUTH'
          ? 'it requires a password and none was given'
          : 'wrong password, or unknown or disabled user',
    };
  }
  if (/^ERR invalid (password|username-password pair)/i.test(message))
    return { kind: 'auth', code: 'WRONGPASS', reason: 'wrong password, or unknown or disabled user' };

  if (code !== undefined) {
    if (code === 'ERR_TLS_CERT_ALTNAME_INVALID' || code === 'HOSTNAME_MISMATCH') {
      const names = e.cert?.subjectaltname ?? e.cert?.subject?.CN;
      return {
        kind: 'tls',
        code,
        reason: 'the certificate is not valid for this host name',
        ...(typeof e.host === 'string' ? { host: e.host } : {}),
        ...(typeof names === 'string' && names !== '' ? { certNames: names } : {}),
      };
    }
    if (
      UNTRUSTED.has(code) ||
      EXPIRED.has(code) ||
      code.startsWith('ERR_TLS_') ||
      code.startsWith('ERR_SSL_')
    )
      return { kind: 'tls', code, reason: firstClause(message) };
    const unreachable = UNREACHABLE[code];
    if (unreachable !== undefined) return { kind: 'unreachable', code, reason: unreachable };
  }
  if (/All sentinels are unreachable/i.test(message)) {
    code ??= 'SENTINELS_UNREACHABLE';
    return { kind: 'unreachable', code, reason: 'no sentinel answered' };
  }
  if (/Connection is closed|Failed to refresh slots cache/i.test(message))
    return { kind: 'unreachable', code, reason: 'the connection was closed' };
  return { kind: 'other', code, reason: firstClause(message) };
}

/** One store as messages name it, and what the operator changes to fix each kind of failure. */
export interface StoreSide {
  /** `store redis://host:6379 (prefix router:)`, without credentials. */
  readonly where: string;
  /** Whether TLS is on (rediss:// or store.tls). */
  readonly tls: boolean;
  /** What sets the address. */
  readonly addrFix: string;
  /** What sets the credentials. */
  readonly authFix: string;
}

/** The configured store: store.addr / store.sentinels, ROUTER_STORE_PASSWORD ... */
export function configuredStoreSide(store: StoreConfig, where?: string): StoreSide {
  const sentinels = store.sentinels.length > 0;
  return {
    where: where ?? `store ${redactAddr(store.addr, store)}`,
    tls: store.tls || /^rediss:/i.test(store.addr.trim()),
    addrFix: sentinels
      ? 'store.sentinels (ROUTER_STORE_SENTINELS) and store.sentinel_name'
      : store.cluster
        ? 'the seed addresses in store.addr (ROUTER_STORE_ADDR)'
        : 'store.addr (ROUTER_STORE_ADDR)',
    authFix:
      'the password in ROUTER_STORE_PASSWORD (or store.password), and for an ACL user its name in ' +
      'ROUTER_STORE_USERNAME (or store.username)',
  };
}

/** The sentence for a failure to connect, naming what to change. */
export function storeFailureMessage(side: StoreSide, failure: StoreFailure, timeoutMs: number): string {
  const code = failure.code === undefined ? '' : ` (${failure.code})`;
  const tail = 'nothing was changed';
  switch (failure.kind) {
    case 'auth':
      return `the ${side.where} refused to authenticate router-admin: ${failure.reason}${code}; set ${side.authFix}; ${tail}`;
    case 'tls': {
      const lead = `TLS verification of the ${side.where} failed`;
      if (failure.code === 'ERR_TLS_CERT_ALTNAME_INVALID' || failure.code === 'HOSTNAME_MISMATCH') {
        const host = failure.host === undefined ? '' : ` ${failure.host}`;
        const names = failure.certNames === undefined ? '' : `; the certificate names ${failure.certNames}`;
        return (
          `${lead}: its certificate is not valid for the host${host}${code}${names}. ` +
          `Address the store by a name the certificate holds in ${side.addrFix}, or reissue the certificate ` +
          `for this name; ${tail}`
        );
      }
      if (failure.code !== undefined && EXPIRED.has(failure.code))
        return (
          `${lead}: ${failure.reason}${code}. Renew the certificate on the Redis server (tls-cert-file), ` +
          `or check the clock of this host; ${tail}`
        );
      if (failure.code !== undefined && UNTRUSTED.has(failure.code))
        return (
          `${lead}: ${failure.reason}${code}. This host does not trust the certificate's issuer: set ` +
          'store.tls_ca_file (ROUTER_STORE_TLS_CA_FILE) to the PEM file of the CA that signed it, or run ' +
          'router-admin (and the gateway) with NODE_EXTRA_CA_CERTS=/path/to/ca.pem; ' +
          tail
        );
      if (failure.code !== undefined && CERTIFICATE_REQUIRED.has(failure.code))
        return (
          `the ${side.where} refused the TLS handshake: it asks for a client certificate${code}; set ` +
          'store.tls_cert_file and store.tls_key_file (ROUTER_STORE_TLS_CERT_FILE, ROUTER_STORE_TLS_KEY_FILE) ' +
          `to a certificate its tls-ca-cert-file trusts and its key; ${tail}`
        );
      return (
        `${lead}: ${failure.reason}${code}. Check that the port in ${side.addrFix} speaks TLS ` +
        `(a rediss:// address or store.tls: true turns TLS on); ${tail}`
      );
    }
    case 'unreachable': {
      const reason = failure.code === undefined ? `no answer within ${timeoutMs} ms` : failure.reason;
      const hint =
        side.tls && (failure.code === undefined || failure.code === 'ETIMEDOUT')
          ? '; with TLS on (rediss:// or store.tls), check that the port speaks TLS'
          : side.tls && (failure.code === 'ECONNRESET' || failure.code === 'EPIPE')
            ? '; with TLS on, a server that wants a client certificate closes the connection: set ' +
              'store.tls_cert_file and store.tls_key_file'
            : !side.tls && (failure.code === 'ECONNRESET' || failure.code === 'EPIPE')
              ? '; if the server expects TLS, use a rediss:// address or store.tls: true'
              : '';
      return (
        `cannot connect to the ${side.where}: ${reason}${code}; check ${side.addrFix} and that Redis runs ` +
        `there and is reachable from this host${hint}; ${tail}`
      );
    }
    default:
      return `cannot use the ${side.where}: ${failure.reason}${code}; ${tail}`;
  }
}

/** Orders failures by how much they say: a refused password explains more than a later reset. */
const RANK: Record<StoreFailureKind, number> = { other: 0, unreachable: 1, tls: 2, auth: 2 };

/**
 * A ready client of the store, or an AdminError saying why not: exit code 2 (configuration) when the
 * credentials or the certificate were refused, which retrying does not fix and which ends the wait at
 * once; exit code 3 when the store is unreachable for `readyTimeoutMs`.
 */
export async function connectStore(
  config: StoreConfig,
  side: StoreSide,
  opts: { connectionName: string; readyTimeoutMs: number },
): Promise<{ client: Redis; keys: KeyLayout }> {
  const client = createRedisClient(config, { connectionName: opts.connectionName });
  let failure: StoreFailure | undefined;
  const ready = await new Promise<boolean>((resolve) => {
    if (client.status === 'ready') {
      resolve(true);
      return;
    }
    const timer = setTimeout(() => done(false), opts.readyTimeoutMs);
    function done(ok: boolean): void {
      clearTimeout(timer);
      client.off('ready', onReady);
      client.off('error', onError);
      resolve(ok);
    }
    function onReady(): void {
      done(true);
    }
    function onError(err: unknown): void {
      const seen = classifyStoreError(err);
      if (failure === undefined || RANK[seen.kind] > RANK[failure.kind]) failure = seen;
      if (seen.kind === 'auth' || seen.kind === 'tls') done(false);
    }
    client.on('ready', onReady);
    client.on('error', onError);
  });
  if (ready) return { client, keys: createKeyLayout(config) };
  client.disconnect();
  const why = failure ?? classifyStoreError(undefined);
  throw new AdminError(
    storeFailureMessage(side, why, opts.readyTimeoutMs),
    why.kind === 'auth' || why.kind === 'tls' ? EXIT.usage : EXIT.unavailable,
  );
}

/**
 * The configured store's adapters for a command (`where` names it in messages), or an AdminError saying
 * why not, as connectStore does.
 */
export async function openAdminStores(store: StoreConfig, where: string): Promise<RedisStores> {
  const side = configuredStoreSide(store, where);
  const readyTimeoutMs = Math.max(2000, store.operationTimeoutMs * 4);
  // A connection of its own first, so that a failure can be told apart (unreachable, credentials, TLS).
  const probe = await connectStore(store, side, { connectionName: 'router-admin', readyTimeoutMs });
  await closeRedisClient(probe.client);
  const stores = await openRedisStores(store, { readyTimeoutMs });
  if (!stores.connected) {
    await stores.close();
    throw new AdminError(
      storeFailureMessage(
        side,
        { kind: 'unreachable', code: undefined, reason: 'no answer' },
        readyTimeoutMs,
      ),
      EXIT.unavailable,
    );
  }
  return stores;
}
