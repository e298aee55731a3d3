// The delivery loop on its own, against an in-memory queue and a scripted transport: the window, the
// order of retries (head of line or per entry), the dead letter, outages (never counted, one probe per
// backoff), the evidence that tells a poison event from a failing service, and stop.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DeliveryLoop } from '../../../billing/delivery/delivery-loop.ts';
import type { IngestFailure } from '../../../billing/delivery/delivery-policy.ts';
import type {
  DeliveryQueue,
  FailureReport,
  SendResult,
  Settlement,
} from '../../../billing/delivery/delivery-queue.ts';

interface Item {
  readonly id: string;
  readonly attempts?: number;
  readonly pass?: boolean;
  readonly unreadable?: boolean;
}

const OK: SendResult = { kind: 'ok' };
const DOWN: IngestFailure = {
  kind: 'retryable',
  status: 503,
  code: 'http_503',
  message: 'down',
  unavailable: true,
};
const BOOM: IngestFailure = {
  kind: 'retryable',
  status: 500,
  code: 'http_500',
  message: 'boom',
  unavailable: false,
};
const REFUSED: IngestFailure = { kind: 'permanent', status: 400, code: 'http_400', message: 'refused' };
const RESET: IngestFailure = {
  kind: 'retryable',
  status: undefined,
  code: 'connection_reset',
  message: 'reset',
  unavailable: false,
};
const ABORTED: IngestFailure = {
  kind: 'retryable',
  status: undefined,
  code: 'aborted',
  message: 'aborted',
  unavailable: true,
};

/** An in-memory queue: what the loop reads, and a record of every call it makes back. */
class MemoryQueue implements DeliveryQueue<Item> {
  readonly items: Item[];
  #pos = 0;
  readonly settled: [string, Settlement][] = [];
  readonly recorded: [string, number][] = [];
  readonly deadLettered: [string, number, string][] = [];
  readonly reports: [string, FailureReport][] = [];
  readonly closedWith: string[][] = [];
  held: (item: Item) => boolean = () => true;

  constructor(ids: readonly (string | Item)[]) {
    this.items = ids.map((i) => (typeof i === 'string' ? { id: i } : i));
  }

  push(...ids: string[]): void {
    for (const id of ids) this.items.push({ id });
  }

