// o200k_base token counts in linear time, the same counts gpt-tokenizer's countTokens gives chunk by chunk.
//
// Not countTokens itself: its merge cache is an LRU on a Map, and evicting the oldest entry with
// keys().next() walks past every entry deleted since the Map was last rehashed; once the cache is full
// (100,000 pieces: a few space-less prompts) each new piece costs more than the last. Pieces are merged
// here on their UTF-8 bytes, held as latin1 strings (one char per byte) so that rank lookups need no
// decoding; the result equals gpt-tokenizer's, which looks byte runs that are valid UTF-8 up by their text
// and the others by their bytes (test/sim/upstream/token-count.test.ts compares the two).

import { isUtf8 } from 'node:buffer';
import bpeRanks from 'gpt-tokenizer/bpeRanks/o200k_base';
import { countTokens } from 'gpt-tokenizer/encoding/o200k_base';
import { O200K_TOKEN_SPLIT_REGEX } from 'gpt-tokenizer/encodingParams/constants';
import { countSteps as sliceSteps } from '../../hooks/usage/token-slices.ts';

const NON_ASCII = /[\u0080-\uffff]/;
// Sticky: test() moves lastIndex to the end of each piece, with no match arrays to allocate.
const PIECE = new RegExp(O200K_TOKEN_SPLIT_REGEX.source, 'uy');
const NONE = 0x7fffffff;
/** Pieces at least this many bytes long are remembered: a space-less run repeats the same long piece. */
const MEMO_MIN = 32;
const MEMO_MAX = 4096;

interface Vocabulary {
  /** Rank of each token, keyed by its bytes as a latin1 string. */
  ranks: Map<string, number>;
  /** Rank of each two-byte token at (first << 8) | second, NONE where there is none. */
  pairs: Int32Array;
}

let vocabulary: Vocabulary | undefined;
const memo = new Map<string, number>();
// Scratch of merge(): part starts and the rank of merging each part with the next.
let starts = new Int32Array(1024);
let pairRanks = new Int32Array(1024);

/** Builds the rank table (once; main.ts does it before listening so no request pays for it). */
export function loadVocabulary(): void {
  if (vocabulary !== undefined) return;
  const ranks = new Map<string, number>();
  const pairs = new Int32Array(1 << 16).fill(NONE);
  const add = (key: string, rank: number): void => {
    ranks.set(key, rank);
    if (key.length === 2) pairs[(key.charCodeAt(0) << 8) | key.charCodeAt(1)] = rank;
  };
  const wide: string[] = [];
  const wideRanks: number[] = [];
  for (let rank = 0; rank < bpeRanks.length; rank++) {
    const token = bpeRanks[rank];
    if (typeof token === 'string') {
      if (!NON_ASCII.test(token)) add(token, rank);
      else {
        wide.push(token);
        wideRanks.push(rank);
      }
    } else if (token !== undefined) {
      // gpt-tokenizer finds byte runs that are valid UTF-8 only among the text tokens.
      const bytes = Buffer.from(token);
      if (!isUtf8(bytes)) add(bytes.toString('latin1'), rank);
    }
  }
  // One conversion for all non-ASCII tokens rather than one each.
  const keys = Buffer.from(wide.join('\0'), 'utf8').toString('latin1').split('\0');
  if (keys.length !== wide.length) throw new Error('o200k_base: a token holds the separator');
  for (let i = 0; i < keys.length; i++) add(keys[i]!, wideRanks[i]!);
  vocabulary = { ranks, pairs };
}

/** Tokens of a piece not in the vocabulary: byte-pair merges, lowest rank first, leftmost on ties. */
function merge(v: Vocabulary, key: string): number {
  const n = key.length;
  if (n + 1 > starts.length) {
    starts = new Int32Array(2 * n);
    pairRanks = new Int32Array(2 * n);
  }
  for (let i = 0; i < n - 1; i++) {
    starts[i] = i;
    pairRanks[i] = v.pairs[(key.charCodeAt(i) << 8) | key.charCodeAt(i + 1)]!;
  }
  starts[n - 1] = n - 1;
  starts[n] = n;
  pairRanks[n - 1] = NONE;
  let parts = n;
  for (;;) {
    let lowest = NONE;
    let at = -1;
    for (let i = 0; i < parts - 1; i++) {
      if (pairRanks[i]! < lowest) {
        lowest = pairRanks[i]!;
        at = i;
      }
    }
    if (at < 0) return parts;
    for (let i = at + 1; i < parts; i++) starts[i] = starts[i + 1]!;
    for (let i = at; i < parts - 1; i++) pairRanks[i] = pairRanks[i + 1]!;
    parts--;
    pairRanks[at] = at + 2 <= parts ? (v.ranks.get(key.slice(starts[at]!, starts[at + 2]!)) ?? NONE) : NONE;
    if (at > 0) pairRanks[at - 1] = v.ranks.get(key.slice(starts[at - 1]!, starts[at + 1]!)) ?? NONE;
  }
}

function pieceTokens(v: Vocabulary, key: string): number {
  const n = key.length;
  if (n === 1) return 1;
  if (n === 2) return v.pairs[(key.charCodeAt(0) << 8) | key.charCodeAt(1)] === NONE ? 2 : 1;
  if (v.ranks.has(key)) return 1;
  // Three bytes that are no token: one merge if either pair is a token (the last merge would be the
  // whole piece), else none.
  if (n === 3) {
    const middle = key.charCodeAt(1);
    const left = v.pairs[(key.charCodeAt(0) << 8) | middle];
    const right = v.pairs[(middle << 8) | key.charCodeAt(2)];
    return left === NONE && right === NONE ? 3 : 2;
  }
  if (n < MEMO_MIN) return merge(v, key);
  let count = memo.get(key);
  if (count === undefined) {
    count = merge(v, key);
    if (memo.size >= MEMO_MAX) memo.clear();
    memo.set(key, count);
  }
  return count;
}

/** countTokens(chunk) of gpt-tokenizer's o200k_base, for chunks of hooks/usage/token-slices.ts. */
export function countChunk(chunk: string): number {
  // Special tokens (refused) and lone surrogates are left to gpt-tokenizer, so they stay as it has them.
  if (chunk.includes('<|') || !chunk.isWellFormed()) return countTokens(chunk);
  loadVocabulary();
  const v = vocabulary!;
  const wide = NON_ASCII.test(chunk);
  let count = 0;
  let start = 0;
  PIECE.lastIndex = 0;
  while (start < chunk.length && PIECE.test(chunk)) {
    const end = PIECE.lastIndex;
    const piece = chunk.slice(start, end);
    count += pieceTokens(v, wide ? Buffer.from(piece, 'utf8').toString('latin1') : piece);
    start = end;
  }
  // Every character starts a piece of the pattern, so this is never expected.
  return start < chunk.length ? countTokens(chunk) : count;
}

/** countSteps of hooks/usage/token-slices.ts with countChunk: the same chunks. */
export function countSteps(text: string): Generator<number, number, undefined> {
  return sliceSteps(text, countChunk);
}
