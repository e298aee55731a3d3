// Google service accounts (Vertex AI): OAuth2 access tokens for the cloud-platform scope, minted by
// google-auth-library's JWT client (it builds and signs the assertion and reads the answer).
// google-auth-library 10 sends every grant to https://oauth2.googleapis.com/token and puts that URL in
// the assertion's `aud`, whatever the key file's `token_uri` says; private clouds and tests point
// token_uri elsewhere. So the client's own transport is given a request interceptor that sends the grant
// to token_uri, and `aud` is set to token_uri through the client's additionalClaims (they are spread
// over the payload last). The interceptor also turns the library's retries off: TokenCache retries.
// Application default credentials of the other types (a user's `gcloud auth application-default login`
// file, workload identity federation's external_account, impersonation) go through GoogleAuth.fromJSON
// with the same interceptor. Without a key file, gcloud's well-known file is used when it exists, else,
// on Google Cloud (or with GCE_METADATA_HOST set), the metadata server through the Compute client.

import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { detectGCPResidency } from 'gcp-metadata';
import { Compute, type Credentials, GoogleAuth, JWT, type JWTInput } from 'google-auth-library';
import { errorText } from '../../common/errors.ts';
import { withinDeadline } from './token-cache.ts';
import { isRefusal } from './token-endpoint.ts';
import { type TokenFetch, TokenRefused, TokenUnavailable } from './types.ts';

export const GOOGLE_SCOPE = 'https://www.googleapis.com/auth/cloud-platform';
/** Where google-auth-library sends grants, whatever the key file says. */
const LIBRARY_TOKEN_URL = 'https://oauth2.googleapis.com/token';

export interface ServiceAccount {
  readonly clientEmail: string;
  readonly privateKey: string;
  readonly privateKeyId: string | undefined;
  readonly tokenUri: string;
  readonly projectId: string | undefined;
}

/** The key file's service account, or what is wrong with it (never quoting its content). */
export function readServiceAccount(
  file: string,
): { ok: true; account: ServiceAccount } | { ok: false; problem: string } {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return {
      ok: false,
      problem: `cannot read the service account file ${file} (${code ?? (err instanceof SyntaxError ? 'not JSON' : errorText(err))})`,
    };
  }
  const o = raw !== null && typeof raw === 'object' ? (raw as Record<string, unknown>) : {};
  if (o.type !== 'service_account') {
    return {
      ok: false,
      problem: `${file} is not a service account key file (its "type" is not "service_account")`,
    };
  }
  const missing = ['client_email', 'private_key'].filter((f) => typeof o[f] !== 'string' || o[f] === '');
  if (missing.length > 0) return { ok: false, problem: `${file} has no ${missing.join(' or ')}` };
  const tokenUri = typeof o.token_uri === 'string' && o.token_uri !== '' ? o.token_uri : LIBRARY_TOKEN_URL;
  try {
    const u = new URL(tokenUri);
    if (u.protocol !== 'https:' && u.protocol !== 'http:') throw new Error('scheme');
  } catch {
    return { ok: false, problem: `${file}: token_uri is not an http(s) URL` };
  }
  return {
    ok: true,
    account: {
      clientEmail: o.client_email as string,
      privateKey: o.private_key as string,
      privateKeyId: typeof o.private_key_id === 'string' ? o.private_key_id : undefined,
      tokenUri,
      projectId: typeof o.project_id === 'string' && o.project_id !== '' ? o.project_id : undefined,
    },
  };
}

interface GaxiosLikeError {
  status?: number;
  response?: { status?: number; data?: unknown };
}

