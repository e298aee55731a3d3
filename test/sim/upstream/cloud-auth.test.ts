// Vertex AI routes and the token endpoints: Google's JWT-bearer grant (through google-auth-library with a
// service-account file whose token_uri is the simulator) and Entra's client credentials for Azure OpenAI.

import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { gaxios, JWT } from 'google-auth-library';
import { startUpstreamSim, type UpstreamSim } from '../../../sim/upstream/server.ts';

const ENTRA = { tenantId: 'tenant-1', clientId: 'client-1', clientSecret: 'entra-secret' };
const SCOPE = 'https://www.googleapis.com/auth/cloud-platform';
// biome-ignore lint/suspicious/noExplicitAny: the simulator's JSON answers, read field by field
type Json = Record<string, any>;

let sim: UpstreamSim;
let dir: string;
let keyFile: string;

/** google-auth-library 10 posts every grant to Google's fixed URL; send it to the key file's token_uri. */
function jwtClient(key: { client_email: string; private_key: string; token_uri: string }): JWT {
  const transporter = new gaxios.Gaxios();
  transporter.interceptors.request.add({
    resolved: async (config) => {
      if (String(config.url) === 'https://oauth2.googleapis.com/token') config.url = new URL(key.token_uri);
      return config;
    },
  });
  return new JWT({ email: key.client_email, key: key.private_key, scopes: [SCOPE], transporter });
}

function vertex(publisher: string, model: string, method: string, query = ''): string {
  return `${sim.url}/v1/projects/sim-project/locations/us-east5/publishers/${publisher}/models/${model}:${method}${query}`;
}

async function post(
  url: string,
  token: string | undefined,
  body: unknown,
  headers: Record<string, string> = {},
) {
  return fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
      ...headers,
    },
    body: JSON.stringify(body),
  });
}

async function grant(): Promise<string> {
  const key = await import(keyFile, { with: { type: 'json' } }).then((m) => m.default);
  const { token } = await jwtClient(key).getAccessToken();
  assert.ok(token);
  return token;
}

before(async () => {
  sim = await startUpstreamSim({ entra: ENTRA });
  dir = await mkdtemp(join(tmpdir(), 'sim-sa-'));
  keyFile = join(dir, 'sa.json');
  await sim.auth.writeServiceAccountFile(keyFile, { project: 'sim-project' });
});

after(async () => {
  await sim.close();
  await rm(dir, { recursive: true, force: true });
});

