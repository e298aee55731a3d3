// Test support: usage-event inputs for property tests: every kind of priced model, few values (so that
// consecutive events often share fields) and strings that JSON escapes.

import fc from 'fast-check';
import type { UsageEventInput } from '../../billing/event-builder.ts';
import { loadPricing } from '../../billing/pricing.ts';
import type { ApiName } from '../../common/types.ts';

export const { pricing } = await loadPricing([
  new URL('../../deploy/config/pricing.yaml', import.meta.url).pathname,
]);

// Priced models of every kind the builder knows: tokens with cache prices, realtime audio, images by
// size, speech by characters, transcription by seconds; and a model without a price.
const MODELS: readonly [string, string, ApiName][] = [
  ['openai', 'gpt-5.4-mini', 'chat.completions'],
  ['anthropic', 'claude-sonnet-4-5', 'native.messages'],
  ['openai', 'gpt-realtime', 'realtime'],
  ['openai', 'dall-e-3', 'images.generations'],
  ['openai', 'tts-1-hd', 'audio.speech'],
  ['openai', 'whisper-1', 'audio.transcriptions'],
  ['openai', 'text-embedding-3-small', 'embeddings'],
  ['nobody', 'unpriced', 'chat.completions'],
];

// Few values, so that consecutive events often share fields (the kept text is reused) and often do not;
// and strings JSON escapes: quotes, backslashes, control characters, lone and paired surrogates.
export const text = fc.oneof(
  fc.constantFrom(
    'api_key',
    'team',
    'client-a',
    'router',
    'upstream',
    'a"b',
    'c\\d',
    'e\u0007f',
    'ü',
    '\ud800',
    '😀',
    '',
  ),
  fc.string({ unit: 'binary', maxLength: 12 }),
  fc.string({ unit: 'binary-ascii', maxLength: 12 }),
);
const count = fc.oneof(fc.nat(5000), fc.constant(0), fc.double({ noNaN: false }));

export const eventInput: fc.Arbitrary<UsageEventInput> = fc
  .record({
    requestId: fc.oneof(fc.constantFrom('01JX0000000000000000000001', 'req-1'), text),
    correlationId: fc.option(text, { nil: undefined }),
    occurredAtMs: fc.integer({ min: 0, max: 4_102_444_800_000 }),
    model: fc.nat(MODELS.length - 1),
    modelName: fc.option(text, { nil: undefined }),
    stream: fc.boolean(),
    status: fc.constantFrom(200, 201, 429, 500),
    usage: fc.record({
      inputTokens: count,
      outputTokens: count,
      totalTokens: count,
      cacheReadTokens: fc.option(count, { nil: undefined }),
      cacheCreationTokens: fc.option(count, { nil: undefined }),
      inputAudioTokens: fc.option(count, { nil: undefined }),
      outputAudioTokens: fc.option(count, { nil: undefined }),
      images: fc.option(count, { nil: undefined }),
      imageSize: fc.option(fc.constantFrom('1024x1024', '1792x1024', 'odd'), { nil: undefined }),
      imageQuality: fc.option(fc.constantFrom('hd', 'standard'), { nil: undefined }),
      inputCharacters: fc.option(count, { nil: undefined }),
      audioSeconds: fc.option(count, { nil: undefined }),
    }),
    usageStage: fc.constantFrom('upstream' as const, 'estimated' as const),
    subjectType: text,
    subjectId: text,
    source: text,
    completionStyle: fc.boolean(),
    itemDetail: fc.constantFrom('spec' as const, 'detailed' as const, undefined),
    priceVersion: fc.option(fc.oneof(fc.constant(pricing.version), text), { nil: undefined }),
    // Most events are of requests that ended normally.
    endReason: fc.oneof(
      { arbitrary: fc.constant(undefined), weight: 6 },
      {
        arbitrary: fc.constantFrom(
          'client_gone' as const,
          'upstream_error' as const,
          'upstream_cut' as const,
          'timeout' as const,
        ),
        weight: 1,
      },
    ),
  })
  .map(({ model, modelName, ...rest }) => {
    const [provider, name, api] = MODELS[model] as [string, string, ApiName];
    return { ...rest, provider, api, model: modelName ?? name, price: pricing.lookup(provider, name) };
  });
