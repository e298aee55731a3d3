import assert from 'node:assert/strict';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type { IngestResult } from '../../billing/billing-client.ts';
import { type OutboxWriter, openOutboxWriter } from '../../billing/outbox/writer.ts';
import { jitteredDelay } from '../../common/backoff.ts';
import {
  type DeliveryWorker,
  type DeliveryWorkerOptions,
  startDeliveryWorker,
} from '../../sidecar/delivery-worker.ts';
import { makeEvent } from '../support/usage-events.ts';

const OK: IngestResult = { kind: 'ok', status: 202 };
const UNAVAILABLE: IngestResult = {
  kind: 'retryable',
  status: 503,
  code: 'http_503',
  message: 'down',
  unavailable: true,
};
const SERVER_ERROR: IngestResult = {
  kind: 'retryable',
  status: 500,
  code: 'http_500',
  message: 'boom',
  unavailable: false,
};
const REJECTED: IngestResult = {
  kind: 'permanent',
  status: 409,
  code: 'rule_set_not_published',
  message: 'extractor rule set is not published',
};

interface Ctx {
  dir: string;
  writer: OutboxWriter;
  /** Starts a worker that is stopped (aborting) at the end of the test even when an assertion fails. */
  start(opts: DeliveryWorkerOptions): Promise<DeliveryWorker>;
}

async function setup(
  t: { after: (fn: () => Promise<void>) => void },
  events = 0,
  maxSegmentBytes?: number,
): Promise<Ctx> {
  const dir = await mkdtemp(join(tmpdir(), 'delivery-test-'));
  const writer = await openOutboxWriter(dir, { maxSegmentBytes });
  const workers: DeliveryWorker[] = [];
  t.after(async () => {
    for (const w of workers) await w.stop({ abort: true });
    await writer.close();
    await rm(dir, { recursive: true, force: true });
  });
  await Promise.all(Array.from({ length: events }, (_, i) => writer.append(makeEvent(i))));
  async function start(opts: DeliveryWorkerOptions): Promise<DeliveryWorker> {
    const w = await startDeliveryWorker(opts);
    workers.push(w);
    return w;
  }
  return { dir, writer, start };
}

function config(
  dir: string,
  over: Partial<DeliveryWorkerOptions['config']> = {},
): DeliveryWorkerOptions['config'] {
  return { outboxDir: dir, retryIntervalMs: 100, maxRetryIntervalMs: 1000, maxAttempts: 5, ...over };
}

/** Never waits: backoff delays are recorded, not slept. */
function recordingSleep(delays: number[]) {
  return async (ms: number) => {
    delays.push(ms);
  };
}

function ids(n: number, from = 0): string[] {
  return Array.from({ length: n }, (_, i) => `req-${from + i}`);
}

test('the delivery backoff (jitteredDelay): full jitter under an exponential bound capped at the max interval', () => {
  assert.equal(
    jitteredDelay(1, 1000, 30000, () => 0),
    0,
  );
  assert.equal(
    jitteredDelay(1, 1000, 30000, () => 0.999999),
    999,
  );
  assert.equal(
    jitteredDelay(3, 1000, 30000, () => 0.5),
    2000,
  );
  assert.equal(
    jitteredDelay(6, 1000, 30000, () => 0.999999),
    29999,
    'capped: 32000 > 30000',
  );
  assert.equal(
    jitteredDelay(500, 1000, 30000, () => 0.5),
    15000,
    'huge exponents stay finite',
  );
  for (let failures = 1; failures < 40; failures++) {
    const d = jitteredDelay(failures, 1000, 30000, Math.random);
    assert.ok(d >= 0 && d < Math.min(30000, 1000 * 2 ** (failures - 1)));
  }
});

test('delivers in order, one at a time with window 1', async (t) => {
  const { dir, start } = await setup(t, 200);
  const seen: string[] = [];
  const worker = await start({
    config: config(dir),
    window: 1,
    client: {
      ingest: async (e) => {
        seen.push(e.external_event_id);
        return OK;
      },
    },
  });
  await worker.waitForDrain();
  await worker.stop();
  assert.deepEqual(seen, ids(200));
  assert.equal(worker.counters().delivered, 200);
});

