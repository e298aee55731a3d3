// Request ids and billing: by default the gateway bills every request under an id of its own, so a
// caller that reuses an X-Router-Request-Id (its own or another subject's) is still charged for each
// request; the caller's id is kept as a correlation id. Only a configured trusted source (an ingress
// that makes unique ids) sets the billing id.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type BillingStack, SUBJECT_ID, startBillingStack } from '../support/billing-stack.ts';
import { ACCESS_KEY } from '../support/stack.ts';

const KEY_B = 'ak_test_client_b_secret';
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

async function chat(stack: BillingStack, key: string, rid: string) {
  const res = await fetch(`${stack.url}/v1/chat/completions`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${key}`,
      'content-type': 'application/json',
      'x-router-request-id': rid,
    },
    body: JSON.stringify({ model: 'gpt-5.4-mini', messages: [{ role: 'user', content: 'hello there' }] }),
  });
  await res.text();
  return {
    status: res.status,
    id: res.headers.get('x-router-request-id') ?? '',
    correlation: res.headers.get('x-router-correlation-id'),
  };
}

describe('default: no trusted source', () => {
  let stack: BillingStack;
  before(async () => {
    stack = await startBillingStack({
      trustCallerIds: false,
      env: { ROUTER_ACCESS_KEY_CLIENT_B: KEY_B },
      billingSim: { wallets: { [`api_key:${SUBJECT_ID}`]: '1000', 'api_key:client_b': '1000' } },
    });
  });
  after(() => stack.close());

  test('a reused X-Router-Request-Id never makes a request free, across subjects or for one', async () => {
    const served = [
      await chat(stack, ACCESS_KEY, 'dup-1'),
      await chat(stack, KEY_B, 'dup-1'),
      await chat(stack, KEY_B, 'dup-1'),
    ];
    for (const r of served) {
      assert.equal(r.status, 200);
      assert.match(r.id, UUID_RE, "the billing id is the gateway's own");
      assert.equal(r.correlation, 'dup-1', "the caller's id is echoed as the correlation id");
    }
    assert.equal(new Set(served.map((r) => r.id)).size, 3);
    for (const r of served) {
      const event = await stack.eventFor(r.id);
      assert.equal(event.idempotency_key, `router:${r.id}`);
      assert.equal(event.raw_json.meta.correlation_id, 'dup-1');
      assert.ok((event.raw_json.usage.output_tokens as number) > 0);
    }
    assert.equal(stack.billing.duplicates, 0, 'no event was dropped as a duplicate');
    assert.notEqual(stack.debited(SUBJECT_ID), '0');
    const b = Number(stack.debited('client_b'));
    const a = Number(stack.debited(SUBJECT_ID));
    assert.ok(Math.abs(b - 2 * a) < 1e-12, `client_b charged twice client_a's amount (${b} vs ${a})`);
  });

  test('every kind of proxied reply carries both ids: relayed, streamed, refused, failed and counted', async () => {
    const post = (path: string, key: string, body: string, extra: Record<string, string> = {}) =>
      fetch(`${stack.url}${path}`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${key}`,
          'content-type': 'application/json',
          'x-router-request-id': 'corr-7',
          ...extra,
        },
        body,
      });
    const chatBody = (stream: boolean) =>
      JSON.stringify({ model: 'gpt-5.4-mini', stream, messages: [{ role: 'user', content: 'hello there' }] });
    const replies = {
      relayed: await post('/v1/chat/completions', ACCESS_KEY, chatBody(false)),
      streamed: await post('/v1/chat/completions', ACCESS_KEY, chatBody(true)),
      refused: await post('/v1/chat/completions', 'ak_not_a_key', chatBody(false)),
      malformed: await post('/v1/chat/completions', ACCESS_KEY, '{'),
      counted: await post(
        '/v1/messages/count_tokens',
        ACCESS_KEY,
        JSON.stringify({ model: 'gpt-5.4-mini', messages: [{ role: 'user', content: 'hello there' }] }),
        { 'anthropic-version': '2023-06-01' },
      ),
    };
    const statuses = Object.fromEntries(Object.entries(replies).map(([k, r]) => [k, r.status]));
    assert.deepEqual(statuses, { relayed: 200, streamed: 200, refused: 401, malformed: 400, counted: 200 });
    for (const [kind, res] of Object.entries(replies)) {
      await res.text();
      assert.match(res.headers.get('x-router-request-id') ?? '', UUID_RE, kind);
      assert.equal(res.headers.get('x-router-correlation-id'), 'corr-7', kind);
    }
  });

  test('the gateway id is in error messages; a malformed caller id is dropped', async () => {
    const res = await fetch(`${stack.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ACCESS_KEY}`, 'x-router-request-id': 'bad id!' },
      body: '{',
    });
    const text = await res.text();
    const id = res.headers.get('x-router-request-id') ?? '';
    assert.match(id, UUID_RE);
    assert.equal(res.headers.get('x-router-correlation-id'), null);
    assert.ok(text.includes(`(request id: ${id})`), text);
  });
});

describe('a trusted source', () => {
  let stack: BillingStack;
  before(async () => {
    stack = await startBillingStack();
  });
  after(() => stack.close());

  test("its X-Router-Request-Id is the billing id, and X-Router-Correlation-Id the caller's", async () => {
    const res = await fetch(`${stack.url}/v1/chat/completions`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${ACCESS_KEY}`,
        'content-type': 'application/json',
        'x-router-request-id': 'ingress-0001',
        'x-router-correlation-id': 'client-42',
      },
      body: JSON.stringify({ model: 'gpt-5.4-mini', messages: [{ role: 'user', content: 'hi' }] }),
    });
    await res.text();
    assert.equal(res.headers.get('x-router-request-id'), 'ingress-0001');
    assert.equal(res.headers.get('x-router-correlation-id'), 'client-42');
    const event = await stack.eventFor('ingress-0001');
    assert.equal(event.idempotency_key, 'router:ingress-0001');
    assert.equal(event.raw_json.meta.correlation_id, 'client-42');
  });
});
