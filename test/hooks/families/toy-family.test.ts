// A wire family is one folder plus one registration line: the toy family (test/fixtures/toy-family/) is
// registered here the way hooks/families/index.ts registers the built-in ones, and a gateway with a
// provider file for it, in front of a tiny upstream that speaks its shape, routes its requests, answers
// and refuses them in its shape and meters their usage by its rules (its usage preset, request text,
// reply text fields and stream end marker). And no file of the proxy core names a family.

import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join, relative } from 'node:path';
import { after, before, test } from 'node:test';
import type { JsonObject } from '../../../common/types.ts';
import { FAMILIES, registerFamily, requestTextOf } from '../../../hooks/families/index.ts';
import { countTokens, estimateInputTokens } from '../../../hooks/usage/estimate.ts';
import { TOY_STREAM_END, toyFamily } from '../../fixtures/toy-family/index.ts';
import { metered } from '../../fixtures/toy-family/usage-probe.ts';
import { commentsOf } from '../../support/source-comments.ts';
import type { Stack } from '../../support/stack.ts';

// The registration line. The gateway's modules compile the registry's tables when they load, so they
// are imported after it, as the built-in families are registered before anything reads the registry.
registerFamily(toyFamily);
const { ACCESS_KEY, ROOT, startStack } = await import('../../support/stack.ts');

const FIXTURE = join(ROOT, 'test/fixtures/toy-family');
const MODEL = 'toy-small';

/** What the toy upstream received. */
const seen: { path: string; headers: IncomingHttpHeaders; body: JsonObject }[] = [];

const sse = (data: string) => `data: ${data}\n\n`;

// Replies by prompt: counted JSON by default; `uncounted` without counts; streams that end with the end
// marker (`ended`), without it (`unended`), or by a cut connection (`cut`).
const upstream = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as JsonObject;
    seen.push({ path: req.url ?? '', headers: req.headers, body });
    const prompt = String(body.prompt);
    if (body.stream !== true) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify(
          prompt === 'uncounted'
            ? { words: 'no counts here' }
            : { words: `toy says: ${prompt}`, tokens: { in: 5, out: 4 } },
        ),
      );
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(sse('{"words":"toy "}'));
    if (prompt === 'cut') {
      setTimeout(() => res.socket?.destroy(), 20);
      return;
    }
    res.write(sse('{"words":"streams"}'));
    res.write(sse('{"tokens":{"in":5,"out":2}}'));
    res.end(prompt === 'ended' ? sse(TOY_STREAM_END) : '');
  });
});

let stack: Stack;

before(async () => {
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const port = (upstream.address() as AddressInfo).port;
  stack = await startStack({
    providerFiles: [join(FIXTURE, 'toy.conf')],
    modelsYaml: `models:\n  ${MODEL}: { providers: [toy] }\n`,
    baseUrls: { toy: `http://127.0.0.1:${port}` },
    // Usage is settled for billing: enabled, with nothing listening (the probe reads what was metered).
    extraYaml: [
      'billing:',
      '  enabled: true',
      '  base_url: http://127.0.0.1:9',
      '  project_id: p',
      '  api_key: billing-secret',
      '  extractor_rule_set_id: r',
      '  outbox_dir: ./outbox',
      'hooks:',
      `  - module: ${join(FIXTURE, 'usage-probe.ts')}`,
    ].join('\n'),
  });
});

after(async () => {
  await stack?.close();
  await new Promise((resolve) => upstream.close(resolve));
});

let requests = 0;

async function generate(
  body: JsonObject,
  headers: Record<string, string> = { 'x-toy-key': ACCESS_KEY },
): Promise<{ id: string; status: number; text: string }> {
  const id = `toy-${++requests}`;
  const res = await fetch(`${stack.url}/toy/v1/generate`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'toy-version': '7',
      'x-router-request-id': id,
      ...headers,
    },
    body: JSON.stringify(body),
  });
  return { id, status: res.status, text: await res.text() };
}