test('outage of any length, then drain: unavailable answers never dead-letter', async (t) => {
  const { dir, start } = await setup(t, 30);
  let calls = 0;
  const seen = new Set<string>();
  const delays: number[] = [];
  const worker = await start({
    config: config(dir, { maxAttempts: 2 }),
    random: () => 0.5,
    sleep: recordingSleep(delays),
    client: {
      ingest: async (e) => {
        calls++;
        if (calls <= 120) return UNAVAILABLE; // far more failures than maxAttempts
        seen.add(e.external_event_id);
        return OK;
      },
    },
  });
  await worker.waitForDrain();
  await worker.stop();
  const c = worker.counters();
  assert.equal(seen.size, 30);
  assert.equal(c.deadLettered, 0);
  assert.ok(c.failedAttempts >= 120 - 16, `failed attempts: ${c.failedAttempts}`);
  assert.equal(c.lastError?.code, 'http_503');
  // During the outage only the head is retried, with growing delays capped at the max interval.
  assert.deepEqual(delays.slice(0, 6), [50, 100, 200, 400, 500, 500]);
  assert.ok(delays.every((d) => d <= 500));
});

test('max attempts: a poison event goes to dead-letter.jsonl and the queue moves on', async (t) => {
  const { dir, start } = await setup(t, 10);
  const calls = new Map<string, number>();
  const delays: number[] = [];
  const worker = await start({
    config: config(dir, { maxAttempts: 3 }),
    random: () => 0,
    sleep: recordingSleep(delays),
    client: {
      ingest: async (e) => {
        calls.set(e.external_event_id, (calls.get(e.external_event_id) ?? 0) + 1);
        if (e.external_event_id === 'req-4') return REJECTED;
        if (e.external_event_id === 'req-7') return SERVER_ERROR;
        return OK;
      },
    },
  });
  await worker.waitForDrain();
  await worker.stop();
  assert.equal(calls.get('req-4'), 3);
  assert.equal(calls.get('req-7'), 3);
  assert.equal(worker.counters().deadLettered, 2);
  assert.equal(worker.counters().delivered, 8);
  const dl = (await readFile(join(dir, 'dead-letter.jsonl'), 'utf8'))
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  assert.deepEqual(
    dl.map((r) => [r.event.external_event_id, r.attempts, r.last_error.code]),
    [
      ['req-4', 3, 'rule_set_not_published'],
      ['req-7', 3, 'http_500'],
    ],
  );
});

test('restart resumes from the checkpoint without re-sending delivered events', async (t) => {
  const { dir, writer, start } = await setup(t, 100);
  const first: string[] = [];
  const w1 = await start({
    config: config(dir),
    client: {
      ingest: async (e) => {
        first.push(e.external_event_id);
        return OK;
      },
    },
  });
  await w1.waitForDrain();
  await w1.stop();
  assert.equal(first.length, 100);
  for (let i = 100; i < 150; i++) await writer.append(makeEvent(i));

  const second: string[] = [];
  const w2 = await start({
    config: config(dir),
    client: {
      ingest: async (e) => {
        second.push(e.external_event_id);
        return OK;
      },
    },
  });
  assert.equal(await w2.pending(), 50);
  await w2.waitForDrain();
  assert.equal(await w2.pending(), 0);
  await w2.stop();
  assert.deepEqual(second, ids(50, 100));
});

test('counted attempts survive a restart', async (t) => {
  const { dir, start } = await setup(t, 3);
  let calls = 0;
  let onSecondFailure: () => void = () => {};
  const secondFailure = new Promise<void>((r) => {
    onSecondFailure = r;
  });
  const w1 = await start({
    config: config(dir, { maxAttempts: 5 }),
    random: () => 0,
    sleep: async (_ms, signal) => {
      if (calls === 2) {
        onSecondFailure();
        await new Promise((r) => signal.addEventListener('abort', r, { once: true }));
      }
    },
    client: {
      ingest: async (e) => {
        if (e.external_event_id !== 'req-0') return OK;
        calls++;
        return REJECTED;
      },
    },
  });
  await secondFailure;
  await w1.stop();
  const cp = JSON.parse(await readFile(join(dir, 'checkpoint.json'), 'utf8'));
  assert.deepEqual(Object.values(cp.attempts), [2]);

  let later = 0;
  const w2 = await start({
    config: config(dir, { maxAttempts: 5 }),
    random: () => 0,
    sleep: async () => {},
    client: {
      ingest: async (e) => {
        if (e.external_event_id !== 'req-0') return OK;
        later++;
        return REJECTED;
      },
    },
  });
  await w2.waitForDrain();
  await w2.stop();
  assert.equal(later, 3, '2 attempts before the restart + 3 after = maxAttempts');
  assert.equal(w2.counters().deadLettered, 1);
});

