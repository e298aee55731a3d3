// AWS web identity end to end: the gateway assumes a role at the metadata simulator's STS (a real
// server on a local port speaking STS's Query protocol) with the token file, and signs every request to
// an upstream that accepts only signatures made with credentials the simulator issued and that have not
// expired. Requests keep succeeding across the expiry of short-lived credentials; the pricing channel is
// `aws-web-identity`; a refused token is 502 upstream_auth_failed at once and asked once; an STS outage
// is 502 upstream_unreachable within the connect timeout and holds up no other provider; an unreadable
// token file is reported by `router -t` and the provider is not offered. No secret reaches a log line,
// an error body or an exported span. On a "cloud host" (the metadata addresses set), Bedrock is signed with the instance
// role through IMDSv2 and Vertex gets the Google metadata server's token, each with its channel.

import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { checkConfig } from '../../proxy/gateway.ts';
import { type CloudMetadata, startCloudMetadata } from '../../sim/upstream/cloud-metadata.ts';
import { recordedChannels } from '../fixtures/credentials/channel-recorder-hook.ts';
import { capturingLogger, type LogLine, waitUntil } from '../support/billing-stack.ts';
import { type OtlpReceiver, startOtlpReceiver } from '../support/otlp-receiver.ts';
import { postJson, ROOT, type Stack, startStack } from '../support/stack.ts';

const WEB_TOKEN = 'eyJhbGciOiJSUzI1NiJ9.e2e-web-identity-token-never-logged.sig';
const ROLE = 'arn:aws:iam::123456789012:role/router-gateway';

const PROVIDER = `syntax "next-router/0.1";
provider "bedrock-wi" {
  defaults {
    upstream_config { base_url = "http://127.0.0.1:1"; }
    auth { auth_sigv4 "bedrock"; }
  }
  match api = "native.messages" {
    request { json_set "$.anthropic_version" "bedrock-2023-05-31"; json_del "$.model"; }
    upstream { set_path template("/model/\${request.model_mapped}/invoke"); }
    metrics { usage_extract anthropic_messages; }
    hook "./channel-recorder-hook.ts";
  }
}
`;
const GOOGLE_PROVIDER = `syntax "next-router/0.1";
provider "vertex-md" {
  defaults {
    upstream_config { base_url = "http://127.0.0.1:1"; }
    auth { auth_google; }
  }
  match api = "chat.completions" {
    upstream { set_path template("/v1/projects/\${provider.project}/chat/completions"); }
    metrics { usage_extract openai_chat_completions; }
    hook "./channel-recorder-hook.ts";
  }
}
`;
const MODELS = `models:
  claude-wi:
    providers:
      - { provider: bedrock-wi, model: anthropic.claude-test }
  gemini-md:
    providers:
      - { provider: vertex-md, model: gemini-test }
`;

let meta: CloudMetadata;
let upstream: Server;
let upstreamUrl: string;
const refusals: string[] = [];
before(async () => {
  meta = await startCloudMetadata({ webIdentityToken: WEB_TOKEN, roleArn: ROLE });
  upstream = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const auth = String(req.headers.authorization ?? '');
      if (auth.startsWith('Bearer ')) {
        res.setHeader('content-type', 'application/json');
        if (!meta.googleTokenValid(auth.slice(7)) || !(req.url ?? '').startsWith('/v1/projects/proj-md/')) {
          res.statusCode = 401;
          res.end(
            JSON.stringify({ error: { code: 401, status: 'UNAUTHENTICATED', message: 'invalid token' } }),
          );
          return;
        }
        res.end(
          JSON.stringify({
            id: 'c1',
            object: 'chat.completion',
            created: 1,
            model: 'm',
            choices: [
              {
                index: 0,
                message: { role: 'assistant', content: 'from the metadata token' },
                finish_reason: 'stop',
              },
            ],
            usage: { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 },
          }),
        );
        return;
      }
      const refusal = meta.verifyAws(
        req.method ?? 'POST',
        req.url ?? '/',
        req.headers,
        Buffer.concat(chunks),
      );
      res.setHeader('content-type', 'application/json');
      if (refusal !== undefined) {
        refusals.push(refusal.errorType);
        res.writeHead(403, { 'x-amzn-errortype': refusal.errorType });
        res.end(JSON.stringify({ message: refusal.message }));
        return;
      }
      res.end(
        JSON.stringify({
          id: 'msg_1',
          type: 'message',
          role: 'assistant',
          model: 'claude-test',
          content: [{ type: 'text', text: 'assumed and signed' }],
          stop_reason: 'end_turn',
          usage: { input_tokens: 6, output_tokens: 3 },
        }),
      );
    });
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
});
after(async () => {
  await meta.close();
  await new Promise<void>((resolve) => {
    upstream.closeAllConnections();
    upstream.close(() => resolve());
  });
});

