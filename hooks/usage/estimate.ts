// Usage estimation for replies that report none (some OpenAI-compatible servers, aborted streams,
// Gemini embeddings). Counts tokens with gpt-tokenizer. Loading an encoding is one synchronous step of
// hundreds of milliseconds, so the gateway loads both before it listens (preloadEncodings): no request
// ever waits on it, and no load stalls the event loop while it serves.
//
// Encoding by model family:
// - cl100k_base: gpt-3.5*, gpt-4 / gpt-4-turbo / gpt-4-32k (not gpt-4o / gpt-4.1 / gpt-4.5),
//   text-embedding-3-*, text-embedding-ada-002 and the ada / babbage / davinci generation;
// - o200k_base: gpt-4o, gpt-4.1, gpt-4.5, gpt-5*, o-series, and every model not listed above.
//   Claude and Gemini tokenizers are not public; o200k_base is the closest public approximation (both
//   are large modern BPE/SentencePiece vocabularies and land within a few percent on English prose).
//
// Input = tokens of the text fields of the request and the text parts inside them (never ids, URLs or
// image/audio data), tool definitions and tool inputs by the provider's published rules, plus the framing
// the provider adds around messages: the wire family of the body says which fields, which rules and how
// much framing (RequestText, hooks/families/*/request-text.ts). Callers pass the body as the serving
// provider reads it (translated) with that provider's family, so its framing is the one counted. Output
// = tokens of the delivered text. Reasoning tokens a model spent without showing them cannot be estimated.
//
// Measured error: test/hooks/usage/estimate.test.ts computes the mean absolute percentage error against
// test/fixtures/usage/recorded-usage.json and asserts it stays under the bound stated there.
//
// Counting is linear in the text and can run in slices (token-slices.ts): the gateway settles usage
// with estimateUsageInSlices, so a huge prompt never holds the event loop for long.

import { createRequire } from 'node:module';
import type { JsonObject, JsonValue, Usage } from '../../common/types.ts';
import { countSteps, runInSlices, runToEnd, type SliceBudget } from './token-slices.ts';
import type { RequestText } from './types.ts';

type EncodingName = 'o200k_base' | 'cl100k_base';
type EncodingModule = typeof import('gpt-tokenizer/encoding/o200k_base');

const requireFromHere = createRequire(import.meta.url);
const encodings = new Map<EncodingName, EncodingModule>();

function loadEncoding(name: EncodingName): EncodingModule {
  let encoding = encodings.get(name);
  if (!encoding) {
    // Synchronous on purpose: countTokens answers synchronously (the embeddings translator); the
    // CommonJS build of the same package is loaded through require.
    encoding = requireFromHere(`gpt-tokenizer/encoding/${name}`) as EncodingModule;
    encodings.set(name, encoding);
  }
  return encoding;
}

/** Loads every encoding the estimate uses; the gateway calls it before it accepts connections. */
export function preloadEncodings(): void {
  for (const name of ENCODINGS) loadEncoding(name).countTokens('warm up', AS_PLAIN_TEXT);
}

/** Encodings loaded so far (tests check that none is loaded on the request path). */
export function loadedEncodings(): readonly EncodingName[] {
  return [...encodings.keys()];
}

const ENCODINGS: readonly EncodingName[] = ['o200k_base', 'cl100k_base'];

const CL100K_MODEL =
  /^(gpt-3\.5|gpt-35|gpt-4(?![o.])|text-embedding-3|text-embedding-ada|davinci-002|babbage-002)/;

export function encodingForModel(model: string): EncodingName {
  // "openai/gpt-4" style ids name the family after the last slash.
  const bare = model.slice(model.lastIndexOf('/') + 1).toLowerCase();
  return CL100K_MODEL.test(bare) ? 'cl100k_base' : 'o200k_base';
}

/** Special-token text such as "<|endoftext|>" in user input is counted as ordinary text, never rejected. */
const AS_PLAIN_TEXT = { disallowedSpecial: new Set<string>() };

/** Above this many characters, count a prefix and extrapolate: bounds the CPU one huge text costs. */
const FULL_COUNT_LIMIT = 2_000_000;
const SAMPLE_CHARS = 500_000;

/** The common rule of thumb (~4 characters per token), if the tokenizer itself fails. */
function roughTokens(text: string): number {
  return Math.ceil(text.length / 4);
}

