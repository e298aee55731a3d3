// Every bad input and failure the gateway answers itself, with its status and catalogue code, in the
// error shape of the client's wire family; and no reply of the suite ever carries an upstream key.

import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import { GoogleGenAI } from '@google/genai';
import OpenAI from 'openai';
import {
  createReplyLog,
  modelsWith,
  type ReplyLog,
  simProvider,
  UPSTREAM_KEY_RE,
} from '../support/sim-providers.ts';
import { ACCESS_KEY, MASTER_KEY, type Stack, startStack } from '../support/stack.ts';

const MAX_BODY = 1000;
const KEYS = {
  fileKey: 'ak_file_client_b_secret',
  expired: 'ak_expired_secret',
  futureExpiry: 'ak_future_expiry_secret',
  revoked: 'ak_revoked_secret',
  disabled: 'ak_disabled_secret',
} as const;

let stack: Stack;
let keysDir: string;
let log: ReplyLog;

before(async () => {
  keysDir = await mkdtemp(join(tmpdir(), 'router-keys-'));
  const keysFile = join(keysDir, 'keys.yaml');
  await writeFile(
    keysFile,
    [
      'access_keys:',
      `  - { name: client-b, value: ${KEYS.fileKey} }`,
      `  - { name: expired-key, value: ${KEYS.expired}, expires_at: "2020-01-01T00:00:00Z" }`,
      `  - { name: future-key, value: ${KEYS.futureExpiry}, expires_at: "2999-01-01T00:00:00Z" }`,
      `  - { name: revoked-key, value: ${KEYS.revoked}, status: revoked }`,
      `  - { name: disabled-key, value: ${KEYS.disabled}, status: disabled }`,
      '',
    ].join('\n'),
  );
  stack = await startStack({
    extraYaml: [
      `keys: ${keysFile}`,
      `limits: { max_body_bytes: ${MAX_BODY}, upstream_headers_timeout_ms: 300, upstream_body_timeout_ms: 300, max_retries: 0 }`,
    ].join('\n'),
    providers: { 'sim-dead': simProvider('sim-dead'), 'sim-a': simProvider('sim-a') },
    baseUrls: { 'sim-dead': 'http://127.0.0.1:1' },
    modelsYaml: modelsWith(['dead-model: { providers: [sim-dead] }']),
  });
  log = createReplyLog();
});
after(async () => {
  await stack.close();
  await rm(keysDir, { recursive: true, force: true });
});

interface Reply {
  status: number;
  headers: Headers;
  json: unknown;
  text: string;
}

/** Send through the reply log; `auth` false sends no credential. */
async function send(
  path: string,
  init: { method?: string; body?: unknown; headers?: Record<string, string>; auth?: boolean } = {},
): Promise<Reply> {
  const headers: Record<string, string> = { ...init.headers };
  if (init.auth !== false && headers.authorization === undefined)
    headers.authorization = `Bearer ${ACCESS_KEY}`;
  let body: string | undefined;
  if (init.body !== undefined) {
    headers['content-type'] ??= 'application/json';
    body = typeof init.body === 'string' ? init.body : JSON.stringify(init.body);
  }
  const res = await log.fetch(`${stack.url}${path}`, { method: init.method ?? 'POST', headers, body });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, json, text };
}

interface OpenAIError {
  message: string;
  type: string;
  code: string;
  param?: string;
}
function openaiError(r: Reply): OpenAIError {
  const err = (r.json as { error?: OpenAIError } | undefined)?.error;
  assert.ok(err, `an OpenAI-shaped error body: ${r.text}`);
  return err;
}

const CHAT = { model: 'gpt-5.4-mini', messages: [{ role: 'user' as const, content: 'hello' }] };

