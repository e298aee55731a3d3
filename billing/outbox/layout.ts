// The on-disk layout of the file-mode billing outbox, shared by the writer (gateway), the reader/delivery
// worker (router-billing sidecar) and the read-only status view (gateway /readyz).
//
// <outbox_dir>/
//   events.jsonl              active segment. First line is a header {"outbox_segment":<seq>,...,
//                             "line_formats":{"event":1,"compact":1}}: the versions of the line formats
//                             the segment may hold; then one event per line, a compact line
//                             (outbox/compact-line.ts) or the whole UsageEvent JSON. Only the gateway's
//                             writer appends to it.
//   segment-<seq>.jsonl       sealed segments: former events.jsonl files renamed by the writer (seq is
//                             zero-padded to 12 digits so names sort). Never written again once renamed.
//   writer.lock               pid of the one gateway process that owns the writer side (O_EXCL create).
//   reader.lock               pid of the one sidecar process that owns the reader side.
//   checkpoint.json           reader state {version, segment, offset, attempts}: everything before byte
//                             `offset` of segment `segment` (and every lower segment) is delivered,
//                             dead-lettered or quarantined. Replaced atomically (temp + fsync + rename).
//   quarantine.jsonl          lines that are not usage events (bad JSON, wrong shape, torn tails).
//   dead-letter.jsonl         events that exhausted their delivery attempts.
//   *.tmp                     in-progress atomic replacements; ignored and removed on open.
//   spool/<slot>/             shared-store mode only: the gateway's spool of events the Redis stream could
//                             not take, each slot an outbox of this same layout (billing/event-spool.ts).
//
// The full design and its crash-safety argument are in billing/outbox/reader.ts.

import { open, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { ifExists, isErrno, writeFileAtomic } from '../../common/durable-fs.ts';
import type { UsageEvent } from '../event/usage-event.ts';
import { COMPACT_VERSION } from './compact-line.ts';

export type FileHandle = Awaited<ReturnType<typeof open>>;

export const ACTIVE_FILE = 'events.jsonl';
export const CHECKPOINT_FILE = 'checkpoint.json';
export const QUARANTINE_FILE = 'quarantine.jsonl';
export const DEAD_LETTER_FILE = 'dead-letter.jsonl';
export const WRITER_LOCK = 'writer.lock';
export const READER_LOCK = 'reader.lock';
export const SPOOL_DIR = 'spool';

const SEGMENT_RE = /^segment-(\d+)\.jsonl$/;
const SEQ_DIGITS = 12;

export function segmentFileName(seq: number): string {
  return `segment-${String(seq).padStart(SEQ_DIGITS, '0')}.jsonl`;
}

export function parseSegmentFileName(name: string): number | undefined {
  const m = SEGMENT_RE.exec(name);
  return m ? Number(m[1]) : undefined;
}

/**
 * The line formats this build writes and reads, by name and version: `event`, the whole UsageEvent
 * object; `compact`, the compact line. A format gains a version when an older reader would misread it;
 * a segment header names them, so an older sidecar stops at that segment instead of quarantining lines.
 */
export const LINE_FORMATS: Readonly<Record<string, number>> = { event: 1, compact: COMPACT_VERSION };

/** The first line of every active segment; it names the segment before it is ever renamed. */
export interface SegmentHeader {
  outbox_segment: number;
  created_at: string;
  writer_pid: number;
  /** Absent in segments of writers older than the field: they hold version 1 of both formats. */
  line_formats?: Record<string, number>;
}

export function headerLine(seq: number): string {
  const header: SegmentHeader = {
    outbox_segment: seq,
    created_at: new Date().toISOString(),
    writer_pid: process.pid,
    line_formats: { ...LINE_FORMATS },
  };
  return `${JSON.stringify(header)}\n`;
}

/** A segment holds a line format this build does not read (a newer gateway wrote it). */
export class OutboxFormatError extends Error {
  readonly segment: number;
  readonly format: string;
  readonly found: number;
  readonly readable: number | undefined;
  constructor(dir: string, segment: number, format: string, found: number) {
    const readable = LINE_FORMATS[format];
    super(
      `outbox ${dir} segment ${segment} holds ${format} lines of version ${found}; this sidecar reads ` +
        `${readable === undefined ? 'no such format' : `${format} lines up to version ${readable}`}: ` +
        "delivery from this outbox stops (the events wait there) until router-billing is upgraded to the gateway's version",
    );
    this.name = 'OutboxFormatError';
    this.segment = segment;
    this.format = format;
    this.found = found;
    this.readable = readable;
  }
}

/** The first format in `formats` newer than this build reads (or unknown to it), as [name, version]. */
export function unreadableFormat(formats: Record<string, number> | undefined): [string, number] | undefined {
  for (const [name, version] of Object.entries(formats ?? {})) {
    const readable = LINE_FORMATS[name];
    if (readable === undefined || version > readable) return [name, version];
  }
  return undefined;
}

export function isHeader(value: unknown): value is SegmentHeader {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as { outbox_segment?: unknown }).outbox_segment === 'number'
  );
}

