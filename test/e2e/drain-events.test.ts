// SIGTERM while 100 streams outlive limits.drain_timeout_ms, on a real gateway process with its
// supervised sidecar, in file mode and in shared-store mode (real redis-server): the streams are cut at
// the drain timeout, and every one of them still has its usage event on record before the process exits.
// A sidecar started afterwards delivers whatever the supervised one had not: the billing simulator ends
// up with each request id exactly once.

import assert from 'node:assert/strict';
import { appendFile } from 'node:fs/promises';
import { test } from 'node:test';
import {
  type BillingStack,
  type ChildGateway,
  spawnLogged,
  startBillingStack,
} from '../support/billing-stack.ts';
import { startRedis } from '../support/redis.ts';
import { ACCESS_KEY } from '../support/stack.ts';

const STREAMS = 100;

/** Opens a stream that would last minutes; resolves once its first bytes arrived. */
async function openStream(url: string, rid: string): Promise<{ rest: Promise<void> }> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${ACCESS_KEY}`,
      'content-type': 'application/json',
      'x-router-request-id': rid,
      'x-router-provider': 'openai',
    },
    body: JSON.stringify({
      // Knobs of the upstream simulator: a stream of minutes.
      model: 'gpt-5.4-mini-chunks-10000-delay-20',
      stream: true,
      messages: [{ role: 'user', content: `stream ${rid} through the shutdown` }],
    }),
  });
  assert.equal(res.status, 200);
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  const first = await reader.read();
  assert.equal(first.done, false);
  const rest = (async () => {
    try {
      while (!(await reader.read()).done) {
        // drain until the gateway cuts the stream
      }
    } catch {
      // cut: the connection was closed under the reader
    }
  })();
  return { rest };
}

async function cutStreamsAtShutdown(stack: BillingStack, extraYaml: string): Promise<void> {
  await appendFile(stack.configFile, `limits:\n  drain_timeout_ms: 200\n${extraYaml}`);
  const gw: ChildGateway = await spawnLogged(
    'proxy/cli.ts',
    ['-c', stack.configFile],
    stack.env,
    'router listening',
  );
  try {
    const rids = Array.from({ length: STREAMS }, (_, i) => `drain-${i}`);
    const streams = await Promise.all(rids.map((rid) => openStream(gw.url, rid)));
    gw.child.kill('SIGTERM');
    await Promise.all(streams.map((s) => s.rest));
    assert.deepEqual(await gw.exited, { code: 0, signal: null });
    await stack.upstream.waitFor((sim) => sim.stats.aborted >= STREAMS, 10_000);

    // What the supervised sidecar had not delivered yet is still queued: a new sidecar delivers it.
    const sidecar = await stack.startSidecar();
    await stack.billing.waitForEvents(STREAMS, 30_000).catch(async (err: unknown) => {
      // Say where the missing events are: still queued, held by some consumer, or failing to send.
      const c = sidecar.consumer;
      const w = sidecar.worker;
      const where =
        c !== undefined
          ? JSON.stringify({ status: await c.status(), counters: c.counters() })
          : JSON.stringify({ pending: await w?.pending(), counters: w?.counters() });
      const warnings = [...gw.lines, ...stack.logs]
        .filter((l) => Number(l.level) >= 40)
        .slice(-8)
        .map((l) => `${String(l.name ?? '')} ${String(l.msg)}`);
      throw new Error(
        `${err instanceof Error ? err.message : String(err)}; ${where}; warnings logged: ${JSON.stringify(warnings)}`,
      );
    });
    if (sidecar.worker !== undefined) await sidecar.worker.waitForDrain();
    const accepted = stack.billing.events.map((e) => e.external_event_id).sort();
    assert.deepEqual(accepted, [...rids].sort(), 'every cut stream has its usage event, once');
    for (const e of stack.billing.events) {
      assert.equal(e.raw_json.usage_stage, 'estimated', 'billed for what was delivered before the cut');
    }
  } finally {
    if (gw.child.exitCode === null && gw.child.signalCode === null) gw.child.kill('SIGKILL');
  }
}

test('file mode: 100 streams cut at the drain timeout, all 100 events in the outbox', async (t) => {
  const stack = await startBillingStack({ gateway: false, sidecar: false });
  t.after(() => stack.close());
  await cutStreamsAtShutdown(stack, '');
});

test('shared-store mode: 100 streams cut at the drain timeout, all 100 events on the stream', async (t) => {
  const redis = await startRedis();
  const stack = await startBillingStack({ gateway: false, sidecar: false });
  t.after(async () => {
    await stack.close();
    await redis.close();
  });
  await cutStreamsAtShutdown(
    stack,
    [
      'store:',
      '  enabled: true',
      `  addr: ${redis.url}`,
      `  key_prefix: "drain${process.pid}:"`,
      '  access_key_mode: file_only',
      '  access_key_hash_secret: drain-test-hash-secret',
      '',
    ].join('\n'),
  );
});