function* tokenSteps(text: string, model: string): Generator<number, number, undefined> {
  if (text.length === 0) return 0;
  let encoding: EncodingModule;
  try {
    encoding = loadEncoding(encodingForModel(model));
  } catch {
    return roughTokens(text);
  }
  const counted = text.length <= FULL_COUNT_LIMIT ? text : text.slice(0, SAMPLE_CHARS);
  let tokens: number;
  try {
    tokens = yield* countSteps(counted, (chunk) => encoding.countTokens(chunk, AS_PLAIN_TEXT));
  } catch {
    return roughTokens(text);
  }
  return counted === text ? tokens : Math.round((tokens / SAMPLE_CHARS) * text.length);
}

/** Tokens of one text, counted at once (linear in its length). */
export function countTokens(text: string, model: string): number {
  return runToEnd(tokenSteps(text, model));
}

interface TextTally {
  texts: string[];
  /** Token ids given directly (embeddings / completions accept token arrays). */
  rawTokens: number;
}

function collectText(
  value: JsonValue | undefined,
  keys: ReadonlySet<string>,
  tally: TextTally,
  depth: number,
): void {
  if (value === undefined || value === null || depth > 32) return;
  if (typeof value === 'string') {
    tally.texts.push(value);
    return;
  }
  if (typeof value === 'number') {
    tally.rawTokens++;
    return;
  }
  if (Array.isArray(value)) {
    for (const item of value) collectText(item, keys, tally, depth + 1);
    return;
  }
  if (typeof value !== 'object') return;
  for (const key of Object.keys(value)) {
    if (keys.has(key)) collectText(value[key], keys, tally, depth + 1);
  }
}

export interface EstimateInput {
  model: string;
  /** Where the body holds text: the family's of the body, for its api (requestTextOf). */
  requestText: RequestText;
  requestBody: JsonObject | undefined;
  outputText: string;
}

function* inputSteps(
  model: string,
  requestText: RequestText,
  body: JsonObject | undefined,
): Generator<number, number, undefined> {
  if (!body) return 0;
  const tally: TextTally = { texts: [], rawTokens: 0 };
  for (const key of requestText.fields) collectText(body[key], requestText.keys, tally, 0);
  const parts = requestText.parts(body, model);
  let tokens = tally.rawTokens + parts.tokens;
  for (const text of tally.texts) tokens += yield* tokenSteps(text, model);
  for (const text of parts.texts) tokens += yield* tokenSteps(text, model);
  return tokens + requestText.framing(body);
}

/** The estimate as steps (token-slices.ts): each yields the characters it counted. */
export function* estimateUsageSteps(input: EstimateInput): Generator<number, Usage, undefined> {
  const inputTokens = yield* inputSteps(input.model, input.requestText, input.requestBody);
  const outputTokens = yield* tokenSteps(input.outputText, input.model);
  return { inputTokens, outputTokens, totalTokens: inputTokens + outputTokens };
}

/**
 * Whether the request's input is text only, which the estimator can count (no part type or key the
 * families mark as media; bounded depth).
 */
export function textOnlyInput(value: JsonValue | undefined, requestText: RequestText, depth = 0): boolean {
  if (value === null || typeof value !== 'object' || depth > 32) return true;
  if (Array.isArray(value)) return value.every((item) => textOnlyInput(item, requestText, depth + 1));
  if (typeof value['type'] === 'string' && requestText.mediaTypes.has(value['type'])) return false;
  for (const key of Object.keys(value)) {
    if (requestText.mediaKeys.has(key)) return false;
    if (!textOnlyInput(value[key], requestText, depth + 1)) return false;
  }
  return true;
}

export function estimateInputTokens(
  model: string,
  requestText: RequestText,
  body: JsonObject | undefined,
): number {
  return runToEnd(inputSteps(model, requestText, body));
}

/** The estimate, counted at once. */
export function estimateUsage(input: EstimateInput): Usage {
  return runToEnd(estimateUsageSteps(input));
}

/** The estimate, synchronously when it fits in one slice, else a promise (the rest in later turns). */
export function estimateUsageInSlices(input: EstimateInput, budget?: SliceBudget): Usage | Promise<Usage> {
  return runInSlices(estimateUsageSteps(input), budget);
}
