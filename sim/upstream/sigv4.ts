// AWS Signature Version 4 verification for the Bedrock routes, written from the AWS SigV4 specification
// (canonical request, string to sign, derived key), independent of the signer the gateway uses.

import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';

export interface AwsCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  /** When set, requests must carry it as x-amz-security-token (temporary credentials). */
  sessionToken?: string;
  /** When set, the credential scope must name this region; else any region is accepted. */
  region?: string;
}

export interface SigV4Refusal {
  /** The x-amzn-ErrorType and the JSON `message`, as AWS answers them (403). */
  errorType:
    | 'InvalidSignatureException'
    | 'UnrecognizedClientException'
    | 'MissingAuthenticationTokenException'
    | 'IncompleteSignatureException';
  message: string;
}

export const SIGV4_SERVICE = 'bedrock';
/** AWS refuses a request whose x-amz-date is further than this from its clock. */
export const MAX_SKEW_MS = 15 * 60_000;

const AUTH_RE =
  /^AWS4-HMAC-SHA256 Credential=([^,\s]+),\s*SignedHeaders=([^,\s]+),\s*Signature=([0-9a-f]{64})$/;
const DATE_RE = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/;

/** RFC 3986 percent-encoding, as SigV4 wants it (everything but A-Z a-z 0-9 - _ . ~). */
function rfc3986(s: string): string {
  return encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

/** Every service but S3: the path is normalised, then each segment (as sent, already encoded) encoded again. */
function canonicalUri(rawPath: string): string {
  const segments: string[] = [];
  for (const seg of rawPath.split('/')) {
    if (seg === '' || seg === '.') continue;
    if (seg === '..') segments.pop();
    else segments.push(rfc3986(seg));
  }
  const trailing = segments.length > 0 && rawPath.endsWith('/') ? '/' : '';
  return `/${segments.join('/')}${trailing}`;
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s.replace(/\+/g, ' '));
  } catch {
    return s;
  }
}

function canonicalQuery(rawQuery: string): string {
  if (rawQuery === '') return '';
  const pairs: [string, string][] = [];
  for (const part of rawQuery.split('&')) {
    if (part === '') continue;
    const eq = part.indexOf('=');
    const k = eq < 0 ? part : part.slice(0, eq);
    const v = eq < 0 ? '' : part.slice(eq + 1);
    pairs.push([rfc3986(safeDecode(k)), rfc3986(safeDecode(v))]);
  }
  pairs.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0));
  return pairs.map(([k, v]) => `${k}=${v}`).join('&');
}

function headerValue(headers: IncomingHttpHeaders, name: string): string | undefined {
  const v = headers[name];
  if (v === undefined) return undefined;
  return (Array.isArray(v) ? v.join(',') : String(v)).trim().replace(/\s+/g, ' ');
}

function hmac(key: Buffer | string, data: string): Buffer {
  return createHmac('sha256', key).update(data, 'utf8').digest();
}

function sha256Hex(data: Buffer | string): string {
  return createHash('sha256').update(data).digest('hex');
}

function parseAmzDate(s: string): number | undefined {
  const m = DATE_RE.exec(s);
  if (!m) return undefined;
  return Date.UTC(+m[1]!, +m[2]! - 1, +m[3]!, +m[4]!, +m[5]!, +m[6]!);
}

const INVALID_TOKEN = 'The security token included in the request is invalid.';

/**
 * Checks a request's SigV4 Authorization header against the configured credentials; undefined when it
 * verifies. `rawUrl` is the request target as received (path and query, still percent-encoded).
 */
