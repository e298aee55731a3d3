// Azure OpenAI with Microsoft Entra ID, end to end: the official openai SDK through the gateway to an
// Azure-shaped upstream that accepts only bearer tokens its token endpoint issued (both real servers on
// local ports). Requests keep working across the expiry of a short-lived token; a wrong client secret is
// 502 upstream_auth_failed naming the provider; a provider whose service account file cannot be read is
// reported by `router -t` and not offered. Workload identity: the federated token file's content is the
// client assertion, and a file that cannot be read keeps the provider from being offered.

import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { checkConfig } from '../../proxy/gateway.ts';
import { capturingLogger, type LogLine } from '../support/billing-stack.ts';
import { ACCESS_KEY, postJson, type Stack, startStack } from '../support/stack.ts';
import { startTokenEndpoint, type TokenEndpoint } from '../support/token-endpoint.ts';

const SECRET = 'entra-secret-e2e-never-logged';
const FEDERATED = 'eyJhbGciOiJSUzI1NiJ9.federated-e2e-never-logged.sig';
const MODELS = `models:
  azure-gpt:
    providers:
      - { provider: azure-openai, model: my-deploy }
`;
const GOOGLE_PROVIDER = `syntax "next-router/0.1";
provider "vertex-test" {
  defaults {
    upstream_config { base_url = "http://127.0.0.1:1"; }
    auth { auth_google; }
  }
  match api = "chat.completions" {
    upstream { set_path template("/v1/projects/\${provider.project}/x"); }
  }
}
`;

interface AzureUpstream {
  readonly url: string;
  readonly seen: { path: string; authorization: string | undefined; apiKey: string | undefined }[];
  close(): Promise<void>;
}

/** An Azure OpenAI deployment that takes only tokens `tokens` issued and still considers valid. */
async function startAzure(tokens: TokenEndpoint): Promise<AzureUpstream> {
  const seen: AzureUpstream['seen'] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const auth = req.headers.authorization;
      seen.push({
        path: req.url ?? '',
        authorization: auth,
        apiKey: req.headers['api-key'] as string | undefined,
      });
      const url = new URL(req.url ?? '/', 'http://x');
      const token = auth?.startsWith('Bearer ') ? auth.slice(7) : '';
      res.setHeader('content-type', 'application/json');
      if (!tokens.isValid(token)) {
        res.statusCode = 401;
        res.end(
          JSON.stringify({ error: { code: '401', message: 'Access token is missing, invalid or expired' } }),
        );
        return;
      }
      if (
        url.pathname !== '/openai/deployments/my-deploy/chat/completions' ||
        !url.searchParams.has('api-version')
      ) {
        res.statusCode = 404;
        res.end(JSON.stringify({ error: { code: 'DeploymentNotFound', message: 'no such deployment' } }));
        return;
      }
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      const text = `Azure says: ${body.messages.at(-1).content}`;
      const usage = { prompt_tokens: 5, completion_tokens: 4, total_tokens: 9 };
      if (body.stream) {
        res.setHeader('content-type', 'text/event-stream');
        const base = { id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'my-deploy' };
        for (const piece of text.split(' ')) {
          res.write(
            `data: ${JSON.stringify({ ...base, choices: [{ index: 0, delta: { content: `${piece} ` } }] })}\n\n`,
          );
        }
        res.write(
          `data: ${JSON.stringify({ ...base, choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })}\n\n`,
        );
        res.write(`data: ${JSON.stringify({ ...base, choices: [], usage })}\n\n`);
        res.end('data: [DONE]\n\n');
        return;
      }
      res.end(
        JSON.stringify({
          id: 'c1',
          object: 'chat.completion',
          created: 1,
          model: 'my-deploy',
          choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }],
          usage,
        }),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