async function usageOf(id: string) {
  for (let i = 0; i < 200 && !metered.has(id); i++) await new Promise((r) => setTimeout(r, 10));
  const entry = metered.get(id);
  assert.ok(entry !== undefined, `nothing metered for ${id}`);
  return entry;
}

test('a request in the toy shape is routed to the toy provider, answered in its shape, its usage metered', async () => {
  const reply = await generate({ model: MODEL, prompt: 'hello toy' });
  assert.equal(reply.status, 200, reply.text);
  assert.deepEqual(JSON.parse(reply.text), { words: 'toy says: hello toy', tokens: { in: 5, out: 4 } });
  const sent = seen.at(-1)!;
  assert.equal(sent.path, '/generate');
  assert.equal(sent.headers['x-toy-upstream-key'], 'sim-toy-key');
  assert.equal(sent.headers['toy-version'], '7', 'the family forwards its protocol header');
  assert.equal(sent.headers['x-toy-key'], undefined, 'the client key never goes upstream');
  assert.deepEqual(sent.body, { model: MODEL, prompt: 'hello toy' });
  assert.deepEqual(await usageOf(reply.id), {
    usage: { inputTokens: 5, outputTokens: 4, totalTokens: 9 },
    usageStage: 'upstream',
    clientFormat: 'toy',
  });
});

test('a reply without counts is estimated by the toy rules: its request text and framing, its reply text', async () => {
  const reply = await generate({ model: MODEL, prompt: 'uncounted' });
  assert.equal(reply.status, 200, reply.text);
  const input = countTokens('uncounted', MODEL) + 2;
  assert.equal(
    estimateInputTokens(MODEL, requestTextOf('toy', 'completions'), { prompt: 'uncounted' }),
    input,
  );
  const output = countTokens('no counts here', MODEL);
  assert.deepEqual(await usageOf(reply.id), {
    usage: { inputTokens: input, outputTokens: output, totalTokens: input + output },
    usageStage: 'estimated',
    clientFormat: 'toy',
  });
});

test('its stream is relayed in its framing; a usage report is final only when the end marker follows', async () => {
  const ended = await generate({ model: MODEL, prompt: 'ended', stream: true });
  assert.equal(ended.status, 200);
  assert.equal(
    ended.text,
    sse('{"words":"toy "}') + sse('{"words":"streams"}') + sse('{"tokens":{"in":5,"out":2}}') + sse('[END]'),
  );
  assert.deepEqual((await usageOf(ended.id)).usage, { inputTokens: 5, outputTokens: 2, totalTokens: 7 });
  assert.equal((await usageOf(ended.id)).usageStage, 'upstream');

  // Without the marker the report is a running count: the reported input is kept, the output is the
  // larger of the report and the delivered `words`.
  const unended = await generate({ model: MODEL, prompt: 'unended', stream: true });
  assert.equal(unended.status, 200);
  const delivered = countTokens('toy streams', MODEL);
  const output = Math.max(2, delivered);
  assert.deepEqual(await usageOf(unended.id), {
    usage: { inputTokens: 5, outputTokens: output, totalTokens: 5 + output },
    usageStage: 'estimated',
    clientFormat: 'toy',
  });
});

test('an upstream that fails mid-stream ends the stream with the toy error event', async () => {
  const cut = await generate({ model: MODEL, prompt: 'cut', stream: true });
  assert.equal(cut.status, 200);
  assert.ok(cut.text.startsWith(sse('{"words":"toy "}')), cut.text);
  const last = /event: toy_error\ndata: (.*)\n\n$/.exec(cut.text);
  assert.ok(last !== null, cut.text);
  const error = (JSON.parse(last[1]!) as { toy_error: Record<string, unknown> }).toy_error;
  assert.equal(error.kind, 'broken');
  assert.equal(error.code, 'upstream_unreachable');
  assert.equal(error.request, cut.id);
});