async function stackWith(
  tokenFileContent: string | undefined,
  logs: LogLine[],
  extraYaml = '',
  extraEnv: Record<string, string> = {},
): Promise<Stack> {
  return startStack({
    providers: { 'bedrock-wi': PROVIDER, 'vertex-md': GOOGLE_PROVIDER },
    providerFiles: [join(ROOT, 'test/fixtures/credentials/channel-recorder-hook.ts')],
    baseUrls: { 'bedrock-wi': upstreamUrl },
    modelsYaml: MODELS,
    extraYaml,
    logger: capturingLogger(logs, 'debug'),
    simEnv: async (_sim, dir) => {
      const file = join(dir, 'web-identity-token');
      if (tokenFileContent !== undefined) await writeFile(file, tokenFileContent);
      return {
        // The stack gives every provider a key; a Bedrock API key would win over signing.
        ROUTER_PROVIDER_BEDROCK_WI_API_KEY: '',
        AWS_ROLE_ARN: ROLE,
        AWS_WEB_IDENTITY_TOKEN_FILE: file,
        AWS_ENDPOINT_URL_STS: meta.url,
        AWS_REGION: 'us-east-1',
        ...extraEnv,
      };
    },
  });
}

/** A gateway whose only cloud credentials are the metadata services (an EC2 instance, a GCE VM). */
function metadataStack(logs: LogLine[]): Promise<Stack> {
  return startStack({
    providers: { 'bedrock-wi': PROVIDER, 'vertex-md': GOOGLE_PROVIDER },
    providerFiles: [join(ROOT, 'test/fixtures/credentials/channel-recorder-hook.ts')],
    baseUrls: { 'bedrock-wi': upstreamUrl, 'vertex-md': upstreamUrl },
    modelsYaml: MODELS,
    logger: capturingLogger(logs, 'debug'),
    env: {
      ROUTER_PROVIDER_BEDROCK_WI_API_KEY: '',
      ROUTER_PROVIDER_VERTEX_MD_API_KEY: '',
      AWS_EC2_METADATA_SERVICE_ENDPOINT: meta.url,
      AWS_REGION: 'us-east-1',
      GCE_METADATA_HOST: new URL(meta.url).host,
      GOOGLE_CLOUD_PROJECT: 'proj-md',
      // No gcloud user credentials of the machine running the tests.
      CLOUDSDK_CONFIG: join(ROOT, 'test/fixtures/credentials'),
    },
  });
}

const message = { model: 'claude-wi', max_tokens: 32, messages: [{ role: 'user', content: 'hello' }] };

/** What must never appear in a log line or a reply: the token file's content and all issued secrets. */
function assertNoSecret(text: string): void {
  assert.equal(text.includes(WEB_TOKEN), false, 'the web identity token leaked');
  for (const secret of meta.issuedSecrets())
    assert.equal(text.includes(secret), false, 'an issued secret leaked');
}

