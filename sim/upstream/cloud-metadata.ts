// The credential services a gateway meets on a cloud host, in one server on a local port: AWS STS
// (AssumeRoleWithWebIdentity, Query protocol, XML answers), the ECS/EKS container credential endpoint,
// the EC2 instance metadata service (IMDSv2 only: a session token first) and Google's metadata server.
// It checks what a real service checks (the role, the web identity token, the container authorization
// token, the IMDSv2 session token, the Metadata-Flavor header), issues credentials with an expiry, and
// verifies SigV4 signatures made with the credentials it issued, so a test's upstream refuses stale ones.
// Point the SDKs at it with AWS_ENDPOINT_URL_STS, AWS_CONTAINER_CREDENTIALS_FULL_URI,
// AWS_EC2_METADATA_SERVICE_ENDPOINT and GCE_METADATA_HOST (README "Cloud metadata services").

import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type AwsCredentials, verifySigV4 } from './sigv4.ts';

export type MetadataService = 'sts' | 'container' | 'imds' | 'gce';

export interface CloudMetadataOptions {
  /** Lifetime of the credentials and tokens issued, seconds (default 3600); `lifetimeS` changes it later. */
  lifetimeS?: number;
  /** The role web identity may assume (default arn:aws:iam::123456789012:role/router-gateway). */
  roleArn?: string;
  /** The web identity token STS accepts (default "sim-web-identity-token"). */
  webIdentityToken?: string;
  /** The Authorization value the container endpoint requires (default "sim-container-token"). */
  containerToken?: string;
  /** The instance profile's role name; null: the instance has none (404). Default "router-gateway". */
  instanceRole?: string | null;
}

export interface CloudMetadataStats {
  /** Credentials or tokens issued, per service. */
  sts: number;
  container: number;
  imds: number;
  gce: number;
  /** IMDSv2 session tokens issued. */
  imdsSessions: number;
  /** Requests refused (4xx) or failed on purpose (5xx). */
  refused: number;
  failed: number;
}

export interface SigningRefusal {
  readonly errorType: string;
  readonly message: string;
}

export interface CloudMetadata {
  readonly url: string;
  lifetimeS: number;
  readonly stats: CloudMetadataStats;
  /** Answer the next `times` requests of a service with `status` (a 5xx: an outage; a 4xx: a refusal). */
  fail(service: MetadataService, status: number, times?: number): void;
  /** Hold every answer of a service for `ms` (a slow or hanging endpoint); 0 ends it. */
  delay(service: MetadataService, ms: number): void;
  /** The web identity token STS accepts from now on. */
  webIdentityToken: string;
  /** undefined when the request is signed with credentials issued here and still valid. */
  verifyAws(
    method: string,
    url: string,
    headers: IncomingHttpHeaders,
    body: Buffer,
  ): SigningRefusal | undefined;
  /** Whether a bearer token is one the Google metadata server issued and still valid. */
  googleTokenValid(token: string): boolean;
  /** Every secret handed out so far (secret keys, session tokens, access tokens), for leak checks. */
  issuedSecrets(): string[];
  /** Expire everything issued so far. */
  expireAll(): void;
  close(): Promise<void>;
}

const STS_NS = 'https://sts.amazonaws.com/doc/2011-06-15/';
const GCE_TOKEN = /^\/computeMetadata\/v1\/instance\/service-accounts\/([^/]+)\/token$/;
const IMDS_CREDS = '/latest/meta-data/iam/security-credentials/';

interface IssuedAws extends AwsCredentials {
  expiresAt: number;
}

