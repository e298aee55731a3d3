// End to end with @google/genai: generateContent / generateContentStream on a Gemini model (native
// passthrough), models.list in the Gemini shape, and generateContent through gemini_to_openai.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { GoogleGenAI } from '@google/genai';
import { load } from 'js-yaml';
import { startUpstreamSim, type UpstreamSim } from '../../sim/upstream/server.ts';
import { createReplyLog, type ReplyLog, UPSTREAM_KEY_RE } from '../support/sim-providers.ts';
import { ACCESS_KEY, MODELS_FILE, type Stack, startStack } from '../support/stack.ts';

let stack: Stack;
let compat: UpstreamSim;
let gemini: GoogleGenAI;
let viaDeepseek: GoogleGenAI;
let log: ReplyLog;
const realFetch = globalThis.fetch;

before(async () => {
  compat = await startUpstreamSim();
  stack = await startStack({ baseUrls: { deepseek: compat.url } });
  // @google/genai takes no fetch option: record through the global one for this file only.
  log = createReplyLog(realFetch);
  globalThis.fetch = log.fetch;
  gemini = new GoogleGenAI({ apiKey: ACCESS_KEY, httpOptions: { baseUrl: stack.url } });
  viaDeepseek = new GoogleGenAI({
    apiKey: ACCESS_KEY,
    httpOptions: { baseUrl: stack.url, headers: { 'x-router-provider': 'deepseek' } },
  });
});
after(async () => {
  globalThis.fetch = realFetch;
  await stack.close();
  await compat.close();
});

describe('Gemini model (native passthrough)', () => {
  test('generateContent: text and usageMetadata; upstream got the provider key, not the access key', async () => {
    const res = await gemini.models.generateContent({
      model: 'gemini-3.8-flash',
      contents: 'hello from the genai sdk',
    });
    assert.match(res.text ?? '', /^Echo: hello from the genai sdk\./);
    assert.equal(res.candidates?.[0]?.finishReason, 'STOP');
    const u = res.usageMetadata;
    assert.ok(u?.promptTokenCount && u.candidatesTokenCount);
    const up = stack.sim.requests.at(-1);
    assert.equal(up?.path, '/v1beta/models/gemini-3.8-flash:generateContent');
    assert.equal(up?.headers['x-goog-api-key'], 'sim-gemini-key');
    assert.doesNotMatch(`${up?.path} ${JSON.stringify(up?.headers)}`, new RegExp(ACCESS_KEY));
  });

  test('generateContentStream: chunks add up to the plain reply; upstream asked with alt=sse', async () => {
    const plain = await gemini.models.generateContent({
      model: 'gemini-3.8-flash',
      contents: 'stream gemini',
    });
    const stream = await gemini.models.generateContentStream({
      model: 'gemini-3.8-flash',
      contents: 'stream gemini',
    });
    let text = '';
    let chunks = 0;
    let lastUsage: number | undefined;
    for await (const chunk of stream) {
      text += chunk.text ?? '';
      chunks++;
      lastUsage = chunk.usageMetadata?.candidatesTokenCount;
    }
    assert.equal(text, plain.text);
    assert.ok(chunks > 1);
    assert.equal(lastUsage, plain.usageMetadata?.candidatesTokenCount);
    const up = stack.sim.requests.at(-1);
    const url = new URL(up?.path ?? '/', 'http://x');
    assert.equal(url.pathname, '/v1beta/models/gemini-3.8-flash:streamGenerateContent');
    assert.equal(url.searchParams.get('alt'), 'sse');
    assert.equal(url.searchParams.get('key'), null);
  });

  test('models.list: the registry in the Gemini shape', async () => {
    const registry = load(readFileSync(MODELS_FILE, 'utf8')) as { models: Record<string, unknown> };
    const expected = Object.keys(registry.models)
      .filter((id) => !id.includes('*'))
      .map((id) => `models/${id}`);
    const names: string[] = [];
    const pager = await gemini.models.list();
    for await (const m of pager) names.push(m.name ?? '');
    assert.deepEqual(names, expected);
  });
});

describe('OpenAI-compatible provider through gemini_to_openai (x-router-provider: deepseek)', () => {
  test('generateContent is translated to chat completions and back', async () => {
    const before = stack.sim.requests.length;
    const res = await viaDeepseek.models.generateContent({
      model: 'deepseek-chat',
      contents: 'hello deepseek via gemini',
      config: { systemInstruction: 'be brief' },
    });
    assert.match(res.text ?? '', /^Echo: hello deepseek via gemini\./);
    assert.equal(res.candidates?.[0]?.finishReason, 'STOP');
    assert.ok(res.usageMetadata?.promptTokenCount && res.usageMetadata.candidatesTokenCount);
    const up = compat.requests.at(-1);
    assert.equal(up?.path, '/v1/chat/completions');
    assert.equal(up?.headers.authorization, 'Bearer sim-deepseek-key');
    const body = up?.json as { model: string; messages: { role: string }[] };
    assert.equal(body.model, 'deepseek-chat');
    assert.deepEqual(
      body.messages.map((m) => m.role),
      ['system', 'user'],
    );
    assert.equal(stack.sim.requests.length, before, 'nothing went to the Gemini upstream');
  });

  test('generateContentStream is translated too', async () => {
    const plain = await viaDeepseek.models.generateContent({ model: 'deepseek-chat', contents: 'both ways' });
    const stream = await viaDeepseek.models.generateContentStream({
      model: 'deepseek-chat',
      contents: 'both ways',
    });
    let text = '';
    for await (const chunk of stream) text += chunk.text ?? '';
    assert.equal(text, plain.text);
    const upBody = compat.requests.at(-1)?.json as { stream?: boolean } | undefined;
    assert.equal(upBody?.stream, true);
  });
});

test('no reply of this suite carries an upstream key', async () => {
  const replies = await log.settled();
  assert.ok(replies.length >= 6);
  for (const r of replies) {
    assert.doesNotMatch(r.headers, UPSTREAM_KEY_RE, `headers of ${r.url}`);
    assert.doesNotMatch(r.body, UPSTREAM_KEY_RE, `body of ${r.url}`);
  }
});
