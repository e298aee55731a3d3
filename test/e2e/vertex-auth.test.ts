// Vertex AI's credentials end to end: the gateway mints access tokens from a service account key file
// at the simulator's token endpoint, which issues short-lived tokens and refuses expired ones. Requests
// keep succeeding while tokens expire and are renewed under them; a key the token endpoint does not know
// is 502 upstream_auth_failed naming the provider in each client's shape, asked once; a token the
// upstream stops accepting is the same error.

import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import { ApiError, GoogleGenAI } from '@google/genai';
import OpenAI from 'openai';
import { checkConfig } from '../../proxy/gateway.ts';
import { capturingLogger, type LogLine } from '../support/billing-stack.ts';
import { ACCESS_KEY, type Stack, startStack } from '../support/stack.ts';

const MODELS_YAML = `models:
  "claude-*": { providers: [vertex] }
  "gemini-*": { providers: [vertex] }
`;
const VERTEX_PATH = /^\/v1\/projects\/sim-project\/locations\/us-east5\/publishers\//;

function vertexStack(opts: { trusted: boolean; tokenLifetimeS?: number; logs?: LogLine[] }): Promise<Stack> {
  return startStack({
    modelsYaml: MODELS_YAML,
    sim: opts.tokenLifetimeS === undefined ? {} : { tokenLifetimeS: opts.tokenLifetimeS },
    ...(opts.logs === undefined ? {} : { logger: capturingLogger(opts.logs, 'info') }),
    simEnv: async (sim, dir) => {
      const file = join(dir, 'vertex-sa.json');
      if (opts.trusted) await sim.auth.writeServiceAccountFile(file, { project: 'sim-project' });
      else {
        const key = sim.auth.serviceAccountKey({ project: 'sim-project', name: 'stranger', trusted: false });
        await writeFile(file, JSON.stringify(key), { mode: 0o600 });
      }
      return {
        GOOGLE_APPLICATION_CREDENTIALS: file,
        ROUTER_PROVIDER_VERTEX_LOCATION: 'us-east5',
        ROUTER_PROVIDER_VERTEX_BASE_URL: sim.url,
      };
    },
  });
}

describe('short-lived access tokens', () => {
  let stack: Stack;
  before(async () => {
    stack = await vertexStack({ trusted: true, tokenLifetimeS: 2 });
  });
  after(() => stack.close());

  test('requests keep succeeding while tokens expire and are renewed under them', async () => {
    const client = new GoogleGenAI({ apiKey: ACCESS_KEY, httpOptions: { baseUrl: stack.url } });
    const claude = new Anthropic({ apiKey: ACCESS_KEY, baseURL: stack.url, maxRetries: 0 });
    // The upstream holds each reply 40 ms, which paces the loop; the gateway renews a token halfway
    // through its 2 s life, so the loop ends once the first two tokens have expired (fourth grant).
    let served = 0;
    while (stack.sim.auth.stats.google < 4) {
      assert.ok(served < 500, 'tokens were renewed');
      if (served % 2 === 0) {
        const r = await client.models.generateContent({
          model: 'gemini-2.5-flash-latency-40',
          contents: `n${served}`,
        });
        assert.match(r.text ?? '', new RegExp(`^Echo: n${served}\\.`));
      } else {
        const m = await claude.messages.create({
          model: 'claude-sonnet-5-latency-40',
          max_tokens: 50,
          messages: [{ role: 'user', content: `n${served}` }],
        });
        assert.equal(m.type, 'message');
      }
      served++;
    }
    const tokens = stack.sim.requests
      .filter((r) => VERTEX_PATH.test(r.path))
      .map((r) => r.headers.authorization ?? '');
    const distinct = [...new Set(tokens)];
    assert.ok(distinct.length >= 3, `${distinct.length} tokens used over ${served} requests`);
    assert.equal(stack.sim.auth.stats.refused, 0);
    // The first token is past its life now: the upstream refuses it, as it would have refused a request.
    const probe = await fetch(
      `${stack.sim.url}/v1/projects/sim-project/locations/us-east5/publishers/google/models/gemini-2.5-flash:generateContent`,
      {
        method: 'POST',
        headers: { authorization: distinct[0]!, 'content-type': 'application/json' },
        body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'late' }] }] }),
      },
    );
    assert.equal(probe.status, 401);
  });

  test('a token the upstream stops accepting: 502 upstream_auth_failed naming the provider', async () => {
    stack.sim.auth.expireTokens();
    const client = new OpenAI({ apiKey: ACCESS_KEY, baseURL: `${stack.url}/v1`, maxRetries: 0 });
    await assert.rejects(
      client.chat.completions.create({
        model: 'gemini-2.5-flash',
        messages: [{ role: 'user', content: 'hi' }],
      }),
      (err: unknown) =>
        err instanceof OpenAI.APIError &&
        err.status === 502 &&
        err.code === 'upstream_auth_failed' &&
        err.message.includes("'vertex'"),
    );
  });
});

