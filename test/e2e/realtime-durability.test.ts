// Realtime billing integrity: a gateway killed (SIGKILL) mid-session loses no event of a response whose
// response.done the client saw; a client that leaves mid-response gets the response cancelled upstream
// and the usage of what was generated until then billed.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { type RawData, WebSocket } from 'ws';
import {
  type BillingStack,
  type ChildGateway,
  spawnGateway,
  startBillingStack,
} from '../support/billing-stack.ts';
import { type Json, RealtimeClient } from '../support/realtime-client.ts';
import { ACCESS_KEY } from '../support/stack.ts';

let stack: BillingStack;
let gateway: ChildGateway | undefined;

before(async () => {
  // No gateway or sidecar in this process: the gateway is a child (to be killed), delivery comes later.
  stack = await startBillingStack({ gateway: false, sidecar: false });
});

after(async () => {
  if (gateway !== undefined && gateway.child.exitCode === null && gateway.child.signalCode === null)
    gateway.child.kill('SIGKILL');
  await gateway?.exited;
  await stack?.close();
});

function connect(base: string, model: string, rid: string, headers: Record<string, string> = {}) {
  return RealtimeClient.open(`${base.replace(/^http/, 'ws')}/v1/realtime?model=${model}`, {
    headers: { authorization: `Bearer ${ACCESS_KEY}`, 'x-router-request-id': rid, ...headers },
  });
}

test('kill -9 of the gateway mid-session: every response the client saw end is billed', async () => {
  gateway = await spawnGateway(stack);
  const rid = 'rt-kill-1';
  const session = await connect(gateway.url, 'gpt-realtime', rid);
  await session.until((m) => m.type === 'session.created');
  const seen: string[] = [];
  for (let i = 0; i < 3; i++) {
    session.ws.send(JSON.stringify({ type: 'response.create', response: { output_modalities: ['text'] } }));
    seen.push((await session.until((m) => m.type === 'response.done')).response.id);
  }
  gateway.child.kill('SIGKILL');
  await gateway.exited;
  // Delivery starts only now, from what the killed gateway left in the outbox.
  await stack.startSidecar();
  for (const id of seen) {
    const event = await stack.eventFor(`${rid}:${id}`);
    assert.equal(event.idempotency_key, `router:${rid}:${id}`);
  }
  await stack.stopSidecar();
});

test('a client that leaves mid-response: the response is cancelled upstream and what it generated is billed', async () => {
  gateway = await spawnGateway(stack);
  const rid = 'rt-leave-1';
  // A slow response (the simulator reads the pace from the model name), routed by the header.
  const session = await connect(gateway.url, 'gpt-realtime-delay-100', rid, {
    'x-router-provider': 'openai',
  });
  await session.until((m) => m.type === 'session.created');
  session.ws.send(JSON.stringify({ type: 'response.create', response: { output_modalities: ['text'] } }));
  const created = await session.until((m) => m.type === 'response.created');
  await session.until((m) => m.type === 'response.output_text.delta');
  session.ws.close(1000);

  await stack.upstream.waitFor((sim) => sim.realtime.sessions.at(-1)?.closed !== undefined, 10_000);
  const upstream = stack.upstream.realtime.sessions.at(-1)!;
  assert.ok(
    upstream.received.some((m) => (m as Json).type === 'response.cancel'),
    'the gateway cancelled the response',
  );
  const done = upstream.sent.find((m) => (m as Json).type === 'response.done') as Json;
  assert.equal(done.response.status, 'cancelled');
  assert.equal(done.response.id, created.response.id);

  await stack.startSidecar();
  const event = await stack.eventFor(`${rid}:${done.response.id}`);
  assert.equal(event.raw_json.usage.output_tokens, done.response.usage.output_tokens);
  assert.ok(done.response.usage.output_tokens > 0, 'some output was generated before the cancel');
  await stack.stopSidecar();
  gateway.child.kill('SIGTERM');
  await gateway.exited;
});

test('a Gemini Live client that cuts a turn: what was relayed is billed as an estimate', async () => {
  gateway = await spawnGateway(stack);
  const rid = 'rt-leave-gemini';
  const path = '/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent';
  const ws = new WebSocket(`${gateway.url.replace(/^http/, 'ws')}${path}?key=${ACCESS_KEY}`, {
    headers: { 'x-router-request-id': rid, 'x-router-provider': 'gemini' },
  });
  const messages: Json[] = [];
  let wake: (() => void) | undefined;
  ws.on('message', (d: RawData) => {
    messages.push(JSON.parse(String(d)) as Json);
    wake?.();
  });
  const until = async (pred: (m: Json) => boolean) => {
    while (!messages.some(pred)) await new Promise<void>((r) => (wake = r));
  };
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  // Slow text deltas (the simulator reads the pace from the model name).
  ws.send(
    JSON.stringify({
      setup: {
        model: 'models/gemini-live-2.5-flash-delay-200',
        generationConfig: { responseModalities: ['TEXT'] },
      },
    }),
  );
  await until((m) => m.setupComplete !== undefined);
  ws.send(
    JSON.stringify({
      clientContent: {
        turns: [{ role: 'user', parts: [{ text: 'tell me a long story' }] }],
        turnComplete: true,
      },
    }),
  );
  await until((m) => m.serverContent?.modelTurn !== undefined);
  ws.close(1000);

  await stack.startSidecar();
  const event = await stack.eventFor(`${rid}:turn-1`);
  assert.equal(event.raw_json.usage_stage, 'estimated');
  assert.ok(event.raw_json.usage.output_tokens > 0, 'the relayed text is counted');
  await stack.stopSidecar();
  gateway.child.kill('SIGTERM');
  await gateway.exited;
});