describe('request bodies', () => {
  test('malformed JSON -> 400 invalid_json', async () => {
    const r = await send('/v1/chat/completions', { body: '{"model": "gpt-5.4-mini", "messages": [' });
    assert.equal(r.status, 400);
    assert.equal(openaiError(r).code, 'invalid_json');
    assert.equal(openaiError(r).type, 'invalid_request_error');
  });

  test('a JSON value that is not an object -> 400 invalid_json', async () => {
    const r = await send('/v1/chat/completions', { body: '[1, 2]' });
    assert.equal(r.status, 400);
    assert.equal(openaiError(r).code, 'invalid_json');
  });

  test('malformed JSON without a key is a 401, not a 400 (nothing is learnt before authentication)', async () => {
    const r = await send('/v1/chat/completions', { body: '{oops', auth: false });
    assert.equal(r.status, 401);
    assert.equal(openaiError(r).code, 'invalid_api_key');
  });

  for (const [field, body] of [
    ['messages', { model: 'gpt-5.4-mini', messages: 'hello' }],
    ['model', { model: 5, messages: [{ role: 'user', content: 'x' }] }],
    ['stream', { ...CHAT, stream: 'yes' }],
    ['messages[0].role', { model: 'gpt-5.4-mini', messages: [{ role: 7, content: 'x' }] }],
    ['messages', { model: 'gpt-5.4-mini' }],
  ] as const) {
    test(`wrong or missing '${field}' -> 400 invalid_parameter naming the field`, async () => {
      const before = stack.sim.requests.length;
      const r = await send('/v1/chat/completions', { body });
      assert.equal(r.status, 400);
      const err = openaiError(r);
      assert.equal(err.code, 'invalid_parameter');
      assert.equal(err.param, field);
      assert.ok(err.message.includes(`'${field}'`), err.message);
      assert.equal(stack.sim.requests.length, before, 'nothing went upstream');
    });
  }

  test('a body over limits.max_body_bytes (Content-Length) -> 413', async () => {
    const r = await send('/v1/chat/completions', {
      body: { ...CHAT, messages: [{ role: 'user', content: 'x'.repeat(MAX_BODY) }] },
    });
    assert.equal(r.status, 413);
    assert.equal(openaiError(r).code, 'request_too_large');
  });

  test('a chunked body (no Content-Length) over the limit -> 413', async () => {
    const text = JSON.stringify({ ...CHAT, messages: [{ role: 'user', content: 'y'.repeat(MAX_BODY * 3) }] });
    const bytes = new TextEncoder().encode(text);
    const stream = new ReadableStream<Uint8Array>({
      start(ctrl) {
        for (let i = 0; i < bytes.length; i += 256) ctrl.enqueue(bytes.subarray(i, i + 256));
        ctrl.close();
      },
    });
    const res = await log.fetch(`${stack.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ACCESS_KEY}`, 'content-type': 'application/json' },
      body: stream,
      duplex: 'half',
    } as RequestInit);
    assert.equal(res.status, 413);
    const body = (await res.json()) as { error: { code: string } };
    assert.equal(body.error.code, 'request_too_large');
  });

  test('a body just under the limit is served', async () => {
    const r = await send('/v1/chat/completions', { body: CHAT });
    assert.equal(r.status, 200);
  });
});

