// The request body's reading and parsing: a broken multipart form is a 400 naming the problem (never an
// unheard stream error, which ended the process), and on every model route the key is checked before
// the body is parsed, so a request without a valid key is a 401 whatever its body.

import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { GatewayError } from '../../common/errors.ts';
import { readMultipartFields } from '../../proxy/request-body.ts';
import { ACCESS_KEY, type Stack, startStack } from '../support/stack.ts';

const TRUNCATED =
  '--b\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\nContent-Type: audio/wav\r\n\r\nRIFF';
const MULTIPART = 'multipart/form-data; boundary=b';

function form(parts: string[]): Buffer {
  return Buffer.from(`${parts.map((p) => `--b\r\n${p}\r\n`).join('')}--b--\r\n`);
}

async function refusal(raw: Buffer | string, contentType = MULTIPART): Promise<GatewayError> {
  const err = await readMultipartFields(contentType, Buffer.from(raw)).then(
    () => assert.fail('the form was accepted'),
    (e: unknown) => e,
  );
  assert.ok(err instanceof GatewayError, String(err));
  return err;
}

describe('readMultipartFields', () => {
  test('reads model and stream, and skips files', async () => {
    const raw = form([
      'Content-Disposition: form-data; name="model"\r\n\r\nwhisper-1',
      'Content-Disposition: form-data; name="stream"\r\n\r\ntrue',
      'Content-Disposition: form-data; name="file"; filename="a.wav"\r\nContent-Type: audio/wav\r\n\r\nRIFF....',
    ]);
    assert.deepEqual(await readMultipartFields(MULTIPART, raw), { model: 'whisper-1', stream: true });
  });

  test('a form that ends inside a file part is a 400 that says so', async () => {
    const err = await refusal(TRUNCATED);
    assert.equal(err.status, 400);
    assert.equal(err.code, 'invalid_parameter');
    assert.match(err.message, /^Malformed multipart\/form-data body: unexpected end of form$/);
  });

  test('a form that ends inside a field, or inside a part header, is a 400', async () => {
    for (const raw of [
      '--b\r\nContent-Disposition: form-data; name="model"\r\n\r\nwhisp',
      '--b\r\nContent-Dispos',
      '--b\r\n',
      '--b',
    ]) {
      const err = await refusal(raw);
      assert.equal(err.status, 400, raw);
    }
  });

  test('too many parts is a 400 naming the bound', async () => {
    const parts = Array.from(
      { length: 700 },
      (_, i) => `Content-Disposition: form-data; name="f${i}"\r\n\r\nx`,
    );
    const err = await refusal(form(parts));
    assert.match(err.message, /more than \d+ (parts|fields)/);
  });

  test('a model field longer than the field bound is a 400; a long other field passes', async () => {
    const long = 'x'.repeat(5000);
    const err = await refusal(form([`Content-Disposition: form-data; name="model"\r\n\r\n${long}`]));
    assert.match(err.message, /the field 'model' is longer than/);
    const fields = await readMultipartFields(
      MULTIPART,
      form([
        `Content-Disposition: form-data; name="prompt"\r\n\r\n${long}`,
        'Content-Disposition: form-data; name="model"\r\n\r\nwhisper-1',
      ]),
    );
    assert.equal(fields.model, 'whisper-1');
  });

  test('a content type without a boundary is a 415', async () => {
    const err = await refusal(form([]), 'multipart/form-data');
    assert.equal(err.code, 'unsupported_media_type');
  });
});

let stack: Stack;
before(async () => {
  stack = await startStack();
});
after(() => stack.close());

interface Reply {
  status: number;
  json: Record<string, unknown>;
}

/** One request on its own connection, its whole body sent before the reply is read. */
function post(path: string, body: Buffer | string, headers: Record<string, string>): Promise<Reply> {
  const url = new URL(stack.url);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { host: url.hostname, port: url.port, method: 'POST', path, headers, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            json: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>,
          }),
        );
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

async function healthy(): Promise<void> {
  const res = await fetch(`${stack.url}/healthz`);
  assert.equal(res.status, 200);
}

const MULTIPART_ROUTES = ['/v1/audio/transcriptions', '/v1/audio/translations', '/v1/images/edits'];