export function googleTokenFetch(account: ServiceAccount): TokenFetch {
  return async (timeoutMs) => {
    // A fresh client per grant: TokenCache keeps the token, so the library's own caches stay out of it.
    const client = new JWT({
      email: account.clientEmail,
      key: account.privateKey,
      keyId: account.privateKeyId,
      scopes: [GOOGLE_SCOPE],
      additionalClaims: { aud: account.tokenUri },
    });
    client.transporter.interceptors.request.add({
      resolved: async (config) => {
        if (String(config.url) === LIBRARY_TOKEN_URL) config.url = new URL(account.tokenUri);
        config.retry = false;
        config.retryConfig = { retry: 0, noResponseRetries: 0 };
        config.signal = AbortSignal.timeout(Math.max(1, timeoutMs));
        return config;
      },
    });
    let tokens: Credentials;
    try {
      tokens = await client.authorize();
    } catch (err) {
      throw googleError(err);
    }
    if (typeof tokens.access_token !== 'string' || typeof tokens.expiry_date !== 'number') {
      throw new TokenUnavailable('token endpoint answered without access_token and expires_in');
    }
    return { token: tokens.access_token, expiresAt: tokens.expiry_date };
  };
}

/**
 * Whether application default credentials would use the metadata server: GCE_METADATA_HOST or
 * GCE_METADATA_IP is set, or this host runs on Google Cloud, and METADATA_SERVER_DETECTION is not `none`.
 */
export function metadataServerConfigured(
  env: Readonly<Record<string, string | undefined>>,
  onGoogleCloud: () => boolean = detectGCPResidency,
): boolean {
  if ((env.METADATA_SERVER_DETECTION ?? '').trim().toLowerCase() === 'none') return false;
  if ((env.GCE_METADATA_HOST ?? '') !== '' || (env.GCE_METADATA_IP ?? '') !== '') return true;
  return onGoogleCloud();
}

/** The metadata server's address, for the log (gcp-metadata reads the same variables). */
export function metadataServerHost(env: Readonly<Record<string, string | undefined>>): string {
  return env.GCE_METADATA_IP || env.GCE_METADATA_HOST || '169.254.169.254';
}

/** An access token of the instance's (or workload's) default service account, from the metadata server. */
export function metadataTokenFetch(): TokenFetch {
  return async (timeoutMs) => {
    const client = new Compute({ scopes: [GOOGLE_SCOPE] });
    let token: string | null | undefined;
    try {
      // gcp-metadata retries a request without answer on its own: the deadline bounds it.
      ({ token } = await withinDeadline(client.getAccessToken(), timeoutMs));
    } catch (err) {
      if (err instanceof TokenUnavailable) throw err;
      const e = err as GaxiosLikeError;
      const status = e.response?.status ?? e.status;
      // 404: no service account on this instance; 403: its scopes do not include cloud-platform.
      if (status !== undefined && isRefusal(status)) throw new TokenRefused(status, undefined);
      throw new TokenUnavailable(
        status === undefined
          ? `the metadata server could not be reached (${errorText(err)})`
          : `the metadata server answered HTTP ${status}`,
        err,
      );
    }
    const expiry = client.credentials.expiry_date;
    if (typeof token !== 'string' || token === '' || typeof expiry !== 'number') {
      throw new TokenUnavailable('the metadata server answered without access_token and expires_in');
    }
    return { token, expiresAt: expiry };
  };
}

/** The credential file types application default credentials accept besides service accounts. */
const ADC_TYPES: Record<string, string> = {
  authorized_user: 'google-authorized-user',
  external_account: 'google-external-account',
  external_account_authorized_user: 'google-external-account',
  impersonated_service_account: 'google-impersonated',
};

/** A credentials file of another type than service_account: what to give GoogleAuth, and what to log. */
export interface AdcFile {
  readonly type: string;
  /** The pricing channel: one per type, not secret. */
  readonly channel: string;
  readonly json: JWTInput;
  readonly projectId: string | undefined;
  /** Where its grants go when the file says (authorized_user's token_uri), for the interceptor. */
  readonly tokenUri: string | undefined;
  /** What the operator checks when its grant is refused (never a secret). */
  readonly check: string;
}

