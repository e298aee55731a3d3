import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import OpenAI from 'openai';
import { ACCESS_KEY, ROOT, type Stack, startStack } from '../support/stack.ts';

// A minimal "Acme" upstream: POST /generate {prompt, max_new_tokens} -> {output, usage}.
const seen: { headers: Record<string, unknown>; body: Record<string, unknown> }[] = [];
const acme = createServer((req, res) => {
  let raw = '';
  req.on('data', (c: Buffer) => {
    raw += c.toString();
  });
  req.on('end', () => {
    const body = JSON.parse(raw) as { prompt: string; max_new_tokens: number };
    seen.push({ headers: req.headers, body });
    res.writeHead(req.url === '/generate' ? 200 : 404, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ output: `acme says: ${body.prompt.length} chars`, usage: { in: 7, out: 3 } }));
  });
});

let stack: Stack;
before(async () => {
  await new Promise<void>((resolve) => acme.listen(0, '127.0.0.1', resolve));
  const port = (acme.address() as AddressInfo).port;
  stack = await startStack({
    // The walkthrough in docs/hooks.md: both files of the example go into the providers folder as they are.
    providerFiles: [join(ROOT, 'examples/acme/acme.conf'), join(ROOT, 'examples/acme/acme-hook.ts')],
    modelsYaml: 'models:\n  acme-large:\n    providers: [acme]\n',
    baseUrls: { acme: `http://127.0.0.1:${port}` },
  });
});
after(async () => {
  await stack.close();
  await new Promise((resolve) => acme.close(resolve));
});

test('a provider added as a DSL file plus a hook module serves the openai SDK', async () => {
  const client = new OpenAI({ apiKey: ACCESS_KEY, baseURL: `${stack.url}/v1` });
  const reply = await client.chat.completions.create({
    model: 'acme-large',
    messages: [{ role: 'user', content: 'hello acme' }],
  });
  assert.equal(reply.choices[0]?.message.content, 'acme says: 16 chars');
  assert.deepEqual(reply.usage, { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 });
  const sent = seen.at(-1);
  assert.equal(sent?.headers['x-acme-key'], 'sim-acme-key');
  assert.deepEqual(sent?.body, { prompt: 'user: hello acme', max_new_tokens: 128 });
});

test('the hook only serves what its rule matches: a stream request is a 400 no_matching_rule', async () => {
  const res = await fetch(`${stack.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ACCESS_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'acme-large', stream: true, messages: [{ role: 'user', content: 'x' }] }),
  });
  assert.equal(res.status, 400);
  assert.equal(((await res.json()) as { error: { code: string } }).error.code, 'no_matching_rule');
});
