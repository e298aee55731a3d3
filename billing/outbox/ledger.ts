// The file outbox read as a ledger of what the gateway served (docs/billing.md "The ledger"): with
// billing.ledger_retention_h the sidecar keeps delivered segments instead of deleting them, so a
// directory holds every event its gateway wrote since its oldest segment began. Read-only: no lock, no
// write, so `router-admin billing reconcile` can read it while the gateway and the sidecar run (a line
// being appended is not whole yet and is left for the next run).

import { open, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { isErrno } from '../../common/durable-fs.ts';
import { takeTraceparent, type UsageEvent } from '../event/usage-event.ts';
import { eventOfCompactLine } from './compact-line.ts';
import {
  ACTIVE_FILE,
  type Checkpoint,
  INITIAL_CHECKPOINT,
  isHeader,
  isUsageEvent,
  listOutbox,
  readCheckpoint,
  segmentFileName,
} from './layout.ts';
import { outboxDirs } from './slots.ts';

export interface LedgerEvent {
  readonly event: UsageEvent;
  /** Not delivered yet: after the reader's checkpoint (file) or not acknowledged (stream). */
  readonly pending: boolean;
}

export interface LedgerRead {
  /** Events whose occurred_at is in [since, until), in the order written. */
  readonly events: LedgerEvent[];
  /**
   * Unix seconds from which the ledger holds everything its writers wrote (the creation of its oldest
   * segment); undefined when it holds nothing.
   */
  readonly beginsAt: number | undefined;
}

/** The window of a read, Unix seconds: since inclusive, until exclusive. */
export interface LedgerWindow {
  readonly since: number;
  readonly until: number;
}

/**
 * A ledger whose delivery state was taken first: what was delivered is judged by the checkpoints read
 * when it was made, and read() (later) reads the lines. Reconcile takes it before it reads the billing
 * service and reads the lines after: an event the service holds was written before it was delivered,
 * so the lines have it; an event written meanwhile lies past the earlier checkpoint and is pending, not
 * missing.
 */
export interface LedgerSnapshot {
  read(window: LedgerWindow): Promise<LedgerRead>;
}

/** An outbox directory and its slots (billing/outbox/slots.ts) as one ledger. */
export async function snapshotOutboxLedger(root: string): Promise<LedgerSnapshot> {
  const dirsOf = async () => {
    try {
      return await outboxDirs(root);
    } catch (err) {
      if (isErrno(err, 'ENOENT')) throw new Error(`no outbox at ${root}`);
      throw err;
    }
  };
  const checkpoints = new Map<string, Checkpoint>();
  for (const dir of await dirsOf()) checkpoints.set(dir, await readCheckpoint(dir));
  return {
    async read(window) {
      const events: LedgerEvent[] = [];
      let beginsAt: number | undefined;
      for (const dir of await dirsOf()) {
        // A slot that appeared since holds only events written since: all pending.
        const checkpoint = checkpoints.get(dir) ?? INITIAL_CHECKPOINT;
        const read = await readDir(dir, checkpoint, window, events);
        // Every directory has its own beginning; the union holds everything only from the latest of them.
        if (read !== undefined) beginsAt = beginsAt === undefined ? read : Math.max(beginsAt, read);
      }
      return { events, beginsAt };
    },
  };
}

/** snapshotOutboxLedger and its read at once. */
export async function readOutboxLedger(root: string, window: LedgerWindow): Promise<LedgerRead> {
  return (await snapshotOutboxLedger(root)).read(window);
}

/**
 * Adds the window's events of one directory; returns when the directory's record begins. The writer
 * may rotate while it reads (events.jsonl renamed to a segment, a new one begun): it lists again until
 * no file it has not read whole appears. A file read twice adds its events twice, which the comparison
 * counts once.
 */
async function readDir(
  dir: string,
  checkpoint: Checkpoint,
  window: LedgerWindow,
  out: LedgerEvent[],
): Promise<number | undefined> {
  let beginsAt: number | undefined;
  const sealedRead = new Set<number>();
  let activeRead: number | undefined;
  for (let pass = 0; pass < 8; pass++) {
    const listing = await listOutbox(dir);
    const files = listing.segments
      .filter((seq) => !sealedRead.has(seq))
      .map((seq) => ({ seq, name: segmentFileName(seq), sealed: true }));
    if (listing.activeSeq !== undefined && listing.activeSeq !== activeRead)
      files.push({ seq: listing.activeSeq, name: ACTIVE_FILE, sealed: false });
    // Nothing new since the last listing: done. An active file sealed meanwhile is listed as a segment
    // now and read again, whole.
    if (files.length === 0) break;
    if (pass === 0 && files[0] !== undefined) beginsAt = await readCreatedAt(join(dir, files[0].name));
    for (const { seq, name, sealed } of files) {
      if (sealed) sealedRead.add(seq);
      else activeRead = seq;
      const path = join(dir, name);
      // Lines are written when their request completes, after it occurred: a file last written before
      // the window begins holds nothing of it.
      const st = await stat(path).catch((err: unknown) => {
        if (isErrno(err, 'ENOENT')) return undefined;
        throw err;
      });
      if (st === undefined || st.mtimeMs < window.since * 1000) continue;
      const pendingFrom =
        seq < checkpoint.segment
          ? Number.POSITIVE_INFINITY
          : seq === checkpoint.segment
            ? checkpoint.offset
            : 0;
      await readFileEvents(path, pendingFrom, window, out);
    }
  }
  return beginsAt;
}

async function readCreatedAt(path: string): Promise<number | undefined> {
  const fh = await open(path, 'r').catch((err: unknown) => {
    if (isErrno(err, 'ENOENT')) return undefined;
    throw err;
  });
  if (fh === undefined) return undefined;
  try {
    const buf = Buffer.alloc(512);
    const { bytesRead } = await fh.read(buf, 0, buf.length, 0);
    const nl = buf.subarray(0, bytesRead).indexOf(0x0a);
    if (nl < 0) return undefined;
    const header: unknown = JSON.parse(buf.subarray(0, nl).toString('utf8'));
    if (!isHeader(header)) return undefined;
    const ms = Date.parse(header.created_at);
    return Number.isFinite(ms) ? Math.floor(ms / 1000) : undefined;
  } catch {
    return undefined;
  } finally {
    await fh.close();
  }
}

/** The usage event of one outbox line (a compact line or the whole event); undefined for anything else. */
export function eventOfOutboxLine(text: string): UsageEvent | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (Array.isArray(value)) return eventOfCompactLine(value)?.event;
  if (!isUsageEvent(value) || isHeader(value)) return undefined;
  takeTraceparent(value as unknown as Record<string, unknown>);
  return value;
}

async function readFileEvents(
  path: string,
  pendingFrom: number,
  window: LedgerWindow,
  out: LedgerEvent[],
): Promise<void> {
  const fh = await open(path, 'r').catch((err: unknown) => {
    if (isErrno(err, 'ENOENT')) return undefined; // trimmed meanwhile
    throw err;
  });
  if (fh === undefined) return;
  try {
    const data = await fh.readFile();
    let start = 0;
    for (;;) {
      const nl = data.indexOf(0x0a, start);
      if (nl < 0) break; // a line still being written
      const offset = start;
      const text = data.toString('utf8', start, nl);
      start = nl + 1;
      if (text.length === 0) continue;
      const event = eventOfOutboxLine(text);
      if (event === undefined) continue;
      if (event.occurred_at < window.since || event.occurred_at >= window.until) continue;
      out.push({ event, pending: offset >= pendingFrom });
    }
  } finally {
    await fh.close();
  }
}
