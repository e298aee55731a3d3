import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { createRedisEventQueue } from '../../proxy/redis-queue.ts';
import { createKeyLayout, createRedisClient, type Redis, waitReady } from '../../store/redis-client.ts';
import { type RedisServer, startRedis, testStoreConfig } from '../support/redis.ts';
import { makeEvent } from '../support/usage-events.ts';

let redis: RedisServer;
let client: Redis;
before(async () => {
  redis = await startRedis();
});
after(async () => {
  client?.disconnect();
  await redis.close();
});

async function readsProcessed(): Promise<number> {
  const info = String(await redis.admin.info('stats'));
  return Number(/total_reads_processed:(\d+)/.exec(info)?.[1]);
}

test('the events of one turn go to the stream in one command, in order; recorded() covers them', async () => {
  const store = testStoreConfig(redis.url);
  // As the gateway opens it (openRedisBillingSink): no auto-pipelining on the queue's connection.
  client = createRedisClient(store, { writeAtOnce: true });
  await waitReady(client, 2000);
  await client.ping();
  const keys = createKeyLayout(store);
  const queue = createRedisEventQueue(client, keys);
  assert.equal(queue.recorded?.(), undefined, 'nothing pending');

  const reads = await readsProcessed();
  const monitor = await redis.monitor();
  // From separate callbacks of one turn, as replies complete in a gateway: immediates queued together
  // run in one check phase, with process.nextTick (ioredis's auto-pipelining flush) run after each.
  // (Timers of 0 ms are not one turn for sure: a millisecond boundary between them splits them.)
  const enqueued: Promise<void>[] = [];
  const { recorded } = await new Promise<{ recorded: Promise<void> | undefined }>((resolve) => {
    for (let i = 0; i < 20; i++) {
      setImmediate(() => {
        enqueued.push(queue.enqueue(makeEvent(i)));
        if (i === 19) resolve({ recorded: queue.recorded?.() });
      });
    }
  });
  assert.ok(recorded instanceof Promise);
  const socket = (client as unknown as { stream: { bytesWritten: number } }).stream;
  const before = socket.bytesWritten;
  await recorded;
  // Handed to the socket by the time recorded() resolves (auto-pipelining would write a turn later).
  assert.ok(socket.bytesWritten > before + 20 * 100, `bytes written: ${socket.bytesWritten - before}`);
  assert.equal(queue.recorded?.(), undefined);
  assert.equal(new Set(enqueued).size, 1, 'the events of the turn share one promise');
  await Promise.all(enqueued);
  // One XADD per event as its own write would be about 20 reads on the server; one command is one
  // (the INFO calls of this test add one each).
  const delta = (await readsProcessed()) - reads;
  assert.ok(delta <= 4, `server reads for 20 events: ${delta}`);
  const sent = (await monitor.stop()).map((c) => c[0]).filter((c) => c === 'xadd' || c!.startsWith('eval'));
  assert.deepEqual(sent, ['eval'], 'one script call for the batch (its XADDs run inside it)');

  const entries = await redis.admin.xrange(keys.shards[0]!.stream, '-', '+');
  assert.deepEqual(
    entries.map(([, fields]) => (JSON.parse(fields[1]!) as { external_event_id: string }).external_event_id),
    Array.from({ length: 20 }, (_, i) => `req-${i}`),
  );
});

test('a batch of multi-byte payloads reaches the stream byte for byte', async () => {
  const store = testStoreConfig(redis.url);
  const keys = createKeyLayout(store);
  const queue = createRedisEventQueue(client, keys);
  const models = ['modèle-é', 'emoji-😀', 'lone-\ud800', 'quote-"-\\-\u0001', 'plain'];
  const events = models.map((model, i) => {
    const event = makeEvent(100 + i);
    event.raw_json.model = model;
    return event;
  });
  await Promise.all(events.map((e) => queue.enqueue(e)));
  const entries = await redis.admin.xrange(keys.shards[0]!.stream, '-', '+');
  assert.deepEqual(
    entries.map(([, fields]) => JSON.parse(fields[1]!) as unknown),
    events.map((e) => JSON.parse(JSON.stringify(e)) as unknown),
  );
});

test('a command error fails the events of the batch (their shared promise), and the queue goes on', async () => {
  const store = testStoreConfig(redis.url);
  const keys = createKeyLayout(store);
  const queue = createRedisEventQueue(client, keys);
  await redis.admin.set(keys.shards[0]!.stream, 'not a stream');
  const both = [queue.enqueue(makeEvent(1)), queue.enqueue(makeEvent(2))];
  assert.equal(both[0], both[1]);
  const failed = await Promise.allSettled(both);
  for (const r of failed) {
    assert.equal(r.status, 'rejected');
    assert.match(String((r as PromiseRejectedResult).reason), /WRONGTYPE/);
  }
  await redis.admin.del(keys.shards[0]!.stream);
  // A lone event of its turn is a plain XADD.
  const monitor = await redis.monitor();
  const next = queue.enqueue(makeEvent(3));
  assert.notEqual(next, both[0], 'a later turn has a promise of its own');
  await next;
  assert.equal(await redis.admin.xlen(keys.shards[0]!.stream), 1);
  const sent = (await monitor.stop()).map((c) => c[0]).filter((c) => c === 'xadd' || c!.startsWith('eval'));
  assert.deepEqual(sent, ['xadd']);
});

