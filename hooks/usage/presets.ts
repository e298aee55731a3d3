// Usage presets: read token counts from one provider family's replies, whole JSON bodies or SSE events.
// Named in provider files as `metrics { usage_extract <preset>; }`; `usage_path` builds one with
// createPathExtractor.
//
// Hot-path rules (sniffers run once per streamed event):
// - constant memory: a sniffer keeps a few numbers, or the text of the single latest candidate event;
// - cheap: a substring test (`"usage"` followed by an object) gates JSON.parse, so content deltas are
//   never parsed;
// - never throw: malformed JSON, wrong types and negative or fractional counts are ignored.

import type { JsonValue, Usage } from '../../common/types.ts';
import type { UsageField } from '../dsl/types.ts';
import type { UsagePreset, UsageSniffer } from './types.ts';
import { UNIT_PRESETS } from './unit-presets.ts';

type JsonRecord = { [key: string]: JsonValue };

function asRecord(value: JsonValue | undefined): JsonRecord | undefined {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? value : undefined;
}

/** A token count: a finite, non-negative number (rounded down; upstreams send integers). */
function count(value: JsonValue | undefined): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? Math.floor(value) : undefined;
}

function parseJson(data: string): JsonValue | undefined {
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

function buildUsage(
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
 * The counts are final when `closes` says the latest report is the stream's last word, or a `[DONE]`
 * came after it; without `closes`, any report is final.
 */
function latestEventSniffer(
  gate: (event: string | undefined, data: string) => boolean,
  read: (body: JsonValue) => Usage | undefined,
  closes?: (body: JsonValue) => boolean,
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
        } else if (latest !== undefined && data === '[DONE]') {
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

function safeRead(read: (body: JsonValue) => Usage | undefined, body: JsonValue): Usage | undefined {
  try {
    return read(body);
  } catch {
    return undefined;
  }
}

// ---------------------------------------------------------------------------------------------------
// OpenAI completion-style: chat.completions, completions, embeddings

function readOpenAiUsage(usageValue: JsonValue | undefined, embeddings: boolean): Usage | undefined {
  const usage = asRecord(usageValue);
  if (!usage) return undefined;
  const input = count(usage['prompt_tokens']);
  const output = embeddings ? undefined : count(usage['completion_tokens']);
  if (input === undefined && output === undefined) return undefined;
  const promptDetails = asRecord(usage['prompt_tokens_details']);
  const completionDetails = asRecord(usage['completion_tokens_details']);
  return buildUsage(input ?? 0, output ?? 0, count(usage['total_tokens']), {
    cacheRead: count(promptDetails?.['cached_tokens']),
    reasoning: count(completionDetails?.['reasoning_tokens']),
  });
}

/**
 * The usage chunk ends the stream: OpenAI's include_usage chunk has no choices left, and servers that
 * report usage in their last content chunk mark it with a finish_reason. Usage on any other chunk
 * (vLLM's continuous usage) is a running count.
 */
function closesOpenAiStream(body: JsonValue): boolean {
  const choices = asRecord(body)?.['choices'];
  if (!Array.isArray(choices) || choices.length === 0) return true;
  return choices.some((choice) => {
    const reason = asRecord(choice)?.['finish_reason'];
    return typeof reason === 'string' && reason !== '';
  });
}

function openAiCompletionPreset(name: string, embeddings: boolean): UsagePreset {
  const read = (body: JsonValue): Usage | undefined => readOpenAiUsage(asRecord(body)?.['usage'], embeddings);
  return {
    name,
    fromJson: (body) => safeRead(read, body),
    createSniffer: () =>
      latestEventSniffer((_event, data) => hasObjectKey(data, '"usage"'), read, closesOpenAiStream),
  };
}

// ---------------------------------------------------------------------------------------------------
// OpenAI Responses API

function readResponsesUsage(usageValue: JsonValue | undefined): Usage | undefined {
  const usage = asRecord(usageValue);
  if (!usage) return undefined;
  const input = count(usage['input_tokens']);
  const output = count(usage['output_tokens']);
  if (input === undefined && output === undefined) return undefined;
  return buildUsage(input ?? 0, output ?? 0, count(usage['total_tokens']), {
    cacheRead: count(asRecord(usage['input_tokens_details'])?.['cached_tokens']),
    reasoning: count(asRecord(usage['output_tokens_details'])?.['reasoning_tokens']),
  });
}

/** Terminal Responses events; each carries the final `response.usage` (incomplete and failed are billed too). */
const RESPONSES_TERMINAL = ['response.completed', 'response.incomplete', 'response.failed'];

function isResponsesTerminal(event: string | undefined, data: string): boolean {
  if (event !== undefined && event !== '' && event !== 'message') return RESPONSES_TERMINAL.includes(event);
  // No SSE event name (some proxies strip it): fall back to the `type` inside the data.
  return RESPONSES_TERMINAL.some((type) => data.includes(`"${type}"`)) && hasObjectKey(data, '"usage"');
}

const openAiResponses: UsagePreset = {
  name: 'openai_responses',
  fromJson: (body) => safeRead((b) => readResponsesUsage(asRecord(b)?.['usage']), body),
  createSniffer: () =>
    latestEventSniffer(isResponsesTerminal, (body) =>
      readResponsesUsage(asRecord(asRecord(body)?.['response'])?.['usage']),
    ),
};

// ---------------------------------------------------------------------------------------------------
// Anthropic Messages

interface AnthropicCounts {
  input?: number;
  output?: number;
  cacheRead?: number;
  cacheCreation?: number;
}

function readAnthropicCounts(usageValue: JsonValue | undefined, into: AnthropicCounts): boolean {
  const usage = asRecord(usageValue);
  if (!usage) return false;
  // Later reports win field by field: message_delta's output_tokens is cumulative, and newer API
  // versions repeat (updated) input and cache counts there too.
  const input = count(usage['input_tokens']);
  const output = count(usage['output_tokens']);
  const cacheRead = count(usage['cache_read_input_tokens']);
  const cacheCreation = count(usage['cache_creation_input_tokens']);
  if (input !== undefined) into.input = input;
  if (output !== undefined) into.output = output;
  if (cacheRead !== undefined) into.cacheRead = cacheRead;
  if (cacheCreation !== undefined) into.cacheCreation = cacheCreation;
  return (
    input !== undefined || output !== undefined || cacheRead !== undefined || cacheCreation !== undefined
  );
}

/**
 * Anthropic reports `input_tokens` WITHOUT the tokens read from or written to the prompt cache. The
 * normalized inputTokens is the whole prompt, as in the other families (OpenAI's prompt_tokens and
 * Gemini's promptTokenCount include cached tokens):
 *   inputTokens = input_tokens + cache_read_input_tokens + cache_creation_input_tokens
 * with cacheReadTokens and cacheCreationTokens kept separately so pricing can charge them at their rates.
 */
function anthropicUsage(counts: AnthropicCounts): Usage {
  const input = (counts.input ?? 0) + (counts.cacheRead ?? 0) + (counts.cacheCreation ?? 0);
  const output = counts.output ?? 0;
  return buildUsage(input, output, undefined, {
    cacheRead: counts.cacheRead,
    cacheCreation: counts.cacheCreation,
  });
}

const anthropicMessages: UsagePreset = {
  name: 'anthropic_messages',
  fromJson(body) {
    const counts: AnthropicCounts = {};
    return readAnthropicCounts(asRecord(body)?.['usage'], counts) ? anthropicUsage(counts) : undefined;
  },
  createSniffer() {
    const counts: AnthropicCounts = {};
    let seen = false;
    // message_start's output_tokens is a placeholder (1); message_delta, sent last, has the final count.
    let closed = false;
    return {
      event(_event, data) {
        // message_start carries message.usage, message_delta carries usage: one or two parses a stream.
        if (typeof data !== 'string' || !hasObjectKey(data, '"usage"')) return;
        const root = asRecord(parseJson(data));
        if (!root) return;
        const usage = root['type'] === 'message_start' ? asRecord(root['message'])?.['usage'] : root['usage'];
        if (readAnthropicCounts(usage, counts)) {
          seen = true;
          if (root['type'] === 'message_delta') closed = true;
        }
      },
      result: () => (seen ? anthropicUsage(counts) : undefined),
      final: () => closed,
    };
  },
};

// ---------------------------------------------------------------------------------------------------
// Gemini generateContent / streamGenerateContent / embedContent

/**
 * promptTokenCount (+ toolUsePromptTokenCount, billed as input) -> input; candidatesTokenCount +
 * thoughtsTokenCount -> output (thinking is billed as output); cachedContentTokenCount (a part of the
 * prompt) -> cacheRead; thoughtsTokenCount -> reasoning.
 */
function readGeminiUsage(metaValue: JsonValue | undefined): Usage | undefined {
  const meta = asRecord(metaValue);
  if (!meta) return undefined;
  const prompt = count(meta['promptTokenCount']);
  const toolPrompt = count(meta['toolUsePromptTokenCount']);
  const candidates = count(meta['candidatesTokenCount']);
  const thoughts = count(meta['thoughtsTokenCount']);
  if (prompt === undefined && candidates === undefined && thoughts === undefined) return undefined;
  return buildUsage(
    (prompt ?? 0) + (toolPrompt ?? 0),
    (candidates ?? 0) + (thoughts ?? 0),
    count(meta['totalTokenCount']),
    {
      cacheRead: count(meta['cachedContentTokenCount']),
      reasoning: thoughts,
    },
  );
}

function readGeminiBody(body: JsonValue): Usage | undefined {
  // streamGenerateContent without alt=sse answers one JSON array of chunks: the last report wins.
  if (Array.isArray(body)) {
    for (let i = body.length - 1; i >= 0; i--) {
      const usage = readGeminiUsage(asRecord(body[i])?.['usageMetadata']);
      if (usage) return usage;
    }
    return undefined;
  }
  return readGeminiUsage(asRecord(body)?.['usageMetadata']);
}

/** The last chunk of a Gemini stream has a finishReason (a blocked prompt answers no candidates). */
function closesGeminiStream(body: JsonValue): boolean {
  const candidates = asRecord(body)?.['candidates'];
  if (!Array.isArray(candidates) || candidates.length === 0) return true;
  return candidates.some((candidate) => typeof asRecord(candidate)?.['finishReason'] === 'string');
}

const geminiGenerateContent: UsagePreset = {
  name: 'gemini_generate_content',
  fromJson: (body) => safeRead(readGeminiBody, body),
  // Every Gemini chunk may carry usageMetadata; counts are cumulative, so only the last is parsed.
  createSniffer: () =>
    latestEventSniffer(
      (_event, data) => hasObjectKey(data, '"usageMetadata"'),
      readGeminiBody,
      closesGeminiStream,
    ),
};

/** embedContent and batchEmbedContents report no usage; the gateway estimates it. */
const geminiEmbedContent: UsagePreset = {
  name: 'gemini_embed_content',
  fromJson: () => undefined,
  createSniffer: () => ({ event() {}, result: () => undefined, final: () => false }),
};

// ---------------------------------------------------------------------------------------------------
// `usage_path` directives

type PathSegments = readonly (string | number)[];

/** Minimal path getter (negative indexes count from the end). Kept local so presets have no DSL dependency. */
function getAtPath(root: JsonValue, path: PathSegments): JsonValue | undefined {
  let node: JsonValue | undefined = root;
  for (const segment of path) {
    if (typeof segment === 'number') {
      if (!Array.isArray(node)) return undefined;
      node = node[segment < 0 ? node.length + segment : segment];
    } else {
      const record = asRecord(node);
      if (!record || !Object.hasOwn(record, segment)) return undefined;
      node = record[segment];
    }
    if (node === undefined) return undefined;
  }
  return node;
}

const FIELD_KEYS: Record<UsageField, keyof Usage> = {
  input_tokens: 'inputTokens',
  output_tokens: 'outputTokens',
  total_tokens: 'totalTokens',
  cache_read_tokens: 'cacheReadTokens',
  cache_creation_tokens: 'cacheCreationTokens',
  reasoning_tokens: 'reasoningTokens',
};

export interface UsagePathSpec {
  readonly field: UsageField;
  readonly path: PathSegments;
}

/**
 * A preset from `usage_path <field> "<json path>";` directives. Missing input or output count as 0;
 * totalTokens defaults to input + output. Streams: each event that mentions one of the paths' last keys
 * is parsed and found values overwrite earlier ones (later reports win).
 */
export function createPathExtractor(paths: readonly UsagePathSpec[]): UsagePreset {
  const specs = paths.map((p) => ({ key: FIELD_KEYS[p.field], path: [...p.path] }));
  const needles = [
    ...new Set(
      specs.map((s) => {
        const last = s.path.findLast((segment) => typeof segment === 'string');
        return last === undefined ? '' : JSON.stringify(last);
      }),
    ),
  ];

  function collect(body: JsonValue, into: Partial<Record<keyof Usage, number>>): boolean {
    let found = false;
    for (const spec of specs) {
      const value = count(getAtPath(body, spec.path));
      if (value !== undefined) {
        into[spec.key] = value;
        found = true;
      }
    }
    return found;
  }

  function toUsage(found: Partial<Record<keyof Usage, number>>): Usage {
    return buildUsage(found.inputTokens ?? 0, found.outputTokens ?? 0, found.totalTokens, {
      cacheRead: found.cacheReadTokens,
      cacheCreation: found.cacheCreationTokens,
      reasoning: found.reasoningTokens,
    });
  }

  return {
    name: 'usage_path',
    fromJson(body) {
      const found: Partial<Record<keyof Usage, number>> = {};
      return collect(body, found) ? toUsage(found) : undefined;
    },
    createSniffer() {
      const found: Partial<Record<keyof Usage, number>> = {};
      let seen = false;
      return {
        event(_event, data) {
          if (typeof data !== 'string' || !needles.some((needle) => data.includes(needle))) return;
          const body = parseJson(data);
          if (body !== undefined && collect(body, found)) seen = true;
        },
        result: () => (seen ? toUsage(found) : undefined),
        // The format is the operator's: a report is taken as final. A stream cut by the transport or
        // the client is still settled as partial (proxy/metering.ts).
        final: () => seen,
      };
    },
  };
}

export const USAGE_PRESETS: ReadonlyMap<string, UsagePreset> = new Map(
  [
    openAiCompletionPreset('openai_chat_completions', false),
    openAiCompletionPreset('openai_completions', false),
    openAiResponses,
    openAiCompletionPreset('openai_embeddings', true),
    anthropicMessages,
    geminiGenerateContent,
    geminiEmbedContent,
    ...UNIT_PRESETS,
  ].map((preset) => [preset.name, preset] as const),
);