describe('access keys', () => {
  test('missing key -> 401 invalid_api_key', async () => {
    const r = await send('/v1/chat/completions', { body: CHAT, auth: false });
    assert.equal(r.status, 401);
    const err = openaiError(r);
    assert.equal(err.code, 'invalid_api_key');
    assert.equal(err.type, 'authentication_error');
  });

  test('wrong key -> 401 invalid_api_key, on the model list too', async () => {
    const r = await send('/v1/chat/completions', {
      body: CHAT,
      headers: { authorization: 'Bearer ak_wrong' },
    });
    assert.equal(r.status, 401);
    assert.equal(openaiError(r).code, 'invalid_api_key');
    const list = await send('/v1/models', { method: 'GET', headers: { authorization: 'Bearer ak_wrong' } });
    assert.equal(list.status, 401);
    assert.equal(openaiError(list).code, 'invalid_api_key');
  });

  for (const [carrier, headers, query] of [
    ['Authorization: Bearer', { authorization: `Bearer ${ACCESS_KEY}` }, ''],
    ['x-api-key', { 'x-api-key': ACCESS_KEY }, ''],
    ['x-goog-api-key', { 'x-goog-api-key': ACCESS_KEY }, ''],
    ['?key=', {}, `?key=${ACCESS_KEY}`],
  ] as const) {
    test(`the right key is accepted via ${carrier} and never forwarded upstream`, async () => {
      const r = await send(`/v1/chat/completions${query}`, {
        body: CHAT,
        headers: { ...headers },
        auth: false,
      });
      assert.equal(r.status, 200, r.text);
      const up = stack.sim.requests.at(-1);
      assert.equal(up?.path, '/v1/chat/completions');
      assert.equal(up?.headers.authorization, 'Bearer sim-openai-key');
      assert.ok(!JSON.stringify(up?.headers).includes(ACCESS_KEY));
    });
  }

  test('?key= on a Gemini-native route is accepted and stripped from the upstream query', async () => {
    const r = await send(`/v1beta/models/gemini-3.8-flash:generateContent?key=${ACCESS_KEY}`, {
      body: { contents: [{ role: 'user', parts: [{ text: 'x' }] }] },
      auth: false,
    });
    assert.equal(r.status, 200, r.text);
    const up = stack.sim.requests.at(-1);
    assert.equal(up?.path, '/v1beta/models/gemini-3.8-flash:generateContent');
    assert.equal(up?.headers['x-goog-api-key'], 'sim-gemini-key');
  });

  test('a key from the keys file is accepted; one expiring in the future too', async () => {
    for (const key of [KEYS.fileKey, KEYS.futureExpiry]) {
      const r = await send('/v1/chat/completions', {
        body: CHAT,
        headers: { authorization: `Bearer ${key}` },
      });
      assert.equal(r.status, 200, r.text);
    }
  });

  for (const [label, key, reason] of [
    ['an expired', KEYS.expired, /expired/],
    ['a revoked', KEYS.revoked, /revoked/],
    ['a disabled', KEYS.disabled, /disabled/],
  ] as const) {
    test(`${label} key -> 401 invalid_api_key`, async () => {
      const r = await send('/v1/chat/completions', {
        body: CHAT,
        headers: { authorization: `Bearer ${key}` },
      });
      assert.equal(r.status, 401);
      const err = openaiError(r);
      assert.equal(err.code, 'invalid_api_key');
      assert.match(err.message, reason);
      assert.ok(!err.message.includes(key), 'the secret is not echoed');
    });
  }

  test('the master key is accepted', async () => {
    const r = await send('/v1/chat/completions', {
      body: CHAT,
      headers: { authorization: `Bearer ${MASTER_KEY}` },
    });
    assert.equal(r.status, 200, r.text);
  });
});

describe('endpoints and methods', () => {
  test('unknown endpoint -> 404 not_found', async () => {
    const r = await send('/v1/no/such/endpoint', { body: CHAT });
    assert.equal(r.status, 404);
    assert.equal(openaiError(r).code, 'not_found');
  });

  test('wrong method -> 405 with an Allow header', async () => {
    const r = await send('/v1/chat/completions', { method: 'GET' });
    assert.equal(r.status, 405);
    assert.equal(openaiError(r).code, 'method_not_allowed');
    assert.equal(r.headers.get('allow'), 'POST');
  });
});

