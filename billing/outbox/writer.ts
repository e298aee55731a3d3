// The gateway's side of the file-mode billing outbox: appends one line per completed request to
// <outbox_dir>/events.jsonl, the compact line of a token-only event (billing/outbox/compact-line.ts) or
// the whole UsageEvent JSON (layout: billing/outbox/layout.ts; design and crash-safety argument:
// billing/outbox/reader.ts).
//
// Two kinds of durability, paid for differently:
// - Against a crash of the gateway (kill -9): lines appended during one event-loop turn are written
//   together by one synchronous write(2) in that turn's check phase (setImmediate), and recorded()
//   hands out the promise of that write. The gateway appends just before a reply's last byte and sends
//   that byte once recorded() has resolved, so a client that saw its reply has an event on record with
//   the kernel, whatever happens to the process afterwards. One write per turn instead of one per event:
//   under load a turn completes many requests, and a write(2) per event cost noticeable CPU
//   (docs/architecture.md). Nothing waits on the disk.
// - Against power loss: group commit. One flush loop runs fdatasync() for everything written since the
//   last one and then resolves those appends; appends that arrive meanwhile share the next fdatasync,
//   so the fsync rate is bounded by disk latency, not by the request rate.
// Lines are written in O_APPEND mode, so the synchronous writes and the loop's own writes (after a
// failure, or during a rotation) each land whole at the end of the file.
//
// Exactly ONE gateway process may write a given outbox directory: open takes writer.lock (pid, O_EXCL)
// and a second gateway on the same directory fails at start with OutboxLockedError.

