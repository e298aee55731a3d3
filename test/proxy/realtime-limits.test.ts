// limits.realtime_max_message_bytes: a client message above it closes the session with 1009 (message
// too big) before it is buffered whole or relayed, and the upstream side closes with it; one under it is
// relayed as usual.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { RealtimeClient } from '../support/realtime-client.ts';
import { ACCESS_KEY, type Stack, startStack } from '../support/stack.ts';

const LIMIT = 4096;
let stack: Stack;

before(async () => {
  stack = await startStack({ extraYaml: `limits: { realtime_max_message_bytes: ${LIMIT} }` });
});

after(async () => {
  await stack?.close();
});

function openClient(): Promise<RealtimeClient> {
  return RealtimeClient.open(`${stack.url.replace(/^http/, 'ws')}/v1/realtime?model=gpt-realtime`, {
    headers: { authorization: `Bearer ${ACCESS_KEY}` },
  });
}

/** An input_audio_buffer.append event of exactly `bytes` bytes. */
function appendOf(bytes: number): string {
  const empty = JSON.stringify({ type: 'input_audio_buffer.append', audio: '' });
  return JSON.stringify({ type: 'input_audio_buffer.append', audio: 'A'.repeat(bytes - empty.length) });
}

test('a message over the limit closes the session with 1009; one at the limit is relayed', {
  timeout: 20_000,
}, async () => {
  const client = await openClient();
  await client.until((m) => m.type === 'session.created');
  const upstream = stack.sim.realtime.sessions.at(-1)!;
  const fits = appendOf(LIMIT);
  assert.equal(Buffer.byteLength(fits), LIMIT);
  client.ws.send(fits);
  await stack.sim.waitFor(() => upstream.received.length === 1);

  client.ws.send(appendOf(LIMIT + 1));
  const closed = await client.closed;
  assert.equal(closed.code, 1009);
  await stack.sim.waitFor(() => upstream.closed !== undefined);
  assert.equal(upstream.received.length, 1, 'the large message never reached the upstream');
});

test('a Gemini Live client that sends no setup message is closed after the head timeout', async () => {
  const quiet = await startStack({ extraYaml: 'limits: { client_header_timeout_ms: 300 }' });
  try {
    const client = await RealtimeClient.open(
      `${quiet.url.replace(/^http/, 'ws')}/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent?key=${ACCESS_KEY}`,
    );
    const closed = await client.closed;
    assert.equal(closed.code, 1008);
    assert.match(closed.reason, /no setup message within 300 ms/);
    assert.equal(quiet.sim.realtime.sessions.length, 0, 'no upstream session was opened');
  } finally {
    await quiet.close();
  }
});

test('a Gemini Live client whose first message is over the limit gets 1009; the gateway stays up', async () => {
  const client = await RealtimeClient.open(
    `${stack.url.replace(/^http/, 'ws')}/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent?key=${ACCESS_KEY}`,
  );
  client.ws.send(`{"setup":{"model":"models/gemini-live-2.5-flash","x":"${'a'.repeat(LIMIT)}"}}`);
  assert.equal((await client.closed).code, 1009);
  const again = await openClient();
  await again.until((m) => m.type === 'session.created');
  again.ws.close(1000);
});

test('a Gemini Live setup nested deeper than limits.max_json_depth is refused (1007) before any upstream opens', async () => {
  const before = stack.sim.realtime.sessions.length;
  const client = await RealtimeClient.open(
    `${stack.url.replace(/^http/, 'ws')}/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent?key=${ACCESS_KEY}`,
  );
  const deep = `${'['.repeat(1500)}${']'.repeat(1500)}`;
  client.ws.send(`{"setup":{"model":"models/gemini-live-2.5-flash","tools":${deep}}}`);
  const closed = await client.closed;
  assert.equal(closed.code, 1007);
  assert.equal(stack.sim.realtime.sessions.length, before, 'no upstream session was opened');
});