describe('with a web identity the role trusts', () => {
  let stack: Stack;
  let receiver: OtlpReceiver;
  const logs: LogLine[] = [];
  const bodies: string[] = [];
  before(async () => {
    meta.lifetimeS = 2;
    receiver = await startOtlpReceiver();
    stack = await stackWith(`${WEB_TOKEN}\n`, logs, 'limits: { upstream_connect_timeout_ms: 1500 }', {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_BSP_SCHEDULE_DELAY: '20',
    });
  });
  after(async () => {
    await stack.close();
    await receiver.close();
  });

  test('a Messages request is signed with the role credentials STS issued; the channel is aws-web-identity', async () => {
    const stsBefore = meta.stats.sts;
    const res = await postJson(`${stack.url}/v1/messages`, message);
    bodies.push(res.text);
    assert.equal(res.status, 200, res.text);
    assert.equal((res.json as { content: { text: string }[] }).content[0]!.text, 'assumed and signed');
    assert.equal(meta.stats.sts - stsBefore, 1);
    // onComplete runs after the reply's last byte.
    await waitUntil(() => recordedChannels().length > 0, 'the channel recorded');
    assert.deepEqual(recordedChannels(), ['aws-web-identity']);
  });

  test('requests keep succeeding across the expiry of short-lived credentials', async () => {
    const stsBefore = meta.stats.sts;
    const refusedBefore = refusals.length;
    const deadline = Date.now() + 15_000;
    let n = 0;
    // Until the credentials were renewed twice (each lives 2 s), however long the machine takes.
    while (meta.stats.sts - stsBefore < 2 && Date.now() < deadline) {
      const res = await postJson(`${stack.url}/v1/messages`, message);
      bodies.push(res.text);
      assert.equal(res.status, 200, `request ${n}: ${res.text}`);
      n++;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.ok(
      meta.stats.sts - stsBefore >= 2,
      `renewed (${meta.stats.sts - stsBefore} times in ${n} requests)`,
    );
    assert.equal(refusals.length, refusedBefore, 'the upstream never saw expired credentials');
  });

  test('STS hanging: 502 upstream_unreachable once the held credentials expire; another provider is not held up', async () => {
    // The held credentials live 2 s; from now on STS answers nothing.
    meta.delay('sts', 60_000);
    const deadline = Date.now() + 15_000;
    let res = await postJson(`${stack.url}/v1/messages`, message);
    while (res.status === 200 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      res = await postJson(`${stack.url}/v1/messages`, message);
    }
    bodies.push(res.text);
    assert.equal(res.status, 502, res.text);
    assert.match(res.text, /upstream_unreachable/);
    assert.match(res.text, /bedrock-wi/);
    // While a request to this provider waits out its connect timeout, one to another provider is served.
    const finished: string[] = [];
    const cloud = postJson(`${stack.url}/v1/messages`, message).then((r) => {
      finished.push('bedrock-wi');
      return r;
    });
    const other = await postJson(
      `${stack.url}/v1/chat/completions`,
      { model: 'gpt-5.4-mini', messages: [{ role: 'user', content: 'meanwhile' }] },
      { 'x-router-provider': 'openai' },
    );
    finished.push('openai');
    assert.equal(other.status, 200, other.text);
    const again = await cloud;
    bodies.push(again.text);
    assert.equal(again.status, 502);
    assert.deepEqual(finished, ['openai', 'bedrock-wi']);
    meta.delay('sts', 0);
    const line = logs.find((l) =>
      String(l.msg).includes("the token endpoint of provider 'bedrock-wi' is unreachable"),
    );
    assert.ok(line, 'the log names the unreachable endpoint');
    assert.match(String(line.msg), /check that this host reaches STS at http:\/\/127\.0\.0\.1/);
  });

  test('no credential in any log line, reply or exported span', async () => {
    await receiver.waitFor((spans) =>
      spans.some((sp) => sp.attributes['gen_ai.provider.name'] === 'bedrock-wi'),
    );
    assertNoSecret(JSON.stringify(logs));
    assertNoSecret(bodies.join('\n'));
    assertNoSecret(receiver.exports.map((e) => e.body.toString('utf8')).join('\n'));
  });
});

describe('with a web identity token STS refuses', () => {
  let stack: Stack;
  const logs: LogLine[] = [];
  before(async () => {
    stack = await stackWith('not-the-trusted-token', logs);
  });
  after(() => stack.close());

  test('502 upstream_auth_failed naming the provider, asked once; the log names the role and the file', async () => {
    const refusedBefore = meta.stats.refused;
    const bodies: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await postJson(`${stack.url}/v1/messages`, message);
      bodies.push(res.text);
      assert.equal(res.status, 502, res.text);
      const err = (res.json as { error: { type: string; message: string } }).error;
      assert.match(JSON.stringify(res.json), /upstream_auth_failed/);
      assert.match(err.message, /'bedrock-wi'/);
    }
    assert.equal(meta.stats.refused - refusedBefore, 1, 'the refused grant is not asked again for 30 s');
    const line = logs.find((l) => String(l.msg).includes("refused provider 'bedrock-wi''s credentials"));
    assert.ok(line, JSON.stringify(logs.map((l) => l.msg)));
    assert.match(String(line.msg), /check the role arn:aws:iam::123456789012:role\/router-gateway/);
    assert.match(String(line.msg), /web-identity-token/);
    const text = JSON.stringify(logs) + bodies.join('\n');
    assert.equal(text.includes('not-the-trusted-token'), false);
    assertNoSecret(text);
  });
});