let tokens: TokenEndpoint;
let azure: AzureUpstream;
before(async () => {
  tokens = await startTokenEndpoint();
  tokens.check = (g) =>
    g.form.get('client_id') === 'app-1' &&
    (g.form.get('client_secret') === SECRET ||
      (g.form.get('client_assertion') === FEDERATED &&
        g.form.get('client_assertion_type') === 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer'))
      ? undefined
      : 'invalid_client';
  azure = await startAzure(tokens);
});
after(async () => {
  await azure.close();
  await tokens.close();
});

function stackWith(secret: string, logs: LogLine[]): Promise<Stack> {
  return startStack({
    modelsYaml: MODELS,
    baseUrls: { 'azure-openai': azure.url },
    providers: { 'vertex-test': GOOGLE_PROVIDER },
    env: {
      AZURE_TENANT_ID: 'tenant-1',
      AZURE_CLIENT_ID: 'app-1',
      AZURE_CLIENT_SECRET: secret,
      AZURE_AUTHORITY_HOST: tokens.url,
      GOOGLE_APPLICATION_CREDENTIALS: '/nonexistent/sa.json',
    },
    logger: capturingLogger(logs, 'debug'),
  });
}

describe('with Entra credentials configured', () => {
  let stack: Stack;
  let client: OpenAI;
  const logs: LogLine[] = [];
  before(async () => {
    tokens.expiresIn = 1;
    stack = await stackWith(SECRET, logs);
    client = new OpenAI({ apiKey: ACCESS_KEY, baseURL: `${stack.url}/v1`, maxRetries: 0 });
  });
  after(() => stack.close());

  test('chat: the upstream gets an Entra bearer token, never the api-key', async () => {
    const res = await client.chat.completions.create({
      model: 'azure-gpt',
      messages: [{ role: 'user', content: 'hello azure' }],
    });
    assert.equal(res.choices[0]!.message.content, 'Azure says: hello azure');
    assert.equal(res.usage?.total_tokens, 9);
    const last = azure.seen.at(-1)!;
    assert.match(last.authorization ?? '', /^Bearer tok-\d+$/);
    assert.equal(last.apiKey, undefined);
    assert.equal(tokens.grants.at(-1)!.path, '/tenant-1/oauth2/v2.0/token');
  });

  test('stream: deltas arrive, authorized the same way', async () => {
    const stream = await client.chat.completions.create({
      model: 'azure-gpt',
      messages: [{ role: 'user', content: 'stream please' }],
      stream: true,
    });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    assert.equal(text.trim(), 'Azure says: stream please');
  });

  test('requests keep succeeding across the expiry of short-lived tokens', async () => {
    const grantsBefore = tokens.grants.length;
    for (let i = 0; i < 10; i++) {
      const res = await client.chat.completions.create({
        model: 'azure-gpt',
        messages: [{ role: 'user', content: `n${i}` }],
      });
      assert.equal(res.choices[0]!.message.content, `Azure says: n${i}`);
      await new Promise((r) => setTimeout(r, 300));
    }
    assert.ok(tokens.grants.length - grantsBefore >= 2, 'tokens were renewed');
    assert.ok(azure.seen.every((s) => s.authorization?.startsWith('Bearer tok-')));
    const text = JSON.stringify(logs);
    assert.equal(text.includes(SECRET), false, 'the client secret is never logged');
    assert.equal(/tok-\d+/.test(text), false, 'nor a token');
  });

  test('a provider whose service account file cannot be read is not offered: 400 provider_not_offered', async () => {
    const res = await postJson(
      `${stack.url}/v1/chat/completions`,
      { model: 'x', messages: [{ role: 'user', content: 'hi' }] },
      { 'x-router-provider': 'vertex-test' },
    );
    assert.equal(res.status, 400);
    assert.equal((res.json as { error: { code: string } }).error.code, 'provider_not_offered');
  });

  test('router -t names the unreadable file', async () => {
    const warnings: string[] = [];
    const problems = await checkConfig(join(stack.dir, 'router.yaml'), { env: stack.env, warnings });
    assert.deepEqual(problems, []);
    const line = warnings.find((w) => w.includes("provider 'vertex-test'"));
    assert.ok(line, warnings.join('\n'));
    assert.match(
      line,
      /cannot read the service account file \/nonexistent\/sa\.json \(ENOENT\); the provider is not offered/,
    );
    assert.equal(
      warnings.some((w) => w.includes("'azure-openai'")),
      false,
    );
  });
});

describe('with a wrong client secret', () => {
  let stack: Stack;
  const logs: LogLine[] = [];
  before(async () => {
    tokens.expiresIn = 3600;
    stack = await stackWith('wrong-secret-value', logs);
  });
  after(() => stack.close());

  test('502 upstream_auth_failed naming the provider; the log says what to check; asked once', async () => {
    const client = new OpenAI({ apiKey: ACCESS_KEY, baseURL: `${stack.url}/v1`, maxRetries: 0 });
    const grantsBefore = tokens.grants.length;
    const seenBefore = azure.seen.length;
    for (let i = 0; i < 3; i++) {
      await assert.rejects(
        client.chat.completions.create({ model: 'azure-gpt', messages: [{ role: 'user', content: 'hi' }] }),
        (err: unknown) =>
          err instanceof OpenAI.APIError &&
          err.status === 502 &&
          (err.error as { code?: string }).code === 'upstream_auth_failed' &&
          err.message.includes("'azure-openai'") &&
          !err.message.includes('wrong-secret-value'),
      );
    }
    assert.equal(tokens.grants.length - grantsBefore, 1, 'the refused grant is not asked again');
    assert.equal(azure.seen.length, seenBefore, 'nothing reached the upstream');
    const refusal = logs.find((l) => String(l.msg).includes('refused'));
    assert.ok(refusal);
    assert.match(String(refusal.msg), /check the Entra application app-1 of tenant tenant-1/);
    assert.equal(JSON.stringify(logs).includes('wrong-secret-value'), false);
  });
});

describe('with workload identity (AZURE_FEDERATED_TOKEN_FILE, no secret)', () => {
  let stack: Stack;
  const logs: LogLine[] = [];
  before(async () => {
    tokens.expiresIn = 3600;
    stack = await startStack({
      modelsYaml: MODELS,
      baseUrls: { 'azure-openai': azure.url },
      env: { AZURE_AUTHORITY_HOST: tokens.url },
      logger: capturingLogger(logs, 'debug'),
      simEnv: async (_sim, dir) => {
        const file = join(dir, 'azure-identity-token');
        await writeFile(file, `${FEDERATED}\n`);
        return { AZURE_TENANT_ID: 'tenant-1', AZURE_CLIENT_ID: 'app-1', AZURE_FEDERATED_TOKEN_FILE: file };
      },
    });
  });
  after(() => stack.close());

  test('the federated token is the client assertion; the upstream gets an Entra token', async () => {
    const client = new OpenAI({ apiKey: ACCESS_KEY, baseURL: `${stack.url}/v1`, maxRetries: 0 });
    const res = await client.chat.completions.create({
      model: 'azure-gpt',
      messages: [{ role: 'user', content: 'federated' }],
    });
    assert.equal(res.choices[0]!.message.content, 'Azure says: federated');
    const grant = tokens.grants.at(-1)!;
    assert.equal(grant.form.get('client_assertion'), FEDERATED);
    assert.equal(grant.form.get('client_secret'), null);
    assert.match(azure.seen.at(-1)!.authorization ?? '', /^Bearer tok-\d+$/);
    assert.equal(JSON.stringify(logs).includes(FEDERATED), false, 'the federated token is never logged');
  });

  test('a token file that cannot be read: router -t names it and the provider is not offered', async () => {
    const env = { ...stack.env, AZURE_FEDERATED_TOKEN_FILE: '/nonexistent/azure-identity-token' };
    const warnings: string[] = [];
    assert.deepEqual(await checkConfig(join(stack.dir, 'router.yaml'), { env, warnings }), []);
    assert.ok(
      warnings.some((w) =>
        /provider 'azure-openai': cannot read the federated token file \/nonexistent\/azure-identity-token \(ENOENT\); the provider is not offered/.test(
          w,
        ),
      ),
      warnings.join('\n'),
    );
  });
});
