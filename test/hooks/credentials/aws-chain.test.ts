// AWS credentials beyond static keys, through the AWS SDK's providers against the metadata simulator on a
// local port: web identity (STS AssumeRoleWithWebIdentity), container credentials and IMDSv2. Each
// signs a request the simulator verifies; credentials are renewed before they expire; a refusal is
// upstream_auth_failed at once and held 30 s; an outage is retried within the deadline, then
// upstream_unreachable; static credentials win; what is set but unusable is a problem for router -t.

import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { after, before, beforeEach, test } from 'node:test';
import pino from 'pino';
import type { AwsCredentials } from '../../../common/config-types.ts';
import { GatewayError } from '../../../common/errors.ts';
import type { RequestContext, UpstreamRequest } from '../../../common/types.ts';
import { awsTemporarySource, detectEc2 } from '../../../hooks/credentials/aws-chain.ts';
import { resolveProviderCredentials, ruleAuthorizer } from '../../../hooks/credentials/index.ts';
import { createSigV4Authorizer } from '../../../hooks/credentials/sigv4.ts';
import { REFUSED_HOLD_MS, TokenCache } from '../../../hooks/credentials/token-cache.ts';
import type { UpstreamAuthorizer } from '../../../hooks/credentials/types.ts';
import { compileProviderSource, defaultRegistries } from '../../../hooks/dsl/index.ts';
import { type CloudMetadata, startCloudMetadata } from '../../../sim/upstream/cloud-metadata.ts';

const ROLE = 'arn:aws:iam::123456789012:role/router-gateway';
const WEB_TOKEN = 'eyJhbGciOiJSUzI1NiJ9.web-identity-token-never-logged.sig';
const CONTAINER_TOKEN = 'container-auth-token-never-logged';
const OFF_CLOUD = { ec2: false };

let meta: CloudMetadata;
let dir: string;
let tokenFile: string;
before(async () => {
  meta = await startCloudMetadata({ webIdentityToken: WEB_TOKEN, containerToken: CONTAINER_TOKEN });
  dir = await mkdtemp(join(tmpdir(), 'aws-chain-'));
  tokenFile = join(dir, 'token');
  await writeFile(tokenFile, `${WEB_TOKEN}\n`);
  // The SDK's instance provider reads its endpoint from the process environment only.
  process.env.AWS_EC2_METADATA_SERVICE_ENDPOINT = meta.url;
});
after(async () => {
  await meta.close();
  await rm(dir, { recursive: true, force: true });
});
beforeEach(() => {
  meta.lifetimeS = 3600;
  meta.fail('sts', 200, 0);
  meta.fail('container', 200, 0);
  meta.fail('imds', 200, 0);
  meta.delay('sts', 0);
  meta.webIdentityToken = WEB_TOKEN;
});

function capture(): { log: pino.Logger; lines: string[] } {
  const lines: string[] = [];
  const log = pino(
    { level: 'debug' },
    new Writable({
      write(chunk, _enc, cb) {
        lines.push(String(chunk));
        cb();
      },
    }),
  );
  return { log, lines };
}

const WEB_ENV = {
  AWS_ROLE_ARN: ROLE,
  AWS_WEB_IDENTITY_TOKEN_FILE: '',
  AWS_ENDPOINT_URL_STS: '',
};

function webEnv(): Record<string, string> {
  return { ...WEB_ENV, AWS_WEB_IDENTITY_TOKEN_FILE: tokenFile, AWS_ENDPOINT_URL_STS: meta.url };
}

function cacheOf(
  env: Record<string, string>,
  opts: { now?: () => number; deadlineMs?: number; ec2?: boolean } = {},
): { cache: TokenCache<AwsCredentials>; channel: string; problems: string[] } {
  const problems: string[] = [];
  const source = awsTemporarySource(env, 'us-east-1', { ec2: opts.ec2 ?? false }, 'bedrock', problems);
  assert.ok(source, problems.join('\n'));
  const cache = new TokenCache<AwsCredentials>({
    provider: 'bedrock',
    scheme: source.scheme,
    check: source.check,
    reach: source.reach,
    fetch: source.fetch,
    deadlineMs: opts.deadlineMs ?? 3000,
    ...(opts.now === undefined ? {} : { now: opts.now }),
  });
  return { cache, channel: source.channel, problems };
}

