import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { test } from 'node:test';
import {
  CHUNK_MAX,
  chunkEnd,
  countSteps,
  runInSlices,
  runToEnd,
  SLICE,
} from '../../../hooks/usage/token-slices.ts';

type Encoding = typeof import('gpt-tokenizer/encoding/o200k_base');
const requireHere = createRequire(import.meta.url);
const AS_TEXT = { disallowedSpecial: new Set<string>() };

/** Ordinary text: every doc of the repository, prose, tables, code blocks and newlines. */
function docsText(): string {
  const dir = new URL('../../../docs/', import.meta.url);
  return readdirSync(dir)
    .map((name) => readFileSync(new URL(name, dir), 'utf8'))
    .join('\n');
}

function chunks(text: string): string[] {
  const out: string[] = [];
  for (let start = 0; start < text.length; ) {
    const end = chunkEnd(text, start);
    out.push(text.slice(start, end));
    start = end;
  }
  return out;
}

test('ordinary text counts exactly as it does whole, in both encodings', () => {
  const text = docsText();
  assert.ok(text.length > 50_000);
  for (const name of ['o200k_base', 'cl100k_base']) {
    const encoding = requireHere(`gpt-tokenizer/encoding/${name}`) as Encoding;
    const whole = encoding.countTokens(text, AS_TEXT);
    const chunked = runToEnd(countSteps(text, (chunk) => encoding.countTokens(chunk, AS_TEXT)));
    assert.equal(chunked, whole, name);
  }
});

test('chunks are bounded, cover the text, and never split a surrogate pair', () => {
  const emoji = '😀🎉👍'.repeat(400);
  const mixed = `${'x'.repeat(1000)} ${'日本語'.repeat(300)}\n${emoji}  end`;
  for (const text of [emoji, mixed, 'y'.repeat(CHUNK_MAX * 3 + 7), docsText()]) {
    const parts = chunks(text);
    assert.equal(parts.join(''), text);
    for (const part of parts) {
      assert.ok(part.length > 0 && part.length <= CHUNK_MAX);
      const last = part.charCodeAt(part.length - 1);
      assert.ok(!(last >= 0xd800 && last <= 0xdbff), 'a chunk ends with a high surrogate');
    }
  }
});

test('a small input is counted synchronously, in its first slice', () => {
  const result = runInSlices(countSteps('a short prompt', (chunk) => chunk.length));
  assert.equal(result, 14);
});

/** Text without spaces in which no chunk equals the one before it (so each one reaches the counter). */
function distinctChunks(length: number): string {
  let text = '';
  for (let i = 0; text.length < length; i++)
    text += `${'z'.repeat(CHUNK_MAX - 1)}${String.fromCharCode(97 + (i % 26))}`;
  return text.slice(0, length);
}

test('a large input yields to the event loop between slices, and no slice exceeds its budget', async () => {
  const text = distinctChunks(SLICE.chars * 10);
  const order: string[] = [];
  let inSlice = 0;
  let most = 0;
  let slices = 0;
  let counting = true;
  const count = (chunk: string): number => {
    inSlice += chunk.length;
    most = Math.max(most, inSlice);
    return 1;
  };
  // Runs once per event-loop turn, right after the slicer's own immediate of that turn.
  const marker = (): void => {
    if (inSlice > 0) slices++;
    inSlice = 0;
    if (counting) setImmediate(marker);
  };
  setImmediate(() => order.push('immediate scheduled before'));
  const pending = runInSlices(countSteps(text, count));
  slices = 1;
  inSlice = 0;
  setImmediate(marker);
  assert.ok(pending instanceof Promise, 'a large input must not be counted in one go');
  const resolved = await pending;
  counting = false;
  order.push('counted');
  assert.deepEqual(order, ['immediate scheduled before', 'counted']);
  assert.equal(resolved, Math.ceil(text.length / CHUNK_MAX));
  assert.ok(most <= SLICE.chars + CHUNK_MAX, `a slice counted ${most} characters`);
  assert.ok(slices >= 10, `${slices} slices`);
});

test('many large inputs at once share one budget per event-loop turn, counted in turn', async () => {
  const texts = Array.from({ length: 20 }, () => distinctChunks(SLICE.chars * 3));
  let inTurn = 0;
  let most = 0;
  let counting = true;
  const count = (chunk: string): number => {
    inTurn += chunk.length;
    most = Math.max(most, inTurn);
    return 1;
  };
  const marker = (): void => {
    inTurn = 0;
    if (counting) setImmediate(marker);
  };
  const pending = texts.map((text) => runInSlices(countSteps(text, count)));
  // The first one's first slice ran at once (nothing was waiting); the others wait their turn.
  inTurn = 0;
  most = 0;
  setImmediate(marker);
  const totals = await Promise.all(pending);
  counting = false;
  for (const [i, total] of totals.entries()) assert.equal(total, Math.ceil(texts[i]!.length / CHUNK_MAX));
  // A slice per input and turn would count 20 inputs' slices in one turn.
  assert.ok(most <= SLICE.chars + CHUNK_MAX, `a turn counted ${most} characters`);
});

test('a chunk equal to the one before it is not counted again, and the total is the same', () => {
  // Runs of one character, then a pattern whose period divides the chunk length, then ordinary text.
  const text = `${'x'.repeat(CHUNK_MAX * 40 + 17)}${'ab'.repeat(CHUNK_MAX * 8)}${docsText().slice(0, 20_000)}`;
  const parts = chunks(text);
  const encoding = requireHere('gpt-tokenizer/encoding/o200k_base') as Encoding;
  const seen: string[] = [];
  const counted = runToEnd(
    countSteps(text, (chunk) => {
      seen.push(chunk);
      return encoding.countTokens(chunk, AS_TEXT);
    }),
  );
  const each = parts.reduce((sum, part) => sum + encoding.countTokens(part, AS_TEXT), 0);
  assert.equal(counted, each);
  // Only the chunks that differ from the one before reach the tokenizer.
  const distinct = parts.filter((part, i) => i === 0 || part !== parts[i - 1]);
  assert.deepEqual(seen, distinct);
  assert.ok(seen.length < parts.length - 40, `${seen.length} of ${parts.length} chunks counted`);
});
