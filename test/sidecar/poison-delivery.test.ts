// File mode, through a real sidecar and the billing simulator: one event the service cannot take is
// attempted max_attempts times and dead-lettered while the events behind it are delivered; an outage of
// any length (service down, connections dropped) dead-letters nothing; both across a sidecar restart.

import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import type { UsageEvent } from '../../billing/event/usage-event.ts';
import { openOutboxWriter } from '../../billing/outbox/writer.ts';
import { type BillingSimOptions, startBillingSim } from '../../sim/billing/server.ts';
import {
  BILLING_API_KEY,
  BILLING_PROJECT,
  BILLING_RULE_SET,
  type BillingStack,
  startBillingStack,
  waitUntil,
} from '../support/billing-stack.ts';
import { makeEvent } from '../support/usage-events.ts';

const EVENTS = 20;
const MAX_ATTEMPTS = 3;
const BODY_LIMIT = 8192;

/** An event larger than the simulator's body limit (as an old gateway could write one). */
function oversized(i: number): UsageEvent {
  const e = makeEvent(i);
  return { ...e, raw_json: { ...e.raw_json, model: `m-${'x'.repeat(BODY_LIMIT * 2)}` } };
}

/** An event the simulator refuses with 400 (occurred_at in milliseconds). */
function invalid(i: number): UsageEvent {
  return { ...makeEvent(i), occurred_at: 1_760_000_000_000 };
}

/** The first backoff wait is held until release(); every later one returns at once. */
function gatedSleep() {
  let release: () => void = () => {};
  const released = new Promise<void>((r) => {
    release = r;
  });
  let calls = 0;
  let onFirst: () => void = () => {};
  const firstWait = new Promise<void>((r) => {
    onFirst = r;
  });
  return {
    release,
    firstWait,
    sleep: async (_ms: number, signal: AbortSignal): Promise<void> => {
      if (++calls > 1) return;
      onFirst();
      await Promise.race([released, new Promise((r) => signal.addEventListener('abort', r, { once: true }))]);
    },
  };
}

async function stackWith(
  t: { after: (fn: () => Promise<void>) => void },
  sim: Partial<BillingSimOptions>,
  worker: NonNullable<Parameters<typeof startBillingStack>[0]>['worker'] = {},
): Promise<BillingStack> {
  const stack = await startBillingStack({
    gateway: false,
    sidecar: false,
    billing: { max_attempts: MAX_ATTEMPTS, retry_interval_ms: 5, max_retry_interval_ms: 20 },
    billingSim: sim,
    worker: { watch: false, ...worker },
  });
  t.after(() => stack.close());
  return stack;
}

async function writeOutbox(stack: BillingStack, events: UsageEvent[]): Promise<void> {
  const writer = await openOutboxWriter(stack.outboxDir);
  await Promise.all(events.map((e) => writer.append(e)));
  await writer.close();
}

interface DeadLetterRecord {
  attempts: number;
  last_error: { code: string; status?: number };
  event: UsageEvent;
}

async function deadLetters(stack: BillingStack): Promise<DeadLetterRecord[]> {
  const text = await readFile(join(stack.outboxDir, 'dead-letter.jsonl'), 'utf8').catch(() => '');
  return text
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as DeadLetterRecord);
}

function behind(): UsageEvent[] {
  return Array.from({ length: EVENTS - 1 }, (_, i) => makeEvent(i + 1));
}

const POISONS: { name: string; sim: Partial<BillingSimOptions>; event: UsageEvent; code: string }[] = [
  {
    name: 'connection dropped mid-upload (body over the service limit)',
    sim: { ingestBodyLimitBytes: BODY_LIMIT, oversize: 'reset' },
    event: oversized(0),
    code: 'connection_reset',
  },
  {
    name: '413 (body over the service limit)',
    sim: { ingestBodyLimitBytes: BODY_LIMIT, oversize: '413' },
    event: oversized(0),
    code: 'http_413',
  },
  { name: '400 (an event the service refuses)', sim: {}, event: invalid(0), code: 'http_400' },
];

for (const poison of POISONS) {
  test(`poison event, ${poison.name}: the events behind it are delivered meanwhile, it is dead-lettered after max_attempts`, async (t) => {
    const gate = gatedSleep();
    const stack = await stackWith(t, poison.sim, { sleep: gate.sleep, random: () => 0 });
    await writeOutbox(stack, [poison.event, ...behind()]);
    const sidecar = await stack.startSidecar();

    // The poison waits out its first backoff (held): the 19 behind it are delivered all the same.
    await gate.firstWait;
    await stack.billing.waitForEvents(EVENTS - 1, 15_000);
    assert.deepEqual(await deadLetters(stack), []);

    gate.release();
    await waitUntil(() => sidecar.worker?.counters().deadLettered === 1, 'the poison event dead-lettered');
    const [record] = await deadLetters(stack);
    assert.ok(record);
    assert.equal(record.event.external_event_id, 'req-0');
    assert.equal(record.attempts, MAX_ATTEMPTS);
    assert.equal(record.last_error.code, poison.code);
    assert.equal(stack.billing.accepted, EVENTS - 1);
    assert.equal(
      stack.billing.ingestCalls,
      EVENTS - 1 + MAX_ATTEMPTS,
      'the poison was sent max_attempts times',
    );
    await sidecar.worker?.waitForDrain();
  });
}

