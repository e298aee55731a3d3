// Deterministic content: reply text derived from the prompt, token counts (o200k_base, like the
// current OpenAI models), stream piece splitting, tool-call arguments and embedding vectors.

import { decode, encode } from 'gpt-tokenizer/encoding/o200k_base';
import { runInSlices, runToEnd } from '../../hooks/usage/token-slices.ts';
import { countSteps } from './token-count.ts';
import type { Knobs } from './types.ts';

export const UNICODE_SAMPLE = 'héllo wörld ✓ 日本語';
const FILLER = (
  'the simulator streams deterministic filler text so that usage numbers stay stable across runs ' +
  'and tests can assert exact output without any real model behind it'
).split(' ');
const ECHO_WORDS = 8;
/** Longest echoed word: a prompt without spaces must not come back whole. */
const ECHO_WORD_MAX = 64;

// Benchmarks send the same prompts over and over; tokenizing them once keeps the simulator off the profile.
const TOKEN_CACHE_MAX = 4096;
const TOKEN_CACHE_KEY_MAX = 16_384;
const tokenCache = new Map<string, number>();
/** Counts of the current request's long strings, from precountTokens (see withPrecounted). */
let precounted: ReadonlyMap<string, number> | undefined;

// Text is counted in chunks of bounded length, so counting is linear in the text's length
// (hooks/usage/token-slices.ts says why and where the cuts go; token-count.ts counts them).

export function tokens(text: string): number {
  if (text === '') return 0;
  const hit = tokenCache.get(text) ?? precounted?.get(text);
  if (hit !== undefined) return hit;
  const n = runToEnd(countSteps(text));
  if (text.length <= TOKEN_CACHE_KEY_MAX) {
    if (tokenCache.size >= TOKEN_CACHE_MAX) tokenCache.clear();
    tokenCache.set(text, n);
  }
  return n;
}

/** Strings of a request body at least this long are counted before the handler, in slices. */
const PRECOUNT_MIN = 2048;

function collectLong(value: unknown, out: string[], depth: number): void {
  if (typeof value === 'string') {
    if (value.length >= PRECOUNT_MIN) out.push(value);
  } else if (typeof value === 'object' && value !== null && depth < 32) {
    for (const item of Array.isArray(value) ? value : Object.values(value)) collectLong(item, out, depth + 1);
  }
}

function* precountSteps(texts: string[]): Generator<number, Map<string, number>, undefined> {
  const counts = new Map<string, number>();
  for (const text of texts) {
    if (!counts.has(text)) counts.set(text, yield* countSteps(text));
  }
  return counts;
}

/**
 * Token counts of the long strings in a request body, counted a slice per event-loop turn when there
 * is much to count (so the simulator keeps serving while a huge prompt is counted).
 */
export function precountTokens(json: unknown): Map<string, number> | Promise<Map<string, number>> {
  const texts: string[] = [];
  collectLong(json, texts, 0);
  return runInSlices(precountSteps(texts));
}

/** Runs a handler with precounted counts in reach of tokens() (its synchronous part). */
export function withPrecounted<T>(counts: ReadonlyMap<string, number>, run: () => T): T {
  precounted = counts.size > 0 ? counts : undefined;
  try {
    return run();
  } finally {
    precounted = undefined;
  }
}

function echoWord(word: string): string {
  if (word.length <= ECHO_WORD_MAX) return word;
  const code = word.charCodeAt(ECHO_WORD_MAX - 1);
  // never half of a surrogate pair
  return word.slice(0, code >= 0xd800 && code <= 0xdbff ? ECHO_WORD_MAX - 1 : ECHO_WORD_MAX);
}

/** Cuts text to at most maxTokens tokens; reports whether it had to. */
export function truncateToTokens(text: string, maxTokens: number): { text: string; truncated: boolean } {
  if (tokens(text) <= maxTokens) return { text, truncated: false };
  return { text: decode(encode(text).slice(0, Math.max(0, maxTokens))), truncated: true };
}

/** The first words of the prompt, as the echo quotes them. */
export function echoWords(userText: string): string {
  return userText.split(/\s+/).filter(Boolean).slice(0, ECHO_WORDS).map(echoWord).join(' ');
}

/** "Echo: <first words of the prompt>." plus filler words, optionally with multi-byte text. */
export function replyText(userText: string, knobs: Knobs): string {
  const words = echoWords(userText);
  let out = `Echo: ${words === '' ? '(empty)' : words}.`;
  if (knobs.unicode || /unicode/i.test(userText)) out += ` ${UNICODE_SAMPLE}.`;
  if (knobs.words > 0) {
    const filler: string[] = new Array(knobs.words);
    for (let i = 0; i < knobs.words; i++) filler[i] = FILLER[i % FILLER.length]!;
    out += ` ${filler.join(' ')}.`;
  }
  return out;
}

