// The sidecar's side of the file-mode billing outbox: reads events in order, quarantines bad lines,
// keeps the durable checkpoint and deletes fully delivered segments.
//
// On-disk layout (see billing/outbox/layout.ts for the file list):
//   events.jsonl               active segment: header line {"outbox_segment":N,...,"line_formats":{..}},
//                              then events
//   segment-<N>.jsonl          sealed segments (renamed events.jsonl), immutable
//   checkpoint.json            {segment, offset, attempts}: first byte not yet done, attempts of the head
//   quarantine.jsonl / dead-letter.jsonl, writer.lock / reader.lock
//
// Cost: each event is written once (append), read once (sequential chunked reads) and passed by the
// checkpoint; checkpoints are written every few hundred events or milliseconds and segments are deleted
// whole once the checkpoint moves past them, so the work per event is constant, whatever the backlog.
// With a retention (billing.ledger_retention_h, the sidecar's outbox) a segment the checkpoint passed is
// kept instead, as the ledger `router-admin billing reconcile` reads (billing/outbox/ledger.ts), and
// trim() deletes those whose last write is older than the retention: a readdir and a stat per segment
// now and then, nothing per event.
//
// Crash safety (kill -9 of either process at any instant; power loss noted where it differs):
// - Writer dies mid-write: the file may end in a torn line. The reader only consumes bytes up to the last
//   newline, so the fragment waits. The next writer never appends to that file: it seals it (renames it
//   to segment-<N>) and starts a new events.jsonl. In a sealed segment a trailing fragment can never be
//   completed, so the reader quarantines it and moves on. An append whose promise resolved was fsync'ed
//   and is a whole line, so it is never the fragment.
// - Writer dies during rotation: the steps are (1) create events.jsonl.next.tmp with header N+1, fsync;
//   (2) rename events.jsonl -> segment-N; (3) rename the temp file -> events.jsonl; (4) fsync the dir.
//   Any prefix of these leaves either the old active file or a sealed segment plus a missing/fresh
//   active file; the next writer removes a leftover temp file and picks a sequence number above every
//   number in use (segments, active header, checkpoint), so sequence numbers only grow. The reader
//   tolerates gaps in the numbering.
// - Sealed means "no longer the inode named events.jsonl". The writer renames only after its last write
//   to the file, and the reader re-reads once after seeing the rename, so no line is missed.
// - Reader dies: checkpoint.json is replaced atomically (temp + fsync + rename + dir fsync). Events after
//   the checkpoint, including the one in flight, are delivered again after restart. The billing service
//   deduplicates on Idempotency-Key (router:<request id>), so at-least-once delivery + idempotency =
//   exactly-once billing. A segment is unlinked only after a checkpoint past it is durable; leftovers of
//   a crash between the two are removed at the next open. Quarantine and dead-letter records are
//   fsync'ed before the checkpoint passes their line, so they may be duplicated by a crash, never lost.
// - Power loss: page-cache data the reader already delivered may vanish, leaving a checkpoint beyond
//   the end of the file; the next writer seals such a file instead of appending to it, and the reader
//   treats a sealed segment shorter than the checkpoint as done.
// Line formats: a segment whose header names a line format newer than this build reads (a gateway
// upgraded before its sidecar) stops the reader before its first line, and so does a compact line of a
// newer version in a segment of an older header: every later next() throws OutboxFormatError, nothing
// is quarantined and the checkpoint stays before it, so an upgraded sidecar delivers it all.