import { writeSync } from 'node:fs';
import { mkdir, open, rename, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { fsyncDir, removeIfExists } from '../../common/durable-fs.ts';
import { createTurnBatch } from '../../common/turn-batch.ts';
import { type TokenEvent, usageEventOf } from '../event/token-event.ts';
import type { UsageEvent } from '../event/usage-event.ts';
import { JsonBytes, writeQueuedEvent } from '../event/usage-event-json.ts';
import { writeCompactEvent, writeCompactLine } from './compact-line.ts';
import {
  ACTIVE_FILE,
  type FileHandle,
  headerLine,
  listOutbox,
  readCheckpoint,
  readHeader,
  segmentFileName,
  WRITER_LOCK,
} from './layout.ts';
import { acquirePidLock } from './lock.ts';

export { OutboxLockedError } from './lock.ts';

/** Segments are sealed once the active file exceeds this many bytes (default 16 MiB). */
export const DEFAULT_MAX_SEGMENT_BYTES = 16 * 1024 * 1024;
/** billing.outbox_fsync_interval_ms's default. */
export const DEFAULT_FSYNC_INTERVAL_MS = 100;

const NEXT_TMP = `${ACTIVE_FILE}.next.tmp`;
const NEWLINE = 0x0a;
const FRAGMENT_END = Buffer.from('\n');
/** The reused buffer a turn's lines are written into; a larger turn grows it, kept up to the max. */
const SCRATCH_BYTES = 64 * 1024;
const MAX_SCRATCH_BYTES = 1024 * 1024;

export interface OutboxWriterOptions {
  maxSegmentBytes?: number;
  /** Called after every fsync of the event file (tests count group commits with it). */
  onFsync?: () => void;
  /** Called when a batch or a rotation fails; the default does nothing (the caller logs rejected appends). */
  onError?: (err: unknown) => void;
  /**
   * Least time between two fdatasync() calls (default 100 ms; billing.outbox_fsync_interval_ms).
   * Without it a busy gateway syncs back to back, and each sync's journal commit and disk completion
   * cost CPU the requests need (docs/benchmarks.md section 10); with it, power loss can lose at most this
   * much of the latest events (a crash of the process loses none: lines are written before the reply
   * ends). Like `appendfsync everysec` in Redis, at a finer grain.
   */
  fsyncIntervalMs?: number;
}

export interface OutboxWriterStats {
  /** Events durably written. */
  appended: number;
  /** write+fsync rounds of the event file. */
  fsyncs: number;
  /** Segments sealed by this writer. */
  rotations: number;
  /** Sequence number of the active segment. */
  segment: number;
}

export interface OutboxWriter {
  readonly dir: string;
  /**
   * Resolves once the event is on disk (written and fsync'ed); rejects when the write failed. The events
   * of one event-loop turn share the promise. `traceparent`: stored beside the event (TRACE_KEY).
   */
  append(event: UsageEvent, traceparent?: string): Promise<void>;
  /** append() for a token event, written from its parts. */
  appendTokens(event: TokenEvent, traceparent?: string): Promise<void>;
  /**
   * Resolves once every line appended so far has been handed to the kernel (or, when the synchronous
   * write failed or a rotation holds it back, to the flush loop); undefined when nothing is waiting.
   */
  recorded(): Promise<void> | undefined;
  /** Appends queued or being written, not yet durable. */
  pending(): number;
  /** Changes the least time between two fdatasync() calls (OutboxWriterOptions.fsyncIntervalMs). */
  setFsyncInterval(ms: number): void;
  stats(): OutboxWriterStats;
  /** Flushes what is queued, closes the file and releases the lock. */
  close(): Promise<void>;
}

/**
 * The lines appended during one event-loop turn. They are written together and made durable by the same
 * fdatasync, so they share one promise: a promise per event cost the request path measurable CPU.
 */
interface TurnLines {
  /** Lines appended. */
  count: number;
  /** Where the lines (each event's JSON and a newline) start and end in the turn's buffer. */
  readonly start: number;
  end: number;
  /** How many of the lines (from the first) the turn's synchronous write put wholly in the file. */
  written: number;
  /** A copy of the lines from `written` on, for the flush loop to write. */
  rest: Buffer | undefined;
  /** Waiting for the synchronous write of its turn; the flush loop leaves it alone until then. */
  awaitingWrite: boolean;
  /** Settled once the lines are on disk (or failed). */
  readonly durable: PromiseWithResolvers<void>;
}

function turnLines(start: number): TurnLines {
  return {
    count: 0,
    start,
    end: start,
    written: 0,
    rest: undefined,
    awaitingWrite: true,
    durable: Promise.withResolvers<void>(),
  };
}

export async function openOutboxWriter(dir: string, opts: OutboxWriterOptions = {}): Promise<OutboxWriter> {
  const maxSegmentBytes = opts.maxSegmentBytes ?? DEFAULT_MAX_SEGMENT_BYTES;
  let fsyncIntervalMs = opts.fsyncIntervalMs ?? DEFAULT_FSYNC_INTERVAL_MS;
  let lastSync = 0;
  await mkdir(dir, { recursive: true });
  const lock = await acquirePidLock(dir, WRITER_LOCK, 'gateway (outbox writer)');
  let state: { fh: FileHandle; seq: number; size: number };
  try {
    state = await startActiveSegment(dir);
  } catch (err) {
    await lock.release();
    throw err;
  }

  let queue: TurnLines[] = [];
  /** Lines in `queue`, and lines of the batch being written and synced. */
  let queued = 0;
  let inFlight = 0;
  /** The lines of the current turn, until its write has run. */
  let current: TurnLines | undefined;
  let flushing: Promise<void> | undefined;
  let closed = false;
  // After a failed write the file may end in a torn fragment; the next batch starts with a newline so the
  // fragment becomes one (quarantined) line instead of corrupting the next event.
  let terminateFragment = false;
  const stats: OutboxWriterStats = { appended: 0, fsyncs: 0, rotations: 0, segment: state.seq };

  async function writeAll(buf: Buffer): Promise<void> {
    let off = 0;
    while (off < buf.length) {
      const { bytesWritten } = await state.fh.write(buf, off, buf.length - off, null);
      off += bytesWritten;
    }
  }

  async function rotate(): Promise<void> {
    const next = state.seq + 1;
    // Lines written synchronously since the last fdatasync belong to this segment: sync them first.
    await state.fh.datasync();
    await createHeaderFile(join(dir, NEXT_TMP), next);
    // Everything for state.seq was written and fsync'ed before this point and nothing is written to it
    // after (`rotating` holds synchronous writes back): the reader may treat the renamed file as sealed
    // the moment it no longer is events.jsonl.
    await rename(join(dir, ACTIVE_FILE), join(dir, segmentFileName(state.seq)));
    await rename(join(dir, NEXT_TMP), join(dir, ACTIVE_FILE));
    await fsyncDir(dir);
    await state.fh.close();
    const fh = await open(join(dir, ACTIVE_FILE), 'a');
    state = { fh, seq: next, size: (await fh.stat()).size };
    stats.rotations++;
    stats.segment = next;
  }

  // While a segment is being sealed, appends are queued and written by the flush loop afterwards.
  let rotating = false;
  // Lines handed to the flush loop unwritten (held back by a rotation, a failed or torn write). Until the
  // loop has written them, later turns hand theirs to the loop too: a turn written at once would land
  // ahead of older lines, and the outbox is delivered in file order.
  let owed = 0;

  /**
   * One synchronous write(2) of whole lines; returns how many bytes reached the file (all of them, or
   * fewer when the write failed or a rotation or a torn fragment sends them through the flush loop).
   */
  function writeNow(buf: Buffer): number {
    if (rotating || terminateFragment || owed > 0) return 0;
    let off = 0;
    try {
      while (off < buf.length) off += writeSync(state.fh.fd, buf, off, buf.length - off);
    } catch (err) {
      // A partial write leaves a fragment: the loop starts its next write with a newline.
      if (off > 0) terminateFragment = true;
      opts.onError?.(err);
    }
    state.size += off;
    return off;
  }

  // The lines appended during one event-loop turn, written together in its check phase. Each event is
  // written as UTF-8 into one reused buffer when it is appended, so the turn's write is of that buffer.
  let scratch = new JsonBytes(SCRATCH_BYTES);
  const turn = createTurnBatch<TurnLines>((groups) => {
    for (const g of groups) {
      if (current === g) current = undefined;
      const bytes = scratch.buf.subarray(g.start, g.end);
      const reached = writeNow(bytes);
      if (reached === bytes.length) g.written = g.count;
      else {
        // JSON text holds no raw newline: each one in what reached the file ends a whole line.
        let whole = 0;
        let wholeEnd = 0;
        for (
          let at = bytes.indexOf(NEWLINE);
          at !== -1 && at < reached;
          at = bytes.indexOf(NEWLINE, at + 1)
        ) {
          whole++;
          wholeEnd = at + 1;
        }
        g.written = whole;
        g.rest = Buffer.from(bytes.subarray(wholeEnd));
      }
      owed += g.count - g.written;
      g.awaitingWrite = false;
    }
    scratch.at = 0;
    if (scratch.buf.length > MAX_SCRATCH_BYTES) scratch = new JsonBytes(SCRATCH_BYTES);
  });

  async function flushLoop(): Promise<void> {
    // Let appends issued in the same tick join the first batch.
    await Promise.resolve();
    while (queue.length > 0) {
      // This turn's lines are written by the turn batch; the loop takes them (to fsync) once it has run.
      const pendingWrite = turn.settled();
      if (pendingWrite !== undefined) await pendingWrite;
      const batch = queue.filter((g) => !g.awaitingWrite);
      queue = queue.filter((g) => g.awaitingWrite);
      if (batch.length === 0) continue;
      let lines = 0;
      const rests: Buffer[] = [];
      let unwritten = 0;
      for (const g of batch) {
        lines += g.count;
        if (g.rest === undefined) continue;
        rests.push(g.rest);
        g.rest = undefined;
        unwritten += g.count - g.written;
      }
      queued -= lines;
      inFlight = lines;
      if (terminateFragment && rests.length > 0) rests.unshift(FRAGMENT_END);
      const buf = Buffer.concat(rests);
      try {
        if (buf.length > 0) {
          try {
            await writeAll(buf);
          } finally {
            // Written, or failed and rejected below: either way no longer ahead of later turns.
            owed -= unwritten;
          }
          terminateFragment = false;
          state.size += buf.length;
        }
        const wait = lastSync + fsyncIntervalMs - Date.now();
        if (wait > 0) await delay(wait);
        await state.fh.datasync();
        lastSync = Date.now();
        stats.fsyncs++;
        stats.appended += lines;
        opts.onFsync?.();
        for (const g of batch) g.durable.resolve();
      } catch (err) {
        terminateFragment = true;
        opts.onError?.(err);
        for (const g of batch) g.durable.reject(err);
      }
      inFlight = 0;
      if (state.size >= maxSegmentBytes) {
        rotating = true;
        try {
          await rotate();
        } catch (err) {
          // Keep appending to the current file; rotation is retried after the next batch.
          opts.onError?.(err);
        } finally {
          rotating = false;
        }
      }
    }
    flushing = undefined;
  }

  /** The current turn's lines, begun when the turn's first event is appended. */
  function turnGroup(): TurnLines {
    let g = current;
    if (g === undefined) {
      g = turnLines(scratch.at);
      current = g;
      queue.push(g);
      turn.add(g);
    }
    return g;
  }

  /** Counts the line just written into the turn's buffer (each JSON text, which never holds a raw newline). */
  function appended(g: TurnLines): Promise<void> {
    scratch.byte(NEWLINE);
    g.end = scratch.at;
    g.count++;
    queued++;
    flushing ??= flushLoop();
    return g.durable.promise;
  }

  function append(event: UsageEvent, traceparent?: string): Promise<void> {
    if (closed) return Promise.reject(new Error('outbox writer is closed'));
    const g = turnGroup();
    // Written now: the caller may reuse the object.
    try {
      if (!writeCompactEvent(scratch, event, traceparent)) writeQueuedEvent(scratch, event, traceparent);
    } catch (err) {
      scratch.at = g.end;
      return Promise.reject(err);
    }
    return appended(g);
  }

  function appendTokens(event: TokenEvent, traceparent?: string): Promise<void> {
    if (closed) return Promise.reject(new Error('outbox writer is closed'));
    const g = turnGroup();
    try {
      if (!writeCompactLine(scratch, event, traceparent))
        writeQueuedEvent(scratch, usageEventOf(event), traceparent);
    } catch (err) {
      scratch.at = g.end;
      return Promise.reject(err);
    }
    return appended(g);
  }

  async function close(): Promise<void> {
    if (closed) return;
    closed = true;
    await flushing;
    await state.fh.close();
    await lock.release();
  }

  return {
    dir,
    append,
    appendTokens,
    recorded: () => turn.settled(),
    pending: () => queued + inFlight,
    setFsyncInterval(ms: number) {
      fsyncIntervalMs = ms;
    },
    stats: () => ({ ...stats }),
    close,
  } satisfies OutboxWriter;
}

/**
 * Makes sure events.jsonl is a fresh segment with a new sequence number. A previous events.jsonl that
 * holds events is sealed first: it may end in a torn line (the old writer died mid-write), and after a
 * power loss it may be shorter than the reader's checkpoint; as a sealed segment the reader handles both
 * (quarantines the tail, or treats the segment as done). Restarts therefore cost one small segment each.
 */
async function startActiveSegment(dir: string): Promise<{ fh: FileHandle; seq: number; size: number }> {
  await removeIfExists(join(dir, NEXT_TMP));
  const listing = await listOutbox(dir);
  let checkpointSeq = 0;
  let checkpointOffset = 0;
  try {
    const cp = await readCheckpoint(dir);
    checkpointSeq = cp.segment;
    checkpointOffset = cp.offset;
  } catch {
    // The reader reports a malformed checkpoint; the writer only needs a sequence number above it.
  }
  let maxSeq = Math.max(0, checkpointSeq, listing.activeSeq ?? 0, ...listing.segments);
  const activePath = join(dir, ACTIVE_FILE);

  if (listing.activeExists) {
    const size = (await stat(activePath)).size;
    const header = await readHeader(activePath);
    const headerSeq = header?.seq;
    const headerOnly = header !== undefined && size === header.bytes;
    const beyondCheckpoint = headerSeq === checkpointSeq && checkpointOffset > size;
    if (headerOnly && !beyondCheckpoint) {
      const fh = await open(activePath, 'a');
      return { fh, seq: header.seq, size };
    }
    if (size > 0) {
      const sealSeq = headerSeq ?? maxSeq + 1;
      maxSeq = Math.max(maxSeq, sealSeq);
      await rename(activePath, join(dir, segmentFileName(sealSeq)));
    }
  }
  const seq = maxSeq + 1;
  await createHeaderFile(join(dir, NEXT_TMP), seq);
  await rename(join(dir, NEXT_TMP), activePath);
  await fsyncDir(dir);
  const fh = await open(activePath, 'a');
  return { fh, seq, size: (await fh.stat()).size };
}

async function createHeaderFile(path: string, seq: number): Promise<void> {
  const fh = await open(path, 'w');
  try {
    await fh.writeFile(headerLine(seq));
    await fh.sync();
  } finally {
    await fh.close();
  }
}
