// SigV4 through the gateway: a provider file with `auth_sigv4 "bedrock"` in front of a local upstream
// that recomputes every signature with an independent implementation (aws4) from the bytes it received.
// The signature covers the rule's ops, the percent-encoded model path, the query and a custom hook's late
// rewrite; a wrong secret is refused by the upstream and reaches the client as 502 upstream_auth_failed.

import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import aws4 from 'aws4';
import { postJson, ROOT, type Stack, startStack } from '../support/stack.ts';

const KEY_ID = 'AKIDGATEWAYTEST';
const SECRET = 'gateway-test-secret-access-key';
const PROFILE = 'arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-test';

const PROVIDER = `syntax "next-router/0.1";
provider "bedrock-test" {
  defaults {
    upstream_config { base_url = "http://127.0.0.1:1"; }
    auth { auth_sigv4 "bedrock"; }
  }
  match api = "native.messages" {
    request { json_set "$.anthropic_version" "bedrock-2023-05-31"; json_del "$.model"; }
    upstream { set_path template("/model/\${request.model_mapped}/invoke"); set_query "trace" "a b"; }
    metrics { usage_extract anthropic_messages; }
    hook "./late-rewrite-hook.ts";
  }
}
`;

interface Seen {
  readonly url: string;
  readonly verified: boolean;
  readonly body: Record<string, unknown>;
  readonly late: string | undefined;
}

/** Recomputes the request's signature with aws4 over what arrived, with the secret the upstream holds. */
function verify(req: IncomingMessage, body: Buffer): boolean {
  const auth = String(req.headers.authorization ?? '');
  const m =
    /^AWS4-HMAC-SHA256 Credential=([^/]+)\/\d{8}\/([^/]+)\/([^/]+)\/aws4_request, SignedHeaders=([^,]+), Signature=[0-9a-f]{64}$/.exec(
      auth,
    );
  if (m === null || m[1] !== KEY_ID) return false;
  const headers: Record<string, string> = {};
  for (const name of m[4]!.split(';')) headers[name] = String(req.headers[name] ?? '');
  const signed = aws4.sign(
    { method: req.method, host: headers.host, path: req.url, headers, body, service: m[3], region: m[2] },
    {
      accessKeyId: KEY_ID,
      secretAccessKey: SECRET,
      sessionToken: headers['x-amz-security-token'] || undefined,
    },
  );
  return (signed.headers as Record<string, string>).Authorization === auth;
}

let server: Server;
let upstreamUrl: string;
const seen: Seen[] = [];
before(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const verified = verify(req, body);
      seen.push({
        url: req.url ?? '',
        verified,
        body: JSON.parse(body.toString('utf8')),
        late: req.headers['x-late'] as string | undefined,
      });
      res.setHeader('content-type', 'application/json');
      if (!verified) {
        res.statusCode = 403;
        res.end(
          JSON.stringify({
            message: 'The request signature we calculated does not match the signature you provided.',
          }),
        );
        return;
      }
      res.end(
        JSON.stringify({
          id: 'msg_1',
          type: 'message',
          role: 'assistant',
          model: 'claude-test',
          content: [{ type: 'text', text: 'signed and sealed' }],
          stop_reason: 'end_turn',
          usage: { input_tokens: 7, output_tokens: 3 },
        }),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  upstreamUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(
  () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
);

function stackWith(secret: string): Promise<Stack> {
  return startStack({
    providers: { 'bedrock-test': PROVIDER },
    providerFiles: [join(ROOT, 'test/fixtures/credentials/late-rewrite-hook.ts')],
    baseUrls: { 'bedrock-test': upstreamUrl },
    modelsYaml: `models:\n  claude-on-bedrock:\n    providers:\n      - { provider: bedrock-test, model: "${PROFILE}" }\n`,
    env: {
      ROUTER_PROVIDER_BEDROCK_TEST_API_KEY: '',
      AWS_ACCESS_KEY_ID: KEY_ID,
      AWS_SECRET_ACCESS_KEY: secret,
      AWS_SESSION_TOKEN: 'session-1',
      AWS_REGION: 'us-east-1',
    },
  });
}

const message = {
  model: 'claude-on-bedrock',
  max_tokens: 64,
  messages: [{ role: 'user', content: 'sign this' }],
};

describe('with the right secret', () => {
  let stack: Stack;
  before(async () => {
    stack = await stackWith(SECRET);
  });
  after(() => stack.close());

  test('the upstream verifies the signature of the request as sent, late rewrite included', async () => {
    const res = await postJson(`${stack.url}/v1/messages`, message, { 'anthropic-version': '2023-06-01' });
    assert.equal(res.status, 200, res.text);
    assert.equal((res.json as { content: { text: string }[] }).content[0]!.text, 'signed and sealed');
    const last = seen.at(-1)!;
    assert.equal(last.verified, true);
    assert.equal(last.url, `/model/${encodeURIComponent(PROFILE)}/invoke?trace=a+b`);
    assert.equal(last.body.anthropic_version, 'bedrock-2023-05-31');
    assert.equal(last.body.model, undefined);
    assert.equal(last.body.late, true);
    assert.equal(last.late, 'added-late');
  });
});

describe('with a wrong secret', () => {
  let stack: Stack;
  before(async () => {
    stack = await stackWith('not-the-secret');
  });
  after(() => stack.close());

  test('the upstream refuses the signature: 502 upstream_auth_failed, the secret nowhere in the reply', async () => {
    const res = await postJson(`${stack.url}/v1/messages`, message, { 'anthropic-version': '2023-06-01' });
    assert.equal(res.status, 502);
    assert.equal(seen.at(-1)!.verified, false);
    assert.match(res.text, /upstream_auth_failed|refused the gateway's credentials/);
    assert.equal(res.text.includes('not-the-secret'), false);
  });
});