test('with billing_wait_replicas, a batch no replica acknowledged is not counted as recorded', async () => {
  const store = testStoreConfig(redis.url);
  const own = createRedisClient(store, { writeAtOnce: true });
  try {
    await waitReady(own, 2000);
    // This server has no replica: WAIT 1 answers 0 once its timeout passes.
    const queue = createRedisEventQueue(own, createKeyLayout(store), undefined, undefined, {
      replicas: 1,
      timeoutMs: 20,
    });
    await assert.rejects(queue.enqueue(makeEvent(1)), (err: Error) => {
      assert.equal(err.name, 'StoreUnavailableError');
      return true;
    });
    // The write itself went through: WAIT judges replication, not the write (the spool, when there is
    // one, takes the batch and the billing service counts a duplicate once).
    assert.equal(await redis.admin.xlen(createKeyLayout(store).shards[0]!.stream), 1);
  } finally {
    own.disconnect();
  }
});

test('on a connection without per-command timers the queue times its batches itself', async () => {
  const store = testStoreConfig(redis.url, { keyPrefix: 'own-timeouts:' });
  const keys = createKeyLayout(store);
  const own = createRedisClient(store, { writeAtOnce: true, ownTimeouts: true });
  try {
    await waitReady(own, 2000);
    const queue = createRedisEventQueue(own, keys, undefined, undefined, undefined, 150);
    // Redis holds every write: neither batch is answered in time, and each fails at its own deadline.
    await redis.admin.call('CLIENT', 'PAUSE', '5000', 'WRITE');
    const started = Date.now();
    const failedAt: number[] = [];
    const first = queue.enqueue(makeEvent(1)).catch((err: Error) => {
      failedAt.push(Date.now() - started);
      return err;
    });
    await new Promise((resolve) => setTimeout(resolve, 60));
    const second = queue.enqueue(makeEvent(2)).catch((err: Error) => {
      failedAt.push(Date.now() - started);
      return err;
    });
    for (const err of [await first, await second]) {
      assert.ok(err instanceof Error);
      assert.equal(err.name, 'StoreUnavailableError');
    }
    await queue.settled();
    assert.equal(failedAt.length, 2);
    assert.ok(failedAt[0]! >= 140 && failedAt[0]! < 1000, `first failed after ${failedAt[0]} ms`);
    assert.ok(failedAt[1]! >= failedAt[0]! + 40, `second failed after ${failedAt[1]} ms`);
    // The late answers, once Redis goes on, change nothing; the queue goes on (the timed-out events
    // were applied after all: the billing service counts such a duplicate once).
    await redis.admin.call('CLIENT', 'UNPAUSE');
    await queue.enqueue(makeEvent(3));
    await queue.settled();
    assert.equal(await redis.admin.xlen(keys.shards[0]!.stream), 3);
  } finally {
    await redis.admin.call('CLIENT', 'UNPAUSE');
    own.disconnect();
  }
});

/** Settles to whether `p` has settled by the end of a few more event-loop turns. */
async function settledSoon(p: Promise<unknown>): Promise<boolean> {
  let settled = false;
  p.then(
    () => {
      settled = true;
    },
    () => {
      settled = true;
    },
  );
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
  return settled;
}

/** Enqueues one event in a turn of its own and returns its enqueue and the recorded() of that turn. */
async function enqueueInOwnTurn(
  queue: ReturnType<typeof createRedisEventQueue>,
  n: number,
): Promise<{ enqueued: Promise<void>; recorded: Promise<void> }> {
  return new Promise((resolve) =>
    setImmediate(() => {
      const enqueued = queue.enqueue(makeEvent(n));
      resolve({ enqueued, recorded: queue.recorded!()! });
    }),
  );
}

test('while a batch is unanswered, later turns are held and go out as one command after its answer', async () => {
  const store = testStoreConfig(redis.url, { keyPrefix: 'held:' });
  const keys = createKeyLayout(store);
  const own = createRedisClient(store, { writeAtOnce: true, ownTimeouts: true });
  try {
    await waitReady(own, 2000);
    await own.ping();
    const queue = createRedisEventQueue(own, keys, undefined, undefined, undefined, 10_000, 60_000);
    const monitor = await redis.monitor();
    await redis.admin.call('CLIENT', 'PAUSE', '60000', 'WRITE');
    const first = await enqueueInOwnTurn(queue, 1);
    assert.equal(await settledSoon(first.recorded), true, 'the first batch is written at once');
    const later = [await enqueueInOwnTurn(queue, 2), await enqueueInOwnTurn(queue, 3)];
    // Unanswered (Redis holds writes): the later turns' events wait, and so do their replies' last bytes.
    assert.equal(await settledSoon(later[0]!.recorded), false, 'held while the first is unanswered');
    assert.equal(await settledSoon(later[1]!.recorded), false);
    await redis.admin.call('CLIENT', 'UNPAUSE');
    await Promise.all([first.enqueued, ...later.map((l) => l.enqueued), ...later.map((l) => l.recorded)]);
    await queue.settled();
    const sent = (await monitor.stop()).map((c) => c[0]).filter((c) => c === 'xadd' || c!.startsWith('eval'));
    assert.deepEqual(sent, ['xadd', 'eval'], 'the first alone, then the held turns as one script call');
    const entries = await redis.admin.xrange(keys.shards[0]!.stream, '-', '+');
    assert.deepEqual(
      entries.map(
        ([, fields]) => (JSON.parse(fields[1]!) as { external_event_id: string }).external_event_id,
      ),
      ['req-1', 'req-2', 'req-3'],
    );
  } finally {
    await redis.admin.call('CLIENT', 'UNPAUSE');
    own.disconnect();
  }
});

