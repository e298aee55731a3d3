// The outbox's line formats are versioned: every segment header names the versions it may hold, a
// segment of an older writer (no line_formats) is read as before, and a reader meeting a newer format,
// in the header or as a compact line, stops before it with a message naming both versions: nothing is
// quarantined, the checkpoint stays before it, and the sidecar's delivery logs the stop once.

import assert from 'node:assert/strict';
import { appendFile, mkdtemp, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type { IngestResult } from '../../../billing/billing-client.ts';
import type { UsageEvent } from '../../../billing/event/usage-event.ts';
import { COMPACT_VERSION } from '../../../billing/outbox/compact-line.ts';
import { LINE_FORMATS, readHeader, segmentFileName } from '../../../billing/outbox/layout.ts';
import {
  OutboxFormatError,
  type OutboxItem,
  type OutboxReader,
  openOutboxReader,
} from '../../../billing/outbox/reader.ts';
import { openOutboxWriter } from '../../../billing/outbox/writer.ts';
import { startDeliveryWorker } from '../../../sidecar/delivery-worker.ts';
import { capturingLogger, type LogLine } from '../../support/billing-stack.ts';
import { makeEvent } from '../../support/usage-events.ts';

async function tempDir(t: { after: (fn: () => Promise<void>) => void }): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'outbox-formats-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** Items until the reader has nothing more or throws; the error, if it threw. */
async function readAll(reader: OutboxReader): Promise<{ items: OutboxItem[]; error: unknown }> {
  const items: OutboxItem[] = [];
  try {
    for (let item = await reader.next(); item; item = await reader.next()) items.push(item);
  } catch (error) {
    return { items, error };
  }
  return { items, error: undefined };
}

const ids = (items: OutboxItem[]) =>
  items.flatMap((i) => (i.kind === 'event' ? [i.event.external_event_id] : []));

/** A writer's events 1 and 2 in a sealed segment; returns that segment's number. */
async function sealedSegmentOfTwo(dir: string): Promise<number> {
  const writer = await openOutboxWriter(dir);
  await writer.append(makeEvent(1));
  await writer.append(makeEvent(2));
  await writer.close();
  const seq = (await readHeader(join(dir, 'events.jsonl')))!.seq;
  await rename(join(dir, 'events.jsonl'), join(dir, segmentFileName(seq)));
  return seq;
}

function header(seq: number, formats?: Record<string, number>): string {
  return `${JSON.stringify({
    outbox_segment: seq,
    created_at: new Date().toISOString(),
    writer_pid: 1,
    ...(formats === undefined ? {} : { line_formats: formats }),
  })}\n`;
}

test('the writer names the line formats in every segment header', async (t) => {
  const dir = await tempDir(t);
  const writer = await openOutboxWriter(dir);
  await writer.append(makeEvent(1));
  await writer.close();
  const first = (await readFile(join(dir, 'events.jsonl'), 'utf8')).split('\n')[0]!;
  assert.deepEqual(JSON.parse(first).line_formats, { event: 1, compact: COMPACT_VERSION });
  assert.deepEqual(LINE_FORMATS, { event: 1, compact: COMPACT_VERSION });
});

test('a segment of an older writer (no line_formats) is read as before', async (t) => {
  const dir = await tempDir(t);
  await writeFile(
    join(dir, 'events.jsonl'),
    `${header(1)}${JSON.stringify(makeEvent(1))}\n${JSON.stringify(makeEvent(2))}\n`,
  );
  const reader = await openOutboxReader(dir);
  const { items, error } = await readAll(reader);
  await reader.close();
  assert.equal(error, undefined);
  assert.deepEqual(ids(items), ['req-1', 'req-2']);
});

test('a header naming a newer compact version: the segments before it are read, then the reader stops', async (t) => {
  const dir = await tempDir(t);
  const seq = await sealedSegmentOfTwo(dir);
  const newer = seq + 1;
  await writeFile(
    join(dir, 'events.jsonl'),
    `${header(newer, { event: 1, compact: COMPACT_VERSION + 1 })}${JSON.stringify(makeEvent(3))}\n`,
  );
  const reader = await openOutboxReader(dir);
  const { items, error } = await readAll(reader);
  assert.deepEqual(ids(items), ['req-1', 'req-2']);
  assert.ok(error instanceof OutboxFormatError, String(error));
  assert.equal(error.segment, newer);
  assert.equal(error.format, 'compact');
  assert.equal(error.found, COMPACT_VERSION + 1);
  assert.match(
    error.message,
    new RegExp(
      `segment ${newer} holds compact lines of version ${COMPACT_VERSION + 1}; this sidecar reads compact lines up to version ${COMPACT_VERSION}`,
    ),
  );
  // It stays stopped: the event behind the header is never taken, nothing is quarantined.
  await assert.rejects(() => reader.next(), OutboxFormatError);
  await reader.close();
  assert.ok(!(await readdir(dir)).includes('quarantine.jsonl'));
});

test('a format this sidecar does not know at all stops it too', async (t) => {
  const dir = await tempDir(t);
  await writeFile(join(dir, 'events.jsonl'), header(1, { event: 1, compact: 1, columnar: 1 }));
  const reader = await openOutboxReader(dir);
  const { error } = await readAll(reader);
  await reader.close();
  assert.ok(error instanceof OutboxFormatError);
  assert.match(error.message, /holds columnar lines of version 1; this sidecar reads no such format/);
});

test('a compact line of a newer version under an older header: the lines before it are read, it waits', async (t) => {
  const dir = await tempDir(t);
  const line = JSON.stringify([
    COMPACT_VERSION + 1,
    { source: 'router' },
    'req-new',
    null,
    1760000000,
    1,
    2,
    3,
  ]);
  await writeFile(
    join(dir, 'events.jsonl'),
    `${header(1)}${JSON.stringify(makeEvent(1))}\nnot json\n${line}\n${JSON.stringify(makeEvent(3))}\n`,
  );
  const reader = await openOutboxReader(dir);
  const { items, error } = await readAll(reader);
  assert.deepEqual(ids(items), ['req-1']);
  assert.ok(error instanceof OutboxFormatError);
  assert.equal(error.found, COMPACT_VERSION + 1);
  const last = items.at(-1)!;
  assert.equal(last.kind, 'skip', 'the corrupt line before it is quarantined as always');
  await assert.rejects(() => reader.next(), OutboxFormatError);
  await reader.close();
  const quarantined = (await readFile(join(dir, 'quarantine.jsonl'), 'utf8')).trim().split('\n');
  assert.equal(quarantined.length, 1, 'only the corrupt line');
});

test('the sidecar delivers up to the newer segment, stops there and says so once, naming both versions', async (t) => {
  const dir = await tempDir(t);
  const seq = await sealedSegmentOfTwo(dir);
  await writeFile(join(dir, 'events.jsonl'), header(seq + 1, { event: 1, compact: COMPACT_VERSION + 1 }));
  await appendFile(join(dir, 'events.jsonl'), `${JSON.stringify(makeEvent(3))}\n`);
  const seen: string[] = [];
  const logs: LogLine[] = [];
  const worker = await startDeliveryWorker({
    config: { outboxDir: dir, retryIntervalMs: 1, maxRetryIntervalMs: 1, maxAttempts: 3 },
    client: {
      ingest: async (event: UsageEvent): Promise<IngestResult> => {
        seen.push(event.external_event_id);
        return { kind: 'ok', status: 202 };
      },
    },
    pollIntervalMs: 5,
    logger: capturingLogger(logs, 'warn'),
  });
  const deadline = Date.now() + 10_000;
  while (worker.counters().lastError?.code !== 'outbox_format_newer') {
    if (Date.now() > deadline) {
      await worker.stop();
      assert.fail(`no stop reported; seen ${JSON.stringify(seen)}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  await worker.stop();
  assert.deepEqual(seen, ['req-1', 'req-2']);
  const stops = logs.filter((l) => l.msg.includes('holds compact lines'));
  assert.equal(stops.length, 1);
  assert.match(stops[0]!.msg, new RegExp(`version ${COMPACT_VERSION + 1}.*up to version ${COMPACT_VERSION}`));
  assert.match(stops[0]!.msg, /delivery from this outbox stops/);
  assert.equal(worker.counters().quarantined, 0);
});
