// The credentials framework: from a provider's auth directives, the keys file and the environment, the
// authorizer each cloud directive uses (docs/dsl.md "Cloud credentials"). Credentials come from the keys file and the
// cloud's own variables, the environment winning; never from a provider file. Without static
// credentials, the standard chains: AWS web identity, container and instance credentials, Google's
// metadata server, Entra workload identity. Built once per configuration load; a token is fetched on
// first use, never at load.

import { resolve } from 'node:path';
import type {
  AwsCredentials,
  CloudCredentials,
  EntraCredentials,
  UpstreamKey,
} from '../../common/config-types.ts';
import type { RequestContext, UpstreamRequest } from '../../common/types.ts';
import { type ProviderSettings, providerSettingEnvName, providerSettingFromEnv } from '../dsl/template.ts';
import type { AuthOp, CloudAuthOp, CompiledProvider, CompiledTemplate } from '../dsl/types.ts';
import { type AwsHost, awsTemporarySource, detectEc2, unreadableFile } from './aws-chain.ts';
import { entraTokenFetch, entraTokenUrl, entraWorkloadTokenFetch } from './entra.ts';
import {
  adcTokenFetch,
  googleTokenFetch,
  metadataServerConfigured,
  metadataServerHost,
  metadataTokenFetch,
  readGoogleCredentialsFile,
  wellKnownCredentialsFile,
} from './google.ts';
import { createBearerAuthorizer, createSigV4Authorizer } from './sigv4.ts';
import { TokenCache } from './token-cache.ts';
import type { TokenFetch, UpstreamAuthorizer } from './types.ts';

export type { UpstreamAuthorizer } from './types.ts';

type Env = Readonly<Record<string, string | undefined>>;

export interface ProviderCredentialInput {
  readonly provider: CompiledProvider;
  /** The provider's upstream keys (keys file, ROUTER_PROVIDER_<NAME>_API_KEY): a Bedrock API key. */
  readonly keys: readonly UpstreamKey[];
  /** The keys file's cloud credentials of this provider. */
  readonly file: CloudCredentials | undefined;
  readonly env: Env;
  /** limits.upstream_connect_timeout_ms: how long a token request may take, retries included. */
  readonly connectTimeoutMs: number;
  /** Where the gateway runs, for the metadata services (tests set it; by default read from the host). */
  readonly host?: Partial<HostProbe>;
}

/** Whether this host is an EC2 instance and whether it runs on Google Cloud (read once, no network). */
export interface HostProbe {
  readonly ec2: () => boolean;
  readonly gcp: () => boolean;
}

let ec2Seen: boolean | undefined;
const defaultHost: HostProbe = {
  ec2: () => {
    ec2Seen ??= detectEc2();
    return ec2Seen;
  },
  gcp: () => metadataServerConfigured({}),
};

export interface ProviderCredentials {
  readonly settings: ProviderSettings;
  /** The authorizer of each cloud directive whose credentials are configured and usable. */
  readonly authorizers: ReadonlyMap<CloudAuthOp['op'], UpstreamAuthorizer>;
  /**
   * What keeps the provider from being used, for `router -t` and the log: credentials that are set but
   * unusable (an unreadable service account file, half of a variable group), a setting its rules need.
   */
  readonly problems: readonly string[];
}

const CLOUD_OPS = new Set(['auth_sigv4', 'auth_google', 'auth_entra']);

export function isCloudAuthOp(op: AuthOp): op is CloudAuthOp {
  return CLOUD_OPS.has(op.op);
}

/**
 * The authorizer a rule uses: its first cloud directive, in written order, whose credentials are
 * configured. undefined: the rule's key directives (auth_bearer, auth_header_key, ...) apply.
 */
export function ruleAuthorizer(
  auth: readonly AuthOp[],
  creds: ProviderCredentials | undefined,
): UpstreamAuthorizer | undefined {
  for (const op of auth) {
    if (!isCloudAuthOp(op)) continue;
    const found = creds?.authorizers.get(op.op);
    if (found !== undefined) return found;
  }
  return undefined;
}

/** Whether a rule can send a credential: it sends none, a cloud one is configured, or it has keys. */
export function ruleHasCredential(
  auth: readonly AuthOp[],
  creds: ProviderCredentials | undefined,
  keys: readonly UpstreamKey[],
): boolean {
  if (auth.every((op) => op.op === 'auth_none')) return true;
  if (ruleAuthorizer(auth, creds) !== undefined) return true;
  return keys.length > 0 && auth.some((op) => !isCloudAuthOp(op) && op.op !== 'auth_none');
}

