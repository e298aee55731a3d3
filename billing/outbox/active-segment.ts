// The outbox writer's files: the active segment (events.jsonl) it appends to, how it is started when the
// writer opens and how it is sealed into a numbered segment (rotation). Crash-safety argument:
// billing/outbox/reader.ts.

import { open, rename, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { fsyncDir, removeIfExists } from '../../common/durable-fs.ts';
import {
  ACTIVE_FILE,
  type FileHandle,
  headerLine,
  listOutbox,
  readCheckpoint,
  readHeader,
  segmentFileName,
} from './layout.ts';

const NEXT_TMP = `${ACTIVE_FILE}.next.tmp`;

/** The open events.jsonl: its handle, sequence number and size in bytes. */
export interface ActiveSegment {
  fh: FileHandle;
  seq: number;
  size: number;
}

/**
 * Makes sure events.jsonl is a fresh segment with a new sequence number. A previous events.jsonl that
 * holds events is sealed first: it may end in a torn line (the old writer died mid-write), and after a
 * power loss it may be shorter than the reader's checkpoint; as a sealed segment the reader handles both
 * (quarantines the tail, or treats the segment as done). Restarts therefore cost one small segment each.
 */
export async function startActiveSegment(dir: string): Promise<ActiveSegment> {
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

/**
 * Seals `active` as segment `active.seq` and opens a fresh events.jsonl numbered one higher. The caller
 * writes nothing to `active` meanwhile: the reader may treat the renamed file as sealed the moment it
 * no longer is events.jsonl.
 */
export async function sealActiveSegment(dir: string, active: ActiveSegment): Promise<ActiveSegment> {
  const next = active.seq + 1;
  // Lines written synchronously since the last fdatasync belong to this segment: sync them first.
  await active.fh.datasync();
  await createHeaderFile(join(dir, NEXT_TMP), next);
  await rename(join(dir, ACTIVE_FILE), join(dir, segmentFileName(active.seq)));
  await rename(join(dir, NEXT_TMP), join(dir, ACTIVE_FILE));
  await fsyncDir(dir);
  await active.fh.close();
  const fh = await open(join(dir, ACTIVE_FILE), 'a');
  return { fh, seq: next, size: (await fh.stat()).size };
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
