// The token endpoints of the clouds, and the checks of the bearer tokens they issue:
// Google's JWT-bearer grant for service accounts (POST /token, the key file's token_uri) and Microsoft
// Entra's client-credentials grant (POST /<tenant>/oauth2/v2.0/token). See README "Cloud credentials".

import { createPublicKey, generateKeyPairSync, type KeyObject, randomBytes, verify } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import type { IncomingHttpHeaders } from 'node:http';
import type { JsonReply } from './types.ts';

export const GOOGLE_TOKEN_PATH = '/token';
export const GOOGLE_TOKEN_URL = 'https://oauth2.googleapis.com/token';
export const CLOUD_PLATFORM_SCOPE = 'https://www.googleapis.com/auth/cloud-platform';
export const ENTRA_SCOPE = 'https://cognitiveservices.azure.com/.default';
const JWT_BEARER = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
const ENTRA_TOKEN_PATH = /^\/([^/]+)\/oauth2\/v2\.0\/token$/;
const ENTRA_METADATA_PATH = /^\/([^/]+)\/v2\.0\/\.well-known\/openid-configuration$/;
/** Google accepts assertions valid for at most an hour; clocks may differ a little. */
const MAX_ASSERTION_S = 3600;
const CLOCK_SKEW_S = 300;
const MAX_TOKENS = 100_000;

export interface EntraApp {
  tenantId: string;
  clientId: string;
  clientSecret: string;
}

/** A Google service-account key file, as the console downloads it. */
export interface ServiceAccountKey {
  type: 'service_account';
  project_id: string;
  private_key_id: string;
  private_key: string;
  client_email: string;
  client_id: string;
  auth_uri: string;
  token_uri: string;
  auth_provider_x509_cert_url: string;
  client_x509_cert_url: string;
  universe_domain: string;
}

export interface ServiceAccountOptions {
  project?: string;
  /** Account name before "@" (default "sim-gateway"). */
  name?: string;
  /** false: a well-formed key the simulator does not know (its grants are refused). Default true. */
  trusted?: boolean;
}

interface Issued {
  kind: 'google' | 'entra';
  subject: string;
  scope: string;
  expiresAt: number;
}

export interface CloudAuthStats {
  /** Tokens issued, per grant. */
  google: number;
  entra: number;
  /** Grants refused (4xx). */
  refused: number;
}

export interface CloudAuth {
  /** Lifetime of the tokens issued from now on, in seconds (the expires_in answered). */
  tokenLifetimeS: number;
  readonly stats: CloudAuthStats;
  /** A service-account key whose token_uri is this simulator's; trusted unless `trusted: false`. */
  serviceAccountKey(opts?: ServiceAccountOptions): ServiceAccountKey;
  /** Writes such a key file (mode 0600) and returns its content. */
  writeServiceAccountFile(path: string, opts?: ServiceAccountOptions): Promise<ServiceAccountKey>;
  /** Accept grants signed with this key file's private key (a file made elsewhere). */
  trustServiceAccount(key: Pick<ServiceAccountKey, 'client_email' | 'private_key'>): void;
  /** Expire every token issued so far: the next request carrying one is refused. */
  expireTokens(): void;
  /** Clears the stats (sim.reset()). */
  reset(): void;
}

export interface CloudAuthInternals extends CloudAuth {
  /** A token-endpoint reply when the request is one, else undefined. */
  tokenEndpoint(
    method: string,
    pathname: string,
    headers: IncomingHttpHeaders,
    body: Buffer,
  ): JsonReply | undefined;
  /** Vertex: a refusal in Google's shape, or undefined when the bearer token is one we issued and valid. */
  checkGoogleBearer(headers: IncomingHttpHeaders): JsonReply | undefined;
  /** Azure OpenAI: a refusal in Azure's shape, or undefined when api-key or a valid Entra token is present. */
  checkAzure(headers: IncomingHttpHeaders): JsonReply | undefined;
}

function json(status: number, body: unknown, headers?: Record<string, string>): JsonReply {
  return {
    kind: 'json',
    status,
    body: JSON.stringify(body),
    headers: { 'cache-control': 'no-store', ...headers },
  };
}

function oauthError(status: number, error: string, description: string): JsonReply {
  return json(status, { error, error_description: description });
}

