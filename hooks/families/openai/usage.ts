// Usage presets of the completion-style family: chat.completions, completions and embeddings report
// `usage` with prompt/completion counts; the Responses API reports input/output counts in its terminal
// events. Units-priced endpoints (images, speech, transcription) are in unit-usage.ts.

import { asObject } from '../../../common/json-guards.ts';
import type { JsonValue, Usage } from '../../../common/types.ts';
import {
  buildUsage,
  count,
  hasObjectKey,
  keyedUsagePreset,
  latestEventSniffer,
  safeRead,
} from '../../usage/sniffers.ts';
import type { UsagePreset } from '../../usage/types.ts';

/** The data of the event that ends completion-style streams. */
export const STREAM_END = '[DONE]';

function readOpenAiUsage(usageValue: JsonValue | undefined, embeddings: boolean): Usage | undefined {
  const usage = asObject(usageValue);
  if (!usage) return undefined;
  const input = count(usage['prompt_tokens']);
  const output = embeddings ? undefined : count(usage['completion_tokens']);
  if (input === undefined && output === undefined) return undefined;
  const promptDetails = asObject(usage['prompt_tokens_details']);
  const completionDetails = asObject(usage['completion_tokens_details']);
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
  const choices = asObject(body)?.['choices'];
  if (!Array.isArray(choices) || choices.length === 0) return true;
  return choices.some((choice) => {
    const reason = asObject(choice)?.['finish_reason'];
    return typeof reason === 'string' && reason !== '';
  });
}

export function openAiCompletionPreset(name: string, embeddings: boolean): UsagePreset {
  const read = (body: JsonValue): Usage | undefined => readOpenAiUsage(asObject(body)?.['usage'], embeddings);
  return keyedUsagePreset(name, '"usage"', read, closesOpenAiStream, STREAM_END);
}

// ---------------------------------------------------------------------------------------------------
// OpenAI Responses API

function readResponsesUsage(usageValue: JsonValue | undefined): Usage | undefined {
  const usage = asObject(usageValue);
  if (!usage) return undefined;
  const input = count(usage['input_tokens']);
  const output = count(usage['output_tokens']);
  if (input === undefined && output === undefined) return undefined;
  return buildUsage(input ?? 0, output ?? 0, count(usage['total_tokens']), {
    cacheRead: count(asObject(usage['input_tokens_details'])?.['cached_tokens']),
    reasoning: count(asObject(usage['output_tokens_details'])?.['reasoning_tokens']),
  });
}

/** Terminal Responses events; each carries the final `response.usage` (incomplete and failed are billed too). */
const RESPONSES_TERMINAL = ['response.completed', 'response.incomplete', 'response.failed'];
/**
 * The events that open a Responses stream. OpenAI's carry `usage: null`; a server that states the input
 * there already (a usage object) gives the provider's count before the end.
 */
const RESPONSES_OPENING = ['response.created', 'response.in_progress'];

function isResponsesReport(event: string | undefined, data: string): boolean {
  if (event !== undefined && event !== '' && event !== 'message') {
    if (RESPONSES_TERMINAL.includes(event)) return true;
    return RESPONSES_OPENING.includes(event) && hasObjectKey(data, '"usage"');
  }
  // No SSE event name (some proxies strip it): fall back to the `type` inside the data.
  return (
    (RESPONSES_TERMINAL.some((type) => data.includes(`"${type}"`)) ||
      RESPONSES_OPENING.some((type) => data.includes(`"${type}"`))) &&
    hasObjectKey(data, '"usage"')
  );
}

/** An opening event's usage is a running count; every other report is the final one. */
function closesResponsesStream(body: JsonValue): boolean {
  const type = asObject(body)?.['type'];
  return typeof type !== 'string' || !RESPONSES_OPENING.includes(type);
}

export const openAiResponses: UsagePreset = {
  name: 'openai_responses',
  fromJson: (body) => safeRead((b) => readResponsesUsage(asObject(b)?.['usage']), body),
  createSniffer: () =>
    latestEventSniffer(
      isResponsesReport,
      (body) => readResponsesUsage(asObject(asObject(body)?.['response'])?.['usage']),
      closesResponsesStream,
    ),
};