test('poison event across a sidecar restart: counted attempts persist, it is dead-lettered at max_attempts in total', async (t) => {
  const gate = gatedSleep();
  const stack = await stackWith(
    t,
    { ingestBodyLimitBytes: BODY_LIMIT, oversize: 'reset' },
    { sleep: gate.sleep, random: () => 0 },
  );
  await writeOutbox(stack, [oversized(0), ...behind()]);
  await stack.startSidecar();
  await gate.firstWait; // one counted attempt, recorded in the checkpoint
  await stack.billing.waitForEvents(EVENTS - 1, 15_000);
  await stack.stopSidecar();
  const checkpoint = JSON.parse(await readFile(join(stack.outboxDir, 'checkpoint.json'), 'utf8'));
  assert.deepEqual(Object.values(checkpoint.attempts), [1]);

  const again = await stack.startSidecar(); // its first backoff is not held
  await waitUntil(() => again.worker?.counters().deadLettered === 1, 'the poison event dead-lettered');
  await again.worker?.waitForDrain();
  const [record] = await deadLetters(stack);
  assert.ok(record);
  assert.equal(record.attempts, MAX_ATTEMPTS);
  assert.equal(record.last_error.code, 'connection_reset');
  // The events behind it were sent again after the restart (the checkpoint waited at the poison) and
  // charged once: the simulator deduplicates them on their idempotency keys.
  assert.equal(stack.billing.accepted, EVENTS - 1);
  const poisonCalls = stack.billing.ingestCalls - stack.billing.accepted - stack.billing.duplicates;
  assert.equal(poisonCalls, MAX_ATTEMPTS);
});

test('service down, however long and across a restart: nothing is dead-lettered; all delivered once it is back', async (t) => {
  const stack = await stackWith(t, {}, { random: () => 0 });
  const port = Number(new URL(stack.billing.url).port);
  await stack.billing.close(); // connections refused from now on
  await writeOutbox(
    stack,
    Array.from({ length: EVENTS }, (_, i) => makeEvent(i)),
  );

  const first = await stack.startSidecar();
  await waitUntil(
    () => (first.worker?.counters().failedAttempts ?? 0) >= 10 * MAX_ATTEMPTS,
    'many failed tries',
  );
  assert.equal(first.worker?.counters().deadLettered, 0);
  await stack.stopSidecar();
  const second = await stack.startSidecar();
  await waitUntil(
    () => (second.worker?.counters().failedAttempts ?? 0) >= 10 * MAX_ATTEMPTS,
    'many failed tries after the restart',
  );
  assert.equal(second.worker?.counters().deadLettered, 0);
  assert.equal(second.worker?.counters().lastError?.code, 'network_error');

  const back = await startBillingSim({
    apiKey: BILLING_API_KEY,
    projectId: BILLING_PROJECT,
    ruleSets: { [BILLING_RULE_SET]: 'published' },
    port,
  });
  t.after(() => back.close());
  await back.waitForEvents(EVENTS, 15_000);
  await second.worker?.waitForDrain();
  assert.equal(back.accepted, EVENTS);
  assert.deepEqual(await deadLetters(stack), []);
});

test('connections dropped by a failing service (probe unanswered too): nothing is dead-lettered', async (t) => {
  const stack = await stackWith(t, {}, { random: () => 0 });
  stack.billing.setFailure('reset');
  await writeOutbox(
    stack,
    Array.from({ length: EVENTS }, (_, i) => makeEvent(i)),
  );
  const sidecar = await stack.startSidecar();
  await waitUntil(
    () => (sidecar.worker?.counters().failedAttempts ?? 0) >= 10 * MAX_ATTEMPTS,
    'many failed tries',
  );
  assert.equal(sidecar.worker?.counters().deadLettered, 0);
  assert.equal(sidecar.worker?.counters().lastError?.code, 'connection_reset');
  stack.billing.setFailure('none');
  await stack.billing.waitForEvents(EVENTS, 15_000);
  await sidecar.worker?.waitForDrain();
  assert.deepEqual(await deadLetters(stack), []);
});
