// A request that reached a provider and failed there (the upstream cut its reply or reset the
// connection) is answered with an error made by the gateway and is still reported (zero usage, its
// status). Its usage event must be on record before that error reply leaves, as a served reply's is:
// a gateway killed with SIGKILL right after the client has the error still delivers the event later.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type ChildGateway, spawnGateway, startBillingStack } from '../support/billing-stack.ts';
import { ACCESS_KEY } from '../support/stack.ts';

const CASES: { path: string; body: (model: string) => unknown; model: string }[] = [
  {
    path: '/v1/messages',
    body: (model) => ({ model, max_tokens: 100, messages: [{ role: 'user', content: 'hello there' }] }),
    model: 'claude-sonnet-5',
  },
  {
    path: '/v1/chat/completions',
    body: (model) => ({ model, messages: [{ role: 'user', content: 'hello there' }] }),
    model: 'gpt-5.4-mini',
  },
  {
    path: '/v1/chat/completions',
    body: (model) => ({ model, messages: [{ role: 'user', content: 'hello there' }] }),
    model: 'gemini-3.8-flash',
  },
];

test('kill -9 right after an error reply to a request that reached the upstream: its event is delivered', async (t) => {
  const stack = await startBillingStack({ gateway: false, sidecar: false });
  let gw: ChildGateway | undefined;
  t.after(async () => {
    gw?.child.kill('SIGKILL');
    await stack.close();
  });
  const rids: string[] = [];
  // Simulator knobs in the model name: half the JSON body then a close, or a reset before any reply.
  for (const fail of ['midstream', 'reset']) {
    for (const c of CASES) {
      const rid = `error-reply-${rids.length}`;
      rids.push(rid);
      gw = await spawnGateway(stack);
      const res = await fetch(`${gw.url}${c.path}`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${ACCESS_KEY}`,
          'content-type': 'application/json',
          'x-router-request-id': rid,
        },
        body: JSON.stringify(c.body(`${c.model}-fail-${fail}`)),
      });
      await res.text();
      assert.equal(res.status, 502, `${c.model} fail-${fail}`);
      gw.child.kill('SIGKILL');
      assert.deepEqual(await gw.exited, { code: null, signal: 'SIGKILL' });
    }
  }
  const sidecar = await stack.startSidecar();
  await stack.billing.waitForEvents(rids.length, 15_000).catch(() => undefined);
  await sidecar.worker?.waitForDrain();
  const accepted = stack.billing.events.map((e) => e.external_event_id).sort();
  assert.deepEqual(accepted, [...rids].sort(), 'every error reply had its event on record');
  for (const e of stack.billing.events) {
    assert.equal(e.raw_json.status, 502);
    assert.equal(e.raw_json.usage.total_tokens, 0);
  }
});