function entraError(status: number, error: string, code: number, description: string): JsonReply {
  const traceId = randomUuid();
  return json(status, {
    error,
    error_description: `AADSTS${code}: ${description} Trace ID: ${traceId} Correlation ID: ${randomUuid()} Timestamp: ${new Date().toISOString().replace('T', ' ').slice(0, 19)}Z`,
    error_codes: [code],
    timestamp: `${new Date().toISOString().replace('T', ' ').slice(0, 19)}Z`,
    trace_id: traceId,
    correlation_id: randomUuid(),
    error_uri: `https://login.microsoftonline.com/error?code=${code}`,
  });
}

function randomUuid(): string {
  return globalThis.crypto.randomUUID();
}

function b64urlJson(part: string): Record<string, unknown> | undefined {
  try {
    const v = JSON.parse(Buffer.from(part, 'base64url').toString('utf8'));
    return typeof v === 'object' && v !== null ? v : undefined;
  } catch {
    return undefined;
  }
}

function bearer(headers: IncomingHttpHeaders): string | undefined {
  const auth = headers.authorization;
  if (auth === undefined || !/^bearer /i.test(auth)) return undefined;
  return auth.slice(7).trim();
}

const GOOGLE_UNAUTHENTICATED =
  'Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project.';
const AZURE_UNAUTHORIZED =
  'Unauthorized. Access token is missing, invalid, audience is incorrect (https://cognitiveservices.azure.com), or have expired.';

