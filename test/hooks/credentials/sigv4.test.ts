// SigV4 signing of the final upstream request, checked by an independent implementation (the aws4
// package): method, percent-encoded path (an inference-profile ARN as one segment), query, headers and
// the body's bytes. Also which credential a provider's auth_sigv4 uses, and the problems router -t names.

import assert from 'node:assert/strict';
import { createHash, createHmac } from 'node:crypto';
import { mock, test } from 'node:test';
import { SignatureV4 } from '@smithy/signature-v4';
import aws4 from 'aws4';
import fc from 'fast-check';
import pino from 'pino';
import type { RequestContext, UpstreamRequest } from '../../../common/types.ts';
import {
  credentialSources,
  resolveProviderCredentials,
  ruleAuthorizer,
} from '../../../hooks/credentials/index.ts';
import { createSigV4Authorizer, Sha256 } from '../../../hooks/credentials/sigv4.ts';
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

/**
 * What aws4 computes for the same request, date and credentials, over the headers the signature names
 * (as a verifier reads them: the rest are sent unsigned).
 */
function aws4Authorization(req: UpstreamRequest, creds: typeof AWS & { sessionToken?: string }): string {
  const named = /SignedHeaders=([^,]+),/.exec(req.headers.authorization ?? '')?.[1]?.split(';') ?? [];
  const headers: Record<string, string> = {};
  for (const name of named) if (req.headers[name] !== undefined) headers[name] = req.headers[name];
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
  assert.equal(req.headers.host, 'bedrock-runtime.us-east-1.amazonaws.com');
  assert.match(req.headers['x-amz-date'] ?? '', /^\d{8}T\d{6}Z$/);
  // The payload's hash is signed (the canonical request's last line) but not sent: only S3 asks for it.
  assert.equal(req.headers['x-amz-content-sha256'], undefined);
  // Signed: what AWS requires (host, content type, x-amz-*) and the body's length; accept is sent unsigned.
  assert.match(
    req.headers.authorization ?? '',
    /^AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE\/\d{8}\/us-east-1\/bedrock\/aws4_request, SignedHeaders=content-length;content-type;host;x-amz-date, Signature=[0-9a-f]{64}$/,
  );
  assert.equal(req.headers.accept, 'application/json');
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

test("the signer's HMAC-SHA-256 and SHA-256 equal node:crypto's, for any key and message", async () => {
  const key = fc.oneof(fc.string({ maxLength: 100 }), fc.uint8Array({ maxLength: 100 }));
  const message = fc.uint8Array({ maxLength: 300 });
  await fc.assert(
    fc.asyncProperty(key, message, fc.nat(3), async (secret, data, repeat) => {
      for (let i = 0; i <= repeat; i++) {
        const mac = new Sha256(secret);
        mac.update(data);
        const expected = createHmac('sha256', typeof secret === 'string' ? secret : Buffer.from(secret))
          .update(data)
          .digest();
        assert.deepEqual(Buffer.from(await mac.digest()), expected);
      }
      const plain = new Sha256();
      plain.update(data);
      assert.deepEqual(Buffer.from(await plain.digest()), createHash('sha256').update(data).digest());
    }),
    { numRuns: 300 },
  );
});

/** The SHA-256 the AWS SDK gives the signer on Node (@smithy/hash-node's shape), over node:crypto. */
class NodeSha256 {
  readonly #hash;
  constructor(secret?: string | ArrayBuffer | ArrayBufferView) {
    this.#hash =
      secret === undefined
        ? createHash('sha256')
        : createHmac('sha256', typeof secret === 'string' ? secret : Buffer.from(secret as Uint8Array));
  }
  update(data: Uint8Array): void {
    this.#hash.update(data);
  }
  async digest(): Promise<Uint8Array> {
    return new Uint8Array(this.#hash.digest());
  }
}

/**
 * What a plain @smithy/signature-v4 signer writes for the request as sent, at the request's own time,
 * given the headers the gateway signs (no x-amz-content-sha256 header: the signer hashes the body itself).
 */
async function smithyAuthorization(req: UpstreamRequest, creds: typeof AWS & { sessionToken?: string }) {
  const url = new URL(req.origin);
  const date = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(req.headers['x-amz-date'] ?? '')!;
  const [, y, mo, d, h, mi, sec] = date.map(Number);
  const headers: Record<string, string> = { host: url.host };
  const body = req.body as Buffer | undefined;
  if (body !== undefined && body.length > 0) headers['content-length'] = String(body.length);
  for (const name in req.headers)
    if (
      name === 'content-type' ||
      (name.startsWith('x-amz-') && !/^x-amz-(date|content-sha256|security-token)$/.test(name))
    )
      headers[name] = req.headers[name]!;
  const query: Record<string, string | string[]> = {};
  for (const [name, value] of req.query) {
    const seen = query[name];
    query[name] = seen === undefined ? value : Array.isArray(seen) ? [...seen, value] : [seen, value];
  }
  const signed = await new SignatureV4({
    service: 'bedrock',
    region: 'us-east-1',
    credentials: creds,
    sha256: NodeSha256,
    applyChecksum: false,
  }).sign(
    {
      method: req.method,
      protocol: url.protocol,
      hostname: url.hostname,
      ...(url.port === '' ? {} : { port: Number(url.port) }),
      path: req.path,
      query,
      headers,
      body,
    },
    { signingDate: new Date(Date.UTC(y!, mo! - 1, d!, h!, mi!, sec!)) },
  );
  return signed.headers.authorization;
}

test('the same bytes as @smithy/signature-v4 alone: payload hash made before it, key, path and date kept', async () => {
  // The memos wrap two of the signer's own steps by name, and the signature is its own step: they must
  // still exist.
  const proto = SignatureV4.prototype as unknown as Record<string, unknown>;
  assert.equal(typeof proto.getSigningKey, 'function');
  assert.equal(typeof proto.getCanonicalPath, 'function');
  assert.equal(typeof proto.getSignature, 'function');
  const creds = { ...AWS, sessionToken: 'session-token-2' };
  const authorizer = createSigV4Authorizer({
    service: 'bedrock',
    region: 'us-east-1',
    credentials: creds,
    channel: 'aws',
  });
  const paths = ['/model/a.b/invoke', '/model/a.b/converse', '/model/a.b/invoke', '/x/../model/./c/'];
  for (const [i, path] of paths.entries()) {
    const req = { ...request(), path };
    if (i === 1) req.headers['x-amz-custom'] = '  two   words ';
    if (i === 2)
      req.query = new URLSearchParams([
        ['k', 'v2'],
        ['k', 'v1'],
        ['a', '*'],
      ]);
    if (i === 3) {
      req.method = 'GET';
      req.body = undefined;
      req.headers.host = 'elsewhere.example';
    }
    await authorizer.authorize(ctx, req);
    assert.equal(req.headers.authorization, await smithyAuthorization(req, creds), path);
    assert.equal(req.headers.authorization, aws4Authorization(req, creds), path);
    if (i === 1) assert.match(req.headers.authorization ?? '', /x-amz-custom/);
    if (i === 3) {
      // No body: no length; the host is the origin's, whatever a rule wrote.
      assert.equal(req.headers['content-length'], undefined);
      assert.equal(req.headers.host, 'bedrock-runtime.us-east-1.amazonaws.com');
      assert.match(
        req.headers.authorization ?? '',
        /SignedHeaders=content-type;host;x-amz-date;x-amz-security-token,/,
      );
    }
  }
});

test("the signing key kept for a day: a request after midnight is signed with the next day's key", async () => {
  mock.timers.enable({ apis: ['Date'], now: Date.UTC(2026, 10, 29, 23, 59, 59) });
  try {
    const authorizer = createSigV4Authorizer({
      service: 'bedrock',
      region: 'us-east-1',
      credentials: AWS,
      channel: 'aws',
    });
    for (const step of [0, 1000, 1000, 86_400_000]) {
      mock.timers.tick(step);
      const req = request();
      await authorizer.authorize(ctx, req);
      assert.equal(req.headers['x-amz-date'], new Date().toISOString().replace(/[-:]|\.\d{3}/g, ''));
      assert.equal(req.headers.authorization, aws4Authorization(req, AWS));
      assert.equal(req.headers.authorization, await smithyAuthorization(req, AWS));
    }
  } finally {
    mock.timers.reset();
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
