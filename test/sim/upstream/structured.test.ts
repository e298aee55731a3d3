import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  anthropicJsonRequest,
  chatJsonRequest,
  geminiJsonRequest,
  responsesJsonRequest,
  structuredText,
} from '../../../sim/upstream/structured.ts';

const schema = {
  type: 'object',
  properties: {
    city: { type: 'string' },
    days: { type: 'array', items: { type: 'integer' } },
    unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
    sunny: { type: 'boolean' },
  },
};

test('each vendor field names the schema; JSON mode without a schema answers {echo}', () => {
  const expected = { schema };
  assert.deepEqual(
    chatJsonRequest({ response_format: { type: 'json_schema', json_schema: { schema } } }),
    expected,
  );
  assert.deepEqual(responsesJsonRequest({ text: { format: { type: 'json_schema', schema } } }), expected);
  assert.deepEqual(
    anthropicJsonRequest({ output_config: { format: { type: 'json_schema', schema } } }),
    expected,
  );
  assert.deepEqual(geminiJsonRequest({ generationConfig: { responseJsonSchema: schema } }), expected);
  assert.equal(chatJsonRequest({ response_format: { type: 'json_object' } }), 'json');
  assert.equal(geminiJsonRequest({ generationConfig: { responseMimeType: 'application/json' } }), 'json');
  assert.equal(chatJsonRequest({}), undefined);
  assert.equal(structuredText('json', 'hello there'), '{"echo":"hello there"}');
});

test('a value of the schema: strings are the prompt, enums their first value, Gemini upper-case types too', () => {
  assert.deepEqual(JSON.parse(structuredText({ schema }, 'Kyoto please') ?? ''), {
    city: 'Kyoto please',
    days: [42],
    unit: 'celsius',
    sunny: true,
  });
  const gemini = { type: 'OBJECT', properties: { n: { type: 'NUMBER' }, s: { type: 'STRING' } } };
  assert.deepEqual(JSON.parse(structuredText({ schema: gemini }, 'x') ?? ''), { n: 42, s: 'x' });
});
