// AWS credentials beyond static keys, fetched by the AWS SDK's own providers, in the order of the SDK's
// default chain: web identity (EKS service accounts: STS AssumeRoleWithWebIdentity with the projected
// token file), container credentials (ECS task roles, EKS Pod Identity) and the instance metadata
// service (IMDSv2 only). TokenCache keeps the temporary credentials and renews them before they expire,
// so the providers' own retries and caches are off: each fetch builds a provider for the time left.

import { accessSync, constants, readFileSync } from 'node:fs';
import { fromHttp } from '@aws-sdk/credential-provider-http';
import { fromWebToken } from '@aws-sdk/credential-provider-web-identity';
import { AssumeRoleWithWebIdentityCommand, STSClient } from '@aws-sdk/nested-clients/sts';
import { fromInstanceMetadata } from '@smithy/credential-provider-imds';
import type { AwsCredentials } from '../../common/config-types.ts';
import { errorText } from '../../common/errors.ts';
import { withinDeadline } from './token-cache.ts';
import { isRefusal } from './token-endpoint.ts';
import {
  CredentialUnusable,
  type FetchedToken,
  type TokenFetch,
  TokenRefused,
  TokenUnavailable,
} from './types.ts';

type Env = Readonly<Record<string, string | undefined>>;

/** The ECS task-role host AWS_CONTAINER_CREDENTIALS_RELATIVE_URI is relative to. */
const ECS_CREDENTIALS_HOST = 'http://169.254.170.2';
const CONTAINER_HOSTS = new Set(['169.254.170.2', '169.254.170.23', '[fd00:ec2::23]', 'localhost', '[::1]']);
/** STS errors that say "later", though answered with a 4xx. */
const STS_TRANSIENT = new Set(['IDPCommunicationError', 'IDPCommunicationErrorException', 'Throttling']);

/** The SDK providers' log goes nowhere: what matters reaches the gateway's log through TokenCache. */
const QUIET = { debug() {}, info() {}, warn() {}, error() {}, trace() {} };

export interface AwsTemporarySource {
  /** `aws-web-identity`, `aws-container`, `aws-instance`: the scheme in logs. */
  readonly scheme: string;
  /** The pricing channel: the same name, stable and not secret. */
  readonly channel: string;
  /** What the operator checks when the source refuses. */
  readonly check: string;
  /** What the operator checks when the source does not answer. */
  readonly reach: string;
  readonly fetch: TokenFetch<AwsCredentials>;
}

export interface AwsHost {
  /** This host looks like an EC2 instance (or the operator named a metadata endpoint). */
  readonly ec2: boolean;
}

/**
 * The first configured source of temporary credentials, or undefined. Variables set in part, an unreadable
 * token file or an unacceptable URL are problems (the provider is then not offered), not silently skipped.
 */
