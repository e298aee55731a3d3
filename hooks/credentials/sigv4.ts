// AWS Signature Version 4 (Bedrock). The signature covers the request as it is sent (method, path, query,
// headers and the body's bytes), so this runs after every rewrite, and the JSON body is serialized here
// once and sent as those bytes. It signs what @smithy/signature-v4 (the AWS SDK's signer) signs, byte for
// byte (test/hooks/credentials/sigv4.test.ts holds the two side by side), written out here because that
// signer's generality (a cloned request, a promise per hash, date parsing) cost more than twice the
// hashing itself on every request (docs/benchmarks.md section 15). The path is given already
// percent-encoded and is encoded once more, as the SDK does for every service but S3. Temporary
// credentials (web identity, container, instance) come from a TokenCache.

import { createHmac, createSecretKey, hash, type KeyObject } from 'node:crypto';
import type { AwsCredentials } from '../../common/config-types.ts';
import type { RequestContext, UpstreamRequest } from '../../common/types.ts';
import { TokenCache } from './token-cache.ts';
import type { UpstreamAuthorizer } from './types.ts';

const ALGORITHM = 'AWS4-HMAC-SHA256';
const EMPTY_SHA256 = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';
/** Headers the signer writes, whatever a client or a rule put there. */
const GENERATED = ['authorization', 'date', 'x-amz-date', 'x-amz-security-token', 'x-amz-content-sha256'];
/** Headers never signed: proxies and clients may change them on the way. */
const UNSIGNABLE = new Set([
  'authorization',
  'cache-control',
  'connection',
  'expect',
  'from',
  'keep-alive',
  'max-forwards',
  'pragma',
  'referer',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'user-agent',
  'x-amzn-trace-id',
]);

