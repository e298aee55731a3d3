// A Responses stream relayed as it comes (an OpenAI Responses upstream) whose connection drops mid-way: the error
// event the gateway adds continues the stream's sequence numbers instead of starting again at 0.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ACCESS_KEY, type Stack, startStack } from '../support/stack.ts';

let stack: Stack;

before(async () => {
  stack = await startStack();
});

after(async () => {
  await stack.close();
});

test('the error event that ends a failed pass-through Responses stream numbers on from the events before it', async () => {
  const res = await fetch(`${stack.url}/v1/responses`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ACCESS_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-4o-mini-fail-midstream-reset', input: 'cut short', stream: true }),
  });
  assert.equal(res.status, 200);
  const events = (await res.text())
    .split('\n\n')
    .map((block) => block.split('\n').find((line) => line.startsWith('data: ')))
    .filter((line): line is string => line !== undefined)
    .map((line) => JSON.parse(line.slice(6)) as { type: string; sequence_number: number });
  const last = events.at(-1)!;
  assert.equal(last.type, 'error', JSON.stringify(events.map((e) => e.type)));
  const before = events.slice(0, -1);
  assert.ok(before.length > 0, 'the upstream sent events before it failed');
  assert.deepEqual(
    before.map((e) => e.sequence_number),
    before.map((_, i) => i),
  );
  assert.equal(last.sequence_number, before.length);
});