export function resolveProviderCredentials(input: ProviderCredentialInput): ProviderCredentials {
  const { provider, env } = input;
  const name = provider.name;
  const r: Resolving = { input, name, env, problems: [] };
  const authorizers = new Map<CloudAuthOp['op'], UpstreamAuthorizer>();
  const ops = new Map<CloudAuthOp['op'], CloudAuthOp>();
  for (const rule of provider.rules) for (const op of rule.auth) if (isCloudAuthOp(op)) ops.set(op.op, op);

  const google = ops.has('auth_google') ? googleCredentials(r) : undefined;
  if (google?.authorizer !== undefined) authorizers.set('auth_google', google.authorizer);
  const settings: ProviderSettings = {
    region: providerSettingFromEnv(name, 'region', env),
    project:
      providerSettingFromEnv(name, 'project', env) ??
      google?.project ??
      nonEmpty(env.GOOGLE_CLOUD_PROJECT) ??
      nonEmpty(env.GCLOUD_PROJECT),
    location: providerSettingFromEnv(name, 'location', env),
  };
  const sigv4 = ops.get('auth_sigv4');
  if (sigv4?.op === 'auth_sigv4') {
    const a = awsAuthorizer(r, sigv4.service, settings.region);
    if (a !== undefined) authorizers.set('auth_sigv4', a);
  }
  if (ops.has('auth_entra')) {
    const a = entraAuthorizer(r);
    if (a !== undefined) authorizers.set('auth_entra', a);
  }

  for (const setting of settingsUsed(provider)) {
    if (settings[setting] === undefined) {
      const fallback =
        setting === 'region'
          ? ' or AWS_REGION'
          : setting === 'project'
            ? ' (or GOOGLE_CLOUD_PROJECT, or a credentials file with project_id)'
            : '';
      r.problems.push(
        `provider '${name}': its rules use $` +
          `{provider.${setting}}: set ${providerSettingEnvName(name, setting)}${fallback}`,
      );
    }
  }
  return { settings, authorizers, problems: r.problems };
}

/** One provider's resolution under way: its input, and the problems found so far. */
interface Resolving {
  readonly input: ProviderCredentialInput;
  readonly name: string;
  readonly env: Env;
  readonly problems: string[];
}

function cacheOf<T>(
  r: Resolving,
  o: { scheme: string; check: string; reach?: string; fetch: TokenFetch<T> },
): TokenCache<T> {
  return new TokenCache<T>({ provider: r.name, deadlineMs: r.input.connectTimeoutMs, ...o });
}

/**
 * auth_google: a credentials file (GOOGLE_APPLICATION_CREDENTIALS, the keys file's, gcloud's well-known
 * one), else the metadata server where there is one; with the file's project for provider.project.
 */
function googleCredentials(r: Resolving): { authorizer?: UpstreamAuthorizer; project?: string } {
  const { env, input } = r;
  const envFile = nonEmpty(env.GOOGLE_APPLICATION_CREDENTIALS);
  const file =
    envFile !== undefined
      ? resolve(envFile)
      : (input.file?.serviceAccountFile ?? wellKnownCredentialsFile(env));
  if (file !== undefined) {
    const read = readGoogleCredentialsFile(file);
    if (!read.ok) {
      r.problems.push(`provider '${r.name}': ${read.problem}`);
      return {};
    }
    if (read.account !== undefined) {
      const account = read.account;
      const cache = cacheOf(r, {
        scheme: 'google',
        check: `check the service account ${account.clientEmail} of ${file} (a deleted or disabled key, the account's access to the project) and that its token_uri ${account.tokenUri} is the token endpoint to use`,
        fetch: googleTokenFetch(account),
      });
      return {
        authorizer: tokenAuthorizer('google', 'service-account', cache),
        ...(account.projectId === undefined ? {} : { project: account.projectId }),
      };
    }
    const adc = read.adc;
    const cache = cacheOf(r, { scheme: adc.channel, check: adc.check, fetch: adcTokenFetch(adc) });
    return {
      authorizer: tokenAuthorizer('google', adc.channel, cache),
      ...(adc.projectId === undefined ? {} : { project: adc.projectId }),
    };
  }
  if (!metadataServerConfigured(env, input.host?.gcp ?? defaultHost.gcp)) return {};
  const cache = cacheOf(r, {
    scheme: 'google-metadata',
    check:
      'check the service account attached to this instance or workload (one is attached, its access scopes include cloud-platform) and its role in the project',
    reach: `check that the metadata server ${metadataServerHost(env)} answers from this host`,
    fetch: metadataTokenFetch(),
  });
  return { authorizer: tokenAuthorizer('google', 'google-metadata', cache) };
}

