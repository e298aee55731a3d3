// Building blocks of usage presets (hooks/families/*/usage.ts): safe readers of token counts and the
// sniffer that keeps only the latest usage report of a stream.
//
// Hot-path rules (sniffers run once per streamed event):
// - constant memory: a sniffer keeps a few numbers, or the text of the single latest candidate event;
// - cheap: a substring test (`"usage"` followed by an object) gates JSON.parse, so content deltas are
//   never parsed;
// - never throw: malformed JSON, wrong types and negative or fractional counts are ignored.

import type { JsonObject, JsonValue, Usage } from '../../common/types.ts';
import type { UsagePreset, UsageSniffer } from './types.ts';

/** A token count: a finite, non-negative number (rounded down; upstreams send integers). */
export function count(value: JsonValue | undefined): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? Math.floor(value) : undefined;
}

/** The valid counts among `fields` (name -> wire key); a missing or invalid count is left out. */
export function counts<K extends string>(
  record: JsonObject,
  fields: Readonly<Record<K, string>>,
): Partial<Record<K, number>> {
  const out: Partial<Record<K, number>> = {};
  for (const name in fields) {
    const value = count(record[fields[name]]);
    if (value !== undefined) out[name] = value;
  }
  return out;
}

export function parseJson(data: string): JsonValue | undefined {
  try {
    return JSON.parse(data) as JsonValue;
  } catch {
    return undefined;
  }
}

function isSpace(code: number): boolean {
  return code === 0x20 || code === 0x09 || code === 0x0a || code === 0x0d;
}

/**
 * True when `"key"` occurs followed by `:` and an object. The quote-delimited form never matches text
 * inside a JSON string (there the quotes are escaped), and `"usage":null` (sent in every OpenAI chunk
 * when include_usage is on) does not count.
 */
export function hasObjectKey(data: string, quotedKey: string): boolean {
  let from = 0;
  for (;;) {
    const at = data.indexOf(quotedKey, from);
    if (at < 0) return false;
    let i = at + quotedKey.length;
    while (i < data.length && isSpace(data.charCodeAt(i))) i++;
    if (data.charCodeAt(i) === 0x3a /* : */) {
      i++;
      while (i < data.length && isSpace(data.charCodeAt(i))) i++;
      if (data.charCodeAt(i) === 0x7b /* { */) return true;
    }
    from = at + quotedKey.length;
  }
}

const ERROR_DATA = /^\{\s*"(?:error"|type"\s*:\s*"error")/;

/**
 * An upstream's error report inside a stream, in any family's shape: an `error` event (Anthropic,
 * Responses, Bedrock's exceptions as the gateway decodes them), or data that is an error object
 * (`{"error":…}` of OpenAI chat and Gemini; `{"type":"error",…}` when a proxy stripped the event name).
 */
export function isStreamError(event: string | undefined, data: string): boolean {
  return event === 'error' || (data.charCodeAt(0) === 0x7b && ERROR_DATA.test(data));
}

export function buildUsage(
  input: number,
  output: number,
  total: number | undefined,
  extra: { cacheRead?: number; cacheCreation?: number; reasoning?: number },
): Usage {
  const usage: Usage = { inputTokens: input, outputTokens: output, totalTokens: total ?? input + output };
  if (extra.cacheRead !== undefined) usage.cacheReadTokens = extra.cacheRead;
  if (extra.cacheCreation !== undefined) usage.cacheCreationTokens = extra.cacheCreation;
  if (extra.reasoning !== undefined) usage.reasoningTokens = extra.reasoning;
  return usage;
}

/**
 * A sniffer that keeps only the text of the latest event passing `gate` and parses it once, on
 * result(). Right for upstreams whose last usage report is cumulative (OpenAI's final chunk, vLLM's
 * continuous usage, Gemini's per-chunk usageMetadata): memory stays one event, parsing happens once.
 * The counts are final when `closes` says the latest report is the stream's last word, or the stream's
 * end marker (`endMarker`: the family's, such as `[DONE]`) came after it; without `closes`, any report is
 * final.
 */
export function latestEventSniffer(
  gate: (event: string | undefined, data: string) => boolean,
  read: (body: JsonValue) => Usage | undefined,
  closes?: (body: JsonValue) => boolean,
  endMarker?: string,
): UsageSniffer {
  let latest: string | undefined;
  let doneAfter = false;
  let parsed: { usage: Usage | undefined; closing: boolean } | undefined;
  const parse = () => {
    if (parsed === undefined && latest !== undefined) {
      const body = parseJson(latest);
      parsed =
        body === undefined
          ? { usage: undefined, closing: false }
          : { usage: safeRead(read, body), closing: closes === undefined || safeTest(closes, body) };
    }
    return parsed;
  };
  return {
    event(event, data) {
      try {
        if (typeof data !== 'string') return;
        if (gate(event, data)) {
          latest = data;
          parsed = undefined;
          doneAfter = false;
        } else if (latest !== undefined && data === endMarker) {
          doneAfter = true;
        }
      } catch {
        // A sniffer must never break the stream.
      }
    },
    result: () => parse()?.usage,
    final() {
      const report = parse();
      return report?.usage !== undefined && (doneAfter || report.closing);
    },
  };
}

function safeTest(test: (body: JsonValue) => boolean, body: JsonValue): boolean {
  try {
    return test(body);
  } catch {
    return false;
  }
}

export function safeRead(read: (body: JsonValue) => Usage | undefined, body: JsonValue): Usage | undefined {
  try {
    return read(body);
  } catch {
    return undefined;
  }
}

/**
 * A preset whose reply carries its usage under one object key, in the JSON body and in stream events
 * (where only the latest report is parsed, and `closes` or the stream's `endMarker` tells whether that
 * report ends the stream).
 */
export function keyedUsagePreset(
  name: string,
  quotedKey: string,
  read: (body: JsonValue) => Usage | undefined,
  closes: (body: JsonValue) => boolean,
  endMarker?: string,
): UsagePreset {
  return {
    name,
    fromJson: (body) => safeRead(read, body),
    createSniffer: () =>
      latestEventSniffer((_event, data) => hasObjectKey(data, quotedKey), read, closes, endMarker),
  };
}
