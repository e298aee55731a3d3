import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { appendFile, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { IngestResult } from '../../../billing/billing-client.ts';
import type { UsageEvent } from '../../../billing/event/usage-event.ts';
import {
  type OutboxItem,
  type OutboxReader,
  openOutboxReader,
  openOutboxStatus,
  positionAfter,
} from '../../../billing/outbox/reader.ts';
import { OutboxLockedError, openOutboxWriter } from '../../../billing/outbox/writer.ts';
import { startDeliveryWorker } from '../../../sidecar/delivery-worker.ts';
import { makeEvent } from '../../support/usage-events.ts';

async function tempDir(t: { after: (fn: () => Promise<void>) => void }): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'outbox-test-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** Reads everything available now; returns the items in order. */
async function drainReader(reader: OutboxReader): Promise<OutboxItem[]> {
  const items: OutboxItem[] = [];
  for (let item = await reader.next(); item; item = await reader.next()) items.push(item);
  return items;
}

function eventIds(items: OutboxItem[]): string[] {
  return items.flatMap((i) => (i.kind === 'event' ? [i.event.external_event_id] : []));
}

const okClient = (seen: string[]) => ({
  ingest: async (event: UsageEvent): Promise<IngestResult> => {
    seen.push(event.external_event_id);
    return { kind: 'ok', status: 202 };
  },
});

test('group commit: concurrent appends share fsyncs; appends during an fsync share the next one', async (t) => {
  const dir = await tempDir(t);
  let fsyncs = 0;
  let writer: Awaited<ReturnType<typeof openOutboxWriter>> | undefined;
  const late: Promise<void>[] = [];
  writer = await openOutboxWriter(dir, {
    onFsync: () => {
      fsyncs++;
      // Arrive while batch 1 is being committed: must all ride in batch 2.
      if (fsyncs === 1) for (let i = 1000; i < 1100; i++) late.push(writer!.append(makeEvent(i)));
    },
  });
  const first = Array.from({ length: 1000 }, (_, i) => writer!.append(makeEvent(i)));
  assert.equal(writer.pending(), 1000);
  await Promise.all(first);
  await Promise.all(late);
  assert.equal(fsyncs, 2);
  assert.equal(writer.stats().appended, 1100);
  assert.equal(writer.pending(), 0);
  await writer.close();

  const lines = (await readFile(join(dir, 'events.jsonl'), 'utf8')).trimEnd().split('\n');
  assert.equal(lines.length, 1101, 'header + one line per event');
  assert.equal(JSON.parse(lines[0]!).outbox_segment, 1);
  assert.deepEqual(
    lines.slice(1).map((l) => (JSON.parse(l) as UsageEvent).external_event_id),
    Array.from({ length: 1100 }, (_, i) => `req-${i}`),
  );
});

test('recorded(): the appends of one turn are in the file, written at once, before it resolves', async (t) => {
  const dir = await tempDir(t);
  const writer = await openOutboxWriter(dir);
  t.after(() => writer.close());
  assert.equal(writer.recorded(), undefined, 'nothing appended yet');
  const file = join(dir, 'events.jsonl');
  const before = (await readFile(file, 'utf8')).split('\n').length;
  const appends = Array.from({ length: 20 }, (_, i) => writer.append(makeEvent(i)));
  const recorded = writer.recorded();
  assert.ok(recorded instanceof Promise, 'a turn is pending');
  await recorded;
  // Read synchronously right after: no fsync has completed yet, the lines are in the page cache.
  const lines = readFileSync(file, 'utf8').trimEnd().split('\n');
  assert.equal(lines.length, before - 1 + 20);
  assert.deepEqual(
    lines.slice(-20).map((l) => (JSON.parse(l) as UsageEvent).external_event_id),
    Array.from({ length: 20 }, (_, i) => `req-${i}`),
  );
  assert.equal(writer.stats().fsyncs, 0, 'recorded() does not wait for the disk');
  assert.equal(writer.recorded(), undefined);
  await Promise.all(appends);
  assert.equal(writer.stats().appended, 20);
});

test('turns of every size and of any text are written whole: small, larger than the reused buffer, larger than its bound', async (t) => {
  const dir = await tempDir(t);
  const writer = await openOutboxWriter(dir, { fsyncIntervalMs: 0 });
  t.after(() => writer.close());
  // Multi-byte UTF-8, a surrogate pair, a lone surrogate, quotes and a control character in the model.
  const models = ['gpt-5.4-mini', 'modèle-é', 'emoji-😀', 'lone-\ud800', 'quote-"-\\-\u0001'];
  const sent: UsageEvent[] = [];
  for (const count of [3, 200, 1500]) {
    const appends: Promise<void>[] = [];
    for (let i = 0; i < count; i++) {
      const event = makeEvent(sent.length);
      event.raw_json.model = `${models[sent.length % models.length]}-${'x'.repeat(sent.length % 7)}`;
      sent.push(event);
      appends.push(writer.append(event));
    }
    await writer.recorded();
    await Promise.all(appends);
  }
  const lines = readFileSync(join(dir, 'events.jsonl'), 'utf8').trimEnd().split('\n').slice(1);
  assert.equal(lines.length, sent.length);
  assert.deepEqual(
    lines.map((l) => JSON.parse(l) as UsageEvent),
    sent.map((e) => JSON.parse(JSON.stringify(e)) as UsageEvent),
  );
  assert.equal(writer.stats().appended, sent.length);
});

test('a second writer on the same directory fails clearly; a stale lock is taken over', async (t) => {
  const dir = await tempDir(t);
  const w1 = await openOutboxWriter(dir);
  await assert.rejects(openOutboxWriter(dir), (err: unknown) => {
    assert.ok(err instanceof OutboxLockedError);
    assert.match(err.message, /only one gateway/);
    assert.equal(err.pid, process.pid);
    return true;
  });
  await w1.close();
  // A lock left by a process that no longer exists.
  const dead = spawnSync(process.execPath, ['-e', '']).pid;
  await writeFile(join(dir, 'writer.lock'), `${dead}\n`);
  const w2 = await openOutboxWriter(dir);
  await w2.append(makeEvent(1));
  await w2.close();
  assert.deepEqual(
    (await readdir(dir)).filter((n) => n.endsWith('.lock')),
    [],
  );
});

test('rotation seals segments; the reader reads across them in order and commit deletes passed segments', async (t) => {
  const dir = await tempDir(t);
  const writer = await openOutboxWriter(dir, { maxSegmentBytes: 4000 });
  for (let i = 0; i < 60; i++) await writer.append(makeEvent(i));
  assert.ok(writer.stats().rotations >= 5, `rotations: ${writer.stats().rotations}`);
  const reader = await openOutboxReader(dir);
  const items = await drainReader(reader);
  assert.deepEqual(
    eventIds(items),
    Array.from({ length: 60 }, (_, i) => `req-${i}`),
  );
  const sealed = items.filter((i) => i.kind === 'sealed').length;
  assert.equal(sealed, writer.stats().rotations);
  const last = items.at(-1);
  assert.ok(last);
  await reader.commit(positionAfter(last), {});
  assert.deepEqual(
    (await readdir(dir)).filter((n) => n.startsWith('segment-')),
    [],
  );
  // The status view sees nothing pending once the checkpoint is at the end.
  const status = await openOutboxStatus(dir).read();
  assert.equal(status.pendingEvents, 0);
  await reader.close();
  await writer.close();
});

test('appends that arrive while a segment is sealed stay in append order with the ones after it', async (t) => {
  const dir = await tempDir(t);
  const n = 400;
  let next = 0;
  const appended: Promise<void>[] = [];
  // One append per event-loop turn, from the first fsync on: some land while the loop seals a segment
  // (held back until it is done), the next ones in the turns right after it.
  const appendEachTurn = () => {
    if (next >= n) return;
    appended.push(writer.append(makeEvent(next++)));
    setImmediate(appendEachTurn);
  };
  let started = false;
  const writer = await openOutboxWriter(dir, {
    maxSegmentBytes: 2000,
    fsyncIntervalMs: 0,
    onFsync: () => {
      if (started) return;
      started = true;
      setImmediate(appendEachTurn);
    },
  });
  appended.push(writer.append(makeEvent(next++)));
  await new Promise<void>((resolve) => {
    const poll = () => (next >= n ? resolve() : setImmediate(poll));
    poll();
  });
  await Promise.all(appended);
  assert.ok(writer.stats().rotations >= 1, `rotations: ${writer.stats().rotations}`);
  const reader = await openOutboxReader(dir);
  assert.deepEqual(
    eventIds(await drainReader(reader)),
    Array.from({ length: n }, (_, i) => `req-${i}`),
  );
  await reader.close();
  await writer.close();
});

test('status reads that overlap (a scrape and /readyz at once) count the same as one read alone', async (t) => {
  const dir = await tempDir(t);
  // Over three 64 KiB count blocks in the active file, so the per-block cache is filled by the reads.
  const writer = await openOutboxWriter(dir);
  const n = 600;
  await Promise.all(Array.from({ length: n }, (_, i) => writer.append(makeEvent(i))));
  await writer.close();
  const alone = await openOutboxStatus(dir).read();
  assert.equal(alone.pendingEvents, n);
  const shared = openOutboxStatus(dir);
  const overlapping = await Promise.all(Array.from({ length: 4 }, () => shared.read()));
  for (const s of overlapping) assert.equal(s.pendingEvents, n);
  // And the cache they left behind still counts right.
  assert.equal((await shared.read()).pendingEvents, n);
});

test('torn last line: ignored while incomplete, read once completed', async (t) => {
  const dir = await tempDir(t);
  const writer = await openOutboxWriter(dir);
  await writer.append(makeEvent(1));
  const reader = await openOutboxReader(dir);
  assert.deepEqual(eventIds(await drainReader(reader)), ['req-1']);

  const line = `${JSON.stringify(makeEvent(2))}\n`;
  await appendFile(join(dir, 'events.jsonl'), line.slice(0, 40));
  assert.equal(await reader.next(), undefined, 'half a line is not an event yet');
  assert.equal((await openOutboxStatus(dir).read({ segment: 1, offset: 0 })).quarantined, 0);
  await appendFile(join(dir, 'events.jsonl'), line.slice(40));
  assert.deepEqual(eventIds(await drainReader(reader)), ['req-2']);
  await reader.close();
  await writer.close();
});

test('torn last line of a dead writer is quarantined once the next writer seals the file', async (t) => {
  const dir = await tempDir(t);
  const w1 = await openOutboxWriter(dir);
  await w1.append(makeEvent(1));
  await w1.close();
  await appendFile(join(dir, 'events.jsonl'), '{"source":"router","external_ev');
  const w2 = await openOutboxWriter(dir);
  await w2.append(makeEvent(2));
  const reader = await openOutboxReader(dir);
  const items = await drainReader(reader);
  assert.deepEqual(
    items.map((i) => i.kind),
    ['event', 'skip', 'sealed', 'event'],
  );
  assert.deepEqual(eventIds(items), ['req-1', 'req-2']);
  const q = (await readFile(join(dir, 'quarantine.jsonl'), 'utf8')).trim().split('\n');
  assert.equal(q.length, 1);
  assert.equal(JSON.parse(q[0]!).reason, 'torn last line');
  await reader.close();
  await w2.close();
});

/** Sets this process's soft limit on the size of files it writes (RLIMIT_FSIZE); no argument lifts it. */
function fileSizeLimit(bytes?: number): void {
  const r = spawnSync('prlimit', ['--pid', String(process.pid), `--fsize=${bytes ?? 'unlimited'}:`]);
  assert.equal(r.status, 0, r.stderr?.toString());
}

test('a synchronous write cut short: the whole lines stay, the torn one is written again after a line end', async (t) => {
  const dir = await tempDir(t);
  const errors: unknown[] = [];
  // The failure is reported as it happens; lifting the limit then lets the flush loop's write succeed.
  const writer = await openOutboxWriter(dir, {
    onError: (err) => {
      errors.push(err);
      fileSizeLimit();
    },
  });
  t.after(() => fileSizeLimit());
  await writer.append(makeEvent(1));
  const file = join(dir, 'events.jsonl');
  const line = Buffer.byteLength(`${JSON.stringify(makeEvent(2))}\n`);
  // The file may grow by one and a half lines: the turn's write of three lines stops inside the second
  // (Node ignores SIGXFSZ, so write(2) returns short, then fails with EFBIG).
  fileSizeLimit((await readFile(file)).length + Math.floor(1.5 * line));
  await Promise.all([2, 3, 4].map((i) => writer.append(makeEvent(i))));
  await writer.append(makeEvent(5));
  assert.deepEqual(
    errors.map((e) => (e as NodeJS.ErrnoException).code),
    ['EFBIG'],
  );

  const reader = await openOutboxReader(dir);
  const items = await drainReader(reader);
  // req-3's first bytes became a line of their own (quarantined); req-3 follows whole, nothing twice.
  assert.deepEqual(eventIds(items), ['req-1', 'req-2', 'req-3', 'req-4', 'req-5']);
  assert.deepEqual(
    items.map((i) => i.kind),
    ['event', 'event', 'skip', 'event', 'event', 'event'],
  );
  await reader.close();
  await writer.close();
});

test('a gateway restart under a running reader: the old file is sealed and reading continues', async (t) => {
  const dir = await tempDir(t);
  const w1 = await openOutboxWriter(dir);
  await w1.append(makeEvent(1));
  const reader = await openOutboxReader(dir);
  assert.deepEqual(eventIds(await drainReader(reader)), ['req-1']);
  await w1.append(makeEvent(2)); // written after the reader reached the end, before the restart
  await w1.close();
  const w2 = await openOutboxWriter(dir);
  await w2.append(makeEvent(3));
  const items = await drainReader(reader);
  assert.deepEqual(
    items.map((i) => i.kind),
    ['event', 'sealed', 'event'],
  );
  assert.deepEqual(eventIds(items), ['req-2', 'req-3']);
  await reader.close();
  await w2.close();
});

test('the status view of a directory that does not exist yet reports nothing pending', async () => {
  const status = await openOutboxStatus(join(tmpdir(), `no-such-outbox-${process.pid}`)).read();
  assert.equal(status.pendingEvents, 0);
  assert.equal(status.deadLettered, 0);
});

test('corrupt lines go to quarantine and never block the queue', async (t) => {
  const dir = await tempDir(t);
  const writer = await openOutboxWriter(dir);
  await writer.append(makeEvent(1));
  await appendFile(join(dir, 'events.jsonl'), 'not json at all\n{"hello":"world"}\n\n');
  await writer.append(makeEvent(2));
  const seen: string[] = [];
  const worker = await startDeliveryWorker({
    config: { outboxDir: dir, retryIntervalMs: 1, maxRetryIntervalMs: 1, maxAttempts: 3 },
    client: okClient(seen),
  });
  await worker.waitForDrain();
  await worker.stop();
  assert.deepEqual(seen, ['req-1', 'req-2']);
  assert.equal(worker.counters().quarantined, 2);
  const q = (await readFile(join(dir, 'quarantine.jsonl'), 'utf8'))
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  assert.deepEqual(
    q.map((r) => [r.reason, r.line]),
    [
      ['invalid JSON', 'not json at all'],
      ['not a usage event', '{"hello":"world"}'],
    ],
  );
  assert.equal((await openOutboxStatus(dir).read()).quarantined, 2);
  await writer.close();
});

test('status view counts pending and dead-lettered events without owning the reader', async (t) => {
  const dir = await tempDir(t);
  const writer = await openOutboxWriter(dir, { maxSegmentBytes: 3000 });
  for (let i = 0; i < 25; i++) await writer.append(makeEvent(i));
  const view = openOutboxStatus(dir);
  const before = await view.read();
  assert.equal(before.pendingEvents, 25);
  assert.equal(before.deadLettered, 0);
  const reader = await openOutboxReader(dir);
  const items = await drainReader(reader);
  const tenth = items.filter((i) => i.kind === 'event')[9];
  assert.ok(tenth);
  await reader.commit(positionAfter(tenth), {});
  assert.equal((await view.read()).pendingEvents, 15);
  for (let i = 25; i < 30; i++) await writer.append(makeEvent(i));
  assert.equal((await view.read()).pendingEvents, 20, 'incremental count picks up new appends');
  await reader.close();
  await writer.close();
});

const writerModule = fileURLToPath(new URL('../../../billing/outbox/writer.ts', import.meta.url));

test('kill -9 of the gateway right after its appends resolved: every event is delivered', async (t) => {
  const dir = await tempDir(t);
  const n = 3000;
  // The child appends n events concurrently (as a busy gateway would), reports when all resolved,
  // then keeps running until killed: nothing after the resolution may be needed for durability.
  const script = `
    import { openOutboxWriter } from ${JSON.stringify(writerModule)};
    const w = await openOutboxWriter(${JSON.stringify(dir)}, { maxSegmentBytes: 200000 });
    const ps = [];
    for (let i = 0; i < ${n}; i++) {
      const rid = 'req-' + i;
      ps.push(w.append({ source: 'router', external_event_id: rid, idempotency_key: 'router:' + rid,
        occurred_at: 1760000000, subject_type: 'api_key', subject_id: 'client-a',
        raw_json: { provider: 'openai', api: 'chat.completions', model: 'm', stream: false, status: 200,
          usage_stage: 'upstream', usage: { input_tokens: 1, output_tokens: 1, total_tokens: 2 },
          meta: { subject_type: 'api_key', subject_id: 'client-a', request_id: rid } } }));
      if (i % 100 === 99) await new Promise((r) => setImmediate(r));
    }
    await Promise.all(ps);
    process.stdout.write('appended\\n');
    setInterval(() => {}, 1000);
  `;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('appended')) {
        child.kill('SIGKILL');
        resolve();
      }
    });
    child.once('exit', (code) => reject(new Error(`child exited early with ${code}`)));
  });
  const exited = await new Promise<NodeJS.Signals | null>((resolve) =>
    child.once('exit', (_c, sig) => resolve(sig)),
  );
  assert.equal(exited, 'SIGKILL');

  // A new gateway takes over the stale lock and keeps appending.
  const writer = await openOutboxWriter(dir);
  await writer.append(makeEvent(n));
  const seen: string[] = [];
  const worker = await startDeliveryWorker({
    config: { outboxDir: dir, retryIntervalMs: 1, maxRetryIntervalMs: 1, maxAttempts: 3 },
    client: okClient(seen),
  });
  await worker.waitForDrain();
  await worker.stop();
  await writer.close();
  assert.deepEqual(
    seen,
    Array.from({ length: n + 1 }, (_, i) => `req-${i}`),
  );
  assert.equal(worker.counters().quarantined, 0);
});

test('a changed fsync interval applies to the next fdatasync', async (t) => {
  const dir = await tempDir(t);
  const syncedAt: number[] = [];
  const writer = await openOutboxWriter(dir, {
    fsyncIntervalMs: 0,
    onFsync: () => syncedAt.push(Date.now()),
  });
  t.after(() => writer.close());
  await writer.append(makeEvent(1));
  await writer.append(makeEvent(2));
  writer.setFsyncInterval(300);
  await writer.append(makeEvent(3));
  assert.equal(syncedAt.length, 3);
  // Timers keep whole milliseconds: a few of tolerance.
  const apart = (syncedAt[2] as number) - (syncedAt[1] as number);
  assert.ok(apart >= 295, `${apart} ms between the last two fdatasync calls`);
});
