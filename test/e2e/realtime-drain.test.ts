// Shutdown with realtime sessions open: the gateway keeps them through the drain timeout (a session that
// ends by itself meanwhile ends normally), then closes the rest with 1001 (going away) and stops.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type RawData, WebSocket } from 'ws';
import { ACCESS_KEY, startStack } from '../support/stack.ts';

function open(base: string): Promise<{ ws: WebSocket; created: Promise<void>; closed: Promise<number> }> {
  const ws = new WebSocket(`${base.replace(/^http/, 'ws')}/v1/realtime?model=gpt-realtime`, {
    headers: { authorization: `Bearer ${ACCESS_KEY}` },
  });
  const created = new Promise<void>((resolve) =>
    ws.on('message', (d: RawData) => {
      if (String(d).includes('"session.created"')) resolve();
    }),
  );
  const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve({ ws, created, closed }));
    ws.once('error', reject);
  });
}

test('sessions run through the drain timeout, then get 1001; the gateway stops', async () => {
  const stack = await startStack({ extraYaml: 'limits: { drain_timeout_ms: 300 }' });
  try {
    const lingering = await open(stack.url);
    const leaving = await open(stack.url);
    await Promise.all([lingering.created, leaving.created]);
    const stopping = stack.gateway.close();
    // Still relayed while draining: the client ends this one itself, normally.
    leaving.ws.close(1000, 'done');
    assert.equal(await leaving.closed, 1000);
    assert.equal(await lingering.closed, 1001);
    await stopping;
    assert.equal(stack.sim.realtime.open, 0, 'no upstream session left open');
  } finally {
    await stack.sim.close();
  }
});
