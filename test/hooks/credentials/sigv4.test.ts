// SigV4 signing of the final upstream request, checked by an independent implementation (the aws4
// package): method, percent-encoded path (an inference-profile ARN as one segment), query, headers and
// the body's bytes. Also which credential a provider's auth_sigv4 uses, and the problems router -t names.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import aws4 from 'aws4';
import pino from 'pino';
import type { RequestContext, UpstreamRequest } from '../../../common/types.ts';
import {
  credentialSources,
  resolveProviderCredentials,
  ruleAuthorizer,
} from '../../../hooks/credentials/index.ts';
import { createSigV4Authorizer } from '../../../hooks/credentials/sigv4.ts';
import { compileProviderSource, defaultRegistries } from '../../../hooks/dsl/index.ts';
import { missingProviderKeyWarning } from '../../../proxy/runtime-compile.ts';

const AWS = { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY' };
const ctx = { log: pino({ level: 'silent' }) } as unknown as RequestContext;
/** Not an EC2 instance, not on Google Cloud, whatever machine runs the tests. */
const OFF_CLOUD = { ec2: () => false, gcp: () => false };

function request(): UpstreamRequest {
  const model = encodeURIComponent(
    'arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-x',
  );
  return {
    method: 'POST',
    origin: 'https://bedrock-runtime.us-east-1.amazonaws.com',
    path: `/model/${model}/invoke`,
    query: new URLSearchParams([
      ['b', 'two words'],
      ['a', '1'],
    ]),
    headers: {
      'content-type': 'application/json',
      accept: 'application/json',
      authorization: 'Bearer client',
    },
    body: { anthropic_version: 'bedrock-2023-05-31', messages: [{ role: 'user', content: 'héllo' }] },
  };
}

/** What aws4 computes for the same request, date and credentials. */
function aws4Authorization(req: UpstreamRequest, creds: typeof AWS & { sessionToken?: string }): string {
  const headers = { ...req.headers };
  delete headers.authorization;
  // aws4 takes the payload hash from this header when present: recompute it from the body itself.
  if (headers['x-amz-content-sha256'] !== undefined)
    headers['x-amz-content-sha256'] = createHash('sha256')
      .update(req.body as Buffer)
      .digest('hex');
  const signed = aws4.sign(
    {
      host: new URL(req.origin).host,
      method: req.method,
      path: `${req.path}?${req.query.toString().replaceAll('+', '%20')}`,
      headers,
      body: req.body as Buffer,
      service: 'bedrock',
      region: 'us-east-1',
    },
    creds,
  );
  return String((signed.headers as Record<string, string>).Authorization);
}

test('the signature of the final request equals an independent SigV4 implementation', async () => {
  const req = request();
  await createSigV4Authorizer({
    service: 'bedrock',
    region: 'us-east-1',
    credentials: AWS,
    channel: 'aws',
  }).authorize(ctx, req);
  assert.ok(Buffer.isBuffer(req.body), 'the body is fixed as the bytes that were signed');
  assert.equal(JSON.parse((req.body as Buffer).toString('utf8')).messages[0].content, 'héllo');
  assert.equal(req.headers['content-length'], String((req.body as Buffer).length));
  assert.match(req.headers['x-amz-date'] ?? '', /^\d{8}T\d{6}Z$/);
  assert.match(
    req.headers.authorization ?? '',
    /^AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE\/\d{8}\/us-east-1\/bedrock\/aws4_request, SignedHeaders=accept;content-length;content-type;host;(x-amz-content-sha256;)?x-amz-date, Signature=[0-9a-f]{64}$/,
  );
  assert.equal(req.headers.authorization, aws4Authorization(req, AWS));
  // A changed body no longer matches the signature.
  const tampered = {
    ...req,
    body: Buffer.from((req.body as Buffer).toString('utf8').replace('héllo', 'hullo')),
  };
  assert.notEqual(req.headers.authorization, aws4Authorization(tampered, AWS));
});

test('temporary credentials: the session token is sent and signed', async () => {
  const creds = { ...AWS, sessionToken: 'session-token-1' };
  const req = request();
  await createSigV4Authorizer({
    service: 'bedrock',
    region: 'us-east-1',
    credentials: creds,
    channel: 'aws',
  }).authorize(ctx, req);
  assert.equal(req.headers['x-amz-security-token'], 'session-token-1');
  assert.match(req.headers.authorization ?? '', /x-amz-security-token/);
  assert.equal(req.headers.authorization, aws4Authorization(req, creds));
});

test('signers of different secrets, used in turn, each sign with their own key', async () => {
  const other = { accessKeyId: 'AKIDOTHER', secretAccessKey: 'otherSecretKeyOfTwentyOrMoreCharacters0' };
  for (const creds of [AWS, other, AWS, other]) {
    const req = request();
    await createSigV4Authorizer({
      service: 'bedrock',
      region: 'us-east-1',
      credentials: creds,
      channel: 'aws',
    }).authorize(ctx, req);
    assert.equal(req.headers.authorization, aws4Authorization(req, creds));
  }
});

const BEDROCK_CONF = `syntax "next-router/0.1";
provider "bedrock-test" {
  defaults {
    upstream_config { base_url = "https://bedrock-runtime.eu-west-1.amazonaws.com"; }
    auth { auth_sigv4 "bedrock"; }
  }
  match api = "native.messages" {
    upstream { set_path template("/model/\${request.model_mapped}/invoke"); }
  }
}
`;

function bedrock() {
  const r = compileProviderSource('bedrock-test.conf', BEDROCK_CONF, {
    registries: defaultRegistries(),
    env: {},
  });
  assert.deepEqual(r.diagnostics, []);
  return r.provider!;
}

test('auth_sigv4: an API key wins over signing credentials; AWS_BEARER_TOKEN_BEDROCK too', async () => {
  const provider = bedrock();
  const base = { provider, file: { aws: AWS }, connectTimeoutMs: 1000 };
  const withKey = resolveProviderCredentials({
    ...base,
    keys: [{ name: 'env', value: 'bedrock-api-key' }],
    env: { AWS_REGION: 'eu-west-1' },
  });
  const a = ruleAuthorizer(provider.rules[0]!.auth, withKey)!;
  assert.equal(a.scheme, 'bearer');
  const req = request();
  await a.authorize(ctx, req);
  assert.equal(req.headers.authorization, 'Bearer bedrock-api-key');

  const fromEnv = resolveProviderCredentials({
    ...base,
    keys: [],
    env: { AWS_BEARER_TOKEN_BEDROCK: 'b2', AWS_REGION: 'x' },
  });
  assert.equal(ruleAuthorizer(provider.rules[0]!.auth, fromEnv)?.scheme, 'bearer');

  const signing = resolveProviderCredentials({
    ...base,
    keys: [],
    env: { ROUTER_PROVIDER_BEDROCK_TEST_REGION: 'eu-west-1', AWS_REGION: 'us-east-1' },
  });
  assert.equal(signing.settings.region, 'eu-west-1');
  assert.equal(ruleAuthorizer(provider.rules[0]!.auth, signing)?.scheme, 'sigv4');
  assert.deepEqual(signing.problems, []);
});

test('auth_sigv4: the environment wins as a group; half a group and a missing region are problems', () => {
  const provider = bedrock();
  const base = { provider, keys: [], file: { aws: AWS }, connectTimeoutMs: 1000, host: OFF_CLOUD };
  const half = resolveProviderCredentials({ ...base, env: { AWS_ACCESS_KEY_ID: 'AKID2', AWS_REGION: 'r' } });
  assert.equal(half.authorizers.size, 0);
  assert.match(half.problems.join('\n'), /AWS_ACCESS_KEY_ID set but AWS_SECRET_ACCESS_KEY not/);
  const noRegion = resolveProviderCredentials({ ...base, env: {} });
  assert.match(
    noRegion.problems.join('\n'),
    /SigV4 needs a region: set ROUTER_PROVIDER_BEDROCK_TEST_REGION or AWS_REGION/,
  );
  const none = resolveProviderCredentials({ ...base, file: undefined, env: { AWS_REGION: 'r' } });
  assert.deepEqual(none.problems, []);
  assert.equal(ruleAuthorizer(provider.rules[0]!.auth, none), undefined);
});

test('a routed provider without cloud credentials: the warning names the variables and keys-file entries', () => {
  const text = missingProviderKeyWarning({
    provider: 'azure-openai',
    variable: 'ROUTER_PROVIDER_AZURE_OPENAI_API_KEY',
    keysFile: '/etc/router/keys.yaml',
    models: ['azure-gpt'],
    cloud: [credentialSources({ op: 'auth_entra' }, 'azure-openai')],
    keyFallback: true,
  });
  assert.equal(
    text,
    "provider 'azure-openai' has no credentials: requests for azure-gpt will be refused with 503 provider_key_missing; set AZURE_TENANT_ID, AZURE_CLIENT_ID and AZURE_CLIENT_SECRET (or providers.azure-openai.entra), or AZURE_TENANT_ID, AZURE_CLIENT_ID and AZURE_FEDERATED_TOKEN_FILE; or set ROUTER_PROVIDER_AZURE_OPENAI_API_KEY or add providers.azure-openai.api_key to the keys file /etc/router/keys.yaml",
  );
  assert.match(credentialSources({ op: 'auth_sigv4', service: 'bedrock' }, 'b'), /AWS_BEARER_TOKEN_BEDROCK/);
});
