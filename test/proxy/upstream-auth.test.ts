// An upstream 401/403 means the gateway's own provider key is wrong: the client gets a gateway error in
// its family's shape, never the upstream's text about that key, and the log names provider and reason.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { capturingLogger, type LogLine } from '../support/billing-stack.ts';
import { postJson, type Stack, startStack } from '../support/stack.ts';

let stack: Stack;
const logs: LogLine[] = [];

before(async () => {
  stack = await startStack({ logger: capturingLogger(logs, 'info') });
});
after(() => stack.close());

const chat = (model: string) => ({ model, messages: [{ role: 'user', content: 'hi' }] });

for (const provider of ['openai', 'anthropic', 'gemini']) {
  for (const status of [401, 403]) {
    test(`${provider} upstream ${status} -> 502 upstream_auth_failed, upstream text withheld`, async () => {
      const before = logs.length;
      const reply = await postJson(`${stack.url}/v1/chat/completions`, chat(`m-fail-${status}`), {
        'x-router-provider': provider,
      });
      assert.equal(reply.status, 502, reply.text);
      const error = (reply.json as { error: { code: string; type: string; message: string } }).error;
      assert.equal(error.code, 'upstream_auth_failed');
      assert.match(error.message, /provider key/);
      assert.doesNotMatch(reply.text, /Simulated|sim-[a-z]+-key|\*\*\*/);
      const line = logs.slice(before).find((l) => l.msg === "upstream refused the gateway's credentials");
      assert.ok(line, 'logged');
      assert.equal(line.provider, provider);
      assert.equal(line.status, status);
      assert.equal(typeof line.reason, 'string');
      assert.doesNotMatch(JSON.stringify(line), /Simulated|sim-[a-z]+-key/);
    });
  }
}

test('each client family gets the auth failure in its own shape', async () => {
  const anthropic = await postJson(
    `${stack.url}/v1/messages`,
    {
      model: 'claude-fail-401',
      max_tokens: 5,
      messages: [{ role: 'user', content: 'hi' }],
    },
    { 'x-router-provider': 'anthropic' },
  );
  assert.equal(anthropic.status, 502);
  assert.equal((anthropic.json as { type: string; error: { code: string } }).type, 'error');
  assert.equal((anthropic.json as { error: { code: string } }).error.code, 'upstream_auth_failed');
  const gemini = await postJson(`${stack.url}/v1beta/models/gemini-fail-403:generateContent`, {
    contents: [{ role: 'user', parts: [{ text: 'hi' }] }],
  });
  assert.equal(gemini.status, 502);
  assert.equal((gemini.json as { error: { status: string } }).error.status, 'UNAVAILABLE');
});
