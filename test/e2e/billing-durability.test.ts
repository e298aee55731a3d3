// Billing end to end, when things break: a billing outage of any length (500s, hangs) loses nothing and
// the backlog drains after recovery; kill -9 of the gateway right after its replies and of the sidecar
// mid-delivery loses no event and charges none twice; and a hanging billing service never delays or
// alters a reply.

import assert from 'node:assert/strict';
import { access } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { Decimal } from 'decimal.js';
import {
  type BillingStack,
  type ChildGateway,
  sidecarPending,
  spawnGateway,
  spawnSidecar,
  startBillingStack,
  waitUntil,
} from '../support/billing-stack.ts';
import { ACCESS_KEY, startStack } from '../support/stack.ts';
import { chargeOf } from '../support/usage-events.ts';

interface Reply {
  status: number;
  body: string;
}

/** A request of a small mixed workload: plain and streamed, three provider families, a translation. */
function workload(i: number): { path: string; body: unknown } {
  const content = `Request number ${i}: tell me something about the number ${i}.`;
  switch (i % 4) {
    case 0:
      return {
        path: '/v1/chat/completions',
        body: { model: 'gpt-5.4-mini', messages: [{ role: 'user', content }] },
      };
    case 1:
      return {
        path: '/v1/chat/completions',
        body: { model: 'gpt-5.4-mini', messages: [{ role: 'user', content }], stream: true },
      };
    case 2:
      return {
        path: '/v1/chat/completions',
        body: { model: 'claude-sonnet-5', messages: [{ role: 'user', content }], stream: true },
      };
    default:
      return {
        path: '/v1beta/models/gemini-3.8-flash:generateContent',
        body: { contents: [{ role: 'user', parts: [{ text: content }] }] },
      };
  }
}