/**
 * auth_sigv4: a Bedrock API key, then static keys (environment, keys file), then the chain's temporary
 * credentials (web identity, container, instance).
 */
function awsAuthorizer(
  r: Resolving,
  service: string,
  region: string | undefined,
): UpstreamAuthorizer | undefined {
  const { env, input, name } = r;
  const key = input.keys[0];
  const bedrockKey = service === 'bedrock' ? nonEmpty(env.AWS_BEARER_TOKEN_BEDROCK) : undefined;
  const aws = envGroup<AwsCredentials>(
    env,
    ['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY'],
    (v) => ({
      accessKeyId: v[0]!,
      secretAccessKey: v[1]!,
      sessionToken: nonEmpty(env.AWS_SESSION_TOKEN),
    }),
    input.file?.aws,
    r.problems,
    name,
  );
  // An API key wins over signing credentials (issue 43: as the AWS SDKs do with both set).
  if (key !== undefined) return createBearerAuthorizer(key.value, key.name);
  if (bedrockKey !== undefined) return createBearerAuthorizer(bedrockKey, 'env');
  if (aws !== undefined) {
    if (region !== undefined)
      return createSigV4Authorizer({ service, region, credentials: aws, channel: 'aws' });
    r.problems.push(needsRegion(name));
    return undefined;
  }
  const host: AwsHost = { ec2: (input.host?.ec2 ?? defaultHost.ec2)() };
  const source = awsTemporarySource(env, region, host, name, r.problems);
  if (source === undefined) return undefined;
  if (region === undefined) {
    r.problems.push(needsRegion(name));
    return undefined;
  }
  const cache = cacheOf(r, {
    scheme: source.scheme,
    check: source.check,
    reach: source.reach,
    fetch: source.fetch,
  });
  return createSigV4Authorizer({ service, region, credentials: cache, channel: source.channel });
}

/** auth_entra: a client secret (environment, keys file), else workload identity's federated token file. */
function entraAuthorizer(r: Resolving): UpstreamAuthorizer | undefined {
  const { env, input, name } = r;
  const authorityHost = nonEmpty(env.AZURE_AUTHORITY_HOST);
  const federatedFile = nonEmpty(env.AZURE_FEDERATED_TOKEN_FILE);
  // Workload identity sets AZURE_TENANT_ID and AZURE_CLIENT_ID without a secret: not half a group.
  const entra =
    federatedFile !== undefined && nonEmpty(env.AZURE_CLIENT_SECRET) === undefined
      ? input.file?.entra
      : envGroup<EntraCredentials>(
          env,
          ['AZURE_TENANT_ID', 'AZURE_CLIENT_ID', 'AZURE_CLIENT_SECRET'],
          (v) => ({ tenantId: v[0]!, clientId: v[1]!, clientSecret: v[2]! }),
          input.file?.entra,
          r.problems,
          name,
        );
  if (entra !== undefined) {
    const url = entraTokenUrl(entra.tenantId, authorityHost);
    const cache = cacheOf(r, {
      scheme: 'entra',
      check: `check the Entra application ${entra.clientId} of tenant ${entra.tenantId} (an expired or wrong client secret, a deleted application, its role on the Azure OpenAI resource) and the token endpoint ${url}`,
      fetch: entraTokenFetch(entra, authorityHost),
    });
    return tokenAuthorizer('entra', 'entra', cache);
  }
  if (federatedFile === undefined) return undefined;
  const tenantId = nonEmpty(env.AZURE_TENANT_ID);
  const clientId = nonEmpty(env.AZURE_CLIENT_ID);
  if (tenantId === undefined || clientId === undefined) {
    const unset = [
      tenantId === undefined ? 'AZURE_TENANT_ID' : '',
      clientId === undefined ? 'AZURE_CLIENT_ID' : '',
    ];
    r.problems.push(
      `provider '${name}': AZURE_FEDERATED_TOKEN_FILE set but ${unset.filter((v) => v !== '').join(', ')} not`,
    );
    return undefined;
  }
  const unreadable = unreadableFile(federatedFile);
  if (unreadable !== undefined) {
    r.problems.push(
      `provider '${name}': cannot read the federated token file ${federatedFile} (${unreadable})`,
    );
    return undefined;
  }
  const url = entraTokenUrl(tenantId, authorityHost);
  const cache = cacheOf(r, {
    scheme: 'entra-workload-identity',
    check: `check the federated credential of the Entra application ${clientId} of tenant ${tenantId} (its issuer and subject match this cluster's service account), the token file ${federatedFile}, and the application's role on the Azure OpenAI resource`,
    reach: `check that this host reaches the token endpoint ${url}`,
    fetch: entraWorkloadTokenFetch({ tenantId, clientId, tokenFile: federatedFile }, authorityHost),
  });
  return tokenAuthorizer('entra', 'entra-workload-identity', cache);
}

