// The simulator's own o200k_base counter (sim/upstream/token-count.ts) against gpt-tokenizer's
// countTokens, which the simulator called before: the same counts, chunk by chunk and for whole texts,
// and the same usage on every provider's endpoint for a 190 KB prompt without spaces.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import fc from 'fast-check';
import { countTokens } from 'gpt-tokenizer/encoding/o200k_base';
import { countSteps as referenceSteps, runToEnd } from '../../../hooks/usage/token-slices.ts';
import { startUpstreamSim, type UpstreamSim } from '../../../sim/upstream/server.ts';
import { countChunk, countSteps } from '../../../sim/upstream/token-count.ts';

/** What the simulator counted before: hooks/usage/token-slices.ts chunks, each through countTokens. */
function referenceCount(text: string): number {
  return runToEnd(referenceSteps(text, (chunk) => countTokens(chunk)));
}

function chunkLengths(steps: Iterator<number, number, undefined>): number[] {
  const out: number[] = [];
  for (let step = steps.next(); !step.done; step = steps.next()) out.push(step.value);
  return out;
}

/** Base64 of xorshift32 bytes, as bench/scenarios/spaceless-prompt.ts replays it. */
function spaceless(chars: number, seed: number): string {
  const bytes = Buffer.alloc(Math.ceil((chars * 3) / 4));
  let x = seed;
  for (let i = 0; i < bytes.length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    bytes[i] = x & 0xff;
  }
  return bytes.toString('base64').slice(0, chars);
}

const SPACELESS = spaceless(190 * 1024, 0x9e3779b9);
const NORMAL = 'The weather in Paris is mild today; tell me what to wear, please.\n\n'.repeat(400);
const UNICODE =
  'héllo wörld ✓ 日本語のテキスト😀👍🏽 Ünïcödé — ‘quotes’ «guillemets» Привет мир عربى  \t'.repeat(400);

// Fragments that exercise every branch of the o200k pattern, multi-byte UTF-8, surrogate pairs, the
// chunk cuts (spaces after whitespace), the special-token check and lone surrogates.
const FRAGMENTS = [
  'x',
  'X',
  'abc',
  'ABC',
  'Hello',
  "'s",
  "'LL",
  "'Re",
  ' ',
  '  ',
  '\t',
  '\n',
  '\r\n',
  ' \n ',
  '0',
  '123',
  '45678',
  '+',
  '/',
  '=',
  '...',
  '!?',
  'é',
  'É',
  'ß',
  '\u0301',
  'ǅ',
  'ʰ',
  '日本語',
  'カタカナ',
  'ไทย',
  'مرحبا',
  '😀',
  '👍🏽',
  '🇫🇷',
  '\u00a0',
  '\u2028',
  '<|',
  '|>',
  '<|endoftext|>',
  '\ud800',
  '\udc00',
];

function settle<T>(run: () => T): T | string {
  try {
    return run();
  } catch (err) {
    return (err as Error).message;
  }
}

test('countChunk equals countTokens on text from every kind of piece (and refuses what it refuses)', () => {
  fc.assert(
    fc.property(fc.array(fc.constantFrom(...FRAGMENTS), { maxLength: 120 }), (parts) => {
      const text = parts.join('');
      assert.equal(
        settle(() => countChunk(text)),
        settle(() => countTokens(text)),
        JSON.stringify(text),
      );
    }),
    { numRuns: 2000 },
  );
  fc.assert(
    fc.property(fc.string({ unit: 'binary', maxLength: 300 }), (text) => {
      assert.equal(
        settle(() => countChunk(text)),
        settle(() => countTokens(text)),
        JSON.stringify(text),
      );
    }),
    { numRuns: 1000 },
  );
});

test('countSteps cuts the same chunks as hooks/usage/token-slices.ts and gives the same totals', () => {
  fc.assert(
    fc.property(fc.array(fc.constantFrom(...FRAGMENTS), { maxLength: 400 }), (parts) => {
      const text = parts.join('');
      // Both refuse a special token in the same chunk.
      assert.deepEqual(
        settle(() => chunkLengths(countSteps(text))),
        settle(() => chunkLengths(referenceSteps(text, (chunk) => countTokens(chunk)))),
      );
      assert.equal(
        settle(() => runToEnd(countSteps(text))),
        settle(() => referenceCount(text)),
      );
    }),
    { numRuns: 300 },
  );
  for (const text of [SPACELESS, '7'.padEnd(190 * 1024, 'x'), NORMAL, UNICODE, '日本語の文章'.repeat(3000)]) {
    assert.deepEqual(chunkLengths(countSteps(text)), chunkLengths(referenceSteps(text, () => 0)));
    assert.equal(runToEnd(countSteps(text)), referenceCount(text));
  }
});

let sim: UpstreamSim;
before(async () => {
  sim = await startUpstreamSim({ record: false });
});
after(() => sim.close());

