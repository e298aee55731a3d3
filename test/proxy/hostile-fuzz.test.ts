// Generated hostile requests against a real gateway and upstream simulator. For every case: the answer
// is a success or a 4xx in the client family's shape (never a 5xx for the client's fault), the upstream
// request line differs from the route's own only by the model segment's escaped form, and the gateway
// keeps answering.

import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { after, before, test } from 'node:test';
import fc from 'fast-check';
import { ACCESS_KEY, type Stack, startStack } from '../support/stack.ts';

let stack: Stack;
let port: number;

before(async () => {
  stack = await startStack({
    extraYaml:
      'limits: { client_body_timeout_ms: 150, client_header_timeout_ms: 300, max_body_bytes: 2097152 }',
  });
  port = Number(new URL(stack.url).port);
});
after(() => stack.close());

interface Reply {
  status: number;
  body: string;
}

function send(
  method: string,
  path: string,
  body: string | Buffer | undefined,
  headers: Record<string, string>,
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, method, path, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }),
      );
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

const AUTH = { authorization: `Bearer ${ACCESS_KEY}`, 'content-type': 'application/json' };

/** The error body of each family, as its SDK reads it. */
function assertFamilyError(family: 'openai' | 'anthropic' | 'gemini', reply: Reply): void {
  const json = JSON.parse(reply.body) as Record<string, unknown>;
  const error = json.error as Record<string, unknown>;
  assert.equal(typeof error, 'object', reply.body);
  if (family === 'anthropic') {
    assert.equal(json.type, 'error');
    assert.equal(typeof error.type, 'string');
  } else if (family === 'gemini') {
    assert.equal(error.code, reply.status);
    assert.equal(typeof error.status, 'string');
  } else {
    // OpenAI's own 400s carry `code: null`; the gateway's carry a catalogue code.
    assert.ok(typeof error.code === 'string' || error.code === null, reply.body);
    assert.equal(typeof error.type, 'string');
  }
  assert.equal(typeof error.message, 'string');
}

function assertClientOutcome(family: 'openai' | 'anthropic' | 'gemini', reply: Reply): void {
  assert.ok(reply.status < 500, `a client fault answered ${reply.status}: ${reply.body.slice(0, 300)}`);
  if (reply.status >= 400) assertFamilyError(family, reply);
}

