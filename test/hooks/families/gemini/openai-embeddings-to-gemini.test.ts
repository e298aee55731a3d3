import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { JsonObject } from '../../../../common/types.ts';
import { openaiEmbeddingsToGemini } from '../../../../hooks/families/gemini/openai-embeddings-to-gemini.ts';
import type { TranslatorInit } from '../../../../hooks/translators/types.ts';
import { TranslationError } from '../../../../hooks/translators/types.ts';
import { caseNames, checkGolden } from '../../../fixtures/translators/gemini/golden.ts';

const DIRECTION = 'openai-embeddings-to-gemini';

const INIT: TranslatorInit = {
  requestId: 'req_3',
  model: 'text-embedding-004',
  upstreamModel: 'gemini-embedding-001',
  stream: false,
  createdAt: 1760000000,
};

describe('openai-embeddings-to-gemini golden fixtures', () => {
  for (const name of caseNames(DIRECTION)) {
    test(name, () => {
      checkGolden(openaiEmbeddingsToGemini, DIRECTION, name);
    });
  }
});

describe('openai-embeddings-to-gemini', () => {
  test('base64 output decodes to the float32 values', () => {
    const translator = openaiEmbeddingsToGemini.create(INIT);
    translator.request({ input: 'x', encoding_format: 'base64' });
    const reply = translator.response({ embeddings: [{ values: [0.5, -2, 0.125] }] }) as JsonObject;
    const encoded = (reply.data as JsonObject[])[0]!.embedding as string;
    const bytes = Buffer.from(encoded, 'base64');
    assert.deepEqual([bytes.readFloatLE(0), bytes.readFloatLE(4), bytes.readFloatLE(8)], [0.5, -2, 0.125]);
  });

  test('token-array input is rejected', () => {
    const translator = openaiEmbeddingsToGemini.create(INIT);
    assert.throws(() => translator.request({ input: [1, 2, 3] }), TranslationError);
    assert.throws(() => translator.request({ input: [[1, 2]] }), TranslationError);
    assert.throws(() => translator.request({ input: [] }), TranslationError);
    assert.throws(() => translator.request({ input: 'x', dimensions: 0 }), TranslationError);
  });

  test('usage is left to the gateway estimate; the body carries a local estimate', () => {
    const translator = openaiEmbeddingsToGemini.create(INIT);
    translator.request({ input: ['hello world', 'again <|endoftext|>'] });
    const reply = translator.response({ embeddings: [{ values: [1] }, { values: [2] }] }) as JsonObject;
    const usage = reply.usage as JsonObject;
    assert.ok((usage.prompt_tokens as number) > 0);
    assert.equal(usage.total_tokens, usage.prompt_tokens);
  });

  test('never streams', () => {
    const translator = openaiEmbeddingsToGemini.create(INIT);
    assert.deepEqual(translator.streamEvent(undefined, '{}'), []);
    assert.deepEqual(translator.streamEnd(true), []);
  });
});
