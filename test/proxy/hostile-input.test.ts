// The reproductions of the hostile-input review, each against a real gateway and upstream simulator:
// client input that tried to steer the upstream request line, unbounded model names, deep JSON,
// malformed percent-encoding, a keyless provider and upstream auth failures.

import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { after, before, test } from 'node:test';
import { capturingLogger, type LogLine, waitUntil } from '../support/billing-stack.ts';
import { ACCESS_KEY, postJson, type Stack, startStack } from '../support/stack.ts';

let stack: Stack;
const logs: LogLine[] = [];

before(async () => {
  stack = await startStack({
    // mistral gets no upstream key: the empty variable is ignored.
    env: { ROUTER_PROVIDER_MISTRAL_API_KEY: '' },
    logger: capturingLogger(logs, 'debug'),
  });
});
after(() => stack.close());

interface RawReply {
  status: number;
  json: Record<string, unknown> | undefined;
  text: string;
}

/** A request whose path goes out byte for byte (fetch would normalize dot segments). */
function raw(
  method: string,
  path: string,
  body?: string,
  headers: Record<string, string> = {},
): Promise<RawReply> {
  const url = new URL(stack.url);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: url.hostname,
        port: url.port,
        method,
        path,
        headers: { authorization: `Bearer ${ACCESS_KEY}`, 'content-type': 'application/json', ...headers },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let json: Record<string, unknown> | undefined;
          try {
            json = JSON.parse(text) as Record<string, unknown>;
          } catch {
            json = undefined;
          }
          resolve({ status: res.statusCode ?? 0, json, text });
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const GEMINI_BODY = JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'hi' }] }] });

function geminiReason(reply: RawReply): unknown {
  const error = reply.json?.error as { details?: { reason?: string }[] } | undefined;
  return error?.details?.[0]?.reason;
}

test('an escaped "?" in a Gemini model path cannot call another method (countTokens%3F)', async () => {
  stack.sim.reset();
  const reply = await raw(
    'POST',
    '/v1beta/models/gemini-3.8-flash:countTokens%3F:generateContent',
    GEMINI_BODY,
  );
  assert.equal(reply.status, 400);
  assert.equal(geminiReason(reply), 'invalid_model');
  assert.match(String((reply.json?.error as { message?: string } | undefined)?.message), /character outside/);
  assert.equal(stack.sim.requests.length, 0, 'nothing reached the upstream');
});

test('dot segments and "#" in a Gemini model path are refused before the upstream', async () => {
  stack.sim.reset();
  for (const path of [
    '/v1beta/models/../../v1beta/files:generateContent',
    '/v1beta/models/..%2F..%2Fv1beta%2Ffiles:generateContent',
    '/v1beta/models/gemini-3.8-flash%23frag:generateContent',
    '/v1beta/models/%2Fgemini-3.8-flash:generateContent',
  ]) {
    const reply = await raw('POST', path, GEMINI_BODY);
    assert.equal(reply.status, 400, path);
    assert.equal(geminiReason(reply), 'invalid_model', path);
  }
  assert.equal(stack.sim.requests.length, 0);
});

test('a Gemini-native path goes upstream rebuilt from its model; the client query does not', async () => {
  stack.sim.reset();
  const reply = await raw(
    'POST',
    '/v1beta/models/gemini-3.8-%66lash:generateContent?foo=bar&key=client-secret&alt=json',
    GEMINI_BODY,
  );
  assert.equal(reply.status, 200, reply.text);
  assert.equal(stack.sim.requests.length, 1);
  assert.equal(stack.sim.requests[0]?.path, '/v1beta/models/gemini-3.8-flash:generateContent');
});

test('a "/" in a model id reaches a set_path template as %2F', async () => {
  stack.sim.reset();
  const reply = await postJson(
    `${stack.url}/v1/chat/completions`,
    { model: 'accounts/fireworks/models/x', messages: [{ role: 'user', content: 'hi' }] },
    { 'x-router-provider': 'gemini' },
  );
  assert.equal(reply.status, 200, reply.text);
  assert.equal(
    stack.sim.requests[0]?.path,
    '/v1beta/models/accounts%2Ffireworks%2Fmodels%2Fx:generateContent',
  );
});

test('real model ids of every shape are accepted', async () => {
  for (const model of [
    'meta-llama/Llama-3.1-8B-Instruct',
    'llama3:8b',
    'gpt-4o-2024-05-13',
    'accounts/fireworks/models/x',
    'claude-opus-5@20261101',
    'ft:gpt-4o-mini:org::id1',
    'anthropic.claude-3-5-sonnet-20240620-v1:0',
    'x'.repeat(256),
  ]) {
    const reply = await postJson(
      `${stack.url}/v1/chat/completions`,
      { model, messages: [{ role: 'user', content: 'hi' }] },
      { 'x-router-provider': 'openai' },
    );
    assert.equal(reply.status, 200, `${model}: ${reply.text}`);
  }
});