function xmlEscape(s: string): string {
  return s.replace(/[<>&'"]/g, (c) => `&#${c.charCodeAt(0)};`);
}

export async function startCloudMetadata(opts: CloudMetadataOptions = {}): Promise<CloudMetadata> {
  const roleArn = opts.roleArn ?? 'arn:aws:iam::123456789012:role/router-gateway';
  const containerToken = opts.containerToken ?? 'sim-container-token';
  const instanceRole = opts.instanceRole === undefined ? 'router-gateway' : opts.instanceRole;
  const aws = new Map<string, IssuedAws>();
  const google = new Map<string, number>();
  const imdsSessions = new Map<string, number>();
  const failures = new Map<MetadataService, { status: number; left: number }>();
  const delays = new Map<MetadataService, number>();
  const stats: CloudMetadataStats = {
    sts: 0,
    container: 0,
    imds: 0,
    gce: 0,
    imdsSessions: 0,
    refused: 0,
    failed: 0,
  };

  function issueAws(prefix: 'ASIA'): IssuedAws {
    const creds: IssuedAws = {
      accessKeyId: `${prefix}${randomBytes(8).toString('hex').toUpperCase()}`,
      secretAccessKey: randomBytes(30).toString('base64'),
      sessionToken: `IQoJsim${randomBytes(48).toString('base64url')}`,
      expiresAt: Date.now() + meta.lifetimeS * 1000,
    };
    aws.set(creds.accessKeyId, creds);
    return creds;
  }

  function send(
    res: ServerResponse,
    status: number,
    body: string,
    type: string,
    extra: Record<string, string> = {},
  ): undefined {
    if (status >= 500) stats.failed++;
    else if (status >= 400) stats.refused++;
    res.writeHead(status, { 'content-type': type, 'content-length': Buffer.byteLength(body), ...extra });
    res.end(body);
  }

  function stsError(res: ServerResponse, status: number, code: string, message: string): undefined {
    send(
      res,
      status,
      `<ErrorResponse xmlns="${STS_NS}">\n  <Error>\n    <Type>Sender</Type>\n    <Code>${code}</Code>\n    <Message>${xmlEscape(message)}</Message>\n  </Error>\n  <RequestId>${randomUUID()}</RequestId>\n</ErrorResponse>\n`,
      'text/xml',
    );
  }

  function sts(res: ServerResponse, form: URLSearchParams): undefined {
    if (form.get('Action') !== 'AssumeRoleWithWebIdentity' || form.get('Version') !== '2011-06-15')
      return stsError(res, 400, 'InvalidAction', `Could not find operation ${form.get('Action') ?? ''}`);
    const token = form.get('WebIdentityToken') ?? '';
    if (token !== meta.webIdentityToken)
      return stsError(
        res,
        400,
        'InvalidIdentityToken',
        "Couldn't retrieve verification key from your identity provider, please reference AssumeRoleWithWebIdentity documentation for requirements",
      );
    const role = form.get('RoleArn') ?? '';
    if (role !== roleArn)
      return stsError(res, 403, 'AccessDenied', 'Not authorized to perform sts:AssumeRoleWithWebIdentity');
    const session = form.get('RoleSessionName') ?? '';
    if (!/^[\w+=,.@-]{2,64}$/.test(session))
      return stsError(
        res,
        400,
        'ValidationError',
        `1 validation error detected: Value '${session}' at 'roleSessionName' failed to satisfy constraint`,
      );
    const c = issueAws('ASIA');
    stats.sts++;
    const roleName = role.split('/').pop() ?? 'role';
    send(
      res,
      200,
      `<AssumeRoleWithWebIdentityResponse xmlns="${STS_NS}">
  <AssumeRoleWithWebIdentityResult>
    <Audience>sts.amazonaws.com</Audience>
    <AssumedRoleUser>
      <AssumedRoleId>AROASIMULATOR:${xmlEscape(session)}</AssumedRoleId>
      <Arn>arn:aws:sts::123456789012:assumed-role/${xmlEscape(roleName)}/${xmlEscape(session)}</Arn>
    </AssumedRoleUser>
    <Provider>arn:aws:iam::123456789012:oidc-provider/oidc.eks.us-east-1.amazonaws.com/id/SIM</Provider>
    <Credentials>
      <AccessKeyId>${c.accessKeyId}</AccessKeyId>
      <SecretAccessKey>${c.secretAccessKey}</SecretAccessKey>
      <SessionToken>${c.sessionToken}</SessionToken>
      <Expiration>${new Date(c.expiresAt).toISOString()}</Expiration>
    </Credentials>
    <SubjectFromWebIdentityToken>system:serviceaccount:default:router</SubjectFromWebIdentityToken>
  </AssumeRoleWithWebIdentityResult>
  <ResponseMetadata>
    <RequestId>${randomUUID()}</RequestId>
  </ResponseMetadata>
</AssumeRoleWithWebIdentityResponse>
`,
      'text/xml',
    );
  }

  function credentialJson(c: IssuedAws, extra: Record<string, string>): string {
    return JSON.stringify({
      ...extra,
      AccessKeyId: c.accessKeyId,
      SecretAccessKey: c.secretAccessKey,
      Token: c.sessionToken,
      Expiration: new Date(c.expiresAt).toISOString().replace(/\.\d{3}Z$/, 'Z'),
    });
  }

  function container(req: IncomingMessage, res: ServerResponse): undefined {
    if (req.headers.authorization !== containerToken)
      return send(
        res,
        403,
        JSON.stringify({ Code: 'AccessDeniedException', Message: 'Authorization token is not valid' }),
        'application/json',
      );
    const c = issueAws('ASIA');
    stats.container++;
    send(res, 200, credentialJson(c, { RoleArn: roleArn }), 'application/json');
  }

  function imds(req: IncomingMessage, res: ServerResponse, path: string): undefined {
    if (path === '/latest/api/token') {
      const ttl = Number(req.headers['x-aws-ec2-metadata-token-ttl-seconds']);
      if (req.method !== 'PUT' || !(ttl >= 1 && ttl <= 21600)) return send(res, 400, '', 'text/plain');
      const token = randomBytes(32).toString('base64');
      imdsSessions.set(token, Date.now() + ttl * 1000);
      stats.imdsSessions++;
      return send(res, 200, token, 'text/plain', { 'x-aws-ec2-metadata-token-ttl-seconds': String(ttl) });
    }
    // IMDSv2 required: no session token, no answer.
    const session = String(req.headers['x-aws-ec2-metadata-token'] ?? '');
    if ((imdsSessions.get(session) ?? 0) <= Date.now()) return send(res, 401, '', 'text/plain');
    if (instanceRole === null) return send(res, 404, '', 'text/html');
    if (path === IMDS_CREDS) return send(res, 200, instanceRole, 'text/plain');
    if (path !== `${IMDS_CREDS}${instanceRole}`) return send(res, 404, '', 'text/html');
    const c = issueAws('ASIA');
    stats.imds++;
    send(
      res,
      200,
      credentialJson(c, { Code: 'Success', LastUpdated: new Date().toISOString(), Type: 'AWS-HMAC' }),
      'text/plain',
    );
  }

  function gce(req: IncomingMessage, res: ServerResponse, url: URL): undefined {
    const flavor = { 'metadata-flavor': 'Google' };
    if (req.headers['metadata-flavor'] !== 'Google')
      return send(res, 403, 'Missing Metadata-Flavor:Google header.', 'text/html');
    const m = GCE_TOKEN.exec(url.pathname);
    if (m === null || m[1] !== 'default') return send(res, 404, 'Not Found', 'text/html', flavor);
    const scopes = (url.searchParams.get('scopes') ?? '').split(',');
    if (!scopes.includes('https://www.googleapis.com/auth/cloud-platform'))
      return send(res, 403, 'Scopes do not include cloud-platform', 'text/html', flavor);
    const token = `ya29.c.sim${randomBytes(24).toString('base64url')}`;
    google.set(token, Date.now() + meta.lifetimeS * 1000);
    stats.gce++;
    send(
      res,
      200,
      JSON.stringify({ access_token: token, expires_in: meta.lifetimeS, token_type: 'Bearer' }),
      'application/json',
      flavor,
    );
  }

  function serviceOf(method: string, path: string): MetadataService | undefined {
    if (path.startsWith('/computeMetadata/')) return 'gce';
    if (path.startsWith('/latest/')) return 'imds';
    if (method === 'POST' && path === '/') return 'sts';
    if (method === 'GET' && (path.startsWith('/v2/credentials') || path.startsWith('/container-credentials')))
      return 'container';
    return undefined;
  }

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://sim');
      const method = req.method ?? 'GET';
      const service = serviceOf(method, url.pathname);
      if (service === undefined) return send(res, 404, 'Not Found', 'text/plain');
      const answer = () => {
        const failure = failures.get(service);
        if (failure !== undefined && failure.left > 0) {
          failure.left--;
          return send(
            res,
            failure.status,
            JSON.stringify({ message: 'failed on purpose' }),
            'application/json',
          );
        }
        switch (service) {
          case 'sts':
            return sts(res, new URLSearchParams(Buffer.concat(chunks).toString('utf8')));
          case 'container':
            return container(req, res);
          case 'imds':
            return imds(req, res, url.pathname);
          case 'gce':
            return gce(req, res, url);
        }
      };
      const ms = delays.get(service) ?? 0;
      if (ms > 0) setTimeout(answer, ms);
      else answer();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;

  const meta: CloudMetadata = {
    url: `http://127.0.0.1:${port}`,
    lifetimeS: opts.lifetimeS ?? 3600,
    stats,
    webIdentityToken: opts.webIdentityToken ?? 'sim-web-identity-token',
    fail(service, status, times = Number.POSITIVE_INFINITY) {
      failures.set(service, { status, left: times });
    },
    delay(service, ms) {
      delays.set(service, ms);
    },
    verifyAws(method, url, headers, body) {
      const keyId = /Credential=([^/,\s]+)\//.exec(String(headers.authorization ?? ''))?.[1];
      const creds = keyId === undefined ? undefined : aws.get(keyId);
      if (creds === undefined)
        return {
          errorType: 'UnrecognizedClientException',
          message: 'The security token included in the request is invalid.',
        };
      if (creds.expiresAt <= Date.now())
        return {
          errorType: 'ExpiredTokenException',
          message: 'The security token included in the request is expired',
        };
      return verifySigV4(method, url, headers, body, creds);
    },
    googleTokenValid(token) {
      return (google.get(token) ?? 0) > Date.now();
    },
    issuedSecrets() {
      return [
        ...[...aws.values()].flatMap((c) => [c.secretAccessKey, c.sessionToken ?? '']),
        ...google.keys(),
        ...imdsSessions.keys(),
      ].filter((v) => v !== '');
    },
    expireAll() {
      for (const c of aws.values()) c.expiresAt = 0;
      for (const t of google.keys()) google.set(t, 0);
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  return meta;
}
