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
import { mkdir } from 'node:fs/promises';
import { setTimeout as delay } from 'node:timers/promises';
import { createTurnBatch, type TurnBatch } from '../../common/turn-batch.ts';
import { type TokenEvent, usageEventOf } from '../event/token-event.ts';
import type { UsageEvent } from '../event/usage-event.ts';
import { JsonBytes, writeQueuedEvent } from '../event/usage-event-json.ts';
import { type ActiveSegment, sealActiveSegment, startActiveSegment } from './active-segment.ts';
import { writeCompactEvent, writeCompactLine } from './compact-line.ts';
import { WRITER_LOCK } from './layout.ts';
import { acquirePidLock, type PidLock } from './lock.ts';

export { OutboxLockedError } from './lock.ts';

/** Segments are sealed once the active file exceeds this many bytes (default 16 MiB). */
export const DEFAULT_MAX_SEGMENT_BYTES = 16 * 1024 * 1024;
/** billing.outbox_fsync_interval_ms's default. */
export const DEFAULT_FSYNC_INTERVAL_MS = 100;

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
  await mkdir(dir, { recursive: true });
  const lock = await acquirePidLock(dir, WRITER_LOCK, 'gateway (outbox writer)');
  let active: ActiveSegment;
  try {
    active = await startActiveSegment(dir);
  } catch (err) {
    await lock.release();
    throw err;
  }
  return new FileOutboxWriter(dir, opts, lock, active);
}

class FileOutboxWriter implements OutboxWriter {
  readonly dir: string;
  readonly #opts: OutboxWriterOptions;
  readonly #lock: PidLock;
  readonly #maxSegmentBytes: number;
  #fsyncIntervalMs: number;
  #lastSync = 0;
  #active: ActiveSegment;
  #queue: TurnLines[] = [];
  /** Lines in `queue`, and lines of the batch being written and synced. */
  #queued = 0;
  #inFlight = 0;
  /** The lines of the current turn, until its write has run. */
  #current: TurnLines | undefined;
  #flushing: Promise<void> | undefined;
  #closed = false;
  // After a failed write the file may end in a torn fragment; the next batch starts with a newline so the
  // fragment becomes one (quarantined) line instead of corrupting the next event.
  #terminateFragment = false;
  // While a segment is being sealed, appends are queued and written by the flush loop afterwards.
  #rotating = false;
  // Lines handed to the flush loop unwritten (held back by a rotation, a failed or torn write). Until the
  // loop has written them, later turns hand theirs to the loop too: a turn written at once would land
  // ahead of older lines, and the outbox is delivered in file order.
  #owed = 0;
  // The lines appended during one event-loop turn, written together in its check phase. Each event is
  // written as UTF-8 into one reused buffer when it is appended, so the turn's write is of that buffer.
  #scratch = new JsonBytes(SCRATCH_BYTES);
  readonly #turn: TurnBatch<TurnLines>;
  readonly #stats: OutboxWriterStats;

  constructor(dir: string, opts: OutboxWriterOptions, lock: PidLock, active: ActiveSegment) {
    this.dir = dir;
    this.#opts = opts;
    this.#lock = lock;
    this.#maxSegmentBytes = opts.maxSegmentBytes ?? DEFAULT_MAX_SEGMENT_BYTES;
    this.#fsyncIntervalMs = opts.fsyncIntervalMs ?? DEFAULT_FSYNC_INTERVAL_MS;
    this.#active = active;
    this.#stats = { appended: 0, fsyncs: 0, rotations: 0, segment: active.seq };
    this.#turn = createTurnBatch<TurnLines>((groups) => this.#writeTurn(groups));
  }

