// AWS Signature Version 4 (Bedrock) with @smithy/signature-v4, the AWS SDK's own signer: it derives the
// signing key once per day, region and service and keeps it. The signature covers the request as it is
// sent (method, path, query, headers and the body's bytes), so this runs after every rewrite, and the
// JSON body is serialized here once and sent as those bytes. The path is given already percent-encoded
// and the signer encodes it once more, as the SDK does for every service but S3. Temporary credentials
// (web identity, container, instance) come from a TokenCache; a signer is made per credential set.
// Around the signer, what it would otherwise redo on every request is done once: the request time's
// text once a second, HMAC keys once per key, the signing key once a day, a path's canonical form once,
// the origin parsed once. Its signRequest's steps (canonical headers and request, scope, string to sign,
// signature) are run on the gateway's own copy of the headers that must be signed, with the payload's
// hash already made, without signRequest's copy of the request and lookups around them (docs/benchmarks.md
// section 15).

import { createHmac, createSecretKey, hash, type KeyObject } from 'node:crypto';
import { ALGORITHM_IDENTIFIER, createScope, getCanonicalHeaders, SignatureV4 } from '@smithy/signature-v4';
import type { AwsCredentials } from '../../common/config-types.ts';
import type { RequestContext, UpstreamRequest } from '../../common/types.ts';
import { TokenCache } from './token-cache.ts';
import type { UpstreamAuthorizer } from './types.ts';

// HMAC keys as KeyObjects, made once per key: Node builds a key object for every createHmac given bytes,
// which cost more than the rest of a signature. The signer HMACs with that day's signing key, the same
// array each time, on every request.
const keysByText = new Map<string, KeyObject>();
const keysByArray = new WeakMap<object, KeyObject>();
const MAX_KEYS = 256;

function hmacKey(secret: string | ArrayBuffer | ArrayBufferView): KeyObject {
  if (typeof secret !== 'string') {
    let key = keysByArray.get(secret);
    if (key === undefined) {
      key = createSecretKey(bytesOf(secret));
      keysByArray.set(secret, key);
    }
    return key;
  }
  let key = keysByText.get(secret);
  if (key === undefined) {
    if (keysByText.size >= MAX_KEYS) keysByText.clear();
    key = createSecretKey(Buffer.from(secret, 'utf8'));
    keysByText.set(secret, key);
  }
  return key;
}

function bytesOf(data: string | ArrayBuffer | ArrayBufferView): Buffer {
  if (typeof data === 'string') return Buffer.from(data, 'utf8');
  if (ArrayBuffer.isView(data)) return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  return Buffer.from(data);
}

/** The signer's SHA-256 (and HMAC-SHA-256, given a secret), in the shape @smithy/signature-v4 takes. */
export class Sha256 {
  readonly #secret: string | ArrayBuffer | ArrayBufferView | undefined;
  #parts: (string | Uint8Array)[] = [];

  constructor(secret?: string | ArrayBuffer | ArrayBufferView) {
    this.#secret = secret;
  }

  update(data: string | ArrayBuffer | ArrayBufferView): void {
    // Node hashes strings (as UTF-8) and any typed array as they are: no copy, no Buffer around them.
    this.#parts.push(typeof data === 'string' || data instanceof Uint8Array ? data : bytesOf(data));
  }