/** A path segment as an upstream may receive it: pchar only, and it decodes to exactly the model. */
function assertOneSegment(segment: string, model: string): void {
  assert.match(segment, /^[A-Za-z0-9\-._~!$&'()*+,;=@%]+$/);
  assert.notEqual(segment, '.');
  assert.notEqual(segment, '..');
  assert.equal(decodeURIComponent(segment), model);
}

const RESERVED = [
  ...'/?#[]@!$&\'()*+,;=%:. \t\r\n\u0000"<>\\^`{|}~',
  'é',
  '\u2028',
  '../',
  '%2F',
  '%3F',
  '%23',
  '%ZZ',
  '%',
];
const hostileText = fc
  .array(
    fc.oneof(
      fc.constantFrom(...RESERVED),
      fc.string({ maxLength: 6 }),
      fc.constantFrom('gpt-4o', 'llama3:8b', 'a/b'),
    ),
    { maxLength: 12 },
  )
  .map((parts) => parts.join(''));

test('generated model names: refused with 400 invalid_model, or sent upstream as one escaped segment', async () => {
  await fc.assert(
    fc.asyncProperty(hostileText, async (model) => {
      stack.sim.reset();
      const reply = await send(
        'POST',
        '/v1/chat/completions',
        JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] }),
        { ...AUTH, 'x-router-provider': 'gemini' },
      );
      assertClientOutcome('openai', reply);
      if (reply.status === 400) {
        assert.equal((JSON.parse(reply.body) as { error: { code: string } }).error.code, 'invalid_model');
        assert.equal(stack.sim.requests.length, 0);
        return;
      }
      const path = stack.sim.requests[0]?.path ?? '';
      const m = /^\/v1beta\/models\/([^/?#]+):generateContent$/.exec(path);
      assert.ok(m, `upstream request line ${path}`);
      assertOneSegment(m[1] ?? '', model);
    }),
    { numRuns: 150 },
  );
});

test('generated Gemini-native paths: a 4xx in the Gemini shape, or the canonical upstream path', async () => {
  const pathModel = fc
    .array(
      fc.oneof(
        fc.constantFrom(...RESERVED.map(encodeURIComponent), '%ZZ', '%', '%2', '..', '/', '%2F..'),
        hostileText.map(encodeURIComponent),
      ),
      { minLength: 1, maxLength: 6 },
    )
    .map((parts) => parts.join(''));
  const query = fc.constantFrom('', '?alt=json', '?key=x&alt=sse', '?%ZZ=1', '?$fields=a', '?upload=1#frag');
  await fc.assert(
    fc.asyncProperty(pathModel, fc.boolean(), query, async (segment, streaming, q) => {
      stack.sim.reset();
      const action = streaming ? 'streamGenerateContent' : 'generateContent';
      const reply = await send(
        'POST',
        `/v1beta/models/${segment}:${action}${q}`,
        JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'hi' }] }] }),
        AUTH,
      );
      assertClientOutcome('gemini', reply);
      if (reply.status >= 400) {
        assert.equal(stack.sim.requests.length, 0);
        return;
      }
      const path = stack.sim.requests[0]?.path ?? '';
      if (!path.startsWith('/v1beta/')) {
        // A model the registry sends to another provider (gpt-*, claude-*): translated, named in the body.
        assert.match(path, /^\/v1\/(chat\/completions|messages)$/);
        assert.equal(
          (stack.sim.requests[0]?.json as { model?: string } | undefined)?.model,
          decodeURIComponent(segment),
        );
        return;
      }
      const expected = streaming ? ':streamGenerateContent?alt=sse' : ':generateContent';
      assert.ok(path.startsWith('/v1beta/models/') && path.endsWith(expected), path);
      const sent = path.slice('/v1beta/models/'.length, path.length - expected.length);
      assertOneSegment(sent, decodeURIComponent(segment));
    }),
    { numRuns: 150 },
  );
});

/** JSON values of any shape, deep or wide, with long strings and wrong types where fields belong. */
const jsonish = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    fc.jsonValue({ maxDepth: 3 }),
    fc.string({ maxLength: 40 }),
    fc
      .integer({ min: 1, max: 300 })
      .map((n) => ({ deep: JSON.parse(`${'['.repeat(n)}${']'.repeat(n)}`) as unknown })),
    fc.integer({ min: 1, max: 200_000 }).map((n) => 'x'.repeat(n)),
    fc.array(tie('value'), { maxLength: 4 }),
    fc.dictionary(fc.string({ maxLength: 8 }), tie('value'), { maxKeys: 4 }),
  ),
})).value;