/** A Google credentials file: a service account key, another type ADC accepts, or what is wrong. */
export function readGoogleCredentialsFile(
  file: string,
):
  | { ok: true; account: ServiceAccount; adc?: undefined }
  | { ok: true; adc: AdcFile; account?: undefined }
  | { ok: false; problem: string } {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, 'utf8'));
  } catch {
    // readServiceAccount says what is wrong with a file that cannot be read or parsed.
    return readServiceAccount(file) as { ok: false; problem: string };
  }
  const o = raw !== null && typeof raw === 'object' ? (raw as Record<string, unknown>) : {};
  const type = typeof o.type === 'string' ? o.type : '';
  const channel = ADC_TYPES[type];
  if (channel === undefined) {
    const read = readServiceAccount(file);
    if (read.ok || type === 'service_account') return read;
    return {
      ok: false,
      problem: `${file} is not a Google credentials file of a type the gateway takes (service_account, ${Object.keys(ADC_TYPES).join(', ')})`,
    };
  }
  const str = (k: string) => (typeof o[k] === 'string' && o[k] !== '' ? (o[k] as string) : undefined);
  const tokenUri = type === 'authorized_user' ? str('token_uri') : undefined;
  const check =
    type === 'authorized_user'
      ? `check the user credentials of ${file} (client ${str('client_id') ?? '?'}): a revoked or expired refresh token is renewed by \`gcloud auth application-default login\``
      : type === 'impersonated_service_account'
        ? `check the impersonation file ${file}: its source credentials and their roles/iam.serviceAccountTokenCreator on ${str('service_account_impersonation_url') ?? 'the target account'}`
        : `check the workload identity federation file ${file} (audience ${str('audience') ?? '?'}): its credential source and the pool provider's attribute conditions${str('service_account_impersonation_url') === undefined ? '' : ', and the impersonated service account'}`;
  return {
    ok: true,
    adc: { type, channel, json: o as JWTInput, projectId: str('project_id'), tokenUri, check },
  };
}

/** gcloud's application default credentials file, when it exists (CLOUDSDK_CONFIG, APPDATA, HOME). */
export function wellKnownCredentialsFile(
  env: Readonly<Record<string, string | undefined>>,
): string | undefined {
  const dir =
    env.CLOUDSDK_CONFIG ||
    (process.platform === 'win32'
      ? env.APPDATA && join(env.APPDATA, 'gcloud')
      : join(env.HOME || homedir(), '.config', 'gcloud'));
  if (!dir) return undefined;
  const file = join(dir, 'application_default_credentials.json');
  return existsSync(file) ? file : undefined;
}

/** A token from an application default credentials file of another type than service_account. */
export function adcTokenFetch(adc: AdcFile): TokenFetch {
  return async (timeoutMs) => {
    // A fresh client per grant, as for service accounts: TokenCache keeps the token.
    const client = new GoogleAuth({ scopes: [GOOGLE_SCOPE] }).fromJSON(adc.json);
    client.transporter.interceptors.request.add({
      resolved: async (config) => {
        if (adc.tokenUri !== undefined && String(config.url) === LIBRARY_TOKEN_URL)
          config.url = new URL(adc.tokenUri);
        config.retry = false;
        config.retryConfig = { retry: 0, noResponseRetries: 0 };
        config.signal = AbortSignal.timeout(Math.max(1, timeoutMs));
        return config;
      },
    });
    let token: string | null | undefined;
    try {
      ({ token } = await withinDeadline(client.getAccessToken(), timeoutMs));
    } catch (err) {
      if (err instanceof TokenUnavailable) throw err;
      throw googleError(err);
    }
    const expiry = client.credentials.expiry_date;
    if (typeof token !== 'string' || token === '' || typeof expiry !== 'number') {
      throw new TokenUnavailable('token endpoint answered without access_token and expires_in');
    }
    return { token, expiresAt: expiry };
  };
}

function googleError(err: unknown): Error {
  const e = err as GaxiosLikeError;
  const status = e.response?.status ?? e.status;
  if (status !== undefined && isRefusal(status)) {
    const data = e.response?.data as { error?: unknown } | undefined;
    return new TokenRefused(status, typeof data?.error === 'string' ? data.error.slice(0, 64) : undefined);
  }
  return new TokenUnavailable(
    status === undefined ? 'token endpoint could not be reached' : `token endpoint answered HTTP ${status}`,
    err,
  );
}
