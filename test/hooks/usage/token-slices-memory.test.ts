// Counting a text must not keep it: gpt-tokenizer's merge cache holds on to the pieces it merged (up to
// 100,000), and a piece sliced from a prompt kept the whole prompt alive, so every estimated prompt with a
// rare long word stayed in the heap (docs/benchmarks.md, "Soak: memory under mixed load").

import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { test } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { countSteps, runToEnd } from '../../../hooks/usage/token-slices.ts';

type Encoding = typeof import('gpt-tokenizer/encoding/o200k_base');
const requireHere = createRequire(import.meta.url);
const AS_TEXT = { disallowedSpecial: new Set<string>() };

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

function heapAfterGc(): number {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}

/** A word no other call has: letters only, so that it is one piece longer than V8 copies outright. */
function rareWord(i: number): string {
  return `zyxwvutsr${[...i.toString(26)].map((d) => String.fromCharCode(97 + Number.parseInt(d, 26))).join('')}qwvkjhgfdsa`;
}

test('texts counted in chunks are not kept by the tokenizer cache', () => {
  const encoding = requireHere('gpt-tokenizer/encoding/o200k_base') as Encoding;
  const count = (text: string) => runToEnd(countSteps(text, (chunk) => encoding.countTokens(chunk, AS_TEXT)));
  count(`${rareWord(1_000_000)} warm-up`);
  const before = heapAfterGc();
  const texts = 20;
  const bytes = 500_000;
  for (let i = 0; i < texts; i++) {
    assert.ok(count(`${rareWord(i)} ${'benchmark '.repeat(bytes / 10)}`) > bytes / 10);
  }
  const grown = heapAfterGc() - before;
  assert.ok(grown < (texts * bytes) / 4, `heap grew by ${grown} bytes after counting ${texts * bytes}`);
});