test('held events are written after the hold bound even when the batch ahead is never answered', async () => {
  const store = testStoreConfig(redis.url, { keyPrefix: 'held-bound:' });
  const keys = createKeyLayout(store);
  const own = createRedisClient(store, { writeAtOnce: true, ownTimeouts: true });
  try {
    await waitReady(own, 2000);
    await own.ping();
    const queue = createRedisEventQueue(own, keys, undefined, undefined, undefined, 60_000, 5);
    await redis.admin.call('CLIENT', 'PAUSE', '60000', 'WRITE');
    const first = await enqueueInOwnTurn(queue, 1);
    await first.recorded;
    const socket = (own as unknown as { stream: { bytesWritten: number } }).stream;
    const before = socket.bytesWritten;
    const second = await enqueueInOwnTurn(queue, 2);
    // Redis answers nothing while paused: only the bound can let the second event out.
    await second.recorded;
    assert.ok(socket.bytesWritten > before, 'the held event was written');
    await redis.admin.call('CLIENT', 'UNPAUSE');
    await Promise.all([first.enqueued, second.enqueued]);
    assert.equal(await redis.admin.xlen(keys.shards[0]!.stream), 2);
  } finally {
    await redis.admin.call('CLIENT', 'UNPAUSE');
    own.disconnect();
  }
});

test('held events of a connection that dropped are failed (or spooled), and settled() still resolves', {
  timeout: 20_000,
}, async () => {
  const store = testStoreConfig(redis.url, { keyPrefix: 'held-drop:' });
  const own = createRedisClient(store, { writeAtOnce: true, ownTimeouts: true });
  try {
    await waitReady(own, 2000);
    await own.ping();
    const queue = createRedisEventQueue(
      own,
      createKeyLayout(store),
      undefined,
      undefined,
      undefined,
      60_000,
      60_000,
    );
    await redis.admin.call('CLIENT', 'PAUSE', '60000', 'WRITE');
    const first = await enqueueInOwnTurn(queue, 1);
    await first.recorded;
    const second = await enqueueInOwnTurn(queue, 2);
    assert.equal(await settledSoon(second.recorded), false, 'held behind the first');
    // Asked while the first is on its way: it must wake when the queue is done.
    const settled = queue.settled();
    // The batch on its way fails with the connection; the held one cannot go out on it.
    own.disconnect();
    const outcomes = await Promise.allSettled([first.enqueued, second.enqueued]);
    assert.deepEqual(
      outcomes.map((o) => o.status),
      ['rejected', 'rejected'],
    );
    await second.recorded;
    await settled;
  } finally {
    await redis.admin.call('CLIENT', 'UNPAUSE');
    own.disconnect();
  }
});

test('each write the stream does not take tells onStoreError once (billingStream): a refused batch, a turn while down', async () => {
  const store = testStoreConfig(redis.url, { keyPrefix: 'store-errors:' });
  const keys = createKeyLayout(store);
  const own = createRedisClient(store, { writeAtOnce: true });
  try {
    await waitReady(own, 2000);
    const errors: string[] = [];
    const queue = createRedisEventQueue(
      own,
      keys,
      undefined,
      undefined,
      undefined,
      undefined,
      undefined,
      (op) => errors.push(op),
    );
    await redis.admin.set(keys.shards[0]!.stream, 'not a stream');
    // Two events of one turn: one command refused, one error.
    const refused = [queue.enqueue(makeEvent(1)), queue.enqueue(makeEvent(2))];
    await Promise.allSettled(refused);
    assert.deepEqual(errors, ['billingStream']);
    await redis.admin.del(keys.shards[0]!.stream);
    await queue.enqueue(makeEvent(3));
    assert.deepEqual(errors, ['billingStream'], 'a write the stream took is no error');
    // The connection is down: the turn's events are not written (no spool here: failed), one error.
    own.disconnect();
    await Promise.allSettled([queue.enqueue(makeEvent(4)), queue.enqueue(makeEvent(5))]);
    assert.deepEqual(errors, ['billingStream', 'billingStream']);
  } finally {
    own.disconnect();
  }
});
