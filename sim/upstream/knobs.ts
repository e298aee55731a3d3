// Reads the x-sim-* control headers, falling back to tokens in the model name (for SDK tests where
// extra headers are awkward, e.g. model "sim-fail-500" or "gpt-4o-chunks-3-delay-20").

import type { IncomingHttpHeaders } from 'node:http';
import type { FailMode, Knobs } from './types.ts';

export const DEFAULT_CHUNKS = 8;
export const DEFAULT_WORDS = 16;

const FAIL_WORDS = new Set([
  'reset',
  'midstream',
  'midstream-429',
  'midstream-reset',
  'midstream-end',
  'hang',
]);
const MODEL_FAIL_RE =
  /(?:^|[-_+/])fail-(midstream-reset|midstream-end|midstream-429|midstream|reset|hang|[45]\d\d)(?=$|[-_+])/;
const MODEL_NUM_RE = /(?:^|[-_+/])(chunks|delay|latency|words|cached|cachewrite|hold)-(\d+)(?=$|[-_+])/g;

function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const v = headers[name];
  return Array.isArray(v) ? v[0] : v;
}

function intOr(value: string | undefined, fallback: number, max = 1_000_000): number {
  if (value === undefined) return fallback;
  const n = Number.parseInt(value, 10);
  return Number.isFinite(n) && n >= 0 ? Math.min(n, max) : fallback;
}

export function parseFailMode(value: string | undefined): FailMode | undefined {
  if (value === undefined || value === '') return undefined;
  const v = value.trim().toLowerCase();
  if (FAIL_WORDS.has(v)) return v as FailMode;
  const status = Number.parseInt(v, 10);
  return status >= 400 && status <= 599 ? status : undefined;
}

function isOn(value: string | undefined): boolean {
  return value === '1' || value === 'true' || value === 'yes';
}

/** Knobs for one request. `model` may be empty. */
export function readKnobs(headers: IncomingHttpHeaders, model: string, defaultChunkDelayMs: number): Knobs {
  const knobs: Knobs = {
    chunks: intOr(header(headers, 'x-sim-chunks'), DEFAULT_CHUNKS, 10_000) || 1,
    chunkDelayMs: intOr(header(headers, 'x-sim-chunk-delay-ms'), defaultChunkDelayMs, 60_000),
    latencyMs: intOr(header(headers, 'x-sim-latency-ms'), 0, 600_000),
    fail: parseFailMode(header(headers, 'x-sim-fail')),
    failTimes: undefined,
    failKey: header(headers, 'x-sim-fail-key') ?? '',
    noUsage: isOn(header(headers, 'x-sim-no-usage')),
    unicode: isOn(header(headers, 'x-sim-unicode')),
    tool: isOn(header(headers, 'x-sim-tool')),
    words: intOr(header(headers, 'x-sim-words'), DEFAULT_WORDS, 1_000_000),
    cachedTokens: intOr(header(headers, 'x-sim-cached-tokens'), 0),
    cacheWriteTokens: intOr(header(headers, 'x-sim-cache-write-tokens'), 0),
    reasoningTokens: intOr(header(headers, 'x-sim-reasoning-tokens'), 0),
    replay: header(headers, 'x-sim-replay'),
    holdAfter: undefined,
    countHang: isOn(header(headers, 'x-sim-count-hang')),
  };
  const holdAfter = header(headers, 'x-sim-hold-after');
  if (holdAfter !== undefined) knobs.holdAfter = intOr(holdAfter, 0, 10_000);
  const failTimes = header(headers, 'x-sim-fail-times');
  if (failTimes !== undefined) knobs.failTimes = intOr(failTimes, 0);
  if (model !== '' && model.includes('-')) applyModelKnobs(knobs, model.toLowerCase(), headers);
  return knobs;
}

/** Model-name tokens apply only where the matching header is absent: headers always win. */
function applyModelKnobs(knobs: Knobs, model: string, headers: IncomingHttpHeaders): void {
  if (knobs.fail === undefined) {
    const m = MODEL_FAIL_RE.exec(model);
    if (m) knobs.fail = parseFailMode(m[1]!);
  }
  for (const m of model.matchAll(MODEL_NUM_RE)) {
    const n = Number.parseInt(m[2]!, 10);
    if (m[1] === 'chunks' && headers['x-sim-chunks'] === undefined) knobs.chunks = Math.max(1, n);
    else if (m[1] === 'delay' && headers['x-sim-chunk-delay-ms'] === undefined) knobs.chunkDelayMs = n;
    else if (m[1] === 'latency' && headers['x-sim-latency-ms'] === undefined) knobs.latencyMs = n;
    else if (m[1] === 'words' && headers['x-sim-words'] === undefined) knobs.words = n;
    else if (m[1] === 'cached' && headers['x-sim-cached-tokens'] === undefined) knobs.cachedTokens = n;
    else if (m[1] === 'cachewrite' && headers['x-sim-cache-write-tokens'] === undefined)
      knobs.cacheWriteTokens = n;
    else if (m[1] === 'hold' && headers['x-sim-hold-after'] === undefined) knobs.holdAfter = n;
  }
  if (model.includes('no-usage')) knobs.noUsage = true;
  if (model.includes('unicode')) knobs.unicode = true;
  if (model.includes('tool')) knobs.tool = true;
  if (model.includes('count-hang')) knobs.countHang = true;
}
