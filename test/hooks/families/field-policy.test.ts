// Every translator from a client family refuses, by name, a request field it neither carries nor may
// ignore without changing the answer; fields with neutral values (0, false, empty) and documented hints
// pass. A feature is translated or refused, never dropped without a word.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { JsonObject } from '../../../common/types.ts';
import { TRANSLATORS } from '../../../hooks/families/index.ts';
import { TranslationError } from '../../../hooks/translators/types.ts';

function request(name: string, body: JsonObject): JsonObject {
  const factory = TRANSLATORS.get(name);
  assert.ok(factory, name);
  const translator = factory.create({
    requestId: 'req_policy',
    model: 'm',
    upstreamModel: 'm',
    stream: false,
    createdAt: 1760000000,
  });
  return translator.request(body);
}

function refuses(name: string, body: JsonObject, field: string): void {
  assert.throws(
    () => request(name, body),
    (err) => err instanceof TranslationError && err.field === field && err.message.includes(field),
    `${name} should refuse ${field}`,
  );
}

const chat = { model: 'm', messages: [{ role: 'user', content: 'hi' }] };
const messages = { model: 'm', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] };
const gemini = { contents: [{ role: 'user', parts: [{ text: 'hi' }] }] };
const responses = { model: 'm', input: 'hi' };

test('completion-style clients: unknown or unservable fields are refused by name, neutral ones pass', () => {
  for (const name of ['openai_to_anthropic', 'openai_to_gemini']) {
    refuses(name, { ...chat, logit_bias: { '50256': -100 } }, 'logit_bias');
    refuses(name, { ...chat, audio: { voice: 'alloy' } }, 'audio');
    refuses(name, { ...chat, prediction: { type: 'content', content: 'x' } }, 'prediction');
    assert.doesNotThrow(() =>
      request(name, { ...chat, logit_bias: {}, presence_penalty: 0, service_tier: 'auto' }),
    );
  }
  // Anthropic has no penalties; Gemini does.
  refuses('openai_to_anthropic', { ...chat, presence_penalty: 0.5 }, 'presence_penalty');
  assert.equal(
    (request('openai_to_gemini', { ...chat, presence_penalty: 0.5 }).generationConfig as JsonObject)
      .presencePenalty,
    0.5,
  );
});

test('Anthropic clients: fields other providers cannot serve are refused, hints and top_k are not', () => {
  for (const name of ['anthropic_to_openai', 'anthropic_to_gemini']) {
    refuses(
      name,
      { ...messages, mcp_servers: [{ type: 'url', url: 'https://x', name: 'x' }] },
      'mcp_servers',
    );
    refuses(name, { ...messages, container: 'container_1' }, 'container');
    assert.doesNotThrow(() =>
      request(name, {
        ...messages,
        service_tier: 'auto',
        top_k: 5,
        context_management: { edits: [{ type: 'clear_tool_uses_20250919' }] },
      }),
    );
  }
  assert.equal(request('anthropic_to_openai', { ...messages, top_k: 5 }).top_k, 5);
  assert.equal(
    (request('anthropic_to_gemini', { ...messages, top_k: 5 }).generationConfig as JsonObject).topK,
    5,
  );
});

test('Gemini clients: logprobs, speech and stricter safety are refused; default-or-looser safety passes', () => {
  for (const name of ['gemini_to_openai', 'gemini_to_anthropic']) {
    refuses(
      name,
      { ...gemini, generationConfig: { responseLogprobs: true } },
      'generationConfig.responseLogprobs',
    );
    refuses(
      name,
      { ...gemini, generationConfig: { responseModalities: ['AUDIO'] } },
      'generationConfig.responseModalities',
    );
    refuses(
      name,
      {
        ...gemini,
        safetySettings: [{ category: 'HARM_CATEGORY_HARASSMENT', threshold: 'BLOCK_LOW_AND_ABOVE' }],
      },
      'safetySettings',
    );
    refuses(name, { ...gemini, labels: { team: 'a' } }, 'labels');
    assert.doesNotThrow(() =>
      request(name, {
        ...gemini,
        safetySettings: [{ category: 'HARM_CATEGORY_HARASSMENT', threshold: 'BLOCK_NONE' }],
        generationConfig: { responseModalities: ['TEXT'], topK: 3 },
      }),
    );
  }
});

test('Responses clients: unservable fields are refused by name, hints pass', () => {
  for (const name of ['responses_to_openai', 'responses_to_anthropic', 'responses_to_gemini']) {
    refuses(name, { ...responses, max_tool_calls: 3 }, 'max_tool_calls');
    refuses(name, { ...responses, truncation: 'auto' }, 'truncation');
    assert.doesNotThrow(() =>
      request(name, {
        ...responses,
        truncation: 'disabled',
        include: ['reasoning.encrypted_content'],
        store: false,
      }),
    );
  }
});