test('pipelined window: the checkpoint never passes an undelivered event', async (t) => {
  const { dir, start } = await setup(t, 20);
  let releaseHead: (r: IngestResult) => void = () => {};
  let othersDone = 0;
  let onOthers: () => void = () => {};
  const others = new Promise<void>((r) => {
    onOthers = r;
  });
  const w1 = await start({
    config: config(dir),
    window: 8,
    checkpointEvery: 1,
    client: {
      ingest: (e, signal) => {
        if (e.external_event_id === 'req-0') {
          return new Promise<IngestResult>((resolve) => {
            releaseHead = resolve;
            signal?.addEventListener('abort', () =>
              resolve({
                kind: 'retryable',
                status: undefined,
                code: 'aborted',
                message: 'aborted',
                unavailable: true,
              }),
            );
          });
        }
        if (++othersDone === 19) onOthers();
        return Promise.resolve(OK);
      },
    },
  });
  await others;
  await w1.stop({ abort: true });
  assert.equal(w1.counters().delivered, 19);
  assert.equal(w1.counters().failedAttempts, 0, 'an ingest aborted by stop is not a failed attempt');
  releaseHead(OK); // too late: the worker gave up on it
  const cp = JSON.parse(await readFile(join(dir, 'checkpoint.json'), 'utf8').catch(() => '{"offset":0}'));
  const headerBytes = (await readFile(join(dir, 'events.jsonl'), 'utf8')).indexOf('\n') + 1;
  assert.ok(cp.offset <= headerBytes, `checkpoint ${cp.offset} passed the undelivered head`);

  const seen: string[] = [];
  const w2 = await start({
    config: config(dir),
    client: {
      ingest: async (e) => {
        seen.push(e.external_event_id);
        return OK;
      },
    },
  });
  await w2.waitForDrain();
  await w2.stop();
  assert.equal(seen[0], 'req-0');
  assert.deepEqual(new Set(seen), new Set(ids(20)));
});

test('stop() lets the in-flight ingest finish and records it', async (t) => {
  const { dir, start } = await setup(t, 1);
  let release: () => void = () => {};
  let started: () => void = () => {};
  const inFlight = new Promise<void>((r) => {
    started = r;
  });
  const worker = await start({
    config: config(dir),
    client: {
      ingest: () =>
        new Promise<IngestResult>((resolve) => {
          release = () => resolve(OK);
          started();
        }),
    },
  });
  await inFlight;
  let stopped = false;
  const stopping = worker.stop().then(() => {
    stopped = true;
  });
  await new Promise((r) => setImmediate(r));
  assert.equal(stopped, false, 'stop waits for the in-flight call');
  release();
  await stopping;
  assert.equal(worker.counters().delivered, 1);
  const cp = JSON.parse(await readFile(join(dir, 'checkpoint.json'), 'utf8'));
  assert.equal(cp.offset, (await readFile(join(dir, 'events.jsonl'))).length);
});

test('fs.watch wakes the worker for new events without polling', async (t) => {
  const { dir, writer, start } = await setup(t, 0);
  let got: (id: string) => void = () => {};
  const arrived = new Promise<string>((r) => {
    got = r;
  });
  const worker = await start({
    config: config(dir),
    pollIntervalMs: 3_600_000,
    client: {
      ingest: async (e) => {
        got(e.external_event_id);
        return OK;
      },
    },
  });
  await worker.waitForDrain(); // idle, nothing to do
  await writer.append(makeEvent(42));
  assert.equal(await arrived, 'req-42');
  await worker.stop();
});

test('a long backlog over many segments drains and the delivered segments are deleted', async (t) => {
  const { dir, writer, start } = await setup(t, 0, 64 * 1024);
  for (let b = 0; b < 50; b++) {
    await Promise.all(Array.from({ length: 100 }, (_, i) => writer.append(makeEvent(b * 100 + i))));
  }
  assert.ok(writer.stats().rotations > 10);
  const seen = new Set<string>();
  const worker = await start({
    config: config(dir),
    client: {
      ingest: async (e) => {
        seen.add(e.idempotency_key);
        return OK;
      },
    },
  });
  await worker.waitForDrain();
  await worker.stop();
  assert.equal(seen.size, 5000);
  assert.deepEqual(
    (await readdir(dir)).filter((n) => n.startsWith('segment-')),
    [],
  );
});