function isFormats(value: unknown): value is Record<string, number> {
  return (
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    Object.values(value).every((v) => typeof v === 'number')
  );
}

/** A structural check only: enough for the delivery worker to build the ingest call. */
export function isUsageEvent(value: unknown): value is UsageEvent {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const v = value as Record<string, unknown>;
  return (
    typeof v.idempotency_key === 'string' &&
    v.idempotency_key.length > 0 &&
    typeof v.external_event_id === 'string' &&
    typeof v.subject_type === 'string' &&
    typeof v.subject_id === 'string' &&
    typeof v.raw_json === 'object' &&
    v.raw_json !== null
  );
}

export interface Checkpoint {
  version: 1;
  segment: number;
  /** Byte offset of the first line not yet done in `segment`. */
  offset: number;
  /** Failed, counted attempts of undelivered events at or after the checkpoint, keyed `<segment>:<offset>`. */
  attempts: Record<string, number>;
}

export const INITIAL_CHECKPOINT: Checkpoint = { version: 1, segment: 0, offset: 0, attempts: {} };

export async function readCheckpoint(dir: string): Promise<Checkpoint> {
  let text: string;
  try {
    const fh = await open(join(dir, CHECKPOINT_FILE), 'r');
    try {
      text = await fh.readFile('utf8');
    } finally {
      await fh.close();
    }
  } catch (err) {
    if (isErrno(err, 'ENOENT')) return { ...INITIAL_CHECKPOINT, attempts: {} };
    throw err;
  }
  const parsed: unknown = JSON.parse(text);
  if (
    typeof parsed !== 'object' ||
    parsed === null ||
    typeof (parsed as Checkpoint).segment !== 'number' ||
    typeof (parsed as Checkpoint).offset !== 'number'
  ) {
    throw new Error(`outbox checkpoint ${join(dir, CHECKPOINT_FILE)} is malformed`);
  }
  const cp = parsed as Checkpoint;
  return { version: 1, segment: cp.segment, offset: cp.offset, attempts: cp.attempts ?? {} };
}

/** Atomic replace: a crash leaves either the old or the new checkpoint, never a mix. */
export async function writeCheckpoint(dir: string, cp: Checkpoint, fsyncHook?: () => void): Promise<void> {
  await writeFileAtomic(dir, CHECKPOINT_FILE, `${JSON.stringify(cp)}\n`, fsyncHook);
}

export interface DirListing {
  /** Sealed segment sequence numbers, ascending. */
  segments: number[];
  /** Sequence number in the header of events.jsonl, when it has a readable header. */
  activeSeq: number | undefined;
  /** events.jsonl exists. */
  activeExists: boolean;
}

export async function listOutbox(dir: string): Promise<DirListing> {
  const names = await readdir(dir);
  const segments: number[] = [];
  let activeExists = false;
  for (const name of names) {
    const seq = parseSegmentFileName(name);
    if (seq !== undefined) segments.push(seq);
    else if (name === ACTIVE_FILE) activeExists = true;
  }
  segments.sort((a, b) => a - b);
  const activeSeq = activeExists ? (await readHeader(join(dir, ACTIVE_FILE)))?.seq : undefined;
  return { segments, activeSeq, activeExists };
}

export interface HeaderInfo {
  seq: number;
  /** Length of the header line including its newline. */
  bytes: number;
  /** The header's line_formats (undefined in segments of older writers). */
  formats?: Record<string, number>;
}

/** Reads the header line of a segment file; undefined when missing, empty or headerless. */
export async function readHeader(path: string): Promise<HeaderInfo | undefined> {
  const fh = await ifExists(open(path, 'r'));
  if (fh === undefined) return undefined;
  try {
    return await readHeaderFromHandle(fh);
  } finally {
    await fh.close();
  }
}

export async function readHeaderFromHandle(fh: FileHandle): Promise<HeaderInfo | undefined> {
  const buf = Buffer.alloc(512);
  const { bytesRead } = await fh.read(buf, 0, buf.length, 0);
  const nl = buf.subarray(0, bytesRead).indexOf(0x0a);
  if (nl < 0) return undefined;
  try {
    const value: unknown = JSON.parse(buf.subarray(0, nl).toString('utf8'));
    if (!isHeader(value)) return undefined;
    const formats = value.line_formats;
    return {
      seq: value.outbox_segment,
      bytes: nl + 1,
      ...(isFormats(formats) ? { formats } : {}),
    };
  } catch {
    return undefined;
  }
}
