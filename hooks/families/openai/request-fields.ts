// The completion-style request fields that translators to other providers read, and the hints they may
// ignore without changing the answer. A field outside both is refused by name (docs/translation.md).

import type { JsonObject, JsonValue } from '../../../common/types.ts';
import { asCount, isObject, refuseUnknownFields } from '../../translators/json.ts';
import { TranslationError } from '../../translators/types.ts';

/** Read by every pivot -> provider translator (each refuses the values it cannot serve). */
export const CHAT_FIELDS: readonly string[] = [
  'model',
  'messages',
  'max_tokens',
  'max_completion_tokens',
  'temperature',
  'top_p',
  'top_k',
  'stop',
  'stream',
  'stream_options',
  'tools',
  'tool_choice',
  'parallel_tool_calls',
  'response_format',
  'reasoning_effort',
  'user',
  'safety_identifier',
  'metadata',
  'n',
  'logprobs',
  'modalities',
  'functions',
  'function_call',
];

/**
 * What no pivot -> provider translator can serve: unknown fields, log probabilities, non-text output and
 * the legacy functions API. `where` ends the messages ("by this provider").
 */
export function refuseUnservable(body: JsonObject, known: ReadonlySet<string>, where: string): void {
  refuseUnknownFields(
    body,
    known,
    (field) => new TranslationError(`${field} is not supported ${where}`, field),
  );
  if (body.logprobs === true) throw new TranslationError(`logprobs is not supported ${where}`, 'logprobs');
  if (Array.isArray(body.modalities) && body.modalities.some((m) => m !== 'text')) {
    throw new TranslationError(`only text output is supported ${where}`, 'modalities');
  }
  if (body.function_call !== undefined || body.functions !== undefined) {
    throw new TranslationError('functions/function_call are not supported; use tools', 'functions');
  }
}

/** A pivot request that streams asks for the final usage chunk too: every stream must be billable. */
export function streamWithUsage(out: JsonObject, stream: boolean): JsonObject {
  if (stream) {
    out.stream = true;
    out.stream_options = { include_usage: true };
  }
  return out;
}

/** The pivot's reasoning_effort values, lowest first (`none` asks for no reasoning). */
export const EFFORTS = ['minimal', 'low', 'medium', 'high', 'xhigh'] as const;

/** A number per reasoning effort (a thinking budget), given lowest first. */
export function byEffort(values: readonly [number, number, number, number, number]): Record<string, number> {
  return Object.fromEntries(EFFORTS.map((effort, i) => [effort, values[i]!]));
}

/** The counts of a pivot usage object (cached and reasoning tokens are parts of prompt and completion). */
export interface PivotUsage {
  prompt: number;
  completion: number;
  total: number | undefined;
  cached: number | undefined;
  reasoning: number | undefined;
}

export function readPivotUsage(usage: JsonValue | undefined): PivotUsage | undefined {
  if (!isObject(usage)) return undefined;
  const promptDetails = isObject(usage.prompt_tokens_details) ? usage.prompt_tokens_details : {};
  const completionDetails = isObject(usage.completion_tokens_details) ? usage.completion_tokens_details : {};
  return {
    prompt: asCount(usage.prompt_tokens) ?? 0,
    completion: asCount(usage.completion_tokens) ?? 0,
    total: asCount(usage.total_tokens),
    cached: asCount(promptDetails.cached_tokens),
    reasoning: asCount(completionDetails.reasoning_tokens),
  };
}

/** Hints about the upstream's own service that other providers have no use for. */
export const IGNORABLE_CHAT_FIELDS: readonly string[] = [
  'service_tier',
  'store',
  'prompt_cache_key',
  'prompt_cache_retention',
];