/** Splits text into exactly n non-empty pieces (fewer if it is shorter), never inside a code point. */
export function splitPieces(text: string, n: number): string[] {
  const points = Array.from(text);
  const count = Math.max(1, Math.min(n, points.length));
  const pieces: string[] = [];
  for (let i = 0; i < count; i++) {
    const start = Math.floor((i * points.length) / count);
    const end = Math.floor(((i + 1) * points.length) / count);
    pieces.push(points.slice(start, end).join(''));
  }
  return pieces;
}

export interface ToolCallPlan {
  name: string;
  args: { location: string; unit: string };
  argsJson: string;
}

/** The tool call the simulated model makes: location from "weather in <Place>", else Paris. */
export function toolCall(name: string, userText: string): ToolCallPlan {
  // A capitalised place name ("New York"), else the single word after the preposition.
  const m =
    /weather (?:in|for|at) (\p{Lu}[\p{L}'-]*(?: \p{Lu}[\p{L}'-]*)*)/u.exec(userText) ??
    /weather (?:in|for|at) ([\p{L}'-]+)/iu.exec(userText);
  const args = { location: m?.[1] ?? 'Paris', unit: 'celsius' };
  return { name, args, argsJson: JSON.stringify(args) };
}

/**
 * The tool calls the simulated model makes: one per "weather in <Place>" of the prompt when `parallel`
 * (one call, the first place, otherwise).
 */
export function toolCallsFor(name: string, userText: string, parallel: boolean): ToolCallPlan[] {
  const places = [
    ...userText.matchAll(/weather (?:in|for|at) (\p{Lu}[\p{L}'-]*(?: \p{Lu}[\p{L}'-]*)*)/gu),
  ].map((m) => m[1]!);
  if (places.length < 2 || !parallel) return [toolCall(name, userText)];
  return places.map((location) => {
    const args = { location, unit: 'celsius' };
    return { name, args, argsJson: JSON.stringify(args) };
  });
}

/** The reasoning a request that asks for it gets before the answer. */
export function reasoningText(userText: string): string {
  return `Thinking about: ${echoWords(userText)}.`;
}

/**
 * Whether to answer with a tool call: tools are offered, the conversation ends with a user turn (not a
 * tool result, so agent loops terminate), and the prompt mentions weather, the model/knob says "tool",
 * or the caller forces it (tool_choice required).
 */
export function wantsTool(opts: {
  toolName: string | undefined;
  lastIsUser: boolean;
  userText: string;
  knobs: Knobs;
  forced: boolean;
  disabled: boolean;
}): boolean {
  if (opts.toolName === undefined || opts.disabled || !opts.lastIsUser) return false;
  return opts.forced || opts.knobs.tool || /weather/i.test(opts.userText);
}

let idSeq = 0;
/** Short unique ids, cheaper than random ones; prefixes match the real APIs (chatcmpl-, msg_, …). */
export function nextId(prefix: string): string {
  idSeq = (idSeq + 1) % 0x7fffffff;
  return `${prefix}sim${idSeq.toString(36).padStart(6, '0')}`;
}

export function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}

function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** A unit-length vector seeded by the text (same text, same vector), xorshift32 values. */
export function embeddingVector(text: string, dims: number): Float32Array {
  const out = new Float32Array(dims);
  let x = fnv1a(text) || 1;
  let norm = 0;
  for (let i = 0; i < dims; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    const v = ((x >>> 0) / 0xffffffff) * 2 - 1;
    out[i] = v;
    norm += v * v;
  }
  const scale = norm > 0 ? 1 / Math.sqrt(norm) : 1;
  for (let i = 0; i < dims; i++) out[i]! *= scale;
  return out;
}

export function float32ToBase64(v: Float32Array): string {
  return Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64');
}

export function vectorToArray(v: Float32Array): number[] {
  return Array.from(v);
}

// Small readers for untyped request JSON.
export function asObject(v: unknown): Record<string, unknown> | undefined {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
    ? (v as Record<string, unknown>)
    : undefined;
}

export function asArray(v: unknown): unknown[] {
  return Array.isArray(v) ? v : [];
}

export function asString(v: unknown): string | undefined {
  return typeof v === 'string' ? v : undefined;
}

export function asNumber(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isFinite(v) ? v : undefined;
}

/** Text of a content value that is a string or an array of {text} parts (OpenAI, Anthropic, Gemini). */
export function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  let out = '';
  for (const part of asArray(content)) {
    const text = asString(asObject(part)?.text);
    if (text !== undefined) out = out === '' ? text : `${out}\n${text}`;
  }
  return out;
}