describe('Google service-account grant', () => {
  test('google-auth-library gets a token from the key file; Vertex accepts it', async () => {
    const token = await grant();
    assert.match(token, /^ya29\./);
    assert.equal(sim.auth.stats.google, 1);
    const form = new URLSearchParams(sim.requests.find((r) => r.path === '/token')!.body.toString());
    assert.equal(form.get('grant_type'), 'urn:ietf:params:oauth:grant-type:jwt-bearer');
    const res = await post(vertex('google', 'gemini-2.5-flash', 'generateContent'), token, {
      contents: [{ role: 'user', parts: [{ text: 'Hello Vertex' }] }],
    });
    assert.equal(res.status, 200);
    const body = (await res.json()) as Json;
    assert.match(body.candidates[0].content.parts[0].text, /^Echo: Hello Vertex\./);
    const counted = (await (
      await post(vertex('google', 'gemini-2.5-flash', 'countTokens'), token, {
        contents: [{ role: 'user', parts: [{ text: 'Hello Vertex' }] }],
      })
    ).json()) as Json;
    assert.equal(counted.totalTokens, body.usageMetadata.promptTokenCount);
    // Vertex's countTokens has no generateContentRequest wrapper (the Gemini API's form).
    const wrapped = await post(vertex('google', 'gemini-2.5-flash', 'countTokens'), token, {
      generateContentRequest: { contents: [{ role: 'user', parts: [{ text: 'Hello Vertex' }] }] },
    });
    assert.equal(wrapped.status, 400);
    assert.match(((await wrapped.json()) as Json).error.message, /Unknown name "generateContentRequest"/);
  });

  test('an unknown account, a forged signature, a wrong grant type: 400 as Google answers', async () => {
    const stranger = sim.auth.serviceAccountKey({ name: 'stranger', trusted: false });
    await assert.rejects(jwtClient(stranger).getAccessToken(), /invalid_grant/);
    const known = sim.auth.serviceAccountKey();
    const forged = { ...known, private_key: stranger.private_key };
    await assert.rejects(jwtClient(forged).getAccessToken(), /invalid_grant: Invalid JWT Signature/);
    const res = await fetch(`${sim.url}/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'grant_type=client_credentials',
    });
    assert.equal(res.status, 400);
    assert.equal(((await res.json()) as Json).error, 'unsupported_grant_type');
  });

  test('no token, a token not issued here, an expired one: 401 UNAUTHENTICATED', async () => {
    const url = vertex('google', 'gemini-2.5-flash', 'generateContent');
    const body = { contents: [{ role: 'user', parts: [{ text: 'hi' }] }] };
    for (const token of [undefined, 'ya29.not-ours']) {
      const res = await post(url, token, body);
      assert.equal(res.status, 401);
      assert.equal(((await res.json()) as Json).error.status, 'UNAUTHENTICATED');
    }
    sim.auth.tokenLifetimeS = 1;
    try {
      const short = await grant();
      assert.equal((await post(url, short, body)).status, 200);
      await new Promise((r) => setTimeout(r, 1100));
      assert.equal((await post(url, short, body)).status, 401);
      assert.equal((await post(url, await grant(), body)).status, 200);
    } finally {
      sim.auth.tokenLifetimeS = 3600;
    }
    const token = await grant();
    sim.auth.expireTokens();
    assert.equal((await post(url, token, body)).status, 401);
  });
});

describe('Vertex publishers', () => {
  test('Gemini streamGenerateContent?alt=sse ends with the usage', async () => {
    const token = await grant();
    const res = await post(vertex('google', 'gemini-2.5-pro', 'streamGenerateContent', '?alt=sse'), token, {
      contents: [{ role: 'user', parts: [{ text: 'Stream on Vertex' }] }],
    });
    assert.equal(res.status, 200);
    const events = (await res.text())
      .split('\r\n\r\n')
      .filter((e) => e.startsWith('data: '))
      .map((e) => JSON.parse(e.slice(6)) as Json);
    assert.ok(events.at(-1)!.usageMetadata.candidatesTokenCount > 0);
  });

  test('Claude rawPredict, streamRawPredict and count-tokens:rawPredict agree on input tokens', async () => {
    const token = await grant();
    const messages = [{ role: 'user', content: 'Hello Claude on Vertex' }];
    const base = { anthropic_version: 'vertex-2023-10-16', max_tokens: 100, messages };
    const res = await post(vertex('anthropic', 'claude-sonnet-4-5@20250929', 'rawPredict'), token, base);
    assert.equal(res.status, 200);
    const msg = (await res.json()) as Json;
    assert.equal(msg.model, 'claude-sonnet-4-5-20250929');
    assert.match(msg.content[0].text, /^Echo: Hello Claude on Vertex\./);
    const stream = await post(vertex('anthropic', 'claude-sonnet-4-5@20250929', 'streamRawPredict'), token, {
      ...base,
      stream: true,
    });
    assert.match(stream.headers.get('content-type') ?? '', /^text\/event-stream/);
    const text = await stream.text();
    assert.ok(text.includes('event: message_stop'));
    const start = JSON.parse(
      text
        .split('\n')
        .find((l) => l.includes('"message_start"'))!
        .slice(6),
    ) as Json;
    assert.equal(start.message.usage.input_tokens, msg.usage.input_tokens);
    const counted = (await (
      await post(vertex('anthropic', 'count-tokens', 'rawPredict'), token, {
        model: 'claude-sonnet-4-5@20250929',
        messages,
      })
    ).json()) as Json;
    assert.equal(counted.input_tokens, msg.usage.input_tokens);
  });

  test('Claude bodies Vertex refuses: a model field, a missing or wrong anthropic_version', async () => {
    const token = await grant();
    const url = vertex('anthropic', 'claude-sonnet-4-5@20250929', 'rawPredict');
    const messages = [{ role: 'user', content: 'x' }];
    for (const body of [
      { anthropic_version: 'vertex-2023-10-16', model: 'claude', max_tokens: 5, messages },
      { max_tokens: 5, messages },
      { anthropic_version: 'bedrock-2023-05-31', max_tokens: 5, messages },
    ]) {
      const res = await post(url, token, body);
      assert.equal(res.status, 400);
      assert.equal(((await res.json()) as Json).error.type, 'invalid_request_error');
    }
    const throttled = await post(
      url,
      token,
      { anthropic_version: 'vertex-2023-10-16', max_tokens: 5, messages },
      {
        'x-sim-fail': '429',
      },
    );
    assert.equal(throttled.status, 429);
    assert.equal(((await throttled.json()) as Json).error.status, 'RESOURCE_EXHAUSTED');
  });
});

describe('Entra client credentials and Azure OpenAI', () => {
  const tokenUrl = () => `${sim.url}/${ENTRA.tenantId}/oauth2/v2.0/token`;
  const form = (over: Record<string, string> = {}) =>
    new URLSearchParams({
      grant_type: 'client_credentials',
      client_id: ENTRA.clientId,
      client_secret: ENTRA.clientSecret,
      scope: 'https://cognitiveservices.azure.com/.default',
      ...over,
    });
  const azure = (headers: Record<string, string>) =>
    fetch(`${sim.url}/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ messages: [{ role: 'user', content: 'hi Azure' }] }),
    });

  test('a token for the right secret and scope; Azure accepts it, or api-key', async () => {
    const res = await fetch(tokenUrl(), { method: 'POST', body: form() });
    assert.equal(res.status, 200);
    const t = (await res.json()) as Json;
    assert.equal(t.token_type, 'Bearer');
    assert.equal(t.expires_in, 3600);
    assert.equal((await azure({ authorization: `Bearer ${t.access_token}` })).status, 200);
    assert.equal((await azure({ 'api-key': 'any-key' })).status, 200);
    const refused = await azure({ authorization: 'Bearer not-issued' });
    assert.equal(refused.status, 401);
    assert.equal(((await refused.json()) as Json).error.code, '401');
    const metadata = (await (
      await fetch(`${sim.url}/${ENTRA.tenantId}/v2.0/.well-known/openid-configuration`)
    ).json()) as Json;
    assert.equal(metadata.token_endpoint, tokenUrl());
  });

  test('refused grants answer as Entra does', async () => {
    const cases: [Record<string, string>, number, string][] = [
      [{ client_secret: 'wrong' }, 401, 'invalid_client'],
      [{ client_id: 'other' }, 400, 'unauthorized_client'],
      [{ scope: 'https://management.azure.com/' }, 400, 'invalid_scope'],
      [{ grant_type: 'password' }, 400, 'unsupported_grant_type'],
    ];
    for (const [over, status, error] of cases) {
      const res = await fetch(tokenUrl(), { method: 'POST', body: form(over) });
      assert.equal(res.status, status, error);
      const body = (await res.json()) as Json;
      assert.equal(body.error, error);
      assert.match(body.error_description, /^AADSTS\d+: /);
    }
    const tenant = await fetch(`${sim.url}/other-tenant/oauth2/v2.0/token`, { method: 'POST', body: form() });
    assert.equal(tenant.status, 400);
  });
});