test('router -t names a missing location and a missing key file; the provider is then not offered', async () => {
  const stack = await vertexStack({ trusted: true });
  try {
    const env: Record<string, string> = { ...stack.env };
    delete env.ROUTER_PROVIDER_VERTEX_LOCATION;
    env.GOOGLE_APPLICATION_CREDENTIALS = join(stack.dir, 'missing-sa.json');
    const warnings: string[] = [];
    assert.deepEqual(await checkConfig(join(stack.dir, 'router.yaml'), { env, warnings }), []);
    const vertex = warnings.filter((w) => w.includes("provider 'vertex'")).join('\n');
    assert.match(vertex, /set ROUTER_PROVIDER_VERTEX_LOCATION/);
    assert.match(vertex, /cannot read the service account file .*missing-sa\.json/);
  } finally {
    await stack.close();
  }
});

describe('a service account key the token endpoint does not know', () => {
  let stack: Stack;
  const logs: LogLine[] = [];
  before(async () => {
    stack = await vertexStack({ trusted: false, logs });
  });
  after(() => stack.close());

  test("502 upstream_auth_failed naming the provider in each client's shape; the grant asked once", async () => {
    const expectFailure = async (call: Promise<unknown>, check: (err: unknown) => boolean) => {
      const err = await call.then(
        () => assert.fail('succeeded'),
        (e: unknown) => e,
      );
      assert.ok(check(err), String(err));
      assert.match(String((err as Error).message), /'vertex'/);
    };
    const openai = new OpenAI({ apiKey: ACCESS_KEY, baseURL: `${stack.url}/v1`, maxRetries: 0 });
    const isOpenai = (err: unknown) =>
      err instanceof OpenAI.APIError && err.status === 502 && err.code === 'upstream_auth_failed';
    await expectFailure(
      openai.chat.completions.create({
        model: 'claude-sonnet-5',
        messages: [{ role: 'user', content: 'hi' }],
      }),
      isOpenai,
    );
    await expectFailure(openai.responses.create({ model: 'gemini-2.5-flash', input: 'hi' }), isOpenai);
    const anthropic = new Anthropic({ apiKey: ACCESS_KEY, baseURL: stack.url, maxRetries: 0 });
    await expectFailure(
      anthropic.messages.create({
        model: 'claude-sonnet-5',
        max_tokens: 5,
        messages: [{ role: 'user', content: 'hi' }],
      }),
      (err) =>
        err instanceof Anthropic.APIError &&
        err.status === 502 &&
        (err.error as { error?: { code?: string } }).error?.code === 'upstream_auth_failed',
    );
    const genai = new GoogleGenAI({ apiKey: ACCESS_KEY, httpOptions: { baseUrl: stack.url } });
    await expectFailure(
      genai.models.generateContent({ model: 'gemini-2.5-flash', contents: 'hi' }),
      (err) =>
        err instanceof ApiError &&
        err.status === 502 &&
        (JSON.parse(err.message) as { error: { details: { reason: string }[] } }).error.details[0]?.reason ===
          'upstream_auth_failed',
    );
    assert.equal(stack.sim.auth.stats.refused, 1, 'a refused grant is not asked again at once');
    assert.equal(stack.sim.auth.stats.google, 0);
    assert.equal(
      stack.sim.requests.some((r) => VERTEX_PATH.test(r.path)),
      false,
      'nothing reached Vertex',
    );
    const refusal = logs.find((l) => String(l.msg).includes('refused'));
    assert.ok(refusal, 'the operator is told');
    assert.match(String(refusal.msg), /check the service account stranger@/);
    assert.doesNotMatch(JSON.stringify(logs), /PRIVATE KEY|ya29\./);
  });
});
