// Usage preset of the Anthropic Messages family (`anthropic_messages`).

import { asObject } from '../../../common/json-guards.ts';
import type { JsonValue, Usage } from '../../../common/types.ts';
import { buildUsage, counts, hasObjectKey, parseJson } from '../../usage/sniffers.ts';
import type { UsagePreset } from '../../usage/types.ts';

interface AnthropicCounts {
  input?: number;
  output?: number;
  cacheRead?: number;
  cacheCreation?: number;
}

const ANTHROPIC_FIELDS = {
  input: 'input_tokens',
  output: 'output_tokens',
  cacheRead: 'cache_read_input_tokens',
  cacheCreation: 'cache_creation_input_tokens',
} as const;

function readAnthropicCounts(usageValue: JsonValue | undefined, into: AnthropicCounts): boolean {
  const usage = asObject(usageValue);
  if (!usage) return false;
  // Later reports win field by field: message_delta's output_tokens is cumulative, and newer API
  // versions repeat (updated) input and cache counts there too.
  const found = counts(usage, ANTHROPIC_FIELDS);
  Object.assign(into, found);
  return Object.keys(found).length > 0;
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

export const anthropicMessages: UsagePreset = {
  name: 'anthropic_messages',
  // message_start, the first event, carries the input.
  inputFirst: true,
  fromJson(body) {
    const counts: AnthropicCounts = {};
    return readAnthropicCounts(asObject(body)?.['usage'], counts) ? anthropicUsage(counts) : undefined;
  },
  createSniffer() {
    const counts: AnthropicCounts = {};
    let seen = false;
    // message_start's output_tokens is a placeholder (1); message_delta, sent last, has the final count.
    let closed = false;
    return {
      event(event, data) {
        // message_start carries message.usage, message_delta carries usage: one or two parses a stream.
        // Named events are told apart by name; a nameless one (a proxy stripped it) by its content.
        if (event !== undefined && event !== '' && event !== 'message_start' && event !== 'message_delta')
          return;
        if (typeof data !== 'string' || !hasObjectKey(data, '"usage"')) return;
        const root = asObject(parseJson(data));
        if (!root) return;
        const usage = root['type'] === 'message_start' ? asObject(root['message'])?.['usage'] : root['usage'];
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