describe('multipart routes', () => {
  test('a form that ends inside a file part is a 400 with a key, a 401 without, and the gateway lives', async () => {
    for (const path of MULTIPART_ROUTES) {
      const keyed = await post(path, TRUNCATED, {
        'content-type': MULTIPART,
        authorization: `Bearer ${ACCESS_KEY}`,
      });
      assert.equal(keyed.status, 400, path);
      const error = keyed.json.error as Record<string, unknown>;
      assert.equal(error.code, 'invalid_parameter');
      assert.match(String(error.message), /unexpected end of form/);
      const upper = await post(path, TRUNCATED, {
        'content-type': 'MULTIPART/FORM-DATA; boundary=b',
        authorization: `Bearer ${ACCESS_KEY}`,
      });
      assert.equal(upper.status, 400, 'a media type is case-insensitive');
      const anonymous = await post(path, TRUNCATED, { 'content-type': MULTIPART });
      assert.equal(anonymous.status, 401, path);
      assert.equal((anonymous.json.error as Record<string, unknown>).code, 'invalid_api_key');
      await healthy();
    }
  });
});

describe('the key is checked before the body is parsed', () => {
  const wrongKey = { authorization: 'Bearer ak_not_a_key' };
  const cases: { path: string; body: string; headers: Record<string, string>; code: string }[] = [
    {
      path: '/v1/chat/completions',
      body: '{"model":',
      headers: { 'content-type': 'application/json' },
      code: 'invalid_api_key',
    },
    {
      path: '/v1/chat/completions',
      body: `${'['.repeat(20000)}`,
      headers: { 'content-type': 'application/json' },
      code: 'invalid_api_key',
    },
    {
      path: '/v1/messages',
      body: 'not json',
      headers: { 'content-type': 'application/json' },
      code: 'invalid_api_key',
    },
    {
      path: '/v1/audio/transcriptions',
      body: 'garbage',
      headers: { 'content-type': 'multipart/form-data' },
      code: 'invalid_api_key',
    },
    {
      path: '/v1/audio/transcriptions',
      body: 'garbage',
      headers: { 'content-type': 'text/plain' },
      code: 'invalid_api_key',
    },
    {
      path: '/v1beta/models/gemini-2.0-flash:generateContent',
      body: '{',
      headers: { 'content-type': 'application/json' },
      code: 'invalid_api_key',
    },
  ];
  test('a request without a valid key is a 401 whatever its body', async () => {
    for (const c of cases) {
      for (const auth of [{}, wrongKey]) {
        const reply = await post(c.path, c.body, { ...c.headers, ...auth });
        assert.equal(reply.status, 401, `${c.path} ${c.body.slice(0, 20)}`);
      }
    }
    await healthy();
  });

  test('the same bodies with a key are the body errors', async () => {
    const keyed = { authorization: `Bearer ${ACCESS_KEY}` };
    const expected = [
      'invalid_json',
      'json_too_deep',
      'invalid_json',
      'unsupported_media_type',
      'unsupported_media_type',
    ];
    for (const [i, code] of expected.entries()) {
      const c = cases[i]!;
      const reply = await post(c.path, c.body, { ...c.headers, ...keyed });
      const error = reply.json.error as Record<string, unknown>;
      const got = c.path === '/v1/messages' ? (error.type as string) : (error.code as string);
      assert.equal(reply.status === 400 || reply.status === 415, true, `${c.path}: ${reply.status}`);
      if (c.path !== '/v1/messages') assert.equal(got, code, c.path);
    }
  });

  test('a declared body over max_body_bytes is a 401 without a key and a 413 with one', async () => {
    const headers = { 'content-type': 'application/json', 'content-length': String(50 * 1024 * 1024) };
    const url = new URL(stack.url);
    for (const [auth, status] of [
      [{}, 401],
      [{ authorization: `Bearer ${ACCESS_KEY}` }, 413],
    ] as const) {
      const reply = await new Promise<number>((resolve) => {
        const req = httpRequest(
          {
            host: url.hostname,
            port: url.port,
            method: 'POST',
            path: '/v1/chat/completions',
            headers: { ...headers, ...auth },
            agent: false,
          },
          (res) => {
            res.resume();
            resolve(res.statusCode ?? 0);
            req.destroy();
          },
        );
        req.on('error', () => undefined);
        req.write('{"model":"gpt-4o-mini"');
      });
      assert.equal(reply, status);
    }
    await healthy();
  });
});