  async read(max: number): Promise<readonly Item[]> {
    const out = this.items.slice(this.#pos, this.#pos + max);
    this.#pos += out.length;
    return out;
  }

  attempts(item: Item): number {
    return item.attempts ?? 0;
  }

  unsendable(item: Item): 'pass' | IngestFailure | undefined {
    if (item.pass) return 'pass';
    return item.unreadable
      ? { kind: 'permanent', status: 0, code: 'invalid_payload', message: 'bad' }
      : undefined;
  }

  async recordAttempt(item: Item, attempts: number): Promise<number> {
    this.recorded.push([item.id, attempts]);
    return attempts;
  }

  async stillHeld(item: Item): Promise<boolean> {
    return this.held(item);
  }

  failed(item: Item, report: FailureReport): void {
    this.reports.push([item.id, report]);
  }

  async deadLetter(item: Item, attempts: number, result: IngestFailure): Promise<boolean> {
    this.deadLettered.push([item.id, attempts, result.code]);
    return true;
  }

  settle(item: Item, how: Settlement): void {
    this.settled.push([item.id, how]);
  }

  loopError(): { code: string; retryInMs: number } {
    return { code: 'memory_error', retryInMs: 0 };
  }

  async close(unfinished: readonly Item[]): Promise<void> {
    this.closedWith.push(unfinished.map((i) => i.id));
  }
}

/** A transport answering from `answer` (per item id and call number), recording every send. */
function scripted(answer: (id: string, call: number) => SendResult | Promise<SendResult>) {
  const sends: string[] = [];
  const calls = new Map<string, number>();
  return {
    sends,
    send(item: Item): Promise<SendResult> {
      sends.push(item.id);
      const n = (calls.get(item.id) ?? 0) + 1;
      calls.set(item.id, n);
      return Promise.resolve(answer(item.id, n));
    },
  };
}

/** A promise with its resolve function. */
function deferred<T = void>() {
  let resolve: (v: T) => void = () => {};
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

/** Backoff waits that do not wait, recorded. */
function recordedSleep(delays: number[]) {
  return async (ms: number) => {
    delays.push(ms);
  };
}

const ids = (n: number, prefix = 'e') => Array.from({ length: n }, (_, i) => `${prefix}${i}`);
const retry = (maxAttempts = 3) => ({ maxAttempts, delay: (failures: number) => 10 * failures });

test('window: never more sends in flight than the window; in order, entries settle in read order', async () => {
  const queue = new MemoryQueue(ids(12));
  const pending = new Map<string, (r: SendResult) => void>();
  let inFlight = 0;
  let most = 0;
  let started = deferred();
  const loop = new DeliveryLoop<Item>({
    queue,
    transport: {
      send: (item) => {
        most = Math.max(most, ++inFlight);
        started.resolve();
        return new Promise<SendResult>((resolve) => {
          pending.set(item.id, (r) => {
            inFlight--;
            resolve(r);
          });
        });
      },
    },
    order: 'in-order',
    window: 3,
    retry: retry(),
  });
  // Answer the newest send first each time: the loop still settles in read order.
  while (queue.settled.length < 12) {
    await started.promise;
    started = deferred();
    while (pending.size > 0) {
      const [id, answer] = [...pending].at(-1)!;
      pending.delete(id);
      answer(OK);
      await new Promise((r) => setImmediate(r));
    }
  }
  await loop.waitForDrain();
  await loop.stop();
  assert.equal(most, 3);
  assert.deepEqual(
    queue.settled.map(([id]) => id),
    ids(12),
  );
  assert.equal(loop.counters.delivered, 12);
});

test('in order: a head in an outage is the only send, once per backoff, and is never counted', async () => {
  const queue = new MemoryQueue(ids(10));
  const delays: number[] = [];
  const transport = scripted((id, call) => (id === 'e0' && call <= 6 ? DOWN : OK));
  const loop = new DeliveryLoop<Item>({
    queue,
    transport,
    order: 'in-order',
    window: 1,
    retry: retry(2),
    sleep: recordedSleep(delays),
  });
  await loop.waitForDrain();
  await loop.stop();
  assert.deepEqual(
    transport.sends.slice(0, 7),
    Array(7).fill('e0'),
    'nothing else is sent during the outage',
  );
  assert.deepEqual(delays, [10, 20, 30, 40, 50, 60]);
  assert.deepEqual(queue.recorded, [], 'an outage is not an attempt');
  assert.deepEqual(queue.deadLettered, []);
  assert.equal(loop.counters.failedAttempts, 6);
  assert.equal(loop.counters.lastError?.code, 'http_503');
  assert.deepEqual(
    queue.settled.map(([id]) => id),
    ids(10),
  );
});

test('in order: a poison head is dead-lettered at max_attempts while the entries behind it are delivered', async () => {
  const queue = new MemoryQueue(ids(6));
  const firstWait = deferred();
  const release = deferred();
  let waits = 0;
  const transport = scripted((id) => (id === 'e0' ? REFUSED : OK));
  const loop = new DeliveryLoop<Item>({
    queue,
    transport,
    order: 'in-order',
    window: 4,
    retry: retry(3),
    sleep: async () => {
      if (++waits > 1) return;
      firstWait.resolve();
      await release.promise;
    },
  });
  await firstWait.promise;
  // The head waits out its first backoff: the others are sent meanwhile, but not settled past it.
  while (loop.counters.delivered < 5) await new Promise((r) => setImmediate(r));
  assert.equal(queue.settled.length, 0, 'nothing settles past the head');
  release.resolve();
  await loop.waitForDrain();
  await loop.stop();
  assert.deepEqual(queue.recorded, [
    ['e0', 1],
    ['e0', 2],
  ]);
  assert.deepEqual(queue.deadLettered, [['e0', 3, 'http_400']], 'the last count goes with the dead letter');
  assert.equal(loop.counters.deadLettered, 1);
  assert.deepEqual(queue.settled[0], ['e0', 'dead-lettered']);
  assert.deepEqual(
    queue.settled.map(([id]) => id),
    ids(6),
  );
  assert.equal(queue.reports.at(-1)?.[1].retryInMs, undefined);
});

test('counted attempts from before (a restart) count toward max_attempts', async () => {
  const queue = new MemoryQueue([{ id: 'e0', attempts: 2 }, 'e1']);
  const transport = scripted((id) => (id === 'e0' ? REFUSED : OK));
  const loop = new DeliveryLoop<Item>({ queue, transport, order: 'in-order', window: 2, retry: retry(3) });
  await loop.waitForDrain();
  await loop.stop();
  assert.equal(transport.sends.filter((s) => s === 'e0').length, 1);
  assert.deepEqual(queue.deadLettered, [['e0', 3, 'http_400']]);
});

test('per entry: each failed entry is retried on its own; the others leave as they are delivered', async () => {
  const queue = new MemoryQueue(ids(5));
  const delays: number[] = [];
  const transport = scripted((id, call) => (id === 'e1' && call <= 2 ? REFUSED : OK));
  const loop = new DeliveryLoop<Item>({
    queue,
    transport,
    order: 'per-entry',
    window: 5,
    retry: retry(5),
    sleep: recordedSleep(delays),
  });
  await loop.waitForDrain();
  await loop.stop();
  assert.deepEqual(
    queue.settled.map(([id]) => id),
    ['e0', 'e2', 'e3', 'e4', 'e1'],
    'e1 leaves last, when it is delivered',
  );
  assert.deepEqual(queue.recorded, [
    ['e1', 1],
    ['e1', 2],
  ]);
  assert.deepEqual(delays, [10, 20]);
});

test('per entry: an unreadable entry goes to the dead letter at once, a position marker passes', async () => {
  const queue = new MemoryQueue(['e0', { id: 'bad', unreadable: true }, { id: 'mark', pass: true }, 'e1']);
  const transport = scripted(() => OK);
  const loop = new DeliveryLoop<Item>({ queue, transport, order: 'per-entry', window: 4, retry: retry() });
  await loop.waitForDrain();
  await loop.stop();
  assert.deepEqual(transport.sends.sort(), ['e0', 'e1']);
  assert.deepEqual(queue.deadLettered, [['bad', 0, 'invalid_payload']]);
  assert.deepEqual(new Map(queue.settled).get('mark'), 'passed');
});

test('per entry: an outage stops new reads until the service answers', async () => {
  const queue = new MemoryQueue(ids(2));
  let down = true;
  const outage = deferred();
  const transport = scripted(() => (down ? DOWN : OK));
  const loop = new DeliveryLoop<Item>({
    queue,
    transport,
    order: 'per-entry',
    window: 4,
    retry: retry(1),
    // Each backoff lets one turn of the event loop pass, so the loop could read if it would.
    sleep: async () => {
      outage.resolve();
      await new Promise((r) => setImmediate(r));
    },
  });
  await outage.promise;
  queue.push('late');
  while (loop.counters.failedAttempts < 6) await new Promise((r) => setImmediate(r));
  assert.ok(!transport.sends.includes('late'), 'nothing new is read during the outage');
  assert.deepEqual(queue.deadLettered, [], 'max_attempts 1, yet nothing is dead-lettered');
  down = false;
  await loop.waitForDrain();
  await loop.stop();
  assert.deepEqual(queue.settled.map(([id]) => id).sort(), ['e0', 'e1', 'late']);
});

test('a 500 counts when other entries are accepted (a poison event), not when they fail too (the service)', async () => {
  for (const service of [false, true]) {
    const queue = new MemoryQueue(ids(4));
    let headCalls = 0;
    // A poison: only e0 fails. The service: everything fails until e0 was tried five times.
    const transport = scripted((id) => {
      if (id === 'e0') headCalls++;
      if (service) return headCalls <= 5 ? BOOM : OK;
      return id === 'e0' ? BOOM : OK;
    });
    const loop = new DeliveryLoop<Item>({
      queue,
      transport: { ...transport, probe: async () => true },
      order: 'in-order',
      window: 4,
      retry: retry(3),
      sleep: recordedSleep([]),
    });
    await loop.waitForDrain();
    await loop.stop();
    if (service) {
      assert.deepEqual(queue.deadLettered, [], 'the service failing everything is never the event');
      assert.ok(!queue.recorded.some(([id]) => id === 'e0'), 'the head is not counted during the outage');
      assert.equal(headCalls, 6);
    } else {
      assert.deepEqual(queue.deadLettered, [['e0', 3, 'http_500']]);
      assert.equal(headCalls, 3);
    }
  }
});

test('a connection reset counts only when the service answers a probe', async () => {
  for (const answers of [true, false]) {
    const queue = new MemoryQueue(['e0']);
    let probes = 0;
    const transport = scripted((_id, call) => (call <= 4 ? RESET : OK));
    const loop = new DeliveryLoop<Item>({
      queue,
      transport: {
        send: transport.send,
        probe: async () => {
          probes++;
          return answers;
        },
      },
      order: 'in-order',
      window: 1,
      retry: retry(3),
      sleep: recordedSleep([]),
    });
    await loop.waitForDrain();
    await loop.stop();
    assert.equal(probes, answers ? 3 : 4);
    assert.deepEqual(queue.deadLettered.length, answers ? 1 : 0);
  }
});

test('a retry finds the entry taken by another consumer: it leaves as dropped, never sent again', async () => {
  const queue = new MemoryQueue(['e0']);
  queue.held = () => false;
  const transport = scripted(() => REFUSED);
  const loop = new DeliveryLoop<Item>({
    queue,
    transport,
    order: 'per-entry',
    window: 1,
    retry: retry(5),
    sleep: recordedSleep([]),
  });
  await loop.waitForDrain();
  await loop.stop();
  assert.deepEqual(transport.sends, ['e0']);
  assert.deepEqual(queue.settled, [['e0', 'dropped']]);
});

test('stop never waits out a retry delay; the entry waiting is handed back', async () => {
  const queue = new MemoryQueue(['e0', 'e1']);
  const failed = deferred();
  const loop = new DeliveryLoop<Item>({
    queue,
    transport: scripted((id) => {
      if (id === 'e0') failed.resolve();
      return id === 'e0' ? DOWN : OK;
    }),
    order: 'per-entry',
    window: 2,
    retry: { maxAttempts: 3, delay: () => 3_600_000 },
  });
  await failed.promise;
  while (loop.counters.failedAttempts === 0) await new Promise((r) => setImmediate(r));
  await loop.stop(); // with the real timer: an hour's wait would time the test out
  assert.deepEqual(queue.closedWith, [['e0']]);
});

test('stop lets a send in flight end; with abort it is aborted and not counted as a failure', async () => {
  for (const abort of [false, true]) {
    const queue = new MemoryQueue(['e0']);
    const sent = deferred();
    const answer = deferred<SendResult>();
    const loop = new DeliveryLoop<Item>({
      queue,
      transport: {
        send: (_item, signal) => {
          signal.addEventListener('abort', () => answer.resolve(ABORTED), { once: true });
          sent.resolve();
          return answer.promise;
        },
      },
      order: 'in-order',
      window: 1,
      retry: retry(),
    });
    await sent.promise;
    const stopped = loop.stop({ abort });
    if (!abort) answer.resolve(OK);
    await stopped;
    await assert.rejects(loop.waitForDrain(), /stopped/);
    assert.equal(loop.counters.failedAttempts, 0);
    assert.equal(loop.counters.delivered, abort ? 0 : 1);
    assert.deepEqual(queue.closedWith, [abort ? ['e0'] : []]);
  }
});