test('model names outside the documented set are 400 invalid_model naming the rule, in each family', async () => {
  const bad = [
    'x'.repeat(257),
    'a b',
    'a\r\nb',
    'gpt/../x',
    '/gpt',
    'gpt/',
    'a//b',
    'ümlaut',
    'a?b',
    'a#b',
    'a%2Fb',
  ];
  for (const model of bad) {
    const reply = await postJson(
      `${stack.url}/v1/chat/completions`,
      { model, messages: [{ role: 'user', content: 'hi' }] },
      { 'x-router-provider': 'openai' },
    );
    assert.equal(reply.status, 400, model);
    const error = (reply.json as { error: { code: string; param: string; message: string } }).error;
    assert.equal(error.code, 'invalid_model', model);
    assert.equal(error.param, 'model');
    assert.match(error.message, /1 to 256 characters/);
  }
  const anthropic = await postJson(`${stack.url}/v1/messages`, {
    model: 'a b',
    max_tokens: 5,
    messages: [{ role: 'user', content: 'hi' }],
  });
  assert.equal(anthropic.status, 400);
  assert.equal((anthropic.json as { type: string }).type, 'error');
});

test('a 4 MB model name is refused at once and kept nowhere: not logged, not echoed', async () => {
  const before = logs.length;
  const model = 'm'.repeat(4 * 1024 * 1024);
  const reply = await postJson(`${stack.url}/v1/chat/completions`, {
    model,
    messages: [{ role: 'user', content: 'hi' }],
  });
  assert.equal(reply.status, 400);
  assert.ok(reply.text.length < 2048, 'the error body does not echo the name');
  const logged = JSON.stringify(logs.slice(before));
  assert.ok(logged.length < 64 * 1024, `log lines of the request hold ${logged.length} bytes`);
});

test('a body nested beyond max_json_depth is a 400, not an upstream error; 100 levels still pass', async () => {
  const deep = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"x":${'['.repeat(10_000)}${']'.repeat(10_000)}}`;
  const reply = await postJson(`${stack.url}/v1/chat/completions`, deep);
  assert.equal(reply.status, 400);
  assert.equal((reply.json as { error: { code: string } }).error.code, 'json_too_deep');
  const brackets = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"${'['.repeat(5000)}"}],"x":${'['.repeat(100)}${']'.repeat(100)}}`;
  const ok = await postJson(`${stack.url}/v1/chat/completions`, brackets);
  assert.equal(ok.status, 200, 'brackets inside strings do not count, 100 levels are accepted');
});

test('malformed percent-encoding in a path is the client 400, never a 500 logged as an error', async () => {
  const before = logs.length;
  const post = await raw('POST', '/v1beta/models/%ZZ:generateContent', GEMINI_BODY);
  assert.equal(post.status, 400);
  assert.equal(geminiReason(post), 'invalid_path');
  const get = await raw('GET', '/v1beta/models/%E0%A4%A');
  assert.equal(get.status, 400);
  const getV1 = await raw('GET', '/v1/models/%ZZ');
  assert.equal(getV1.status, 400);
  assert.equal((getV1.json as { error: { code: string } }).error.code, 'invalid_path');
  assert.equal(
    logs.slice(before).filter((l) => l.level >= 50).length,
    0,
    'no error-level log line for a client fault',
  );
});

test('a provider with no upstream key: named by x-router-provider the client gets 400, chosen by the registry a 503 naming it; the variable is in the log only', async () => {
  const before = logs.length;
  const chat = { model: 'mistral-small', messages: [{ role: 'user', content: 'hi' }] };
  // Named by the client: its own fault, not a 5xx it could cause at will.
  const named = await postJson(`${stack.url}/v1/chat/completions`, chat, { 'x-router-provider': 'mistral' });
  assert.equal(named.status, 400);
  const refused = (named.json as { error: { code: string; message: string } }).error;
  assert.equal(refused.code, 'provider_not_offered');
  assert.match(refused.message, /x-router-provider header names 'mistral'/);
  assert.doesNotMatch(named.text, /ROUTER_PROVIDER/);
  for (let i = 0; i < 2; i++) {
    const reply = await postJson(`${stack.url}/v1/chat/completions`, chat);
    assert.equal(reply.status, 503);
    const error = (reply.json as { error: { code: string; message: string } }).error;
    assert.equal(error.code, 'provider_key_missing');
    assert.match(error.message, /'mistral'/);
    assert.doesNotMatch(reply.text, /ROUTER_PROVIDER/);
  }
  const warned = logs.slice(before).filter((l) => l.variable === 'ROUTER_PROVIDER_MISTRAL_API_KEY');
  assert.equal(warned.length, 1, 'warned once, with the variable to set');
});

test('a client that disconnects mid-body is logged below error level', async () => {
  const before = logs.length;
  const url = new URL(stack.url);
  await new Promise<void>((resolve) => {
    const req = httpRequest({
      agent: false,
      host: url.hostname,
      port: url.port,
      method: 'POST',
      path: '/v1/chat/completions',
      headers: {
        authorization: `Bearer ${ACCESS_KEY}`,
        'content-type': 'application/json',
        'content-length': '1000',
      },
    });
    req.on('error', () => resolve());
    req.on('close', () => resolve());
    // Half a body, then gone once the bytes are on the wire.
    req.write('{"model":"gpt-4o-mini",', () => req.destroy());
  });
  // The access line is the request's last log line.
  await waitUntil(() => logs.slice(before).some((l) => l.msg === 'request'), 'the access log line');
  const lines = logs.slice(before);
  assert.equal(lines.filter((l) => l.level >= 50).length, 0, JSON.stringify(lines));
  assert.ok(
    lines.some((l) => l.msg === 'client went away' && l.level === 20),
    JSON.stringify(lines),
  );
});
