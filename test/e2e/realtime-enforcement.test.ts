// Balance enforcement of realtime sessions: a blocked subject's upgrade is refused with 402; a subject
// blocked by a webhook while its session is open gets the session closed (1008, the reason saying why)
// once the current response has been delivered and billed.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import {
  type EnforcementStack,
  SUBJECT_A,
  startEnforcementStack,
  WEBHOOK_PATH,
} from '../support/enforcement-stack.ts';
import { type Json, RealtimeClient } from '../support/realtime-client.ts';
import { ACCESS_KEY } from '../support/stack.ts';

let stack: EnforcementStack;
const subject = { subject_type: 'api_key', subject_id: SUBJECT_A };

before(async () => {
  stack = await startEnforcementStack({ wallets: { [`api_key:${SUBJECT_A}`]: '1000' } });
});

after(async () => {
  await stack?.close();
});

function connect(): Promise<RealtimeClient> {
  return RealtimeClient.open(`${stack.url.replace(/^http/, 'ws')}/v1/realtime?model=gpt-realtime`, {
    headers: { authorization: `Bearer ${ACCESS_KEY}` },
  });
}

test('blocked mid-session: closed with 1008 after the current response; the next upgrade is 402', async () => {
  const client = await connect();
  const { ws } = client;
  const next = (pred: (m: Json) => boolean) => client.until(pred);
  const closed = client.closed;
  await next((m) => m.type === 'session.created');
  ws.send(JSON.stringify({ type: 'response.create', response: { output_modalities: ['text'] } }));
  await next((m) => m.type === 'response.done');

  const blocked = await stack.billing.sendWebhook('wallet.insufficient_balance', subject, {
    url: `${stack.url}${WEBHOOK_PATH}`,
  });
  assert.equal(blocked.status, 204);
  // The next response is delivered whole, then the session is closed.
  ws.send(JSON.stringify({ type: 'response.create', response: { output_modalities: ['text'] } }));
  const done = await next((m) => m.type === 'response.done');
  assert.equal(done.response.status, 'completed');
  const close = await closed;
  assert.equal(close.code, 1008);
  assert.match(close.reason, /balance/i);

  await assert.rejects(connect(), (err: { status?: number }) => err.status === 402);

  const credited = await stack.billing.sendWebhook('wallet.balance_changed', subject, {
    url: `${stack.url}${WEBHOOK_PATH}`,
  });
  assert.equal(credited.status, 204);
  const again = await connect();
  await again.until((m) => m.type === 'session.created');
  again.ws.close(1000);
});
