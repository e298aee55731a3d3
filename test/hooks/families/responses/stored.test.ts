// The Responses family's stored state (hooks/families/responses/stored.ts): how references resolve, which
// reply part is the whole response, and what a record holds.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { GatewayError } from '../../../../common/errors.ts';
import type { JsonObject, JsonValue } from '../../../../common/types.ts';
import type { StoredLookup } from '../../../../hooks/families/response-state.ts';
import { responsesStored } from '../../../../hooks/families/responses/stored.ts';

const earlier = {
  response: {
    id: 'resp_1',
    object: 'response',
    output: [
      { type: 'reasoning', id: 'rs_1', summary: [{ type: 'summary_text', text: 'thinking' }] },
      {
        type: 'message',
        id: 'msg_1',
        status: 'completed',
        role: 'assistant',
        content: [{ type: 'output_text', text: 'Hi Ada', annotations: [] }],
      },
      {
        type: 'function_call',
        id: 'fc_1',
        call_id: 'call_1',
        name: 'lookup',
        arguments: '{}',
        status: 'completed',
      },
    ],
  },
  input: [{ type: 'message', role: 'user', content: 'I am Ada' }],
};

function lookup(records: Record<string, unknown>, items: Record<string, string> = {}): StoredLookup {
  return {
    response: async (id) => (records[id] === undefined ? undefined : JSON.stringify(records[id])),
    item: async (id) => {
      const owner = items[id];
      return owner === undefined ? undefined : JSON.stringify(records[owner]);
    },
  };
}

test('previous_response_id: its input, then its output as input items, then the new input', async () => {
  const body: JsonObject = { model: 'm', previous_response_id: 'resp_1', input: 'and now?', store: true };
  const resolved = await responsesStored.resolve(body, lookup({ resp_1: earlier }));
  assert.equal(resolved.previousId, 'resp_1');
  assert.equal(resolved.body.previous_response_id, undefined);
  assert.equal(resolved.body.store, true);
  assert.deepEqual(resolved.body.input, [
    { type: 'message', role: 'user', content: 'I am Ada' },
    // Output items lose id and status; reasoning without encrypted_content is left out.
    {
      type: 'message',
      role: 'assistant',
      content: [{ type: 'output_text', text: 'Hi Ada', annotations: [] }],
    },
    { type: 'function_call', call_id: 'call_1', name: 'lookup', arguments: '{}' },
    { type: 'message', role: 'user', content: 'and now?' },
  ]);
  assert.deepEqual(resolved.input, resolved.body.input);
});

test('item_reference: each becomes the item it names, wherever in the input', async () => {
  const body: JsonObject = {
    model: 'm',
    input: [
      { role: 'user', content: 'I am Ada' },
      { type: 'item_reference', id: 'msg_1' },
      { type: 'item_reference', id: 'rs_1' },
      { role: 'user', content: 'who am I?' },
    ],
  };
  const resolved = await responsesStored.resolve(
    body,
    lookup({ resp_1: earlier }, { msg_1: 'resp_1', rs_1: 'resp_1' }),
  );
  assert.deepEqual(resolved.body.input, [
    { role: 'user', content: 'I am Ada' },
    {
      type: 'message',
      role: 'assistant',
      content: [{ type: 'output_text', text: 'Hi Ada', annotations: [] }],
    },
    { role: 'user', content: 'who am I?' },
  ]);
});

test('a request naming nothing stored goes on unchanged (the same object)', async () => {
  const body: JsonObject = { model: 'm', input: 'hello' };
  const resolved = await responsesStored.resolve(body, lookup({}));
  assert.equal(resolved.body, body);
  assert.deepEqual(resolved.input, [{ type: 'message', role: 'user', content: 'hello' }]);
});

test('an id not found is a 404 naming the field: previous_response_not_found, item_not_found', async () => {
  await assert.rejects(
    responsesStored.resolve({ model: 'm', previous_response_id: 'resp_x', input: 'hi' }, lookup({})),
    (err) =>
      err instanceof GatewayError &&
      err.status === 404 &&
      err.code === 'previous_response_not_found' &&
      err.param === 'previous_response_id',
  );
  await assert.rejects(
    responsesStored.resolve({ model: 'm', input: [{ type: 'item_reference', id: 'msg_x' }] }, lookup({})),
    (err) =>
      err instanceof GatewayError &&
      err.status === 404 &&
      err.code === 'item_not_found' &&
      err.param === 'input',
  );
  // An id no reply could have is not looked up at all.
  const never: StoredLookup = {
    response: () => assert.fail('looked up'),
    item: () => assert.fail('looked up'),
  };
  await assert.rejects(
    responsesStored.resolve({ model: 'm', previous_response_id: 'r'.repeat(257), input: 'hi' }, never),
    (err) => err instanceof GatewayError && err.code === 'previous_response_not_found',
  );
  await assert.rejects(
    responsesStored.resolve({ model: 'm', input: [{ type: 'item_reference', id: 'i'.repeat(257) }] }, never),
    (err) => err instanceof GatewayError && err.code === 'item_not_found',
  );
  // An item index that names a record without that item is not found either.
  await assert.rejects(
    responsesStored.resolve(
      { model: 'm', input: [{ type: 'item_reference', id: 'msg_9' }] },
      lookup({ resp_1: earlier }, { msg_9: 'resp_1' }),
    ),
    (err) => err instanceof GatewayError && err.code === 'item_not_found',
  );
});

test('the whole response: the JSON reply, or the completed or incomplete event of a stream', () => {
  const response = { id: 'resp_2', object: 'response', output: [] };
  assert.deepEqual(responsesStored.finalResponse({ type: 'json', value: response }), response);
  assert.equal(
    responsesStored.finalResponse({ type: 'json', value: { error: { message: 'x' } } }),
    undefined,
  );
  for (const type of ['response.completed', 'response.incomplete']) {
    const data = JSON.stringify({ type, sequence_number: 9, response });
    assert.deepEqual(responsesStored.finalResponse({ type: 'event', event: type, data }), response);
    // Streams that leave out the event name are recognised by the data's type.
    assert.deepEqual(responsesStored.finalResponse({ type: 'event', data }), response);
  }
  for (const type of ['response.created', 'response.output_text.delta', 'response.failed', 'error']) {
    const data = JSON.stringify({ type, response });
    assert.equal(responsesStored.finalResponse({ type: 'event', event: type, data }), undefined);
  }
});

test('a record: the response marked stored with its previous id, the input, and every item id', () => {
  const response = {
    id: 'resp_3',
    object: 'response',
    store: false,
    previous_response_id: null,
    output: [{ type: 'message', id: 'msg_3', role: 'assistant', content: [] }],
  };
  const input: JsonValue[] = [
    { type: 'function_call_output', id: 'fco_1', call_id: 'c', output: 'ok' },
    { role: 'user' },
  ];
  const record = responsesStored.record({ body: {}, input, previousId: 'resp_2' }, response);
  assert.ok(record !== undefined);
  assert.equal(record.id, 'resp_3');
  assert.deepEqual(record.itemIds, ['msg_3', 'fco_1']);
  const stored = JSON.parse(record.record) as { response: JsonObject; input: unknown };
  assert.deepEqual(stored.input, input);
  assert.equal(stored.response.store, true);
  assert.equal(stored.response.previous_response_id, 'resp_2');
  assert.deepEqual(responsesStored.view(record.record), stored.response);
});
