// Stored responses while Redis is away (shared-store mode): a request that names a stored response, and
// GET of one, are 503 `stored_response_unavailable` (retry), not a 404 that would tell the client its
// conversation is gone; a request that names nothing is still served (its reply just is not stored);
// once Redis is back, what was stored before is found again.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { waitUntil } from '../support/billing-stack.ts';
import { type RedisServer, startRedis } from '../support/redis.ts';
import { ACCESS_KEY, postJson, type Stack, startStack } from '../support/stack.ts';

let redis: RedisServer;
let stack: Stack;

before(async () => {
  redis = await startRedis({ persist: true });
  stack = await startStack({
    extraYaml: [
      'store:',
      '  enabled: true',
      `  addr: ${redis.url}`,
      '  access_key_hash_secret: store-down-secret',
      '  access_key_mode: file_only',
      '  operation_timeout_ms: 300',
    ].join('\n'),
  });
});
after(async () => {
  await stack?.close();
  await redis?.close();
});

test('Redis away: references are 503 stored_response_unavailable, plain turns are served; back: found', async () => {
  const url = `${stack.url}/v1/responses`;
  const model = 'claude-sonnet-5';
  const one = await postJson(url, { model, input: 'before the outage' });
  assert.equal(one.status, 200, one.text);
  const id = (one.json as { id: string }).id;

  await redis.stop();
  const named = await postJson(url, { model, previous_response_id: id, input: 'during' });
  assert.equal(named.status, 503, named.text);
  assert.equal((named.json as { error: { code: string } }).error.code, 'stored_response_unavailable');
  const got = await fetch(`${url}/${id}`, { headers: { authorization: `Bearer ${ACCESS_KEY}` } });
  assert.equal(got.status, 503);
  const plain = await postJson(url, { model, input: 'nothing named' });
  assert.equal(plain.status, 200, plain.text);

  await redis.start();
  // The gateway reconnects on its own schedule: 503 until it has, then the response stored before.
  let again = 0;
  await waitUntil(async () => {
    again = (await postJson(url, { model, previous_response_id: id, input: 'after' })).status;
    return again !== 503;
  }, 'the store connection back');
  assert.equal(again, 200);
});
