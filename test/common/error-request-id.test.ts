// Behind another gateway that passed the request id on, an error message already names it: each
// family's body and stream error event name it once.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { GatewayError, withRequestId } from '../../common/errors.ts';
import { errorBody, errorEvent } from '../../hooks/families/index.ts';

const ID = 'req_two_hops_1';

test('withRequestId appends the id once, and a different id is kept beside it', () => {
  assert.equal(withRequestId('Upstream failed', ID), `Upstream failed (request id: ${ID})`);
  assert.equal(
    withRequestId(`Upstream failed (request id: ${ID})`, ID),
    `Upstream failed (request id: ${ID})`,
  );
  assert.equal(
    withRequestId('Upstream failed (request id: other)', ID),
    `Upstream failed (request id: other) (request id: ${ID})`,
  );
});

/** Every `message` string in a body or event (an event's data is JSON text). */
function messages(value: unknown, out: string[] = []): string[] {
  if (typeof value === 'string' && value.startsWith('{')) return messages(JSON.parse(value), out);
  if (value === null || typeof value !== 'object') return out;
  for (const [key, v] of Object.entries(value)) {
    if (key === 'message' && typeof v === 'string') out.push(v);
    else messages(v, out);
  }
  return out;
}

test('every family names the request id once in each message of its error body and stream error event', () => {
  const err = new GatewayError('upstream_bad_response', `The upstream said no (request id: ${ID})`);
  for (const format of ['openai', 'anthropic', 'gemini', 'responses']) {
    for (const shape of [errorBody(format, err, ID), errorEvent(format, err, ID)]) {
      const found = messages(shape);
      assert.ok(found.length > 0, `${format}: ${JSON.stringify(shape)}`);
      for (const m of found) assert.equal(m, `The upstream said no (request id: ${ID})`, format);
    }
  }
});
