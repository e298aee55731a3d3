// The output cap each family's request names, as rate-limit admission counts it provisionally: read
// directly, and the same number the trace attributes (gen_ai.request.max_tokens) report.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { JsonObject } from '../../../common/types.ts';
import { anthropicTelemetry } from '../../../hooks/families/anthropic/telemetry.ts';
import { geminiTelemetry } from '../../../hooks/families/gemini/telemetry.ts';
import { openaiTelemetry } from '../../../hooks/families/openai/telemetry.ts';
import { responsesTelemetry } from '../../../hooks/families/responses/telemetry.ts';
import type { FamilyTelemetry, TraceAttribute } from '../../../hooks/families/types.ts';

function attributed(t: FamilyTelemetry, body: JsonObject): TraceAttribute | undefined {
  let out: TraceAttribute | undefined;
  t.requestAttributes(body, (key, value) => {
    if (key === 'gen_ai.request.max_tokens') out = value;
  });
  return out;
}

const CASES: [string, FamilyTelemetry, JsonObject, number | undefined][] = [
  ['openai max_tokens', openaiTelemetry, { model: 'm', max_tokens: 300 }, 300],
  ['openai max_completion_tokens', openaiTelemetry, { max_completion_tokens: 40, model: 'm' }, 40],
  ['openai none', openaiTelemetry, { model: 'm', temperature: 0.2 }, undefined],
  ['openai not a number', openaiTelemetry, { max_tokens: '300' }, undefined],
  ['openai negative', openaiTelemetry, { max_tokens: -1 }, undefined],
  ['anthropic', anthropicTelemetry, { model: 'c', max_tokens: 1024, messages: [] }, 1024],
  ['responses', responsesTelemetry, { model: 'm', max_output_tokens: 77 }, 77],
  ['gemini', geminiTelemetry, { contents: [], generationConfig: { maxOutputTokens: 9 } }, 9],
  ['gemini without a config', geminiTelemetry, { contents: [] }, undefined],
  ['gemini cap outside the config', geminiTelemetry, { maxOutputTokens: 9 }, undefined],
];

for (const [name, telemetry, body, expected] of CASES) {
  test(`the output cap of a request: ${name}`, () => {
    assert.equal(telemetry.maxOutputTokens(body), expected);
    if (expected !== undefined) assert.equal(attributed(telemetry, body), expected);
  });
}

test('with both OpenAI caps the newer one (max_completion_tokens) counts, whatever their order', () => {
  assert.equal(openaiTelemetry.maxOutputTokens({ max_tokens: 10, max_completion_tokens: 20 }), 20);
  assert.equal(openaiTelemetry.maxOutputTokens({ max_completion_tokens: 20, max_tokens: 10 }), 20);
});
