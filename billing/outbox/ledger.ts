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

/** An outbox directory and its slots (billing/outbox/slots.ts) as one ledger. */
export async function readOutboxLedger(root: string, window: LedgerWindow): Promise<LedgerRead> {
  const events: LedgerEvent[] = [];
  let beginsAt: number | undefined;
  let dirs: string[];
  try {
    dirs = await outboxDirs(root);
  } catch (err) {
    if (isErrno(err, 'ENOENT')) throw new Error(`no outbox at ${root}`);
    throw err;
  }
  for (const dir of dirs) {
    const read = await readDir(dir, window, events);
    // Every directory has its own beginning; the union holds everything only from the latest of them.
    if (read !== undefined) beginsAt = beginsAt === undefined ? read : Math.max(beginsAt, read);
  }
  return { events, beginsAt };
}

/** Adds the window's events of one directory; returns when the directory's record begins. */
async function readDir(dir: string, window: LedgerWindow, out: LedgerEvent[]): Promise<number | undefined> {
  const listing = await listOutbox(dir);
  const checkpoint = await readCheckpoint(dir);
  const files = listing.segments.map((seq) => ({ seq, name: segmentFileName(seq) }));
  if (listing.activeSeq !== undefined) files.push({ seq: listing.activeSeq, name: ACTIVE_FILE });
  let beginsAt: number | undefined;
  for (const [i, { seq, name }] of files.entries()) {
    const path = join(dir, name);
    if (i === 0) {
      const header = await readCreatedAt(path);
      if (header !== undefined) beginsAt = header;
    }
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