export function awsTemporarySource(
  env: Env,
  region: string | undefined,
  host: AwsHost,
  provider: string,
  problems: string[],
): AwsTemporarySource | undefined {
  const roleArn = nonEmpty(env.AWS_ROLE_ARN);
  const tokenFile = nonEmpty(env.AWS_WEB_IDENTITY_TOKEN_FILE);
  if (roleArn !== undefined || tokenFile !== undefined) {
    if (roleArn === undefined || tokenFile === undefined) {
      problems.push(
        `provider '${provider}': ${roleArn === undefined ? 'AWS_WEB_IDENTITY_TOKEN_FILE set but AWS_ROLE_ARN not' : 'AWS_ROLE_ARN set but AWS_WEB_IDENTITY_TOKEN_FILE not'}`,
      );
      return undefined;
    }
    const unreadable = unreadableFile(tokenFile);
    if (unreadable !== undefined) {
      problems.push(
        `provider '${provider}': cannot read the web identity token file ${tokenFile} (${unreadable})`,
      );
      return undefined;
    }
    const endpoint = nonEmpty(env.AWS_ENDPOINT_URL_STS) ?? nonEmpty(env.AWS_ENDPOINT_URL);
    return {
      scheme: 'aws-web-identity',
      channel: 'aws-web-identity',
      check: `check the role ${roleArn} (its trust policy names this cluster's OIDC provider and service account) and the token file ${tokenFile}`,
      reach: `check that this host reaches STS${endpoint === undefined ? ` in ${region ?? 'its region'}` : ` at ${endpoint}`}`,
      fetch: webIdentityFetch({
        roleArn,
        tokenFile,
        sessionName: nonEmpty(env.AWS_ROLE_SESSION_NAME),
        region,
        endpoint,
      }),
    };
  }

  const relative = nonEmpty(env.AWS_CONTAINER_CREDENTIALS_RELATIVE_URI);
  const full = nonEmpty(env.AWS_CONTAINER_CREDENTIALS_FULL_URI);
  if (relative !== undefined || full !== undefined) {
    // The SDK's rule: the relative URI wins.
    const url = relative !== undefined ? `${ECS_CREDENTIALS_HOST}${relative}` : full!;
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      problems.push(`provider '${provider}': AWS_CONTAINER_CREDENTIALS_FULL_URI is not a URL`);
      return undefined;
    }
    if (
      parsed.protocol !== 'https:' &&
      !CONTAINER_HOSTS.has(parsed.hostname) &&
      !/^127\./.test(parsed.hostname)
    ) {
      problems.push(
        `provider '${provider}': AWS_CONTAINER_CREDENTIALS_FULL_URI must be https, a loopback address or the ECS/EKS credential host (it is ${parsed.protocol}//${parsed.host})`,
      );
      return undefined;
    }
    const tokenFileC = nonEmpty(env.AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE);
    if (tokenFileC !== undefined) {
      const unreadable = unreadableFile(tokenFileC);
      if (unreadable !== undefined) {
        problems.push(
          `provider '${provider}': cannot read AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE ${tokenFileC} (${unreadable})`,
        );
        return undefined;
      }
    }
    const where = `${parsed.protocol}//${parsed.host}`;
    return {
      scheme: 'aws-container',
      channel: 'aws-container',
      check: `check the task role or EKS Pod Identity association of this container, and its authorization token${tokenFileC === undefined ? '' : ` file ${tokenFileC}`}`,
      reach: `check that this container reaches its credential endpoint ${where}`,
      fetch: containerFetch({
        url,
        token: nonEmpty(env.AWS_CONTAINER_AUTHORIZATION_TOKEN),
        tokenFile: tokenFileC,
      }),
    };
  }

  if ((env.AWS_EC2_METADATA_DISABLED ?? '').toLowerCase() === 'true') return undefined;
  const imdsEndpoint = nonEmpty(env.AWS_EC2_METADATA_SERVICE_ENDPOINT);
  if (imdsEndpoint === undefined && !host.ec2) return undefined;
  return {
    scheme: 'aws-instance',
    channel: 'aws-instance',
    check:
      "check the instance's IAM role (instance profile): one is attached and its policy allows the calls",
    reach: `check that the instance metadata service ${imdsEndpoint ?? '169.254.169.254'} answers IMDSv2 (from a container: the instance's metadata hop limit is at least 2)`,
    fetch: instanceFetch(),
  };
}