import { mkdir, open, readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { appendDurable, isErrno, removeIfExists } from '../../common/durable-fs.ts';
import { takeTraceparent, type UsageEvent } from '../event/usage-event.ts';
import { COMPACT_VERSION, eventOfCompactLine } from './compact-line.ts';
import {
  ACTIVE_FILE,
  CHECKPOINT_FILE,
  type Checkpoint,
  DEAD_LETTER_FILE,
  type FileHandle,
  isHeader,
  isUsageEvent,
  listOutbox,
  OutboxFormatError,
  QUARANTINE_FILE,
  READER_LOCK,
  readCheckpoint,
  readHeaderFromHandle,
  segmentFileName,
  unreadableFormat,
  writeCheckpoint,
} from './layout.ts';
import { acquirePidLock, type PidLock } from './lock.ts';

export { OutboxFormatError } from './layout.ts';
export { type OutboxStatus, type OutboxStatusView, openOutboxStatus } from './status.ts';

export interface OutboxPosition {
  segment: number;
  offset: number;
}

export type OutboxItem =
  /** A usage event occupying bytes [offset, end) of its segment. */
  | {
      kind: 'event';
      segment: number;
      offset: number;
      end: number;
      event: UsageEvent;
      /** The request's traceparent stored beside the event (billing/event/usage-event.ts TRACE_KEY). */
      traceparent?: string;
    }
  /** A line already moved to quarantine.jsonl; done as soon as it is seen. */
  | { kind: 'skip'; segment: number; offset: number; end: number }
  /** The end of a sealed segment; passing it lets the segment be deleted. */
  | { kind: 'sealed'; segment: number };

/** The checkpoint position once `item` (and everything before it) is done. */
export function positionAfter(item: OutboxItem): OutboxPosition {
  return item.kind === 'sealed'
    ? { segment: item.segment + 1, offset: 0 }
    : { segment: item.segment, offset: item.end };
}

export function attemptKey(item: { segment: number; offset: number }): string {
  return `${item.segment}:${item.offset}`;
}

export interface DeadLetterInfo {
  attempts: number;
  lastError: { kind: string; status?: number; code: string; message: string } | undefined;
}

export interface OutboxReaderOptions {
  /** Read size; a longer line grows the buffer as needed. Default 1 MiB. */
  chunkBytes?: number;
  onFsync?: () => void;
  /** Told about each quarantined line (segment, offset, reason); never gets the line itself. */
  onQuarantine?: (info: { segment: number; offset: number; reason: string }) => void;
  /**
   * Keep segments the checkpoint passed for this long after their last write (trim() deletes them
   * then). 0 or unset: deleted as soon as a checkpoint past them is durable.
   */
  retentionMs?: number;
}

export interface OutboxReader {
  readonly dir: string;
  /** The checkpoint found at open. */
  readonly initial: Checkpoint;
  /**
   * The next item in order, or undefined when nothing complete is available right now. Throws
   * OutboxFormatError, at every call from then on, once it reaches lines newer than this build reads.
   */
  next(): Promise<OutboxItem | undefined>;
  /** Durably records that everything before `pos` is done; deletes segments below it (no retention). */
  commit(pos: OutboxPosition, attempts: Record<string, number>): Promise<void>;
  /**
   * With a retention: deletes the segments below the checkpoint whose last write is older than it
   * (oldest first; the first one still young ends the pass). Returns how many. Without: nothing.
   */
  trim(now?: number): Promise<number>;
  deadLetter(item: Extract<OutboxItem, { kind: 'event' }>, info: DeadLetterInfo): Promise<void>;
  quarantined(): number;
  close(): Promise<void>;
}

interface OpenSegment {
  seq: number;
  fh: FileHandle;
  pos: number;
  ino: number;
  dev: number;
  sealed: boolean;
}

export async function openOutboxReader(dir: string, opts: OutboxReaderOptions = {}): Promise<OutboxReader> {
  await mkdir(dir, { recursive: true });
  const lock = await acquirePidLock(dir, READER_LOCK, 'billing sidecar (outbox reader)');
  let initial: Checkpoint;
  try {
    for (const name of await readdir(dir)) {
      if (name.startsWith(`${CHECKPOINT_FILE}.`) && name.endsWith('.tmp'))
        await removeIfExists(join(dir, name));
    }
    initial = await readCheckpoint(dir);
    // Kept segments are the ledger: trim() removes them by age.
    if (!((opts.retentionMs ?? 0) > 0)) {
      for (const seq of (await listOutbox(dir)).segments) {
        if (seq < initial.segment) await removeIfExists(join(dir, segmentFileName(seq)));
      }
    }
  } catch (err) {
    await lock.release();
    throw err;
  }
  return new FileOutboxReader(dir, opts, lock, initial);
}

class FileOutboxReader implements OutboxReader {
  readonly dir: string;
  readonly initial: Checkpoint;
  readonly #opts: OutboxReaderOptions;
  readonly #lock: PidLock;
  #target: OutboxPosition;
  #cur: OpenSegment | undefined;
  #buf: Buffer;
  #items: OutboxItem[] = [];
  #itemIndex = 0;
  #quarantinedCount = 0;
  readonly #sealedSeen: number[] = [];
  #closed = false;
  /** The segment of the last durable checkpoint: segments below it are done. */
  #committedSegment: number;
  /** Set when the next line is of a format newer than this build reads; permanent for this reader. */
  #newer: OutboxFormatError | undefined;

  constructor(dir: string, opts: OutboxReaderOptions, lock: PidLock, initial: Checkpoint) {
    this.dir = dir;
    this.initial = initial;
    this.#opts = opts;
    this.#lock = lock;
    this.#target = { segment: initial.segment, offset: initial.offset };
    this.#committedSegment = initial.segment;
    this.#buf = Buffer.allocUnsafe(opts.chunkBytes ?? 1024 * 1024);
  }

  async next(): Promise<OutboxItem | undefined> {
    if (this.#closed) return undefined;
    for (;;) {
      const ready = this.#take();
      if (ready) return ready;
      if (this.#newer !== undefined) throw this.#newer;
      this.#cur ??= await this.#openSegment();
      const cur = this.#cur;
      if (!cur) return undefined;
      const consumed = await this.#readLines(cur);
      if (this.#items.length > 0 || consumed > 0 || this.#newer !== undefined) continue;
      if (!cur.sealed) {
        if (!(await this.#isSealed(cur))) return undefined;
        cur.sealed = true; // read once more: lines written just before the rename
        continue;
      }
      await this.#finishSealed(cur);
    }
  }

  async commit(pos: OutboxPosition, attempts: Record<string, number>): Promise<void> {
    await writeCheckpoint(
      this.dir,
      { version: 1, segment: pos.segment, offset: pos.offset, attempts },
      this.#opts.onFsync,
    );
    this.#committedSegment = pos.segment;
    const sealedSeen = this.#sealedSeen;
    const keep = (this.#opts.retentionMs ?? 0) > 0;
    while (sealedSeen.length > 0 && sealedSeen[0]! < pos.segment) {
      const seq = sealedSeen.shift() as number;
      if (!keep) await removeIfExists(join(this.dir, segmentFileName(seq)));
    }
  }

  async trim(now = Date.now()): Promise<number> {
    const retentionMs = this.#opts.retentionMs ?? 0;
    if (!(retentionMs > 0) || this.#closed) return 0;
    let removed = 0;
    for (const seq of (await listOutbox(this.dir)).segments) {
      if (seq >= this.#committedSegment) break;
      const path = join(this.dir, segmentFileName(seq));
      const st = await stat(path).catch((err: unknown) => {
        if (isErrno(err, 'ENOENT')) return undefined;
        throw err;
      });
      if (st === undefined) continue;
      if (st.mtimeMs > now - retentionMs) break;
      await removeIfExists(path);
      removed++;
    }
    return removed;
  }

  async deadLetter(item: Extract<OutboxItem, { kind: 'event' }>, info: DeadLetterInfo): Promise<void> {
    const record = {
      dead_lettered_at: new Date().toISOString(),
      segment: item.segment,
      offset: item.offset,
      attempts: info.attempts,
      last_error: info.lastError,
      event: item.event,
    };
    await appendDurable(this.dir, DEAD_LETTER_FILE, `${JSON.stringify(record)}\n`, this.#opts.onFsync);
  }

  quarantined(): number {
    return this.#quarantinedCount;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#cur) await this.#cur.fh.close();
    this.#cur = undefined;
    await this.#lock.release();
  }

  #take(): OutboxItem | undefined {
    if (this.#itemIndex >= this.#items.length) return undefined;
    const item = this.#items[this.#itemIndex++];
    if (this.#itemIndex === this.#items.length) {
      this.#items = [];
      this.#itemIndex = 0;
    }
    return item;
  }

  async #openSegment(): Promise<OpenSegment | undefined> {
    const dir = this.dir;
    const target = this.#target;
    for (let tries = 0; tries < 5; tries++) {
      const listing = await listOutbox(dir);
      const sealedSeq = listing.segments.find((s) => s >= target.segment);
      const activeSeq =
        listing.activeSeq !== undefined && listing.activeSeq >= target.segment
          ? listing.activeSeq
          : undefined;
      if (sealedSeq === undefined && activeSeq === undefined) return undefined;
      const useSealed = sealedSeq !== undefined && (activeSeq === undefined || sealedSeq < activeSeq);
      const seq = useSealed ? sealedSeq : (activeSeq as number);
      const path = join(dir, useSealed ? segmentFileName(seq) : ACTIVE_FILE);
      let fh: FileHandle;
      try {
        fh = await open(path, 'r');
      } catch (err) {
        if (isErrno(err, 'ENOENT')) continue; // renamed under us: look again
        throw err;
      }
      const header = await readHeaderFromHandle(fh);
      if (!useSealed && header?.seq !== seq) {
        await fh.close(); // the writer rotated between listing and open
        continue;
      }
      const newer = unreadableFormat(header?.formats);
      if (newer !== undefined) {
        await fh.close();
        this.#newer = new OutboxFormatError(dir, seq, newer[0], newer[1]);
        throw this.#newer;
      }
      const st = await fh.stat();
      const pos = seq === target.segment ? target.offset : 0;
      return { seq, fh, pos, ino: st.ino, dev: st.dev, sealed: useSealed };
    }
    return undefined;
  }

  async #isSealed(seg: OpenSegment): Promise<boolean> {
    try {
      const st = await stat(join(this.dir, ACTIVE_FILE));
      return st.ino !== seg.ino || st.dev !== seg.dev;
    } catch (err) {
      if (isErrno(err, 'ENOENT')) return true;
      throw err;
    }
  }

  /** Reads complete lines from the current segment into `items`; returns the number of lines consumed. */
  async #readLines(seg: OpenSegment): Promise<number> {
    for (;;) {
      const buf = this.#buf;
      const { bytesRead } = await seg.fh.read(buf, 0, buf.length, seg.pos);
      if (bytesRead === 0) return 0;
      const data = buf.subarray(0, bytesRead);
      const last = data.lastIndexOf(0x0a);
      if (last < 0) {
        if (bytesRead < buf.length) return 0; // only a partial line so far
        this.#buf = Buffer.allocUnsafe(buf.length * 2);
        continue;
      }
      const base = seg.pos;
      let quarantine = '';
      let lines = 0;
      let start = 0;
      while (start <= last) {
        const nl = data.indexOf(0x0a, start);
        lines++;
        const text = data.toString('utf8', start, nl);
        const offset = base + start;
        const end = base + nl + 1;
        start = nl + 1;
        if (text.trim() === '') continue;
        const reason = this.#takeLine(seg.seq, offset, end, text);
        if (reason === undefined) continue;
        if (typeof reason === 'number') {
          // Stop before the line: the lines before it are taken, it and the rest wait.
          this.#newer = new OutboxFormatError(this.dir, seg.seq, 'compact', reason);
          if (quarantine !== '')
            await appendDurable(this.dir, QUARANTINE_FILE, quarantine, this.#opts.onFsync);
          seg.pos = offset;
          return lines - 1;
        }
        quarantine += quarantineRecord(seg.seq, offset, reason, text);
      }
      if (quarantine !== '') await appendDurable(this.dir, QUARANTINE_FILE, quarantine, this.#opts.onFsync);
      seg.pos = base + last + 1;
      return lines;
    }
  }

  /**
   * Adds the item of one line: an event, or a skip for a line that is not one (the reason returned, for
   * the caller to write to quarantine). A header line adds nothing. A compact line of a newer version
   * adds nothing either: its version is returned.
   */
  #takeLine(segment: number, offset: number, end: number, text: string): string | number | undefined {
    let value: unknown;
    let reason: string | undefined;
    try {
      value = JSON.parse(text);
    } catch {
      reason = 'invalid JSON';
    }
    if (reason === undefined && isHeader(value)) return undefined;
    if (reason === undefined && Array.isArray(value)) {
      const compact = eventOfCompactLine(value);
      if (compact !== undefined) {
        this.#items.push({ kind: 'event', segment, offset, end, ...compact });
        return undefined;
      }
      const version: unknown = value[0];
      if (typeof version === 'number' && version > COMPACT_VERSION) return version;
    } else if (reason === undefined && isUsageEvent(value)) {
      const traceparent = takeTraceparent(value as unknown as Record<string, unknown>);
      this.#items.push({ kind: 'event', segment, offset, end, event: value, traceparent });
      return undefined;
    }
    reason ??= 'not a usage event';
    this.#items.push({ kind: 'skip', segment, offset, end });
    this.#opts.onQuarantine?.({ segment, offset, reason });
    this.#quarantinedCount++;
    return reason;
  }

  async #finishSealed(seg: OpenSegment): Promise<void> {
    const size = (await seg.fh.stat()).size;
    if (size > seg.pos) {
      // A torn last line of a segment nobody will ever append to again.
      const tail = Buffer.alloc(size - seg.pos);
      await seg.fh.read(tail, 0, tail.length, seg.pos);
      await appendDurable(
        this.dir,
        QUARANTINE_FILE,
        quarantineRecord(seg.seq, seg.pos, 'torn last line', tail.toString('utf8')),
        this.#opts.onFsync,
      );
      this.#items.push({ kind: 'skip', segment: seg.seq, offset: seg.pos, end: size });
      this.#opts.onQuarantine?.({ segment: seg.seq, offset: seg.pos, reason: 'torn last line' });
      this.#quarantinedCount++;
    }
    this.#items.push({ kind: 'sealed', segment: seg.seq });
    this.#sealedSeen.push(seg.seq);
    await seg.fh.close();
    this.#target = { segment: seg.seq + 1, offset: 0 };
    this.#cur = undefined;
  }
}

function quarantineRecord(segment: number, offset: number, reason: string, line: string): string {
  return `${JSON.stringify({ quarantined_at: new Date().toISOString(), segment, offset, reason, line })}\n`;
}
