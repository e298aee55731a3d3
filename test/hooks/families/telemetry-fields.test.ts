import assert from 'node:assert/strict';
import { test } from 'node:test';
import { stringFieldMarker } from '../../../hooks/families/telemetry-fields.ts';

test('a string field marker matches the key followed by a string, after any JSON whitespace', () => {
  const finish = stringFieldMarker('finish_reason');
  assert.equal(finish.test('{"choices":[{"delta":{},"finish_reason":"stop"}]}'), true);
  assert.equal(finish.test('{"finish_reason": \t\r\n "length"}'), true);
  assert.equal(finish.test('{"finish_reason":""}'), true);
  // A null, a number, the key inside a string (escaped), a longer key, the text ending early.
  assert.equal(finish.test('{"choices":[{"delta":{"content":"hi"},"finish_reason":null}]}'), false);
  assert.equal(finish.test('{"finish_reason":3}'), false);
  assert.equal(finish.test('{"content":"say \\"finish_reason\\":\\"stop\\""}'), false);
  assert.equal(finish.test('{"x_finish_reason":"stop"}'), false);
  assert.equal(finish.test('{"finish_reason":'), false);
  assert.equal(finish.test('{"finish_reason": '), false);
  // The first occurrence is null, a later one a string.
  assert.equal(finish.test('[{"finish_reason":null},{"finish_reason":"stop"}]'), true);
});

test('with values, the string must start with one of them', () => {
  const final = stringFieldMarker('type', ['response.completed"', 'response.failed"']);
  assert.equal(final.test('{"type":"response.completed","response":{}}'), true);
  assert.equal(final.test('{"type": "response.failed"}'), true);
  assert.equal(final.test('{"type":"response.output_text.delta","delta":"x"}'), false);
  assert.equal(final.test('{"type":"response.completed_extra"}'), false);
  assert.equal(final.test('{"item":{"type":"message"},"type":"response.completed"}'), true);
});