function webIdentityFetch(o: {
  roleArn: string;
  tokenFile: string;
  sessionName: string | undefined;
  region: string | undefined;
  endpoint: string | undefined;
}): TokenFetch<AwsCredentials> {
  return async (timeoutMs) => {
    let webIdentityToken: string;
    try {
      // Read on every fetch: the kubelet rotates the projected token.
      webIdentityToken = readFileSync(o.tokenFile, 'ascii').trim();
    } catch (err) {
      throw new CredentialUnusable(
        `cannot read the web identity token file ${o.tokenFile} (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
      );
    }
    const ms = Math.max(1, Math.floor(timeoutMs));
    const provider = fromWebToken({
      roleArn: o.roleArn,
      roleSessionName: o.sessionName ?? `router-gateway-${Date.now()}`,
      webIdentityToken,
      logger: QUIET,
      roleAssumerWithWebIdentity: async (params) => {
        const sts = new STSClient({
          ...(o.region === undefined ? {} : { region: o.region }),
          ...(o.endpoint === undefined ? {} : { endpoint: o.endpoint }),
          maxAttempts: 1,
          requestHandler: { connectionTimeout: ms, requestTimeout: ms },
          logger: QUIET,
        });
        try {
          const { Credentials: c } = await sts.send(new AssumeRoleWithWebIdentityCommand(params));
          if (c?.AccessKeyId === undefined || c.SecretAccessKey === undefined)
            throw new TokenUnavailable('STS answered without credentials');
          return {
            accessKeyId: c.AccessKeyId,
            secretAccessKey: c.SecretAccessKey,
            sessionToken: c.SessionToken,
            expiration: c.Expiration,
          };
        } finally {
          sts.destroy();
        }
      },
    });
    return fetched(await call(() => provider(), ms, classifySts));
  };
}

function containerFetch(o: {
  url: string;
  token: string | undefined;
  tokenFile: string | undefined;
}): TokenFetch<AwsCredentials> {
  return async (timeoutMs) => {
    if (o.tokenFile !== undefined) {
      const unreadable = unreadableFile(o.tokenFile);
      if (unreadable !== undefined)
        throw new CredentialUnusable(
          `cannot read AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE ${o.tokenFile} (${unreadable})`,
        );
    }
    const ms = Math.max(1, Math.floor(timeoutMs));
    const provider = fromHttp({
      awsContainerCredentialsFullUri: o.url,
      ...(o.tokenFile !== undefined
        ? { awsContainerAuthorizationTokenFile: o.tokenFile }
        : o.token !== undefined
          ? { awsContainerAuthorizationToken: o.token }
          : {}),
      timeout: ms,
      maxRetries: 0,
      logger: QUIET,
    });
    return fetched(await call(() => provider(), ms, classifyContainer));
  };
}

function instanceFetch(): TokenFetch<AwsCredentials> {
  return async (timeoutMs) => {
    const ms = Math.max(1, Math.floor(timeoutMs));
    // The endpoint comes from AWS_EC2_METADATA_SERVICE_ENDPOINT (or the AWS config file), read by the SDK.
    const provider = fromInstanceMetadata({
      timeout: ms,
      maxRetries: 0,
      ec2MetadataV1Disabled: true,
      logger: QUIET,
    });
    return fetched(await call(() => provider(), ms, classifyInstance));
  };
}

interface SdkCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string | undefined;
  expiration?: Date | undefined;
}

function fetched(c: SdkCredentials): FetchedToken<AwsCredentials> {
  if (c.expiration === undefined || !Number.isFinite(c.expiration.getTime()))
    throw new TokenUnavailable('the credential service answered credentials without an expiry');
  return {
    token: {
      accessKeyId: c.accessKeyId,
      secretAccessKey: c.secretAccessKey,
      ...(c.sessionToken === undefined ? {} : { sessionToken: c.sessionToken }),
    },
    expiresAt: c.expiration.getTime(),
  };
}

/** A provider's credentials within `ms`, its failure classified. */
async function call<T>(run: () => Promise<T>, ms: number, classify: (err: unknown) => Error): Promise<T> {
  try {
    return await withinDeadline(run(), ms);
  } catch (err) {
    if (err instanceof TokenUnavailable || err instanceof TokenRefused || err instanceof CredentialUnusable)
      throw err;
    throw classify(err);
  }
}

interface SdkError {
  name?: string;
  $metadata?: { httpStatusCode?: number };
  statusCode?: number;
  message?: string;
}

function classifySts(err: unknown): Error {
  const e = err as SdkError;
  const status = e.$metadata?.httpStatusCode;
  const name = e.name ?? 'Error';
  if (status !== undefined && isRefusal(status) && !STS_TRANSIENT.has(name))
    return new TokenRefused(status, name.slice(0, 64));
  return new TokenUnavailable(
    status === undefined
      ? `STS could not be reached (${errorText(err)})`
      : `STS answered HTTP ${status} (${name})`,
    err,
  );
}

function classifyContainer(err: unknown): Error {
  // The provider wraps every failure in one error whose message holds the status.
  const status = /status: (\d{3})/.exec((err as SdkError).message ?? '')?.[1];
  if (status !== undefined && isRefusal(Number(status))) return new TokenRefused(Number(status), undefined);
  return new TokenUnavailable(
    status === undefined
      ? `the container credential endpoint could not be reached (${errorText(err)})`
      : `the container credential endpoint answered HTTP ${status}`,
    err,
  );
}

function classifyInstance(err: unknown): Error {
  const e = err as SdkError;
  if (e.name === 'InstanceMetadataV1FallbackError')
    return new TokenUnavailable('the instance metadata service gave no IMDSv2 session token', err);
  const status = e.statusCode;
  // 404 on the role list: no instance profile is attached.
  if (status !== undefined && isRefusal(status)) return new TokenRefused(status, undefined);
  return new TokenUnavailable(
    status === undefined
      ? `the instance metadata service could not be reached (${errorText(err)})`
      : `the instance metadata service answered HTTP ${status}`,
    err,
  );
}

/** undefined when the file can be read, else the reason (an errno code). */
export function unreadableFile(file: string): string | undefined {
  try {
    accessSync(file, constants.R_OK);
    return undefined;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code ?? 'error';
  }
}

function nonEmpty(v: string | undefined): string | undefined {
  return v === undefined || v === '' ? undefined : v;
}

/** Whether this host is an EC2 instance, from what Linux shows of its firmware (no network). */
export function detectEc2(read: (path: string) => string | undefined = readSys): boolean {
  const vendor = read('/sys/class/dmi/id/sys_vendor')?.trim();
  if (vendor === 'Amazon EC2') return true;
  if (/^i-[0-9a-f]{8,}$/.test(read('/sys/class/dmi/id/board_asset_tag')?.trim() ?? '')) return true;
  return /^ec2/i.test(read('/sys/hypervisor/uuid')?.trim() ?? '');
}

function readSys(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}