test("the gateway's own errors are in the toy shape", async () => {
  const errorOf = (text: string) => (JSON.parse(text) as { toy_error: Record<string, unknown> }).toy_error;

  const keyless = await generate({ model: MODEL, prompt: 'hi' }, {});
  assert.equal(keyless.status, 401);
  assert.deepEqual(errorOf(keyless.text), {
    kind: 'unauthenticated',
    code: 'invalid_api_key',
    said: 'Missing access key',
    request: keyless.id,
  });

  // The toy family's body schema: `prompt` is a required string.
  const wrongType = await generate({ model: MODEL, prompt: 42 });
  assert.equal(wrongType.status, 400);
  assert.equal(errorOf(wrongType.text).code, 'invalid_parameter');
  assert.match(String(errorOf(wrongType.text).said), /'prompt'/);
  const missing = await generate({ model: MODEL });
  assert.equal(missing.status, 400);
  assert.equal(errorOf(missing.text).said, "Missing required parameter: 'prompt'");

  const unknownModel = await generate({ model: 'no-such-toy', prompt: 'hi' });
  assert.equal(unknownModel.status, 404);
  assert.equal(errorOf(unknownModel.text).kind, 'rejected');
  assert.equal(errorOf(unknownModel.text).code, 'model_not_found');

  const unknownPath = await fetch(`${stack.url}/toy/v1/nothing`, { headers: { 'x-toy-key': ACCESS_KEY } });
  assert.equal(unknownPath.status, 404);
  assert.equal(errorOf(await unknownPath.text()).code, 'not_found');
});

test('its model list and model entries are in its shape', async () => {
  const headers = { 'x-toy-key': ACCESS_KEY };
  const list = await fetch(`${stack.url}/toy/v1/models`, { headers });
  assert.equal(list.status, 200);
  assert.deepEqual(await list.json(), { toys: [{ toy_id: MODEL }] });
  const item = await fetch(`${stack.url}/toy/v1/models/${MODEL}`, { headers });
  assert.equal(item.status, 200);
  assert.deepEqual(await item.json(), { toy_id: MODEL });
});

/** Folders of the proxy core: they ask the registry and name no family. */
const CORE = ['proxy', 'hooks/builtin', 'hooks/usage', 'hooks/dsl', 'hooks/transforms'];

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return name.endsWith('.ts') ? [path] : [];
  });
}

/** The string literals of a source file outside its comments, with their line numbers. */
function stringLiterals(path: string, source: string): { line: number; text: string }[] {
  const lines = source.split('\n');
  for (const comment of commentsOf(path, source)) {
    const i = comment.line - 1;
    const at = lines[i]?.lastIndexOf(comment.text) ?? -1;
    if (at >= 0) lines[i] = lines[i]!.slice(0, at) + lines[i]!.slice(at + comment.text.length);
  }
  return lines.flatMap((code, i) =>
    [...code.matchAll(/'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|`(?:[^`\\]|\\.)*`/g)].map((m) => ({
      line: i + 1,
      text: m[0],
    })),
  );
}

test('no file of the proxy core names a registered wire family in its code', () => {
  const names = FAMILIES.map((f) => f.name);
  assert.ok(names.includes('toy') && names.length >= 5);
  // The name as a word of a string: 'gemini', "anthropic-version", `openai_${x}`.
  const named = new RegExp(`(?<![A-Za-z])(?:${names.join('|')})(?![A-Za-z])`, 'i');
  const found: string[] = [];
  for (const folder of CORE) {
    for (const path of sourceFiles(join(ROOT, folder))) {
      for (const literal of stringLiterals(path, readFileSync(path, 'utf8')))
        if (named.test(literal.text)) found.push(`${relative(ROOT, path)}:${literal.line}: ${literal.text}`);
    }
  }
  assert.deepEqual(found, []);
});