/** Where the credentials of a cloud directive come from, for the warning about a provider without any. */
export function credentialSources(op: CloudAuthOp, provider: string): string {
  switch (op.op) {
    case 'auth_sigv4':
      return `AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or providers.${provider}.aws)${op.service === 'bedrock' ? ', or a Bedrock API key in AWS_BEARER_TOKEN_BEDROCK' : ''}, or AWS_ROLE_ARN and AWS_WEB_IDENTITY_TOKEN_FILE, or AWS_CONTAINER_CREDENTIALS_FULL_URI (or _RELATIVE_URI), or AWS_EC2_METADATA_SERVICE_ENDPOINT (found by itself on EC2)`;
    case 'auth_google':
      return `GOOGLE_APPLICATION_CREDENTIALS (or providers.${provider}.service_account_file, or gcloud's application_default_credentials.json), or GCE_METADATA_HOST (found by itself on Google Cloud)`;
    case 'auth_entra':
      return `AZURE_TENANT_ID, AZURE_CLIENT_ID and AZURE_CLIENT_SECRET (or providers.${provider}.entra), or AZURE_TENANT_ID, AZURE_CLIENT_ID and AZURE_FEDERATED_TOKEN_FILE`;
  }
}

function needsRegion(provider: string): string {
  return `provider '${provider}': SigV4 needs a region: set ${providerSettingEnvName(provider, 'region')} or AWS_REGION`;
}

/** Which of provider.region, provider.project and provider.location the provider's templates use. */
export function settingsUsed(provider: CompiledProvider): Set<'region' | 'project' | 'location'> {
  const used = new Set<'region' | 'project' | 'location'>(provider.baseUrlSettings ?? []);
  const scan = (t: CompiledTemplate) => {
    for (const part of t.parts) {
      if ('variable' in part && part.variable.startsWith('provider.') && part.variable !== 'provider.name') {
        used.add(part.variable.slice('provider.'.length) as 'region' | 'project' | 'location');
      }
    }
  };
  for (const rule of provider.rules) {
    for (const op of rule.upstream) if (op.op !== 'del_query') scan(op.value);
    for (const op of rule.request) {
      if (op.op === 'set_header') scan(op.value);
      else if (op.op === 'json_set' && isTemplate(op.value)) scan(op.value);
    }
  }
  return used;
}

function isTemplate(v: unknown): v is CompiledTemplate {
  return v !== null && typeof v === 'object' && 'parts' in v && 'source' in v;
}

/**
 * A group of variables that wins over the keys file as a whole when any of them is set; one set without
 * the others is a problem (never a silent mix of the file's and the environment's).
 */
function envGroup<T>(
  env: Env,
  names: readonly string[],
  make: (values: string[]) => T,
  file: T | undefined,
  problems: string[],
  provider: string,
): T | undefined {
  const values = names.map((n) => nonEmpty(env[n]));
  if (values.every((v) => v === undefined)) return file;
  const unset = names.filter((_, i) => values[i] === undefined);
  if (unset.length > 0) {
    problems.push(
      `provider '${provider}': ${names.filter((n) => !unset.includes(n)).join(', ')} set but ${unset.join(', ')} not`,
    );
    return undefined;
  }
  return make(values as string[]);
}

function nonEmpty(v: string | undefined): string | undefined {
  return v === undefined || v === '' ? undefined : v;
}

function tokenAuthorizer(scheme: string, channel: string, cache: TokenCache<string>): UpstreamAuthorizer {
  return {
    scheme,
    channel,
    authorize(ctx: RequestContext, req: UpstreamRequest) {
      const token = cache.token(ctx.log);
      if (typeof token === 'string') {
        req.headers.authorization = `Bearer ${token}`;
        return;
      }
      return token.then((t) => {
        req.headers.authorization = `Bearer ${t}`;
      });
    },
    refused() {
      cache.refused();
    },
  };
}
