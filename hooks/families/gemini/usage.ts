// Usage presets of the Gemini family: generateContent / streamGenerateContent report `usageMetadata`;
// embedContent reports none.

import { asObject } from '../../../common/json-guards.ts';
import type { JsonValue, Usage } from '../../../common/types.ts';
import { buildUsage, counts, keyedUsagePreset } from '../../usage/sniffers.ts';
import type { UsagePreset } from '../../usage/types.ts';

const GEMINI_FIELDS = {
  prompt: 'promptTokenCount',
  toolPrompt: 'toolUsePromptTokenCount',
  candidates: 'candidatesTokenCount',
  thoughts: 'thoughtsTokenCount',
  total: 'totalTokenCount',
  cached: 'cachedContentTokenCount',
} as const;

/**
 * promptTokenCount (+ toolUsePromptTokenCount, billed as input) -> input; candidatesTokenCount +
 * thoughtsTokenCount -> output (thinking is billed as output); cachedContentTokenCount (a part of the
 * prompt) -> cacheRead; thoughtsTokenCount -> reasoning.
 */
function readGeminiUsage(metaValue: JsonValue | undefined): Usage | undefined {
  const meta = asObject(metaValue);
  if (!meta) return undefined;
  const c = counts(meta, GEMINI_FIELDS);
  if (c.prompt === undefined && c.candidates === undefined && c.thoughts === undefined) return undefined;
  return buildUsage((c.prompt ?? 0) + (c.toolPrompt ?? 0), (c.candidates ?? 0) + (c.thoughts ?? 0), c.total, {
    cacheRead: c.cached,
    reasoning: c.thoughts,
  });
}

function readGeminiBody(body: JsonValue): Usage | undefined {
  // streamGenerateContent without alt=sse answers one JSON array of chunks: the last report wins.
  if (Array.isArray(body)) {
    for (let i = body.length - 1; i >= 0; i--) {
      const usage = readGeminiUsage(asObject(body[i])?.['usageMetadata']);
      if (usage) return usage;
    }
    return undefined;
  }
  return readGeminiUsage(asObject(body)?.['usageMetadata']);
}

/** The last chunk of a Gemini stream has a finishReason (a blocked prompt answers no candidates). */
function closesGeminiStream(body: JsonValue): boolean {
  const candidates = asObject(body)?.['candidates'];
  if (!Array.isArray(candidates) || candidates.length === 0) return true;
  return candidates.some((candidate) => typeof asObject(candidate)?.['finishReason'] === 'string');
}

// Every Gemini chunk may carry usageMetadata; counts are cumulative, so only the last is parsed. The
// first chunk already has promptTokenCount.
export const geminiGenerateContent: UsagePreset = {
  ...keyedUsagePreset('gemini_generate_content', '"usageMetadata"', readGeminiBody, closesGeminiStream),
  inputFirst: true,
};

/** embedContent and batchEmbedContents report no usage; the gateway estimates it. */
export const geminiEmbedContent: UsagePreset = {
  name: 'gemini_embed_content',
  fromJson: () => undefined,
  createSniffer: () => ({ event() {}, result: () => undefined, final: () => false }),
};