async function serve(url: string, rid: string, i: number): Promise<Reply> {
  const { path, body } = workload(i);
  const res = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${ACCESS_KEY}`,
      'content-type': 'application/json',
      'x-router-request-id': rid,
    },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.text() };
}

/** Every id accepted exactly once, nothing else accepted, and the wallet charged once per event. */
function assertBilledOnce(stack: BillingStack, rids: readonly string[]): void {
  const accepted = stack.billing.events.map((e) => e.external_event_id);
  assert.deepEqual([...accepted].sort(), [...rids].sort(), 'each served request accepted exactly once');
  const total = stack.billing.events.reduce((sum, e) => sum.plus(chargeOf(e)), new Decimal(0));
  assert.ok(total.gt(0));
  assert.ok(new Decimal(stack.debited()).eq(total), `debited ${stack.debited()}, charges ${total}`);
}

async function exists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}

test('a billing outage longer than the attempt budget (500s, then hangs) loses nothing; the backlog drains after recovery', async (t) => {
  const stack = await startBillingStack({
    // A small attempt budget and short timeouts, so the outage outlasts max_attempts many times over.
    billing: { max_attempts: 3, retry_interval_ms: 5, max_retry_interval_ms: 20, request_timeout_ms: 100 },
  });
  t.after(() => stack.close());
  const worker = stack.sidecar?.worker;
  assert.ok(worker);
  const rids: string[] = [];
  let n = 0;
  for (const mode of ['error500', 'hang'] as const) {
    stack.billing.setFailure(mode);
    const failedBefore = worker.counters().failedAttempts;
    for (let i = 0; i < 8; i++) {
      const rid = `outage-${mode}-${i}`;
      const reply = await serve(stack.url, rid, n++);
      assert.equal(reply.status, 200, 'served during the outage');
      rids.push(rid);
    }
    await waitUntil(
      () => worker.counters().failedAttempts >= failedBefore + 4 * 3,
      `${mode}: failed attempts well beyond max_attempts`,
    );
    assert.equal(
      stack.billing.accepted,
      mode === 'error500' ? 0 : 8,
      'nothing got through during the outage',
    );
    stack.billing.setFailure('none');
    await stack.billing.waitForEvents(rids.length, 15_000);
    await worker.waitForDrain();
  }
  assert.equal(worker.counters().deadLettered, 0, 'an outage never dead-letters');
  assert.equal(await exists(join(stack.outboxDir, 'dead-letter.jsonl')), false);
  assert.equal(await worker.pending(), 0);
  assertBilledOnce(stack, rids);
});

// The usage event is written to the outbox (one write(2) per event-loop turn) before the reply's last byte
// leaves the gateway (proxy/request-completion.ts endReply()), so a client that saw its whole reply has an
// event the kernel holds, whatever happens to the process after.
test('kill -9 of the gateway right after its replies: a sidecar started later delivers every event', async (t) => {
  const stack = await startBillingStack({ gateway: false, sidecar: false });
  let child: ChildGateway | undefined;
  t.after(async () => {
    child?.child.kill('SIGKILL');
    await stack.close();
  });
  child = await spawnGateway(stack);
  const rids: string[] = [];
  // Concurrent requests, so appends share group commits and the last ones are the freshest writes.
  const replies = await Promise.all(
    Array.from({ length: 24 }, (_, i) => {
      const rid = `kill-gw-${i}`;
      rids.push(rid);
      return serve(child?.url ?? '', rid, i);
    }),
  );
  child.child.kill('SIGKILL');
  assert.deepEqual(await child.exited, { code: null, signal: 'SIGKILL' });
  for (const r of replies) assert.equal(r.status, 200, r.body);

  const sidecar = await stack.startSidecar();
  await stack.billing.waitForEvents(rids.length, 15_000);
  await sidecar.worker?.waitForDrain();
  assertBilledOnce(stack, rids);
});

test('kill -9 of the sidecar mid-delivery, restarted: every event charged exactly once', async (t) => {
  const stack = await startBillingStack({ sidecar: false });
  const children: ChildGateway[] = [];
  t.after(async () => {
    for (const c of children) c.child.kill('SIGKILL');
    await stack.close();
  });
  const rids: string[] = [];
  for (let i = 0; i < 30; i++) {
    const rid = `kill-sc-${i}`;
    rids.push(rid);
    assert.equal((await serve(stack.url, rid, i)).status, 200);
  }
  // Slow ingests: the simulator processes (and charges) each one after 150 ms even when the sender is
  // gone, so the events in flight at the kill are charged and their acknowledgements lost.
  stack.billing.setFailure('slow:150');
  const first = await spawnSidecar(stack);
  children.push(first);
  await waitUntil(() => stack.billing.ingestCalls >= 4, 'ingests in flight');
  first.child.kill('SIGKILL');
  assert.deepEqual(await first.exited, { code: null, signal: 'SIGKILL' });
  await waitUntil(() => stack.billing.accepted >= 4, 'the in-flight ingests were processed');
  stack.billing.setFailure('none');

  const second = await spawnSidecar(stack);
  children.push(second);
  await stack.billing.waitForEvents(rids.length, 15_000);
  await waitUntil(async () => (await sidecarPending(second.url)) === 0, 'the restarted sidecar drained');
  assert.ok(stack.billing.duplicates >= 1, 'events in flight at the kill were sent again (and deduplicated)');
  assertBilledOnce(stack, rids);
  second.child.kill('SIGTERM');
  assert.deepEqual(await second.exited, { code: 0, signal: null });
});

/** Reply bodies with the per-response ids and timestamps taken out. */
function normalized(body: string): string {
  return body
    .replace(/"(id|created|responseId|system_fingerprint)":("[^"]*"|\d+)/g, '"$1":"*"')
    .replace(/"created_at":\d+/g, '"created_at":"*"');
}

test('a hanging billing service never delays or alters a reply', async (t) => {
  const plain = await startStack();
  const billed = await startBillingStack({ billing: { request_timeout_ms: 60_000 } });
  t.after(async () => {
    await billed.close();
    await plain.close();
  });
  billed.billing.setFailure('hang');

  // The first reply produces an event; the sidecar's ingest of it hangs.
  const first = await serve(billed.url, 'hang-0', 0);
  assert.equal(first.status, 200);
  await waitUntil(() => billed.billing.ingestCalls >= 1, 'an ingest hanging at the billing service');

  const rids = ['hang-0'];
  const expected = [await serve(plain.url, 'hang-0', 0)];
  const got = [first];
  for (let i = 1; i < 12; i++) {
    const rid = `hang-${i}`;
    rids.push(rid);
    got.push(await serve(billed.url, rid, i));
    expected.push(await serve(plain.url, rid, i));
    // Ordering, not timing: this reply is complete while the ingest is still hanging.
    assert.equal(billed.billing.accepted, 0, 'the billing service has accepted nothing yet');
    assert.equal(billed.sidecar?.worker?.counters().delivered, 0);
  }
  assert.equal(got.length, expected.length);
  for (const [i, reply] of got.entries()) {
    const want = expected[i];
    assert.ok(want);
    assert.equal(reply.status, want.status);
    assert.equal(normalized(reply.body), normalized(want.body), `reply ${i} is identical`);
  }
  assert.ok(
    got.some((r) => r.body.startsWith('data:')),
    'streamed replies were compared too',
  );

  // Recovery: the simulator drops the held connection (reset also clears the failure mode); the
  // sidecar sees a network error, retries, and everything is delivered once.
  billed.billing.reset();
  await billed.billing.waitForEvents(rids.length, 15_000);
  await billed.sidecar?.worker?.waitForDrain();
  assertBilledOnce(billed, rids);
});

test('two gateway processes on one outbox directory: the second writes a slot; kill -9 of it loses nothing', async (t) => {
  const stack = await startBillingStack({ gateway: false, sidecar: false });
  const children: ChildGateway[] = [];
  t.after(async () => {
    for (const c of children) c.child.kill('SIGKILL');
    await stack.close();
  });
  const first = await spawnGateway(stack);
  children.push(first);
  // Same configuration, same billing.outbox_dir: the directory's writer lock is taken, so a slot.
  const second = await spawnGateway(stack);
  children.push(second);
  assert.ok(
    await exists(join(stack.outboxDir, 'slots', '1', 'writer.lock')),
    'the second gateway took slot 1',
  );

  const rids: string[] = [];
  const replies = await Promise.all(
    Array.from({ length: 40 }, (_, i) => {
      const rid = `slots-${i}`;
      rids.push(rid);
      return serve((i % 2 === 0 ? first : second).url, rid, i);
    }),
  );
  for (const r of replies) assert.equal(r.status, 200, r.body);
  second.child.kill('SIGKILL');
  assert.deepEqual(await second.exited, { code: null, signal: 'SIGKILL' });

  // One sidecar delivers the directory and the slot, the dead gateway's events included.
  const sidecar = await stack.startSidecar();
  await stack.billing.waitForEvents(rids.length, 15_000);
  await sidecar.worker?.waitForDrain();
  assertBilledOnce(stack, rids);
});