  append(event: UsageEvent, traceparent?: string): Promise<void> {
    if (this.#closed) return Promise.reject(new Error('outbox writer is closed'));
    const g = this.#turnGroup();
    // Written now: the caller may reuse the object.
    try {
      if (!writeCompactEvent(this.#scratch, event, traceparent))
        writeQueuedEvent(this.#scratch, event, traceparent);
    } catch (err) {
      this.#scratch.at = g.end;
      return Promise.reject(err);
    }
    return this.#appended(g);
  }

  appendTokens(event: TokenEvent, traceparent?: string): Promise<void> {
    if (this.#closed) return Promise.reject(new Error('outbox writer is closed'));
    const g = this.#turnGroup();
    try {
      if (!writeCompactLine(this.#scratch, event, traceparent))
        writeQueuedEvent(this.#scratch, usageEventOf(event), traceparent);
    } catch (err) {
      this.#scratch.at = g.end;
      return Promise.reject(err);
    }
    return this.#appended(g);
  }

  recorded(): Promise<void> | undefined {
    return this.#turn.settled();
  }

  pending(): number {
    return this.#queued + this.#inFlight;
  }

  setFsyncInterval(ms: number): void {
    this.#fsyncIntervalMs = ms;
  }

  stats(): OutboxWriterStats {
    return { ...this.#stats };
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#flushing;
    await this.#active.fh.close();
    await this.#lock.release();
  }

  /** The current turn's lines, begun when the turn's first event is appended. */
  #turnGroup(): TurnLines {
    let g = this.#current;
    if (g === undefined) {
      g = turnLines(this.#scratch.at);
      this.#current = g;
      this.#queue.push(g);
      this.#turn.add(g);
    }
    return g;
  }

  /** Counts the line just written into the turn's buffer (each JSON text, which never holds a raw newline). */
  #appended(g: TurnLines): Promise<void> {
    this.#scratch.byte(NEWLINE);
    g.end = this.#scratch.at;
    g.count++;
    this.#queued++;
    this.#flushing ??= this.#flushLoop();
    return g.durable.promise;
  }

  /** The turn batch's flush: each turn's lines in one synchronous write, the rest left to the flush loop. */
  #writeTurn(groups: TurnLines[]): void {
    for (const g of groups) {
      if (this.#current === g) this.#current = undefined;
      const bytes = this.#scratch.buf.subarray(g.start, g.end);
      const reached = this.#writeNow(bytes);
      if (reached === bytes.length) g.written = g.count;
      else keepUnwritten(g, bytes, reached);
      this.#owed += g.count - g.written;
      g.awaitingWrite = false;
    }
    this.#scratch.at = 0;
    if (this.#scratch.buf.length > MAX_SCRATCH_BYTES) this.#scratch = new JsonBytes(SCRATCH_BYTES);
  }

  /**
   * One synchronous write(2) of whole lines; returns how many bytes reached the file (all of them, or
   * fewer when the write failed or a rotation or a torn fragment sends them through the flush loop).
   */
  #writeNow(buf: Buffer): number {
    if (this.#rotating || this.#terminateFragment || this.#owed > 0) return 0;
    let off = 0;
    try {
      while (off < buf.length) off += writeSync(this.#active.fh.fd, buf, off, buf.length - off);
    } catch (err) {
      // A partial write leaves a fragment: the loop starts its next write with a newline.
      if (off > 0) this.#terminateFragment = true;
      this.#opts.onError?.(err);
    }
    this.#active.size += off;
    return off;
  }

  async #flushLoop(): Promise<void> {
    // Let appends issued in the same tick join the first batch.
    await Promise.resolve();
    while (this.#queue.length > 0) {
      // This turn's lines are written by the turn batch; the loop takes them (to fsync) once it has run.
      const pendingWrite = this.#turn.settled();
      if (pendingWrite !== undefined) await pendingWrite;
      const batch = this.#queue.filter((g) => !g.awaitingWrite);
      this.#queue = this.#queue.filter((g) => g.awaitingWrite);
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
      this.#queued -= lines;
      this.#inFlight = lines;
      if (this.#terminateFragment && rests.length > 0) rests.unshift(FRAGMENT_END);
      const buf = Buffer.concat(rests);
      try {
        if (buf.length > 0) {
          try {
            await this.#writeAll(buf);
          } finally {
            // Written, or failed and rejected below: either way no longer ahead of later turns.
            this.#owed -= unwritten;
          }
          this.#terminateFragment = false;
          this.#active.size += buf.length;
        }
        const wait = this.#lastSync + this.#fsyncIntervalMs - Date.now();
        if (wait > 0) await delay(wait);
        await this.#active.fh.datasync();
        this.#lastSync = Date.now();
        this.#stats.fsyncs++;
        this.#stats.appended += lines;
        this.#opts.onFsync?.();
        for (const g of batch) g.durable.resolve();
      } catch (err) {
        this.#terminateFragment = true;
        this.#opts.onError?.(err);
        for (const g of batch) g.durable.reject(err);
      }
      this.#inFlight = 0;
      if (this.#active.size >= this.#maxSegmentBytes) await this.#rotate();
    }
    this.#flushing = undefined;
  }

  async #writeAll(buf: Buffer): Promise<void> {
    let off = 0;
    while (off < buf.length) {
      const { bytesWritten } = await this.#active.fh.write(buf, off, buf.length - off, null);
      off += bytesWritten;
    }
  }

  async #rotate(): Promise<void> {
    // `rotating` holds synchronous writes back while the segment is sealed.
    this.#rotating = true;
    try {
      this.#active = await sealActiveSegment(this.dir, this.#active);
      this.#stats.rotations++;
      this.#stats.segment = this.#active.seq;
    } catch (err) {
      // Keep appending to the current file; rotation is retried after the next batch.
      this.#opts.onError?.(err);
    } finally {
      this.#rotating = false;
    }
  }
}

/**
 * After a write that reached the file only up to `reached` of the turn's `bytes`: counts the lines that
 * landed whole and copies the rest for the flush loop. JSON text holds no raw newline: each one in what
 * reached the file ends a whole line.
 */
function keepUnwritten(g: TurnLines, bytes: Buffer, reached: number): void {
  let whole = 0;
  let wholeEnd = 0;
  for (let at = bytes.indexOf(NEWLINE); at !== -1 && at < reached; at = bytes.indexOf(NEWLINE, at + 1)) {
    whole++;
    wholeEnd = at + 1;
  }
  g.written = whole;
  g.rest = Buffer.from(bytes.subarray(wholeEnd));
}