describe('upstream failures', () => {
  test('connection refused -> 502 upstream_unreachable', async () => {
    const r = await send('/v1/chat/completions', { body: { ...CHAT, model: 'dead-model' } });
    assert.equal(r.status, 502);
    const err = openaiError(r);
    assert.equal(err.code, 'upstream_unreachable');
    assert.ok(!err.message.includes('127.0.0.1'), 'no upstream address in the message');
  });

  test('upstream hang -> 504 upstream_timeout, and the upstream request is abandoned', async () => {
    const before = stack.sim.stats.aborted;
    const r = await send('/v1/chat/completions', { body: { ...CHAT, model: 'gpt-5.4-mini-fail-hang' } });
    assert.equal(r.status, 504);
    assert.equal(openaiError(r).code, 'upstream_timeout');
    await stack.sim.waitFor((s) => s.stats.aborted === before + 1);
  });

  test('upstream resets the connection before replying -> 502 upstream_unreachable', async () => {
    const r = await send('/v1/chat/completions', { body: { ...CHAT, model: 'gpt-5.4-mini-fail-reset' } });
    assert.equal(r.status, 502);
    assert.equal(openaiError(r).code, 'upstream_unreachable');
  });

  test('a stream whose upstream hangs before its headers -> 504 JSON, not a stream', async () => {
    const r = await send('/v1/chat/completions', {
      body: { ...CHAT, model: 'gpt-5.4-mini-fail-hang', stream: true },
    });
    assert.equal(r.status, 504);
    assert.match(r.headers.get('content-type') ?? '', /json/);
    assert.equal(openaiError(r).code, 'upstream_timeout');
  });

  test('a stream that stalls longer than upstream_body_timeout_ms ends with an upstream_timeout error event', async () => {
    const client = new OpenAI({
      apiKey: ACCESS_KEY,
      baseURL: `${stack.url}/v1`,
      maxRetries: 0,
      fetch: log.fetch,
    });
    const stream = await client.chat.completions.create({
      ...CHAT,
      model: 'gpt-5.4-mini-chunks-3-delay-5000',
      messages: [{ role: 'user', content: 'stall' }],
      stream: true,
    });
    let chunks = 0;
    await assert.rejects(
      async () => {
        for await (const _ of stream) chunks++;
      },
      (err: unknown) => {
        assert.ok(err instanceof OpenAI.APIError, String(err));
        assert.equal((err.error as { code?: string } | undefined)?.code, 'upstream_timeout');
        return true;
      },
    );
    assert.ok(chunks >= 1, 'the first chunk arrived before the stall');
  });

  test('a translated upstream error keeps its meaning: Claude 429 -> OpenAI RateLimitError', async () => {
    const client = new OpenAI({
      apiKey: ACCESS_KEY,
      baseURL: `${stack.url}/v1`,
      maxRetries: 0,
      fetch: log.fetch,
    });
    await assert.rejects(
      client.chat.completions.create({ ...CHAT, model: 'claude-sonnet-5-fail-429', max_tokens: 10 }),
      OpenAI.RateLimitError,
    );
  });

  test('a translated upstream error keeps its meaning: OpenAI-compatible 429 -> Anthropic RateLimitError', async () => {
    const client = new Anthropic({
      apiKey: ACCESS_KEY,
      baseURL: stack.url,
      maxRetries: 0,
      fetch: log.fetch,
      defaultHeaders: { 'x-router-provider': 'sim-a' },
    });
    await assert.rejects(
      client.messages.create({
        model: 'compat-fail-429',
        max_tokens: 10,
        messages: [{ role: 'user', content: 'x' }],
      }),
      (err: unknown) => {
        assert.ok(err instanceof Anthropic.RateLimitError, String(err));
        const body = err.error as { type?: string; error?: { type?: string } } | undefined;
        assert.equal(body?.type, 'error');
        assert.equal(body?.error?.type, 'rate_limit_error');
        return true;
      },
    );
  });

  test('an upstream error status is relayed with its body', async () => {
    const r = await send('/v1/chat/completions', { body: { ...CHAT, model: 'gpt-5.4-mini-fail-400' } });
    assert.equal(r.status, 400);
    assert.equal(openaiError(r).type, 'invalid_request_error');
    assert.match(r.headers.get('x-router-request-id') ?? '', /.+/);
  });
});