export function createCloudAuth(opts: {
  url: () => string;
  tokenLifetimeS?: number;
  entra?: EntraApp;
}): CloudAuthInternals {
  const trusted = new Map<string, KeyObject>();
  const issued = new Map<string, Issued>();
  const stats: CloudAuthStats = { google: 0, entra: 0, refused: 0 };
  let keyPair: { privatePem: string; publicKey: KeyObject } | undefined;
  const entra = opts.entra;

  function pair(): { privatePem: string; publicKey: KeyObject } {
    if (keyPair === undefined) {
      const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
      keyPair = { privatePem: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string, publicKey };
    }
    return keyPair;
  }

  function issue(kind: Issued['kind'], subject: string, scope: string): { token: string; lifetime: number } {
    if (issued.size >= MAX_TOKENS) {
      const now = Date.now();
      for (const [t, rec] of issued) if (rec.expiresAt <= now) issued.delete(t);
      if (issued.size >= MAX_TOKENS) issued.clear();
    }
    const lifetime = Math.max(1, Math.round(auth.tokenLifetimeS));
    const prefix = kind === 'google' ? 'ya29.sim.' : 'eyJ0eXAiOiJKV1QiLCJzaW0iOnRydWV9.';
    const token = `${prefix}${randomBytes(24).toString('base64url')}`;
    issued.set(token, { kind, subject, scope, expiresAt: Date.now() + lifetime * 1000 });
    stats[kind]++;
    return { token, lifetime };
  }

  function refuse(reply: JsonReply): JsonReply {
    stats.refused++;
    return reply;
  }

  function googleGrant(form: URLSearchParams): JsonReply {
    const grantType = form.get('grant_type');
    if (grantType !== JWT_BEARER)
      return refuse(oauthError(400, 'unsupported_grant_type', `Invalid grant_type: ${grantType ?? ''}`));
    const parts = (form.get('assertion') ?? '').split('.');
    const header = parts.length === 3 ? b64urlJson(parts[0]!) : undefined;
    const claims = parts.length === 3 ? b64urlJson(parts[1]!) : undefined;
    if (!header || !claims || header.alg !== 'RS256')
      return refuse(oauthError(400, 'invalid_grant', 'Invalid JWT: Unexpected token.'));
    const iss = typeof claims.iss === 'string' ? claims.iss : '';
    const key = trusted.get(iss);
    if (key === undefined)
      return refuse(oauthError(400, 'invalid_grant', 'Invalid grant: account not found'));
    const signed = Buffer.from(`${parts[0]}.${parts[1]}`);
    if (!verify('RSA-SHA256', signed, key, Buffer.from(parts[2]!, 'base64url')))
      return refuse(oauthError(400, 'invalid_grant', 'Invalid JWT Signature.'));
    const aud = claims.aud;
    const ownUrl = `${opts.url()}${GOOGLE_TOKEN_PATH}`;
    if (aud !== GOOGLE_TOKEN_URL && aud !== ownUrl)
      return refuse(oauthError(400, 'invalid_grant', 'Invalid JWT: Failed audience check.'));
    const now = Date.now() / 1000;
    const iat = typeof claims.iat === 'number' ? claims.iat : Number.NaN;
    const exp = typeof claims.exp === 'number' ? claims.exp : Number.NaN;
    if (!(exp > now - CLOCK_SKEW_S && iat < now + CLOCK_SKEW_S && exp - iat <= MAX_ASSERTION_S && exp > iat))
      return refuse(
        oauthError(
          400,
          'invalid_grant',
          'Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim.',
        ),
      );
    const scope = typeof claims.scope === 'string' ? claims.scope : '';
    if (scope === '')
      return refuse(oauthError(400, 'invalid_scope', 'Invalid OAuth scope or ID token audience provided.'));
    const { token, lifetime } = issue('google', iss, scope);
    return json(200, { access_token: token, expires_in: lifetime, token_type: 'Bearer' });
  }

  function entraGrant(tenant: string, form: URLSearchParams, headers: IncomingHttpHeaders): JsonReply {
    let clientId = form.get('client_id') ?? '';
    let secret = form.get('client_secret') ?? '';
    const basic = headers.authorization;
    if (basic !== undefined && /^basic /i.test(basic)) {
      const decoded = Buffer.from(basic.slice(6).trim(), 'base64').toString('utf8');
      const colon = decoded.indexOf(':');
      clientId = decodeURIComponent(decoded.slice(0, colon));
      secret = decodeURIComponent(decoded.slice(colon + 1));
    }
    if (form.get('grant_type') !== 'client_credentials')
      return refuse(
        entraError(400, 'unsupported_grant_type', 70003, 'The app requested an unsupported grant type.'),
      );
    if (entra === undefined || tenant !== entra.tenantId)
      return refuse(
        entraError(
          400,
          'invalid_request',
          90002,
          `Tenant '${tenant}' not found. Check to make sure you have the correct tenant ID and are signing into the correct cloud.`,
        ),
      );
    if (clientId !== entra.clientId)
      return refuse(
        entraError(
          400,
          'unauthorized_client',
          700016,
          `Application with identifier '${clientId}' was not found in the directory '${tenant}'.`,
        ),
      );
    if (secret !== entra.clientSecret)
      return refuse(
        entraError(
          401,
          'invalid_client',
          7000215,
          'Invalid client secret provided. Ensure the secret being sent in the request is the client secret value, not the client secret ID, for a secret added to app.',
        ),
      );
    const scope = form.get('scope') ?? '';
    if (scope !== ENTRA_SCOPE)
      return refuse(
        entraError(
          400,
          'invalid_scope',
          1002012,
          `The provided value for scope ${scope} is not valid. Client credential flows must have a scope value with /.default suffixed to the resource identifier (application ID URI).`,
        ),
      );
    const { token, lifetime } = issue('entra', clientId, scope);
    return json(200, {
      token_type: 'Bearer',
      expires_in: lifetime,
      ext_expires_in: lifetime,
      access_token: token,
    });
  }

  function entraMetadata(tenant: string, headers: IncomingHttpHeaders): JsonReply {
    const base = `http://${headers.host ?? '127.0.0.1'}/${tenant}`;
    return json(200, {
      token_endpoint: `${base}/oauth2/v2.0/token`,
      token_endpoint_auth_methods_supported: ['client_secret_post', 'private_key_jwt', 'client_secret_basic'],
      jwks_uri: `${base}/discovery/v2.0/keys`,
      response_types_supported: ['code', 'id_token', 'code id_token', 'id_token token'],
      issuer: `https://login.microsoftonline.com/${tenant}/v2.0`,
      authorization_endpoint: `${base}/oauth2/v2.0/authorize`,
      end_session_endpoint: `${base}/oauth2/v2.0/logout`,
      tenant_region_scope: null,
      cloud_instance_name: 'microsoftonline.com',
    });
  }

  const auth: CloudAuthInternals = {
    tokenLifetimeS: opts.tokenLifetimeS ?? 3600,
    stats,
    serviceAccountKey(o = {}) {
      const project = o.project ?? 'sim-project';
      const email = `${o.name ?? 'sim-gateway'}@${project}.iam.gserviceaccount.com`;
      // An untrusted key gets its own pair, so that its signatures really fail.
      let privatePem: string;
      if (o.trusted === false) {
        const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
        privatePem = privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
      } else {
        const p = pair();
        privatePem = p.privatePem;
        trusted.set(email, p.publicKey);
      }
      return {
        type: 'service_account',
        project_id: project,
        private_key_id: randomBytes(20).toString('hex'),
        private_key: privatePem,
        client_email: email,
        client_id: String(100_000_000_000_000_000_000n + BigInt(randomBytes(4).readUInt32BE())),
        auth_uri: 'https://accounts.google.com/o/oauth2/auth',
        token_uri: `${opts.url()}${GOOGLE_TOKEN_PATH}`,
        auth_provider_x509_cert_url: 'https://www.googleapis.com/oauth2/v1/certs',
        client_x509_cert_url: `https://www.googleapis.com/robot/v1/metadata/x509/${encodeURIComponent(email)}`,
        universe_domain: 'googleapis.com',
      };
    },
    async writeServiceAccountFile(path, o) {
      const key = auth.serviceAccountKey(o);
      await writeFile(path, `${JSON.stringify(key, null, 2)}\n`, { mode: 0o600 });
      return key;
    },
    trustServiceAccount(key) {
      trusted.set(key.client_email, createPublicKey(key.private_key));
    },
    expireTokens() {
      for (const rec of issued.values()) rec.expiresAt = 0;
    },
    reset() {
      stats.google = 0;
      stats.entra = 0;
      stats.refused = 0;
    },
    tokenEndpoint(method, pathname, headers, body) {
      if (method === 'POST' && pathname === GOOGLE_TOKEN_PATH)
        return googleGrant(new URLSearchParams(body.toString('utf8')));
      const t = ENTRA_TOKEN_PATH.exec(pathname);
      if (t && method === 'POST')
        return entraGrant(decodeURIComponent(t[1]!), new URLSearchParams(body.toString('utf8')), headers);
      if (method !== 'GET') return undefined;
      const m = ENTRA_METADATA_PATH.exec(pathname);
      if (m) return entraMetadata(decodeURIComponent(m[1]!), headers);
      if (pathname === '/common/discovery/instance') {
        const host = headers.host ?? '127.0.0.1';
        return json(200, {
          tenant_discovery_endpoint: `http://${host}/common/v2.0/.well-known/openid-configuration`,
          'api-version': '1.1',
          metadata: [{ preferred_network: host, preferred_cache: host, aliases: [host] }],
        });
      }
      return undefined;
    },
    checkGoogleBearer(headers) {
      const token = bearer(headers);
      const rec = token === undefined ? undefined : issued.get(token);
      if (rec === undefined || rec.kind !== 'google' || rec.expiresAt <= Date.now())
        return json(
          401,
          { error: { code: 401, message: GOOGLE_UNAUTHENTICATED, status: 'UNAUTHENTICATED' } },
          { 'www-authenticate': 'Bearer realm="https://accounts.google.com/", error="invalid_token"' },
        );
      if (!rec.scope.split(' ').includes(CLOUD_PLATFORM_SCOPE))
        return json(403, {
          error: {
            code: 403,
            message: 'Request had insufficient authentication scopes.',
            status: 'PERMISSION_DENIED',
            details: [
              {
                '@type': 'type.googleapis.com/google.rpc.ErrorInfo',
                reason: 'ACCESS_TOKEN_SCOPE_INSUFFICIENT',
                domain: 'googleapis.com',
              },
            ],
          },
        });
      return undefined;
    },
    checkAzure(headers) {
      const apiKey = headers['api-key'];
      if (typeof apiKey === 'string' && apiKey !== '') return undefined;
      const token = bearer(headers);
      if (token !== undefined && token !== '') {
        if (entra === undefined) return undefined;
        const rec = issued.get(token);
        if (rec !== undefined && rec.kind === 'entra' && rec.expiresAt > Date.now()) return undefined;
      }
      return json(401, { error: { code: '401', message: AZURE_UNAUTHORIZED } });
    },
  };
  return auth;
}