export function verifySigV4(
  method: string,
  rawUrl: string,
  headers: IncomingHttpHeaders,
  body: Buffer,
  creds: AwsCredentials,
  now = Date.now(),
): SigV4Refusal | undefined {
  const auth = headers.authorization;
  if (auth === undefined || auth === '')
    return { errorType: 'MissingAuthenticationTokenException', message: 'Missing Authentication Token' };
  const m = AUTH_RE.exec(auth.trim());
  if (!m)
    return {
      errorType: 'IncompleteSignatureException',
      message: `Authorization header requires 'Credential', 'SignedHeaders' and 'Signature' parameters. Authorization=${auth.split(' ')[0]}`,
    };
  const [accessKeyId, scopeDate, region, service, terminator, ...extra] = m[1]!.split('/');
  if (accessKeyId !== creds.accessKeyId)
    return { errorType: 'UnrecognizedClientException', message: INVALID_TOKEN };
  if (extra.length > 0 || terminator !== 'aws4_request' || scopeDate === undefined || region === undefined)
    return {
      errorType: 'IncompleteSignatureException',
      message: `Credential should be scoped to a valid region. Credential=${m[1]}`,
    };
  if (service !== SIGV4_SERVICE)
    return {
      errorType: 'InvalidSignatureException',
      message: `Credential should be scoped to correct service: '${SIGV4_SERVICE}'. `,
    };
  if (creds.region !== undefined && region !== creds.region)
    return {
      errorType: 'InvalidSignatureException',
      message: `Credential should be scoped to a valid region. Credential=${m[1]}`,
    };
  const amzDate = headerValue(headers, 'x-amz-date') ?? '';
  const time = parseAmzDate(amzDate);
  if (time === undefined)
    return {
      errorType: 'IncompleteSignatureException',
      message: "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header.",
    };
  if (amzDate.slice(0, 8) !== scopeDate)
    return {
      errorType: 'InvalidSignatureException',
      message: `Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: '${scopeDate}' != '${amzDate.slice(0, 8)}', from '${amzDate}'.`,
    };
  if (now - time > MAX_SKEW_MS)
    return {
      errorType: 'InvalidSignatureException',
      message: `Signature expired: ${amzDate} is now earlier than ${isoBasic(now - MAX_SKEW_MS)} (${isoBasic(now)} - 15 min.)`,
    };
  if (time - now > MAX_SKEW_MS)
    return {
      errorType: 'InvalidSignatureException',
      message: `Signature not yet current: ${amzDate} is still later than ${isoBasic(now + MAX_SKEW_MS)} (${isoBasic(now)} + 15 min.)`,
    };
  const signed = m[2]!.split(';');
  if (!signed.includes('host'))
    return {
      errorType: 'InvalidSignatureException',
      message: "'Host' or ':authority' must be a 'SignedHeader' in the AWS Authorization.",
    };
  const token = headerValue(headers, 'x-amz-security-token');
  if (creds.sessionToken !== undefined ? token !== creds.sessionToken : token !== undefined)
    return { errorType: 'UnrecognizedClientException', message: INVALID_TOKEN };
  // The service hashes the body it received; a declared x-amz-content-sha256 must agree with it.
  const bodyHash = sha256Hex(body);
  const declared = headerValue(headers, 'x-amz-content-sha256');
  if (declared !== undefined && declared !== bodyHash)
    return {
      errorType: 'InvalidSignatureException',
      message: 'The provided x-amz-content-sha256 header does not match what was computed.',
    };

  const q = rawUrl.indexOf('?');
  const canonical = [
    method,
    canonicalUri(q < 0 ? rawUrl : rawUrl.slice(0, q)),
    canonicalQuery(q < 0 ? '' : rawUrl.slice(q + 1)),
    ...signed.map((name) => `${name}:${headerValue(headers, name) ?? ''}`),
    '',
    signed.join(';'),
    bodyHash,
  ].join('\n');
  const scope = `${scopeDate}/${region}/${service}/aws4_request`;
  const stringToSign = `AWS4-HMAC-SHA256\n${amzDate}\n${scope}\n${sha256Hex(canonical)}`;
  const kDate = hmac(`AWS4${creds.secretAccessKey}`, scopeDate);
  const kSigning = hmac(hmac(hmac(kDate, region), service), 'aws4_request');
  const expected = hmac(kSigning, stringToSign);
  const given = Buffer.from(m[3]!, 'hex');
  if (given.length === expected.length && timingSafeEqual(given, expected)) return undefined;
  return {
    errorType: 'InvalidSignatureException',
    message:
      'The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.',
  };
}

function isoBasic(ms: number): string {
  return new Date(ms)
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}/, '');
}