function request(): UpstreamRequest {
  return {
    method: 'POST',
    origin: 'https://bedrock-runtime.us-east-1.amazonaws.com',
    path: '/model/anthropic.claude-x/invoke',
    query: new URLSearchParams(),
    headers: { 'content-type': 'application/json' },
    body: { messages: [{ role: 'user', content: 'hi' }] },
  };
}

/** Signs a request with the authorizer and has the simulator verify it. */
async function signAndVerify(a: UpstreamAuthorizer, log: pino.Logger): Promise<UpstreamRequest> {
  const req = request();
  await a.authorize({ log } as unknown as RequestContext, req);
  const url = new URL(req.origin);
  const refusal = meta.verifyAws(
    req.method,
    req.path,
    { ...req.headers, host: url.host },
    req.body as Buffer,
  );
  assert.equal(refusal, undefined, JSON.stringify(refusal));
  return req;
}

function sigv4(cache: TokenCache<AwsCredentials>, channel: string): UpstreamAuthorizer {
  return createSigV4Authorizer({ service: 'bedrock', region: 'us-east-1', credentials: cache, channel });
}

test('web identity: STS AssumeRoleWithWebIdentity with the token file; the credentials sign requests', async () => {
  const { cache, channel } = cacheOf(webEnv());
  assert.equal(channel, 'aws-web-identity');
  const { log, lines } = capture();
  const before = meta.stats.sts;
  const req = await signAndVerify(sigv4(cache, channel), log);
  assert.match(req.headers['x-amz-security-token'] ?? '', /^IQoJsim/);
  assert.match(req.headers.authorization ?? '', /Credential=ASIA[0-9A-F]{16}\//);
  await signAndVerify(sigv4(cache, channel), log);
  assert.equal(meta.stats.sts - before, 1, 'cached: one AssumeRoleWithWebIdentity');
  assert.equal(lines.join('').includes(WEB_TOKEN), false);
});

test('temporary credentials are renewed in the background before they expire', async () => {
  meta.lifetimeS = 600;
  let now = Date.now();
  const { cache, channel } = cacheOf(webEnv(), { now: () => now });
  const a = sigv4(cache, channel);
  const { log } = capture();
  const first = (await signAndVerify(a, log)).headers['x-amz-security-token'];
  // Past the refresh point (5 minutes before expiry): the held credentials still sign, a renewal starts.
  now += 301_000;
  const before = meta.stats.sts;
  const second = (await signAndVerify(a, log)).headers['x-amz-security-token'];
  assert.equal(second, first);
  await new Promise<void>((resolve) => {
    const poll = () => (meta.stats.sts > before ? resolve() : setImmediate(poll));
    poll();
  });
  // The renewal landed: the next request signs with the new set.
  let third = first;
  for (let i = 0; i < 200 && third === first; i++) {
    third = (await signAndVerify(a, log)).headers['x-amz-security-token'];
    if (third === first) await new Promise((r) => setImmediate(r));
  }
  assert.notEqual(third, first);
  assert.equal(meta.stats.sts - before, 1);
});

test('one AssumeRoleWithWebIdentity in flight: 50 concurrent requests share it', async () => {
  meta.delay('sts', 150);
  const { cache, channel } = cacheOf(webEnv());
  const a = sigv4(cache, channel);
  const { log } = capture();
  const before = meta.stats.sts;
  const reqs = await Promise.all(Array.from({ length: 50 }, () => signAndVerify(a, log)));
  assert.equal(new Set(reqs.map((r) => r.headers['x-amz-security-token'])).size, 1);
  assert.equal(meta.stats.sts - before, 1);
});

test('web identity: a token STS refuses is upstream_auth_failed naming the provider, held 30 s', async () => {
  meta.webIdentityToken = 'another-token';
  let now = Date.now();
  const { cache, channel } = cacheOf(webEnv(), { now: () => now });
  const a = sigv4(cache, channel);
  const { log, lines } = capture();
  const before = meta.stats.refused;
  await assert.rejects(
    async () => a.authorize({ log } as unknown as RequestContext, request()),
    (err: unknown) =>
      err instanceof GatewayError &&
      err.code === 'upstream_auth_failed' &&
      err.status === 502 &&
      err.message.includes("'bedrock'") &&
      !err.message.includes(WEB_TOKEN),
  );
  assert.equal(meta.stats.refused - before, 1);
  const logged = lines.join('');
  assert.match(logged, /check the role arn:aws:iam::123456789012:role\/router-gateway/);
  assert.match(logged, /InvalidIdentityToken/);
  assert.equal(logged.includes(WEB_TOKEN), false, 'the web identity token is never logged');
  meta.webIdentityToken = WEB_TOKEN;
  now += REFUSED_HOLD_MS - 1;
  await assert.rejects(async () => a.authorize({ log } as unknown as RequestContext, request()), {
    code: 'upstream_auth_failed',
  });
  assert.equal(meta.stats.refused - before, 1, 'not asked again within the hold');
  now += 2;
  await signAndVerify(a, log);
});

test('web identity: a role the token may not assume (403 AccessDenied) is refused too', async () => {
  const { cache } = cacheOf({ ...webEnv(), AWS_ROLE_ARN: 'arn:aws:iam::123456789012:role/other' });
  const { log, lines } = capture();
  await assert.rejects(async () => cache.token(log), { code: 'upstream_auth_failed' });
  assert.match(lines.join(''), /"status":403.*"reason":"AccessDenied/);
});

test('STS answering 5xx is retried with backoff; always 5xx is upstream_unreachable within the deadline', async () => {
  meta.fail('sts', 503, 2);
  const { cache, channel } = cacheOf(webEnv());
  const { log } = capture();
  await signAndVerify(sigv4(cache, channel), log);

  meta.fail('sts', 500);
  const down = cacheOf(webEnv(), { deadlineMs: 700 }).cache;
  const t0 = Date.now();
  const { log: log2, lines } = capture();
  await assert.rejects(async () => down.token(log2), { code: 'upstream_unreachable' });
  assert.ok(Date.now() - t0 < 2000, `within the deadline (${Date.now() - t0} ms)`);
  assert.ok(down.requests >= 2, `retried (${down.requests})`);
  assert.match(lines.join(''), /is unreachable: check that this host reaches STS at http:\/\/127\.0\.0\.1/);
});

test('STS that does not answer: each attempt gets the time left, then upstream_unreachable', async () => {
  meta.delay('sts', 5000);
  const { cache } = cacheOf(webEnv(), { deadlineMs: 500 });
  const t0 = Date.now();
  await assert.rejects(async () => cache.token(capture().log), { code: 'upstream_unreachable' });
  assert.ok(Date.now() - t0 < 1500, `${Date.now() - t0} ms`);
});

test('web identity: a token file that disappears is upstream_auth_failed naming the file', async () => {
  const gone = join(dir, 'gone');
  await writeFile(gone, WEB_TOKEN);
  const { cache } = cacheOf({ ...webEnv(), AWS_WEB_IDENTITY_TOKEN_FILE: gone });
  await rm(gone);
  const { log, lines } = capture();
  await assert.rejects(async () => cache.token(log), { code: 'upstream_auth_failed' });
  assert.match(lines.join(''), /cannot read the web identity token file .*gone \(ENOENT\)/);
});

test('container credentials: the full URI with its authorization token (or token file)', async () => {
  const env = {
    AWS_CONTAINER_CREDENTIALS_FULL_URI: `${meta.url}/v2/credentials/task-1`,
    AWS_CONTAINER_AUTHORIZATION_TOKEN: CONTAINER_TOKEN,
  };
  const { cache, channel } = cacheOf(env);
  assert.equal(channel, 'aws-container');
  const { log, lines } = capture();
  await signAndVerify(sigv4(cache, channel), log);

  const file = join(dir, 'container-token');
  await writeFile(file, CONTAINER_TOKEN);
  const fromFile = cacheOf({
    AWS_CONTAINER_CREDENTIALS_FULL_URI: `${meta.url}/v2/credentials/task-1`,
    AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE: file,
  });
  await signAndVerify(sigv4(fromFile.cache, fromFile.channel), log);

  const wrong = cacheOf({ ...env, AWS_CONTAINER_AUTHORIZATION_TOKEN: 'wrong-token' }).cache;
  await assert.rejects(async () => wrong.token(log), { code: 'upstream_auth_failed' });
  assert.match(lines.join(''), /check the task role or EKS Pod Identity association/);
  assert.equal(lines.join('').includes(CONTAINER_TOKEN), false);

  meta.fail('container', 502);
  const down = cacheOf(env, { deadlineMs: 500 }).cache;
  await assert.rejects(async () => down.token(log), { code: 'upstream_unreachable' });
});

test('instance metadata (IMDSv2): a session token, the role, its credentials', async () => {
  const sessions = meta.stats.imdsSessions;
  const { cache, channel } = cacheOf({ AWS_EC2_METADATA_SERVICE_ENDPOINT: meta.url });
  assert.equal(channel, 'aws-instance');
  const { log } = capture();
  await signAndVerify(sigv4(cache, channel), log);
  assert.ok(meta.stats.imdsSessions > sessions, 'IMDSv2: a session token was asked for');

  meta.fail('imds', 503);
  const down = cacheOf({ AWS_EC2_METADATA_SERVICE_ENDPOINT: meta.url }, { deadlineMs: 500 }).cache;
  const { log: log2, lines } = capture();
  await assert.rejects(async () => down.token(log2), { code: 'upstream_unreachable' });
  assert.match(lines.join(''), /answers IMDSv2 \(from a container: the instance's metadata hop limit/);
});

test('instance metadata: an instance without a role is upstream_auth_failed naming the instance profile', async () => {
  const bare = await startCloudMetadata({ instanceRole: null });
  const saved = process.env.AWS_EC2_METADATA_SERVICE_ENDPOINT;
  process.env.AWS_EC2_METADATA_SERVICE_ENDPOINT = bare.url;
  try {
    const { cache } = cacheOf({ AWS_EC2_METADATA_SERVICE_ENDPOINT: bare.url });
    const { log, lines } = capture();
    await assert.rejects(async () => cache.token(log), { code: 'upstream_auth_failed' });
    assert.match(lines.join(''), /instance profile/);
  } finally {
    process.env.AWS_EC2_METADATA_SERVICE_ENDPOINT = saved;
    await bare.close();
  }
});

test('expired credentials handed out are upstream_auth_failed at once, naming the clock', async () => {
  meta.lifetimeS = 600;
  const { cache } = cacheOf(webEnv(), { now: () => Date.now() + 3_600_000 });
  const { log, lines } = capture();
  await assert.rejects(async () => cache.token(log), { code: 'upstream_auth_failed' });
  assert.match(lines.join(''), /already expired .*check this host's clock/);
});

test('which source: web identity, then container, then instance metadata (on EC2 or with its endpoint)', () => {
  const problems: string[] = [];
  const container = { AWS_CONTAINER_CREDENTIALS_RELATIVE_URI: '/v2/credentials/x' };
  assert.equal(
    awsTemporarySource({ ...webEnv(), ...container }, 'r', OFF_CLOUD, 'b', problems)?.scheme,
    'aws-web-identity',
  );
  assert.equal(awsTemporarySource(container, 'r', OFF_CLOUD, 'b', problems)?.scheme, 'aws-container');
  assert.equal(awsTemporarySource({}, 'r', OFF_CLOUD, 'b', problems), undefined);
  assert.equal(awsTemporarySource({}, 'r', { ec2: true }, 'b', problems)?.scheme, 'aws-instance');
  assert.equal(
    awsTemporarySource({ AWS_EC2_METADATA_DISABLED: 'true' }, 'r', { ec2: true }, 'b', problems),
    undefined,
  );
  assert.deepEqual(problems, []);
  assert.equal(
    detectEc2((p) => (p.endsWith('sys_vendor') ? 'Amazon EC2\n' : undefined)),
    true,
  );
  assert.equal(
    detectEc2((p) => (p.endsWith('board_asset_tag') ? 'i-0123456789abcdef0\n' : undefined)),
    true,
  );
  assert.equal(
    detectEc2(() => undefined),
    false,
  );
});

test('set but unusable: half the web identity pair, an unreadable token file, a container URI off its hosts', () => {
  const cases: [Record<string, string>, RegExp][] = [
    [{ AWS_ROLE_ARN: ROLE }, /AWS_ROLE_ARN set but AWS_WEB_IDENTITY_TOKEN_FILE not/],
    [
      { AWS_ROLE_ARN: ROLE, AWS_WEB_IDENTITY_TOKEN_FILE: '/nonexistent/token' },
      /cannot read the web identity token file \/nonexistent\/token \(ENOENT\)/,
    ],
    [
      { AWS_CONTAINER_CREDENTIALS_FULL_URI: 'http://10.1.2.3/creds' },
      /must be https, a loopback address or the ECS\/EKS credential host/,
    ],
    [
      {
        AWS_CONTAINER_CREDENTIALS_FULL_URI: 'http://127.0.0.1:9/c',
        AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE: '/nope',
      },
      /cannot read AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE \/nope \(ENOENT\)/,
    ],
  ];
  for (const [env, problem] of cases) {
    const problems: string[] = [];
    assert.equal(awsTemporarySource(env, 'r', OFF_CLOUD, 'bedrock', problems), undefined);
    assert.match(problems.join('\n'), problem);
  }
});

const PROVIDER = `syntax "next-router/0.1";
provider "bedrock-x" {
  defaults {
    upstream_config { base_url = "https://bedrock-runtime.us-east-1.amazonaws.com"; }
    auth { auth_sigv4 "bedrock"; }
  }
  match api = "native.messages" { upstream { set_path "/model/x/invoke"; } }
}
`;

test('static credentials win over the chains; each source has its own stable channel', async () => {
  const r = compileProviderSource('bedrock-x.conf', PROVIDER, { registries: defaultRegistries(), env: {} });
  assert.deepEqual(r.diagnostics, []);
  const provider = r.provider!;
  const resolve = (env: Record<string, string>, file?: { aws: AwsCredentials }) =>
    resolveProviderCredentials({
      provider,
      keys: [],
      file,
      env: { AWS_REGION: 'us-east-1', ...env },
      connectTimeoutMs: 1000,
      host: { ec2: () => true, gcp: () => false },
    });
  const channel = (c: ReturnType<typeof resolve>) => ruleAuthorizer(provider.rules[0]!.auth, c)?.channel;
  const keys = { AWS_ACCESS_KEY_ID: 'AKIDSTATIC', AWS_SECRET_ACCESS_KEY: 'static-secret' };
  assert.equal(channel(resolve({ ...keys, ...webEnv() })), 'aws');
  assert.equal(channel(resolve(webEnv(), { aws: { accessKeyId: 'A', secretAccessKey: 'B' } })), 'aws');
  assert.equal(channel(resolve(webEnv())), 'aws-web-identity');
  assert.equal(channel(resolve({ AWS_CONTAINER_CREDENTIALS_FULL_URI: `${meta.url}/c` })), 'aws-container');
  assert.equal(channel(resolve({})), 'aws-instance');
  const partial = resolve({ AWS_ROLE_ARN: ROLE });
  assert.equal(channel(partial), undefined);
  assert.match(partial.problems.join('\n'), /provider 'bedrock-x': AWS_ROLE_ARN set but/);
});
