// Deterministic content helpers: piece splitting, reply text, tool arguments, vectors.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { readKnobs } from '../../../sim/upstream/knobs.ts';
import {
  embeddingVector,
  precountTokens,
  replyText,
  splitPieces,
  tokens,
  toolCall,
  withPrecounted,
} from '../../../sim/upstream/text.ts';

test('splitPieces rejoins to the input, gives min(n, code points) pieces, never splits a code point', () => {
  fc.assert(
    fc.property(
      fc.string({ unit: 'grapheme', maxLength: 60 }),
      fc.integer({ min: 1, max: 20 }),
      (text, n) => {
        const pieces = splitPieces(text, n);
        assert.equal(pieces.join(''), text);
        const points = Array.from(text).length;
        assert.equal(pieces.length, Math.max(1, Math.min(n, points)));
        for (const p of pieces) assert.ok(!/^[\uDC00-\uDFFF]|[\uD800-\uDBFF]$/.test(p), 'no lone surrogate');
      },
    ),
  );
});

test('replyText echoes the first words and honours the unicode and words knobs', () => {
  const knobs = readKnobs({ 'x-sim-words': '3' }, '', 0);
  assert.equal(
    replyText('one two three four five six seven eight nine', knobs),
    'Echo: one two three four five six seven eight. the simulator streams.',
  );
  assert.equal(replyText('', { ...knobs, words: 0 }), 'Echo: (empty).');
  assert.match(replyText('hi', { ...knobs, unicode: true }), /héllo wörld ✓ 日本語/);
});

test('toolCall takes the place name after "weather in"', () => {
  assert.equal(toolCall('get_weather', 'What is the weather in New York today?').args.location, 'New York');
  assert.equal(toolCall('get_weather', 'weather for lyon please').args.location, 'lyon');
  assert.equal(toolCall('get_weather', 'is it raining?').args.location, 'Paris');
});

test('embedding vectors are deterministic per text and unit length', () => {
  const a = embeddingVector('hello', 32);
  assert.deepEqual(a, embeddingVector('hello', 32));
  assert.notDeepEqual(a, embeddingVector('hellp', 32));
  const norm = Math.sqrt(a.reduce((s, v) => s + v * v, 0));
  assert.ok(Math.abs(norm - 1) < 1e-5);
});

test('model-name knobs apply when headers are absent', () => {
  const k = readKnobs({}, 'gpt-4o-fail-midstream-reset-chunks-3-no-usage', 5);
  assert.equal(k.fail, 'midstream-reset');
  assert.equal(k.chunks, 3);
  assert.equal(k.chunkDelayMs, 5);
  assert.equal(k.noUsage, true);
  assert.equal(readKnobs({ 'x-sim-chunks': '9' }, 'm-chunks-3', 0).chunks, 9);
  assert.equal(readKnobs({}, 'gpt-4o-mini', 0).fail, undefined);
  assert.equal(readKnobs({ 'x-sim-fail': '200' }, '', 0).fail, undefined, 'only 4xx/5xx statuses');
});

test('tokens() of 200k characters without spaces finishes, close to a linear extrapolation', () => {
  // Super-linear before: the simulator took ~20 s for this prompt.
  const n = tokens('x'.repeat(200_000));
  const sample = tokens('x'.repeat(8_000));
  assert.ok(Math.abs(n - sample * 25) / n < 0.02, `${n} vs ${sample * 25}`);
});

test('a huge prompt is counted in slices before the handler: the event loop runs in between', async () => {
  const prompt = `${'y'.repeat(150_000)} and more`;
  const order: string[] = [];
  setImmediate(() => order.push('immediate scheduled before'));
  const pending = precountTokens({ messages: [{ role: 'user', content: prompt }], model: 'm' });
  assert.ok(pending instanceof Promise, 'a 150 KB prompt is not counted in one go');
  const counts = await pending;
  order.push('counted');
  assert.deepEqual(order, ['immediate scheduled before', 'counted']);
  assert.equal(counts.get(prompt), tokens(prompt));
  assert.equal(
    withPrecounted(counts, () => tokens(prompt)),
    counts.get(prompt),
  );
});

test('replyText echoes at most 64 characters of a word', () => {
  const knobs = readKnobs({ 'x-sim-words': '0' }, '', 0);
  assert.equal(replyText(`${'z'.repeat(100_000)} tail`, knobs), `Echo: ${'z'.repeat(64)} tail.`);
  const emoji = `${'a'.repeat(63)}😀`;
  assert.equal(replyText(emoji, knobs), `Echo: ${'a'.repeat(63)}.`, 'never half a surrogate pair');
});

test('toolCallsFor: one call per place when parallel calls are allowed, else the first', async () => {
  const { toolCallsFor, reasoningText } = await import('../../../sim/upstream/text.ts');
  const question = 'What is the weather in Kyoto and the weather in New York?';
  assert.deepEqual(
    toolCallsFor('get_weather', question, true).map((c) => c.args.location),
    ['Kyoto', 'New York'],
  );
  assert.deepEqual(
    toolCallsFor('get_weather', question, false).map((c) => c.args.location),
    ['Kyoto'],
  );
  assert.deepEqual(
    toolCallsFor('get_weather', 'weather please', true).map((c) => c.args.location),
    ['Paris'],
  );
  assert.equal(reasoningText('why is the sky blue'), 'Thinking about: why is the sky blue.');
});