  digest(): Promise<Uint8Array> {
    const parts = this.#parts;
    const data = parts.length === 1 ? parts[0]! : Buffer.concat(parts.map((p) => bytesOf(p)));
    if (this.#secret === undefined) return Promise.resolve(hash('sha256', data, 'buffer'));
    return Promise.resolve(createHmac('sha256', hmacKey(this.#secret)).update(data).digest());
  }

  reset(): void {
    this.#parts = [];
  }
}

type SigningKeyOf = (
  credentials: unknown,
  region: string,
  shortDate: string,
  service?: string,
) => Promise<Uint8Array>;
type CanonicalPathOf = (request: { path: string }) => string;
type SignatureOf = (
  longDate: string,
  scope: string,
  key: Promise<Uint8Array>,
  canonicalRequest: string,
) => Promise<string>;
type SignedRequest = Parameters<typeof getCanonicalHeaders>[0];

// Two of the signer's own steps, kept by their inputs. Both are private in the signer's types, so they
// are reached by name: were a later version to rename them, these memos would go unused and the
// signer's own steps would run as before (test/hooks/credentials/sigv4.test.ts checks the names).
const signersKey = (SignatureV4.prototype as unknown as { getSigningKey: SigningKeyOf }).getSigningKey;
const signersPath = (SignatureV4.prototype as unknown as { getCanonicalPath: CanonicalPathOf })
  .getCanonicalPath;
const signersSignature = (SignatureV4.prototype as unknown as { getSignature: SignatureOf }).getSignature;

/**
 * @smithy/signature-v4 with what it would otherwise redo on every request kept: the request time's text
 * (once a second), the signing key (the signer derives it once a day, region and service, but finds
 * its cache entry by an HMAC of the credentials and a hex key on every request; a signer is made per
 * credential set, so the day, region and service name it here) and the canonical form of a path.
 */
class Signer extends SignatureV4 {
  #second = -1;
  #date = { longDate: '', shortDate: '' };
  #keyScope = '';
  #key: Promise<Uint8Array> | undefined;
  readonly #paths = new Map<string, string>();

  protected override formatDate(now: Date): { longDate: string; shortDate: string } {
    const second = Math.floor(now.getTime() / 1000);
    if (second !== this.#second) {
      this.#second = second;
      this.#date = super.formatDate(now);
    }
    return this.#date;
  }

  /**
   * The Authorization value of a request, by signRequest's own steps: the date, the scope, the canonical
   * headers and request, the signature with the day's key. signRequest also copies the request, looks up
   * the credentials and the region (promises) and scans its headers three times (for generated headers,
   * a given payload hash and the checksum header); here the request is the gateway's own copy, holding
   * only the headers to sign, lower-case, and its payload's hash is made. Sets x-amz-date (and the
   * session token) on those headers.
   */
  async authorization(request: SignedRequest, payloadHash: string): Promise<string> {
    const creds = this.#creds;
    const { longDate, shortDate } = this.formatDate(new Date());
    const headers = request.headers;
    headers['x-amz-date'] = longDate;
    if (creds.sessionToken !== undefined) headers['x-amz-security-token'] = creds.sessionToken;
    const scope = createScope(shortDate, this.#region, this.service);
    const canonical = getCanonicalHeaders(request);
    const self = this as unknown as { getSigningKey: SigningKeyOf };
    const signature = await signersSignature.call(
      this,
      longDate,
      scope,
      self.getSigningKey(creds, this.#region, shortDate, this.service),
      this.createCanonicalRequest(request, canonical, payloadHash),
    );
    return `${ALGORITHM_IDENTIFIER} Credential=${creds.accessKeyId}/${scope}, SignedHeaders=${this.getCanonicalHeaderList(canonical)}, Signature=${signature}`;
  }

  readonly #creds: AwsCredentials;
  readonly #region: string;

  constructor(service: string, region: string, creds: AwsCredentials) {
    super({
      service,
      region,
      credentials: {
        accessKeyId: creds.accessKeyId,
        secretAccessKey: creds.secretAccessKey,
        ...(creds.sessionToken === undefined ? {} : { sessionToken: creds.sessionToken }),
      },
      sha256: Sha256,
    });
    this.#creds = creds;
    this.#region = region;
    const self = this as unknown as { getSigningKey: SigningKeyOf; getCanonicalPath: CanonicalPathOf };
    if (typeof signersKey === 'function') {
      self.getSigningKey = (credentials, region, shortDate, service) => {
        const scope = `${shortDate}/${region}/${service ?? ''}`;
        if (scope !== this.#keyScope || this.#key === undefined) {
          const key = signersKey.call(this, credentials, region, shortDate, service);
          this.#keyScope = scope;
          this.#key = key;
          key.catch(() => {
            if (this.#key === key) this.#key = undefined;
          });
        }
        return this.#key;
      };
    }
    if (typeof signersPath === 'function') {
      self.getCanonicalPath = (request) => {
        let path = this.#paths.get(request.path);
        if (path === undefined) {
          path = signersPath.call(this, request);
          if (this.#paths.size >= MAX_KEYS) this.#paths.clear();
          this.#paths.set(request.path, path);
        }
        return path;
      };
    }
  }
}

const origins = new Map<string, URL>();

function originOf(origin: string): URL {
  let url = origins.get(origin);
  if (url === undefined) {
    if (origins.size >= MAX_KEYS) origins.clear();
    url = new URL(origin);
    origins.set(origin, url);
  }
  return url;
}

/** The SHA-256 of no bytes, as SigV4 writes it. */
const EMPTY_SHA256 = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';
/** Whatever a client or a rule put there: these are written here, as they are signed. */
const WRITTEN_HEADERS = [
  'authorization',
  'x-amz-date',
  'x-amz-security-token',
  'x-amz-content-sha256',
  'host',
  'content-length',
];

export interface SigV4Options {
  readonly service: string;
  readonly region: string;
  /** Static credentials, or the cache of a source of temporary ones. */
  readonly credentials: AwsCredentials | TokenCache<AwsCredentials>;
  readonly channel: string;
}

export function createSigV4Authorizer(opts: SigV4Options): UpstreamAuthorizer {
  // Not a memo: the signature itself. A version without this step fails here, at configuration, not per request.
  if (typeof signersSignature !== 'function')
    throw new Error(
      '@smithy/signature-v4 has no getSignature step: install the version package-lock.json pins',
    );
  const make = (c: AwsCredentials) => new Signer(opts.service, opts.region, c);
  const cache = opts.credentials instanceof TokenCache ? opts.credentials : undefined;
  let signedWith = cache === undefined ? (opts.credentials as AwsCredentials) : undefined;
  let signer = signedWith === undefined ? undefined : make(signedWith);
  return {
    scheme: 'sigv4',
    channel: opts.channel,
    async authorize(ctx: RequestContext, req: UpstreamRequest): Promise<void> {
      if (cache !== undefined) {
        const pending = cache.token(ctx.log);
        const creds = pending instanceof Promise ? await pending : pending;
        if (creds !== signedWith) {
          signedWith = creds;
          signer = make(creds);
        }
      }
      const body =
        req.body === undefined
          ? undefined
          : Buffer.isBuffer(req.body)
            ? req.body
            : Buffer.from(JSON.stringify(req.body));
      req.body = body;
      const headers = req.headers;
      for (const name of WRITTEN_HEADERS) if (headers[name] !== undefined) delete headers[name];
      const url = originOf(req.origin);
      // What is signed: the host, the body's length and hash, and of the request's own headers the
      // content type and any x-amz-* header, the ones AWS requires signed. The others (accept,
      // accept-encoding, a passed header) are sent unsigned: the signer need not canonicalize them on every
      // request. The payload's hash is made here in one call; it is not sent (only S3 asks for it; boto3
      // and aws4 leave it out for Bedrock).
      const toSign: Record<string, string> = { host: url.host };
      if (body !== undefined && body.length > 0) toSign['content-length'] = String(body.length);
      for (const name in headers) {
        if (name === 'content-type' || name.startsWith('x-amz-')) toSign[name] = headers[name]!;
      }
      let query: Record<string, string | string[]> | undefined;
      if (req.query.size > 0) {
        query = {};
        for (const [name, value] of req.query) {
          const seen = query[name];
          query[name] = seen === undefined ? value : Array.isArray(seen) ? [...seen, value] : [seen, value];
        }
      }
      const authorization = await signer!.authorization(
        { method: req.method, path: req.path, query: query ?? {}, headers: toSign } as SignedRequest,
        body === undefined ? EMPTY_SHA256 : hash('sha256', body, 'hex'),
      );
      // Lower-case already: the request's by its contract, the signed ones as written above.
      for (const name in toSign) headers[name] = toSign[name]!;
      headers.authorization = authorization;
    },
    ...(cache === undefined ? {} : { refused: () => cache.refused() }),
  };
}

/** A Bedrock API key: sent as a bearer token, in place of a signature. */
export function createBearerAuthorizer(key: string, channel: string): UpstreamAuthorizer {
  const value = `Bearer ${key}`;
  return {
    scheme: 'bearer',
    channel,
    authorize(_ctx, req) {
      req.headers.authorization = value;
    },
  };
}
