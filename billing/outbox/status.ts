// A read-only view of an outbox directory for /readyz of the gateway and the sidecar: pending and
// dead-letter counts without owning the reader (takes no lock, writes nothing).
//
// Counts are newline counts: pending = lines after the checkpoint minus segment headers, so a corrupt
// line still waiting to be quarantined counts as pending. Newlines are counted per 64 KiB block and the
// block counts are cached per file (segments are append-only, then immutable), so a probe reads only the
// bytes added since the previous probe plus at most one block at the checkpoint.

import { open } from 'node:fs/promises';
import { join } from 'node:path';
import { ifExists, isErrno } from '../../common/durable-fs.ts';
import {
  ACTIVE_FILE,
  DEAD_LETTER_FILE,
  type FileHandle,
  listOutbox,
  QUARANTINE_FILE,
  readCheckpoint,
  segmentFileName,
} from './layout.ts';

const BLOCK = 64 * 1024;

export interface OutboxStatus {
  /** Events (lines) not yet passed by the checkpoint. */
  pendingEvents: number;
  pendingBytes: number;
  deadLettered: number;
  quarantined: number;
  /** Segments not yet deleted, the active one included. */
  segments: number;
}

export interface OutboxStatusView {
  /** `position` overrides the on-disk checkpoint (the worker knows a newer one). */
  read(position?: { segment: number; offset: number }): Promise<OutboxStatus>;
}

interface FileCounts {
  ino: number;
  /** Newlines per complete block. */
  blocks: number[];
}

export function openOutboxStatus(dir: string): OutboxStatusView {
  const cache = new Map<string, FileCounts>();

  async function withFile<T>(
    name: string,
    fn: (fh: FileHandle, size: number, ino: number) => Promise<T>,
  ): Promise<T | undefined> {
    const fh = await ifExists(open(join(dir, name), 'r'));
    if (fh === undefined) return undefined;
    try {
      const st = await fh.stat();
      return await fn(fh, st.size, st.ino);
    } finally {
      await fh.close();
    }
  }

  /** Newlines in [from, size) of the file. */
  async function countLines(
    name: string,
    from: number,
  ): Promise<{ lines: number; bytes: number; headerPending: boolean }> {
    const result = await withFile(name, async (fh, size, ino) => {
      let counts = cache.get(name);
      if (!counts || counts.ino !== ino) {
        counts = { ino, blocks: [] };
        cache.set(name, counts);
      }
      const buf = Buffer.allocUnsafe(BLOCK);
      const completeBlocks = Math.floor(size / BLOCK);
      while (counts.blocks.length < completeBlocks) {
        const n = await countRange(fh, buf, counts.blocks.length * BLOCK, BLOCK);
        counts.blocks.push(n);
      }
      const start = Math.min(from, size);
      const firstBlock = Math.floor(start / BLOCK);
      let lines = 0;
      if (firstBlock < completeBlocks) {
        lines += await countRange(fh, buf, start, (firstBlock + 1) * BLOCK - start);
        for (let b = firstBlock + 1; b < completeBlocks; b++) lines += counts.blocks[b]!;
        lines += await countRange(fh, buf, completeBlocks * BLOCK, size - completeBlocks * BLOCK);
      } else {
        lines += await countRange(fh, buf, start, size - start);
      }
      return { lines, bytes: size - start, headerPending: start === 0 && size > 0 };
    });
    return result ?? { lines: 0, bytes: 0, headerPending: false };
  }

  // Reads run one at a time: two overlapping ones (a /metrics scrape and /readyz) would both extend a
  // file's block counts from the same length and push the same blocks twice, over-counting for good.
  let previous: Promise<unknown> = Promise.resolve();
  function read(position?: { segment: number; offset: number }): Promise<OutboxStatus> {
    const next = previous.then(() => readNow(position));
    previous = next.catch(() => undefined);
    return next;
  }

  async function readNow(position?: { segment: number; offset: number }): Promise<OutboxStatus> {
    let listing: Awaited<ReturnType<typeof listOutbox>>;
    try {
      listing = await listOutbox(dir);
    } catch (err) {
      // No outbox yet (nothing was ever appended): nothing is pending.
      if (isErrno(err, 'ENOENT'))
        return { pendingEvents: 0, pendingBytes: 0, deadLettered: 0, quarantined: 0, segments: 0 };
      throw err;
    }
    const cp = position ?? (await readCheckpoint(dir));
    const names: { name: string; seq: number }[] = listing.segments
      .filter((s) => s >= cp.segment)
      .map((seq) => ({ name: segmentFileName(seq), seq }));
    if (listing.activeSeq !== undefined && listing.activeSeq >= cp.segment) {
      names.push({ name: ACTIVE_FILE, seq: listing.activeSeq });
    }
    let pendingEvents = 0;
    let pendingBytes = 0;
    for (const { name, seq } of names) {
      const c = await countLines(name, seq === cp.segment ? cp.offset : 0);
      // A header line is not an event; headerless (foreign) segments are rare enough to ignore here.
      pendingEvents += Math.max(0, c.lines - (c.headerPending ? 1 : 0));
      pendingBytes += c.bytes;
    }
    // Forget cached counts of deleted files.
    const live = new Set(names.map((n) => n.name));
    for (const name of cache.keys()) {
      if (name !== DEAD_LETTER_FILE && name !== QUARANTINE_FILE && !live.has(name)) cache.delete(name);
    }
    const deadLettered = (await countLines(DEAD_LETTER_FILE, 0)).lines;
    const quarantined = (await countLines(QUARANTINE_FILE, 0)).lines;
    return { pendingEvents, pendingBytes, deadLettered, quarantined, segments: names.length };
  }

  return { read } satisfies OutboxStatusView;
}

async function countRange(fh: FileHandle, buf: Buffer, position: number, length: number): Promise<number> {
  let n = 0;
  let done = 0;
  while (done < length) {
    const want = Math.min(buf.length, length - done);
    const { bytesRead } = await fh.read(buf, 0, want, position + done);
    if (bytesRead === 0) break;
    let i = buf.indexOf(0x0a, 0);
    while (i >= 0 && i < bytesRead) {
      n++;
      i = buf.indexOf(0x0a, i + 1);
    }
    done += bytesRead;
  }
  return n;
}
