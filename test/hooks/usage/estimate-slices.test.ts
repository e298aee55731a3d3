// The estimate of a 150 KB prompt without spaces, counted with the real tokenizer: how much one
// synchronous slice does (characters and tokenizer calls, not milliseconds), and that the encodings are
// loaded before, never on the way.

import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { test } from 'node:test';
import { requestTextOf } from '../../../hooks/families/index.ts';
import { estimateUsageInSlices, loadedEncodings, preloadEncodings } from '../../../hooks/usage/estimate.ts';
import { CHUNK_MAX, SLICE } from '../../../hooks/usage/token-slices.ts';

const require = createRequire(import.meta.url);

test('preloadEncodings loads both encodings; the estimate then loads none', async () => {
  assert.deepEqual(loadedEncodings(), [], 'this file loads nothing before it asks');
  preloadEncodings();
  assert.deepEqual([...loadedEncodings()].sort(), ['cl100k_base', 'o200k_base']);

  const o200k = require('gpt-tokenizer/encoding/o200k_base') as {
    countTokens: (t: string, o?: unknown) => number;
  };
  const real = o200k.countTokens;
  let calls = 0;
  let chars = 0;
  let mostCalls = 0;
  let mostChars = 0;
  let slices = 0;
  let counting = true;
  o200k.countTokens = (text: string, opts?: unknown) => {
    calls++;
    chars += text.length;
    mostCalls = Math.max(mostCalls, calls);
    mostChars = Math.max(mostChars, chars);
    return real(text, opts);
  };
  // Runs once per event-loop turn, after the slicer's own immediate of that turn: closes a slice.
  const marker = (): void => {
    if (calls > 0) slices++;
    calls = 0;
    chars = 0;
    if (counting) setImmediate(marker);
  };
  try {
    // No chunk equals the one before it, so every chunk reaches the tokenizer (a run of one character
    // would be counted once per distinct chunk: token-slices.ts).
    let prompt = '';
    for (let i = 0; prompt.length < 150 * 1024; i++)
      prompt += `${'x'.repeat(CHUNK_MAX - 1)}${String.fromCharCode(97 + (i % 26))}`;
    const pending = estimateUsageInSlices({
      model: 'gpt-4o-mini',
      requestText: requestTextOf('openai', 'chat.completions'),
      requestBody: { model: 'gpt-4o-mini', messages: [{ role: 'user', content: prompt }] },
      outputText: '',
    });
    setImmediate(marker);
    assert.ok(pending instanceof Promise, 'a 150 KB prompt is not counted in one go');
    const usage = await pending;
    counting = false;
    assert.ok(usage.inputTokens > (150 * 1024) / 16, `${usage.inputTokens} input tokens`);
    // A slice ends after the chunk that reaches its budget: at most one chunk past it.
    assert.ok(mostChars <= SLICE.chars + CHUNK_MAX, `a slice counted ${mostChars} characters`);
    assert.ok(mostCalls <= SLICE.chars / CHUNK_MAX + 1, `a slice made ${mostCalls} tokenizer calls`);
    assert.ok(slices >= (150 * 1024) / (SLICE.chars + CHUNK_MAX), `${slices} slices`);
    assert.deepEqual([...loadedEncodings()].sort(), ['cl100k_base', 'o200k_base']);
  } finally {
    o200k.countTokens = real;
  }
});
