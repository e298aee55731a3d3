// Usage presets of Bedrock replies: `bedrock_converse` (Converse `usage`, ConverseStream's `metadata`
// event) and `bedrock_invoke` (InvokeModel's Anthropic body; its stream's Anthropic events, whose last,
// `message_stop`, carries `amazon-bedrock-invocationMetrics`, Bedrock's own billed counts).
//
// Both report input without the prompt cache, as Anthropic does: the normalized inputTokens is
// input + cache reads + cache writes, with the cache parts kept for pricing.

import { asObject } from '../../../common/json-guards.ts';
import type { JsonValue, Usage } from '../../../common/types.ts';
import { buildUsage, counts, hasObjectKey, parseJson } from '../../usage/sniffers.ts';
import type { UsagePreset } from '../../usage/types.ts';
import { anthropicMessages } from '../anthropic/usage.ts';

interface CacheCounts {
  input?: number;
  output?: number;
  cacheRead?: number;
  cacheWrite?: number;
}

const CONVERSE_FIELDS = {
  input: 'inputTokens',
  output: 'outputTokens',
  cacheRead: 'cacheReadInputTokens',
  cacheWrite: 'cacheWriteInputTokens',
} as const;

const METRICS_FIELDS = {
  input: 'inputTokenCount',
  output: 'outputTokenCount',
  cacheRead: 'cacheReadInputTokenCount',
  cacheWrite: 'cacheWriteInputTokenCount',
} as const;

function usageOf(found: CacheCounts): Usage {
  const input = (found.input ?? 0) + (found.cacheRead ?? 0) + (found.cacheWrite ?? 0);
  return buildUsage(input, found.output ?? 0, undefined, {
    cacheRead: found.cacheRead,
    cacheCreation: found.cacheWrite,
  });
}

function converseUsage(value: JsonValue | undefined): Usage | undefined {
  const usage = asObject(value);
  if (usage === undefined) return undefined;
  const found = counts(usage, CONVERSE_FIELDS);
  return Object.keys(found).length > 0 ? usageOf(found) : undefined;
}

export const bedrockConverse: UsagePreset = {
  name: 'bedrock_converse',
  fromJson: (body) => converseUsage(asObject(body)?.['usage']),
  createSniffer() {
    let usage: Usage | undefined;
    return {
      event(event, data) {
        // Only `metadata` reports usage, once, after messageStop.
        if (event !== 'metadata' || typeof data !== 'string' || !hasObjectKey(data, '"usage"')) return;
        usage = converseUsage(asObject(parseJson(data))?.['usage']) ?? usage;
      },
      result: () => usage,
      final: () => usage !== undefined,
    };
  },
};

/** The counts of `amazon-bedrock-invocationMetrics`, when the value is that object with counts. */
export function invocationMetricsUsage(value: JsonValue | undefined): Usage | undefined {
  const metrics = asObject(value);
  if (metrics === undefined) return undefined;
  const found = counts(metrics, METRICS_FIELDS);
  return found.input === undefined && found.output === undefined ? undefined : usageOf(found);
}

export const bedrockInvoke: UsagePreset = {
  name: 'bedrock_invoke',
  inputFirst: true,
  fromJson: (body) => anthropicMessages.fromJson(body),
  createSniffer() {
    const anthropic = anthropicMessages.createSniffer();
    let metrics: Usage | undefined;
    return {
      event(event, data) {
        anthropic.event(event, data);
        if (event !== 'message_stop' || typeof data !== 'string') return;
        if (!hasObjectKey(data, '"amazon-bedrock-invocationMetrics"')) return;
        metrics =
          invocationMetricsUsage(asObject(parseJson(data))?.['amazon-bedrock-invocationMetrics']) ?? metrics;
      },
      // Bedrock's invocation metrics are what it bills; the Anthropic events' counts until they come.
      result: () => metrics ?? anthropic.result(),
      final: () => metrics !== undefined || anthropic.final(),
    };
  },
};