/** RFC 3986 unreserved characters stay; everything else is %XX, upper case. */
function escapeUri(text: string): string {
  return encodeURIComponent(text).replace(
    /[!'()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
}

/** The path's segments normalized (no empty, `.` or `..` segments) and encoded once more. */
function canonicalPath(path: string): string {
  const segments: string[] = [];
  for (const segment of path.split('/')) {
    if (segment === '' || segment === '.') continue;
    if (segment === '..') segments.pop();
    else segments.push(segment);
  }
  const normalized = `${path.startsWith('/') ? '/' : ''}${segments.join('/')}${segments.length > 0 && path.endsWith('/') ? '/' : ''}`;
  return escapeUri(normalized).replaceAll('%2F', '/');
}

// Few paths per provider (one per model and operation): each is encoded once.
const paths = new Map<string, string>();
const MAX_PATHS = 1024;

function pathOf(path: string): string {
  let canonical = paths.get(path);
  if (canonical === undefined) {
    if (paths.size >= MAX_PATHS) paths.clear();
    canonical = canonicalPath(path);
    paths.set(path, canonical);
  }
  return canonical;
}

/** Names and values encoded, sorted by name, then a name's values sorted; the last of duplicates kept. */
function canonicalQuery(query: URLSearchParams): string {
  if (query.size === 0) return '';
  const byName = new Map<string, string[]>();
  for (const [name, value] of query) {
    if (name.toLowerCase() === 'x-amz-signature') continue;
    const key = escapeUri(name);
    let values = byName.get(key);
    if (values === undefined) {
      values = [];
      byName.set(key, values);
    }
    values.push(`${key}=${escapeUri(value)}`);
  }
  return [...byName.keys()]
    .sort()
    .map((key) => byName.get(key)!.sort().join('&'))
    .join('&');
}

const NEEDS_TRIM = /[\r\n\t]| {2}|^ | $/;

function headerValue(value: string): string {
  if (!NEEDS_TRIM.test(value)) return value;
  return value
    .replace(/[\r\n]/g, ' ')
    .replace(/[ \t]+/g, ' ')
    .replace(/^ | $/g, '');
}

/** The request time as SigV4 writes it (20261129T150405Z), made once a second. */
let clockSecond = -1;
let clockLong = '';

function longDate(nowMs: number): string {
  const second = Math.floor(nowMs / 1000);
  if (second !== clockSecond) {
    clockSecond = second;
    clockLong = new Date(second * 1000)
      .toISOString()
      .replace(/\.\d{3}Z$/, 'Z')
      .replace(/[-:]/g, '');
  }
  return clockLong;
}

interface SigningKey {
  readonly day: string;
  readonly scope: string;
  readonly key: KeyObject;
}

function hmac(key: string | Buffer | KeyObject, data: string): Buffer {
  return createHmac('sha256', key).update(data, 'utf8').digest();
}

/** One credential set's signer for one service and region: its signing key derived once a day. */
export class SigV4Signer {
  readonly #credentials: AwsCredentials;
  readonly #region: string;
  readonly #service: string;
  #signing: SigningKey | undefined;

  constructor(credentials: AwsCredentials, region: string, service: string) {
    this.#credentials = credentials;
    this.#region = region;
    this.#service = service;
  }

  #keyFor(day: string): SigningKey {
    const current = this.#signing;
    if (current !== undefined && current.day === day) return current;
    let key = hmac(`AWS4${this.#credentials.secretAccessKey}`, day);
    for (const part of [this.#region, this.#service, 'aws4_request']) key = hmac(key, part);
    const signing = {
      day,
      scope: `${day}/${this.#region}/${this.#service}/aws4_request`,
      key: createSecretKey(key),
    };
    this.#signing = signing;
    return signing;
  }

  /**
   * Signs `req` in place: the body fixed as bytes, the generated headers written (host among them),
   * every signable header covered.
   */
  sign(req: UpstreamRequest, nowMs: number = Date.now()): void {
    const body =
      req.body === undefined
        ? undefined
        : Buffer.isBuffer(req.body)
          ? req.body
          : Buffer.from(JSON.stringify(req.body));
    req.body = body;
    const date = longDate(nowMs);
    const signing = this.#keyFor(date.slice(0, 8));
    const payloadHash = body === undefined ? EMPTY_SHA256 : hash('sha256', body, 'hex');
    const headers: Record<string, string> = {};
    for (const name in req.headers) {
      const value = req.headers[name];
      if (value !== undefined) headers[name.toLowerCase()] = value;
    }
    for (const name of GENERATED) delete headers[name];
    // Signed as the SDK signs it; undici sends the same value for these bytes.
    if (body !== undefined) headers['content-length'] = String(body.length);
    else delete headers['content-length'];
    headers.host = new URL(req.origin).host;
    headers['x-amz-date'] = date;
    if (this.#credentials.sessionToken) headers['x-amz-security-token'] = this.#credentials.sessionToken;
    headers['x-amz-content-sha256'] = payloadHash;
    const names: string[] = [];
    for (const name in headers) {
      if (UNSIGNABLE.has(name) || name.startsWith('proxy-') || name.startsWith('sec-')) continue;
      names.push(name);
    }
    names.sort();
    let canonicalHeaders = '';
    for (const name of names) canonicalHeaders += `${name}:${headerValue(headers[name]!)}\n`;
    const signedHeaders = names.join(';');
    const canonicalRequest = `${req.method}\n${pathOf(req.path)}\n${canonicalQuery(req.query)}\n${canonicalHeaders}\n${signedHeaders}\n${payloadHash}`;
    const stringToSign = `${ALGORITHM}\n${date}\n${signing.scope}\n${hash('sha256', canonicalRequest, 'hex')}`;
    const signature = createHmac('sha256', signing.key).update(stringToSign, 'utf8').digest('hex');
    headers.authorization = `${ALGORITHM} Credential=${this.#credentials.accessKeyId}/${signing.scope}, SignedHeaders=${signedHeaders}, Signature=${signature}`;
    req.headers = headers;
  }
}

export interface SigV4Options {
  readonly service: string;
  readonly region: string;
  /** Static credentials, or the cache of a source of temporary ones. */
  readonly credentials: AwsCredentials | TokenCache<AwsCredentials>;
  readonly channel: string;
}

export function createSigV4Authorizer(opts: SigV4Options): UpstreamAuthorizer {
  const make = (c: AwsCredentials) => new SigV4Signer(c, opts.region, opts.service);
  const cache = opts.credentials instanceof TokenCache ? opts.credentials : undefined;
  if (cache === undefined) {
    const signer = make(opts.credentials as AwsCredentials);
    return { scheme: 'sigv4', channel: opts.channel, authorize: (_ctx, req) => signer.sign(req) };
  }
  let signedWith: AwsCredentials | undefined;
  let signer: SigV4Signer | undefined;
  return {
    scheme: 'sigv4',
    channel: opts.channel,
    async authorize(ctx: RequestContext, req: UpstreamRequest): Promise<void> {
      const pending = cache.token(ctx.log);
      const creds = pending instanceof Promise ? await pending : pending;
      if (creds !== signedWith || signer === undefined) {
        signedWith = creds;
        signer = make(creds);
      }
      signer.sign(req);
    },
    refused: () => cache.refused(),
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