describe('error shapes per wire family', () => {
  const messagesBody = {
    model: 'claude-sonnet-5',
    max_tokens: 10,
    messages: [{ role: 'user' as const, content: 'x' }],
  };

  test('/v1/messages errors are Anthropic-shaped', async () => {
    const cases: [Reply, number, string][] = [
      [await send('/v1/messages', { body: messagesBody, auth: false }), 401, 'authentication_error'],
      [await send('/v1/messages', { body: '{bad' }), 400, 'invalid_request_error'],
      [
        await send('/v1/messages', { body: { ...messagesBody, model: 'no-such-model' } }),
        404,
        'not_found_error',
      ],
      [await send('/v1/messages', { method: 'GET' }), 405, 'invalid_request_error'],
    ];
    for (const [r, status, type] of cases) {
      assert.equal(r.status, status, r.text);
      const body = r.json as { type: string; error: { type: string; message: string } };
      assert.equal(body.type, 'error');
      assert.equal(body.error.type, type);
      assert.match(body.error.message, /\(request id: [^)]+\)/);
    }
  });

  test('the Anthropic SDK raises its own error classes', async () => {
    const bad = new Anthropic({ apiKey: 'ak_wrong', baseURL: stack.url, maxRetries: 0, fetch: log.fetch });
    await assert.rejects(bad.messages.create(messagesBody), Anthropic.AuthenticationError);
    const good = new Anthropic({ apiKey: ACCESS_KEY, baseURL: stack.url, maxRetries: 0, fetch: log.fetch });
    await assert.rejects(
      good.messages.create({ ...messagesBody, model: 'no-such-model' }),
      Anthropic.NotFoundError,
    );
  });

  test('/v1beta errors are Gemini-shaped', async () => {
    const path = '/v1beta/models/gemini-3.8-flash:generateContent';
    const body = { contents: [{ role: 'user', parts: [{ text: 'x' }] }] };
    const cases: [Reply, number, string][] = [
      [await send(path, { body, auth: false }), 401, 'UNAUTHENTICATED'],
      [
        await send(path, { body: '{bad', headers: { 'x-goog-api-key': ACCESS_KEY } }),
        400,
        'INVALID_ARGUMENT',
      ],
      [await send(path, { body: { contents: 'x' } }), 400, 'INVALID_ARGUMENT'],
      [await send('/v1beta/models/no-such-model:generateContent', { body }), 404, 'NOT_FOUND'],
      [await send('/v1beta/models/no-such-model', { method: 'GET' }), 404, 'NOT_FOUND'],
    ];
    for (const [r, status, name] of cases) {
      assert.equal(r.status, status, r.text);
      const err = (r.json as { error: { code: number; status: string; message: string } }).error;
      assert.equal(err.code, status);
      assert.equal(err.status, name);
      assert.match(err.message, /\(request id: [^)]+\)/);
    }
  });

  test('GET on a Gemini action path -> 405 in the Gemini shape (not a model lookup)', async () => {
    const r = await send('/v1beta/models/gemini-3.8-flash:generateContent', { method: 'GET' });
    assert.equal(r.status, 405, r.text);
    const err = (r.json as { error: { code: number; status: string } }).error;
    assert.equal(err.code, 405);
    assert.equal(err.status, 'UNIMPLEMENTED');
    assert.equal(r.headers.get('allow'), 'POST');
  });

  test('the Google SDK raises an ApiError with the status', async () => {
    const realFetch = globalThis.fetch;
    globalThis.fetch = log.fetch;
    try {
      const gemini = new GoogleGenAI({ apiKey: 'ak_wrong', httpOptions: { baseUrl: stack.url } });
      await assert.rejects(
        gemini.models.generateContent({ model: 'gemini-3.8-flash', contents: 'x' }),
        (err: unknown) => {
          assert.equal((err as { status?: number }).status, 401);
          return true;
        },
      );
    } finally {
      globalThis.fetch = realFetch;
    }
  });

  test('the openai SDK raises its own error classes', async () => {
    const bad = new OpenAI({
      apiKey: 'ak_wrong',
      baseURL: `${stack.url}/v1`,
      maxRetries: 0,
      fetch: log.fetch,
    });
    await assert.rejects(
      bad.chat.completions.create({ model: 'gpt-5.4-mini', messages: [] }),
      OpenAI.AuthenticationError,
    );
    const good = new OpenAI({
      apiKey: ACCESS_KEY,
      baseURL: `${stack.url}/v1`,
      maxRetries: 0,
      fetch: log.fetch,
    });
    await assert.rejects(
      good.chat.completions.create({ model: 'dead-model', messages: [{ role: 'user', content: 'x' }] }),
      (err: unknown) => {
        assert.ok(err instanceof OpenAI.APIError);
        assert.equal(err.status, 502);
        assert.equal(err.code, 'upstream_unreachable');
        return true;
      },
    );
  });
});

test('no reply of this suite carries an upstream key', async () => {
  // One successful reply of each native family too, so bodies that echo upstream data are covered.
  await send('/v1/messages', {
    body: { model: 'claude-sonnet-5', max_tokens: 50, messages: [{ role: 'user', content: 'x' }] },
  });
  await send('/v1beta/models/gemini-3.8-flash:generateContent', {
    body: { contents: [{ role: 'user', parts: [{ text: 'x' }] }] },
  });
  const replies = await log.settled();
  assert.ok(replies.length > 30, `replies logged: ${replies.length}`);
  for (const r of replies) {
    assert.doesNotMatch(r.headers, UPSTREAM_KEY_RE, `headers of ${r.url}`);
    assert.doesNotMatch(r.body, UPSTREAM_KEY_RE, `body of ${r.url}`);
  }
});
