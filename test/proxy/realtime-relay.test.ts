// The relay's response bookkeeping while a usage event is being put on record. A global hook module
// holds the recording of a chosen response open (its onComplete waits for a gate the test opens; the
// gateway runs in this process). A response ends when its usage message arrives, even though that
// message is still held from the client, and one that starts meanwhile is in progress: a client that
// leaves is billed neither an extra estimate for the first nor nothing for the second.

import assert from 'node:assert/strict';
import { mkdtemp, readdir, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { type BillingStack, startBillingStack } from '../support/billing-stack.ts';
import { RealtimeClient } from '../support/realtime-client.ts';
import { ACCESS_KEY } from '../support/stack.ts';

const GEMINI_PATH = '/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent';

const GATE_MODULE = `
export function createHook() {
  return {
    name: 'record-gate',
    async onComplete(ctx) {
      const gate = globalThis.__recordGate;
      if (gate === undefined || gate.used || !ctx.id.startsWith(gate.id)) return;
      gate.used = true;
      gate.entered();
      await gate.opened;
    },
  };
}
`;

interface Gate {
  /** The first response whose request id starts with this is held. */
  id: string;
  used?: boolean;
  entered(): void;
  opened: Promise<void>;
}
const shared = globalThis as { __recordGate?: Gate };

let stack: BillingStack;

before(async () => {
  const module = join(await mkdtemp(join(tmpdir(), 'record-gate-')), 'record-gate.mjs');
  await writeFile(module, GATE_MODULE);
  stack = await startBillingStack({ extraYaml: `hooks:\n  - module: ${module}` });
});

after(async () => {
  delete shared.__recordGate;
  await stack?.close();
});

/**
 * Holds the recording of the first response whose request id starts with `id`: `inRecording` resolves
 * when it is held, `open()` lets it finish.
 */
function holdRecording(id: string): { inRecording: Promise<void>; open: () => void } {
  let entered!: () => void;
  const inRecording = new Promise<void>((resolve) => {
    entered = resolve;
  });
  let open!: () => void;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  shared.__recordGate = { id, entered, opened };
  return { inRecording, open };
}

/** Whether any outbox file holds a line with `text`. */
async function inOutbox(text: string): Promise<boolean> {
  for (const name of await readdir(stack.outboxDir)) {
    if (!name.endsWith('.jsonl')) continue;
    if ((await readFile(join(stack.outboxDir, name), 'utf8')).includes(text)) return true;
  }
  return false;
}

test('a Gemini client that leaves while its turn is being recorded is billed that turn once, and no estimate', {
  timeout: 20_000,
}, async () => {
  const rid = 'rt-relay-left-recording';
  const { inRecording, open } = holdRecording(`${rid}:turn-1`);
  const client = await RealtimeClient.open(
    `${stack.url.replace(/^http/, 'ws')}${GEMINI_PATH}?key=${ACCESS_KEY}`,
    { headers: { 'x-router-request-id': rid } },
  );
  client.send({
    setup: { model: 'models/gemini-live-2.5-flash', generationConfig: { responseModalities: ['TEXT'] } },
  });
  client.send({
    clientContent: { turns: [{ role: 'user', parts: [{ text: 'hello' }] }], turnComplete: true },
  });
  await inRecording;
  // The turn's usage message has arrived and waits for its event: the client leaves now.
  client.ws.close(1000);
  await client.closed;
  const upstream = stack.upstream.realtime.sessions.at(-1)!;
  // The gateway closes the upstream from the same handler that would bill a cut turn's estimate.
  await stack.upstream.waitFor(() => upstream.closed !== undefined);
  open();

  const billed = await stack.eventFor(`${rid}:turn-1`);
  assert.equal(billed.raw_json.usage_stage, 'upstream');
  // A request made after the close: its line follows any the close wrote.
  const marker = 'rt-relay-marker';
  const res = await fetch(`${stack.url}/v1/chat/completions`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${ACCESS_KEY}`,
      'content-type': 'application/json',
      'x-router-request-id': marker,
    },
    body: JSON.stringify({ model: 'gpt-5.4-mini', messages: [{ role: 'user', content: 'hi' }] }),
  });
  assert.equal(res.status, 200);
  await res.text();
  await stack.eventFor(marker);
  assert.equal(await inOutbox(`${rid}:turn-2`), false, 'no estimate of a turn that had ended');
  assert.equal(
    stack.billing.events.filter((e) => e.external_event_id.startsWith(`${rid}:`)).length,
    1,
    'billed once',
  );
});

test('a response that starts while the one before is being recorded is in progress: a client leaving it cancels it, and its usage is billed', {
  timeout: 20_000,
}, async () => {
  const rid = 'rt-relay-next-started';
  const { inRecording, open } = holdRecording(`${rid}:`);
  // Responses of 20 deltas 50 ms apart: the second is still being generated when the client leaves.
  const client = await RealtimeClient.open(
    `${stack.url.replace(/^http/, 'ws')}/v1/realtime?model=gpt-realtime-chunks-20-delay-50`,
    { headers: { authorization: `Bearer ${ACCESS_KEY}`, 'x-router-request-id': rid } },
  );
  await client.until((m) => m.type === 'session.created');
  client.send({
    type: 'conversation.item.create',
    item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'first' }] },
  });
  client.send({ type: 'response.create', response: { output_modalities: ['text'] } });
  const first = await client.until((m) => m.type === 'response.created');
  await inRecording;
  const upstream = stack.upstream.realtime.sessions.at(-1)!;
  const typeOf = (m: unknown) => (m as { type?: unknown }).type;
  client.send({ type: 'response.create', response: { output_modalities: ['text'] } });
  // The second response is well under way upstream (three deltas, 50 ms apart, after its start): its
  // messages reach the gateway while the first one's usage is still being recorded.
  await stack.upstream.waitFor(() => {
    const start = upstream.sent.findLastIndex((m) => typeOf(m) === 'response.created');
    const created = upstream.sent.filter((m) => typeOf(m) === 'response.created').length;
    return (
      created === 2 &&
      upstream.sent.slice(start).filter((m) => typeOf(m) === 'response.output_text.delta').length >= 3
    );
  });
  open();
  await client.until((m) => m.type === 'response.done' && m.response.id === first.response.id);
  const second = await client.until((m) => m.type === 'response.created');
  client.ws.close(1000);
  await client.closed;

  assert.equal((await stack.eventFor(`${rid}:${first.response.id}`)).raw_json.usage_stage, 'upstream');
  // Cancelled upstream when the client left, and billed with the usage the upstream reported for it.
  const cut = await stack.eventFor(`${rid}:${second.response.id}`);
  assert.ok(cut.raw_json.usage.output_tokens > 0);
  assert.ok(
    upstream.received.some((m) => typeOf(m) === 'response.cancel'),
    'the second response was cancelled',
  );
});

test('an upstream that hangs up right after a usage message: the client gets that message, then the close', {
  timeout: 20_000,
}, async () => {
  const rid = 'rt-relay-hang-up';
  const { inRecording, open } = holdRecording(`${rid}:`);
  const client = await RealtimeClient.open(
    `${stack.url.replace(/^http/, 'ws')}/v1/realtime?model=gpt-realtime`,
    {
      headers: { authorization: `Bearer ${ACCESS_KEY}`, 'x-router-request-id': rid },
    },
  );
  await client.until((m) => m.type === 'session.created');
  client.send({ type: 'response.create', response: { output_modalities: ['text'] } });
  const created = await client.until((m) => m.type === 'response.created');
  await inRecording;
  const upstream = stack.upstream.realtime.sessions.at(-1)!;
  stack.upstream.realtime.hangUp(1000, 'done here');
  await stack.upstream.waitFor(() => upstream.closed !== undefined);
  open();
  const done = await client.until((m) => m.type === 'response.done');
  assert.equal(done.response.id, created.response.id, 'the billed response reached the client');
  const closed = await client.closed;
  assert.equal(closed.code, 1000);
  assert.equal((await stack.eventFor(`${rid}:${created.response.id}`)).raw_json.usage_stage, 'upstream');
});