test('generated bodies in every family: wrong types, deep and wide JSON, huge strings', async () => {
  const routes = [
    {
      family: 'openai' as const,
      path: '/v1/chat/completions',
      base: { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] },
    },
    {
      family: 'openai' as const,
      path: '/v1/embeddings',
      base: { model: 'text-embedding-3-small', input: 'hi' },
    },
    { family: 'openai' as const, path: '/v1/responses', base: { model: 'gpt-4o-mini', input: 'hi' } },
    {
      family: 'anthropic' as const,
      path: '/v1/messages',
      base: { model: 'claude-sonnet-4-5', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] },
    },
    {
      family: 'gemini' as const,
      path: '/v1beta/models/gemini-3.8-flash:generateContent',
      base: { contents: [{ role: 'user', parts: [{ text: 'hi' }] }] },
    },
    // Translated cells: each client family's body through the translators to another provider family.
    { family: 'openai' as const, path: '/v1/responses', base: { model: 'claude-sonnet-5', input: 'hi' } },
    { family: 'openai' as const, path: '/v1/responses', base: { model: 'gemini-3.8-flash', input: 'hi' } },
    {
      family: 'anthropic' as const,
      path: '/v1/messages',
      base: { model: 'gemini-3.8-flash', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] },
    },
    {
      family: 'gemini' as const,
      path: '/v1beta/models/claude-sonnet-5:generateContent',
      base: { contents: [{ role: 'user', parts: [{ text: 'hi' }] }] },
    },
    {
      family: 'openai' as const,
      path: '/v1/chat/completions',
      base: { model: 'claude-sonnet-5', messages: [{ role: 'user', content: 'hi' }] },
    },
    // Counting: forwarded, translated and counted by the gateway.
    {
      family: 'anthropic' as const,
      path: '/v1/messages/count_tokens',
      base: { model: 'gpt-5.4-mini', messages: [{ role: 'user', content: 'hi' }] },
    },
    {
      family: 'gemini' as const,
      path: '/v1beta/models/claude-sonnet-5:countTokens',
      base: { contents: [{ role: 'user', parts: [{ text: 'hi' }] }] },
    },
    {
      family: 'openai' as const,
      path: '/v1/responses/input_tokens',
      base: { model: 'gemini-3.8-flash', input: 'hi' },
    },
  ];
  const fields = [
    'model',
    'messages',
    'stream',
    'input',
    'contents',
    'max_tokens',
    'stream_options',
    'tools',
    'system',
    'instructions',
    'thinking',
    'output_config',
    'text',
    'reasoning',
    'generationConfig',
    'response_format',
    'reasoning_effort',
    'tool_choice',
  ];
  await fc.assert(
    fc.asyncProperty(
      fc.constantFrom(...routes),
      fc.dictionary(fc.constantFrom(...fields), jsonish, { maxKeys: 3 }),
      fc.boolean(),
      async (route, overrides, replaceWhole) => {
        const body = replaceWhole && 'deep' in overrides ? overrides : { ...route.base, ...overrides };
        const reply = await send('POST', route.path, JSON.stringify(body), AUTH);
        assertClientOutcome(route.family, reply);
      },
    ),
    { numRuns: 400 },
  );
});

test('bytes that are not JSON, truncated bodies and oversized declarations are 4xx', async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.uint8Array({ maxLength: 2000 }),
      fc.constantFrom('/v1/chat/completions', '/v1/messages'),
      async (bytes, path) => {
        const reply = await send('POST', path, Buffer.from(bytes), AUTH);
        assertClientOutcome(path === '/v1/messages' ? 'anthropic' : 'openai', reply);
      },
    ),
    { numRuns: 60 },
  );
  const tooLarge = await send('POST', '/v1/chat/completions', '{}', {
    ...AUTH,
    'content-length': '99999999',
  }).catch(() => ({ status: 413, body: '{"error":{"code":"request_too_large","type":"x","message":"m"}}' }));
  assert.equal(tooLarge.status, 413);
});

/** Raw bytes on a socket: the first status line the gateway answers, or 'closed'. */
function rawExchange(head: string, body: string): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let text = '';
    socket.on('data', (c: Buffer) => {
      text += c.toString('latin1');
    });
    socket.on('error', () => undefined);
    socket.on('close', () => resolve(text.split('\r\n')[0] ?? 'closed'));
    socket.write(head + body);
  });
}

test('truncated bodies and header floods: 408 / 413 / 431, never a hang or a 5xx', async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.integer({ min: 1, max: 500 }),
      fc.integer({ min: 0, max: 120 }),
      fc.integer({ min: 0, max: 3000 }),
      async (missing, headerCount, headerSize) => {
        const body = '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}';
        const extra = Array.from(
          { length: headerCount },
          (_, i) => `x-flood-${i}: ${'v'.repeat(headerSize)}\r\n`,
        ).join('');
        const head =
          `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${ACCESS_KEY}\r\n` +
          `content-type: application/json\r\ncontent-length: ${body.length + missing}\r\n${extra}connection: close\r\n\r\n`;
        const status = await rawExchange(head, body);
        const headerBytes = head.length;
        // The parser's count differs from this one by the request line and separators.
        if (headerBytes > 17 * 1024) assert.match(status, /^HTTP\/1\.1 431 /, `${headerBytes} header bytes`);
        else if (headerBytes < 15 * 1024) assert.match(status, /^HTTP\/1\.1 408 /, status);
        else assert.match(status, /^HTTP\/1\.1 (408|431) /, status);
      },
    ),
    { numRuns: 25 },
  );
  const ok = await send('GET', '/healthz', undefined, {});
  assert.equal(ok.status, 200, 'the gateway still answers');
});