const HEADERS = {
  'content-type': 'application/json',
  authorization: 'Bearer sk-test',
  'x-api-key': 'sk-test',
  'anthropic-version': '2023-06-01',
  'x-goog-api-key': 'sk-test',
};

async function post(path: string, body: unknown): Promise<string> {
  const res = await fetch(`${sim.url}${path}`, {
    method: 'POST',
    headers: HEADERS,
    body: JSON.stringify(body),
  });
  const text = await res.text();
  assert.equal(res.status, 200, text.slice(0, 300));
  return text;
}

function events(sse: string): Record<string, unknown>[] {
  return sse
    .split('\n')
    .filter((line) => line.startsWith('data: ') && line !== 'data: [DONE]')
    .map((line) => JSON.parse(line.slice(6)) as Record<string, unknown>);
}

interface Counts {
  prompt: number;
  completion: number;
}

type Usage = Record<string, number>;

/** Prompt and completion tokens as each endpoint reports them, plain and streamed. */
async function reported(prompt: string): Promise<Record<string, Counts>> {
  const out: Record<string, Counts> = {};
  const completions = { model: 'gpt-3.5-turbo-instruct', prompt, stream_options: { include_usage: true } };
  const chat = {
    model: 'gpt-4o',
    messages: [{ role: 'user', content: prompt }],
    stream_options: { include_usage: true },
  };
  const messages = {
    model: 'claude-sonnet-4',
    max_tokens: 100,
    messages: [{ role: 'user', content: prompt }],
  };
  const gemini = { contents: [{ role: 'user', parts: [{ text: prompt }] }] };
  for (const stream of [false, true]) {
    const how = stream ? 'stream' : 'plain';
    const c = stream
      ? (events(await post('/v1/completions', { ...completions, stream })).at(-1)!.usage as Usage)
      : (JSON.parse(await post('/v1/completions', completions)).usage as Usage);
    out[`completions ${how}`] = { prompt: c.prompt_tokens!, completion: c.completion_tokens! };
    const ch = stream
      ? (events(await post('/v1/chat/completions', { ...chat, stream })).at(-1)!.usage as Usage)
      : (JSON.parse(await post('/v1/chat/completions', chat)).usage as Usage);
    out[`chat ${how}`] = { prompt: ch.prompt_tokens!, completion: ch.completion_tokens! };
    if (stream) {
      const ev = events(await post('/v1/messages', { ...messages, stream }));
      const start = (ev.find((e) => e.type === 'message_start')!.message as { usage: Usage }).usage;
      const delta = ev.find((e) => e.type === 'message_delta')!.usage as Usage;
      out[`messages ${how}`] = { prompt: start.input_tokens!, completion: delta.output_tokens! };
    } else {
      const m = JSON.parse(await post('/v1/messages', messages)).usage as Usage;
      out[`messages ${how}`] = { prompt: m.input_tokens!, completion: m.output_tokens! };
    }
    const g = stream
      ? (events(await post('/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse', gemini)).at(-1)!
          .usageMetadata as Usage)
      : (JSON.parse(await post('/v1beta/models/gemini-2.0-flash:generateContent', gemini))
          .usageMetadata as Usage);
    out[`gemini ${how}`] = { prompt: g.promptTokenCount!, completion: g.candidatesTokenCount! };
  }
  return out;
}

/** The per-request overheads the simulator adds to the prompt's own count (README "Usage"). */
function expected(promptTokens: number, completion: { short: number; long: number }): Record<string, Counts> {
  const out: Record<string, Counts> = {};
  for (const how of ['plain', 'stream']) {
    // /v1/completions defaults to max_tokens 16; the others answer the whole reply.
    out[`completions ${how}`] = { prompt: promptTokens, completion: completion.short };
    // 3 for the reply's priming, 3 per message and tokens('user') = 1; Anthropic 4 per message.
    out[`chat ${how}`] = { prompt: promptTokens + 7, completion: completion.long };
    out[`messages ${how}`] = { prompt: promptTokens + 4, completion: completion.long };
    out[`gemini ${how}`] = { prompt: promptTokens, completion: completion.long };
  }
  return out;
}

test('a 190 KB prompt without spaces: the counts of before, on every endpoint, plain and streamed', async () => {
  // 133,082 is what the simulator reported before its own counter (gpt-tokenizer's countTokens on each
  // chunk), recomputed here that way; 61 is the reply "Echo: <first 64 characters>." with 16 filler words.
  assert.equal(SPACELESS.length, 194_560);
  assert.equal(referenceCount(SPACELESS), 133_082);
  assert.deepEqual(await reported(SPACELESS), expected(133_082, { short: 16, long: 61 }));
});

test('normal and unicode prompts: the same counts as countTokens chunk by chunk', async () => {
  for (const prompt of [NORMAL, UNICODE]) {
    const counts = await reported(prompt);
    const prompts = Object.values(counts).map((c) => c.prompt);
    const base = referenceCount(prompt);
    assert.deepEqual(prompts, [base, base + 7, base + 4, base, base, base + 7, base + 4, base]);
  }
});
