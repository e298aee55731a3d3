import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { postJson, type Stack, startStack } from '../support/stack.ts';

let stack: Stack;
before(async () => {
  stack = await startStack();
});
after(() => stack.close());

test('a chat completion reaches the OpenAI upstream and comes back unchanged', async () => {
  const res = await postJson(`${stack.url}/v1/chat/completions`, {
    model: 'gpt-5.4-mini',
    messages: [{ role: 'user', content: 'hello there' }],
  });
  assert.equal(res.status, 200);
  assert.match(res.headers.get('x-router-request-id') ?? '', /.+/);
  const body = res.json as { choices: { message: { content: string } }[] };
  assert.match(body.choices[0]!.message.content, /^Echo: hello there/);
  const sent = stack.sim.requests.at(-1);
  assert.equal(sent?.headers.authorization, 'Bearer sim-openai-key');
});
