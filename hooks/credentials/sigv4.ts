// AWS Signature Version 4 (Bedrock) with @smithy/signature-v4, the AWS SDK's own signer: it derives the
// signing key once per day, region and service and keeps it. The signature covers the request as it is
// sent (method, path, query, headers and the body's bytes), so this runs after every rewrite, and the
// JSON body is serialized here once and sent as those bytes. The path is given already percent-encoded
// and the signer encodes it once more, as the SDK does for every service but S3. Temporary credentials
// (web identity, container, instance) come from a TokenCache; a signer is made per credential set.
// Around the signer, what it would otherwise redo on every request is done once: the request time's
// text once a second, HMAC keys once per key, the origin parsed once (docs/benchmarks.md section 15).

import { createHmac, createSecretKey, hash, type KeyObject } from 'node:crypto';
import { SignatureV4 } from '@smithy/signature-v4';
import type { AwsCredentials } from '../../common/config-types.ts';
import type { RequestContext, UpstreamRequest } from '../../common/types.ts';
import { TokenCache } from './token-cache.ts';
import type { UpstreamAuthorizer } from './types.ts';

// HMAC keys as KeyObjects, made once per key: Node builds a key object for every createHmac given bytes,
// which cost more than the rest of a signature. The signer HMACs with the secret (to find its cached
// signing key) and with that day's signing key, the same array each time, on every request.
const keysByText = new Map<string, KeyObject>();
const keysByArray = new WeakMap<object, KeyObject>();
const MAX_HMAC_KEYS = 256;

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
    if (keysByText.size >= MAX_HMAC_KEYS) keysByText.clear();
    key = createSecretKey(Buffer.from(secret, 'utf8'));
    keysByText.set(secret, key);
  }
  return key;
}

// HMACs of short messages, by key and message: the signer HMACs the access key id with the secret on
// every request only to look up its cached signing key, and derives that key by HMACs of the date,
// region and service. Their results never change; the string to sign (longer) is never kept.
const shortHmacs = new Map<string, Buffer>();
const SHORT_HMAC_BYTES = 64;

function bytesOf(data: string | ArrayBuffer | ArrayBufferView): Buffer {
  if (typeof data === 'string') return Buffer.from(data, 'utf8');
  if (ArrayBuffer.isView(data)) return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  return Buffer.from(data);
}

/** The signer's SHA-256 (and HMAC-SHA-256, given a secret), in the shape @smithy/signature-v4 takes. */
class Sha256 {
  readonly #secret: string | ArrayBuffer | ArrayBufferView | undefined;
  #parts: Buffer[] = [];

  constructor(secret?: string | ArrayBuffer | ArrayBufferView) {
    this.#secret = secret;
  }

  update(data: string | ArrayBuffer | ArrayBufferView): void {
    this.#parts.push(bytesOf(data));
  }

  digest(): Promise<Uint8Array> {
    const data = this.#parts.length === 1 ? this.#parts[0]! : Buffer.concat(this.#parts);
    if (this.#secret === undefined) return Promise.resolve(hash('sha256', data, 'buffer'));
    const key = hmacKey(this.#secret);
    if (data.length > SHORT_HMAC_BYTES)
      return Promise.resolve(createHmac('sha256', key).update(data).digest());
    const secret = this.#secret;
    const id = `${typeof secret === 'string' ? secret : bytesOf(secret).toString('latin1')}\n${data.toString('latin1')}`;
    let mac = shortHmacs.get(id);
    if (mac === undefined) {
      if (shortHmacs.size >= MAX_HMAC_KEYS) shortHmacs.clear();
      mac = createHmac('sha256', key).update(data).digest();
      shortHmacs.set(id, mac);
    }
    return Promise.resolve(mac);
  }

  reset(): void {
    this.#parts = [];
  }
}

/** The request time as SigV4 writes it (20261129T150405Z), made once a second. */
class Signer extends SignatureV4 {
  #second = -1;
  #date = { longDate: '', shortDate: '' };

  protected override formatDate(now: Date): { longDate: string; shortDate: string } {
    const second = Math.floor(now.getTime() / 1000);
    if (second !== this.#second) {
      this.#second = second;
      this.#date = super.formatDate(now);
    }
    return this.#date;
  }
}

const origins = new Map<string, URL>();

function originOf(origin: string): URL {
  let url = origins.get(origin);
  if (url === undefined) {
    if (origins.size >= MAX_HMAC_KEYS) origins.clear();
    url = new URL(origin);
    origins.set(origin, url);
  }
  return url;
}

export interface SigV4Options {
  readonly service: string;
  readonly region: string;
  /** Static credentials, or the cache of a source of temporary ones. */
  readonly credentials: AwsCredentials | TokenCache<AwsCredentials>;
  readonly channel: string;
}

export function createSigV4Authorizer(opts: SigV4Options): UpstreamAuthorizer {
  const make = (c: AwsCredentials) =>
    new Signer({
      service: opts.service,
      region: opts.region,
      credentials: {
        accessKeyId: c.accessKeyId,
        secretAccessKey: c.secretAccessKey,
        ...(c.sessionToken === undefined ? {} : { sessionToken: c.sessionToken }),
      },
      sha256: Sha256,
    });
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
      const url = originOf(req.origin);
      const query: Record<string, string | string[]> = {};
      if (req.query.size > 0)
        for (const [name, value] of req.query) {
          const seen = query[name];
          query[name] = seen === undefined ? value : Array.isArray(seen) ? [...seen, value] : [seen, value];
        }
      // Whatever a client or a rule put there, these are the signer's to write.
      for (const name of ['authorization', 'x-amz-date', 'x-amz-security-token', 'x-amz-content-sha256']) {
        delete req.headers[name];
      }
      // Signed as the SDK signs it; undici sends the same value for these bytes.
      if (body !== undefined) req.headers['content-length'] = String(body.length);
      else delete req.headers['content-length'];
      const signed = await signer!.sign({
        method: req.method,
        protocol: url.protocol,
        hostname: url.hostname,
        ...(url.port === '' ? {} : { port: Number(url.port) }),
        path: req.path,
        query,
        headers: { ...req.headers, host: url.host },
        body,
      });
      // Lower-case already: the request's by its contract, the signer's own as it writes them.
      req.headers = signed.headers;
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