describe('with a token file that cannot be read', () => {
  let stack: Stack;
  const logs: LogLine[] = [];
  before(async () => {
    stack = await stackWith(undefined, logs);
  });
  after(() => stack.close());

  test('router -t names the file; the provider is not offered', async () => {
    const warnings: string[] = [];
    const problems = await checkConfig(join(stack.dir, 'router.yaml'), { env: stack.env, warnings });
    assert.deepEqual(problems, []);
    const line = warnings.find((w) => w.includes("provider 'bedrock-wi'"));
    assert.ok(line, warnings.join('\n'));
    assert.match(
      line,
      /cannot read the web identity token file .*web-identity-token \(ENOENT\); the provider is not offered/,
    );
    const res = await postJson(`${stack.url}/v1/messages`, message, { 'x-router-provider': 'bedrock-wi' });
    assert.equal(res.status, 400, res.text);
    assert.match(res.text, /provider_not_offered/);
  });
});

describe('on a cloud host: the instance metadata service and the Google metadata server', () => {
  let stack: Stack;
  const logs: LogLine[] = [];
  const saved = { aws: process.env.AWS_EC2_METADATA_SERVICE_ENDPOINT, gce: process.env.GCE_METADATA_HOST };
  before(async () => {
    meta.lifetimeS = 3600;
    // The libraries read these addresses from the process's environment only.
    process.env.AWS_EC2_METADATA_SERVICE_ENDPOINT = meta.url;
    process.env.GCE_METADATA_HOST = new URL(meta.url).host;
    stack = await metadataStack(logs);
  });
  after(async () => {
    await stack.close();
    for (const [name, value] of [
      ['AWS_EC2_METADATA_SERVICE_ENDPOINT', saved.aws],
      ['GCE_METADATA_HOST', saved.gce],
    ] as const) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  });

  test('Bedrock signed with the instance role (IMDSv2), channel aws-instance', async () => {
    const sessions = meta.stats.imdsSessions;
    const before = recordedChannels().length;
    const res = await postJson(`${stack.url}/v1/messages`, message);
    assert.equal(res.status, 200, res.text);
    assert.ok(meta.stats.imdsSessions > sessions, 'an IMDSv2 session token was asked for');
    await waitUntil(() => recordedChannels().length > before, 'the channel recorded');
    assert.equal(recordedChannels().at(-1), 'aws-instance');
  });

  test("Vertex with the metadata server's token, channel google-metadata, project from GOOGLE_CLOUD_PROJECT", async () => {
    const before = recordedChannels().length;
    const res = await postJson(`${stack.url}/v1/chat/completions`, {
      model: 'gemini-md',
      messages: [{ role: 'user', content: 'hi' }],
    });
    assert.equal(res.status, 200, res.text);
    assert.match(res.text, /from the metadata token/);
    await waitUntil(() => recordedChannels().length > before, 'the channel recorded');
    assert.equal(recordedChannels().at(-1), 'google-metadata');
    assertNoSecret(JSON.stringify(logs));
  });
});
