// File helpers for state that must survive a crash: atomic replacement (temp file, fsync, rename,
// directory fsync) and durable appends. The billing outbox and the file state store use them.

import { open, rename, unlink } from 'node:fs/promises';
import { join } from 'node:path';

let tmpCounter = 0;

export async function writeFileAtomic(
  dir: string,
  name: string,
  content: string,
  fsyncHook?: () => void,
): Promise<void> {
  // A unique temporary name: two replacements of the same file in flight must not rename each
  // other's temporary file away (the loser would fail with ENOENT).
  const tmp = join(dir, `${name}.${process.pid}.${++tmpCounter}.tmp`);
  await writeSynced(tmp, 'w', content, fsyncHook);
  await rename(tmp, join(dir, name));
  await fsyncDir(dir);
  fsyncHook?.();
}

/** Makes renames, creations and unlinks in `dir` durable. */
export async function fsyncDir(dir: string): Promise<void> {
  const fh = await open(dir, 'r');
  try {
    await fh.sync();
  } catch (err) {
    // Some filesystems refuse fsync on a directory; the rename itself is still atomic there.
    if (!isErrno(err, 'EINVAL') && !isErrno(err, 'EISDIR') && !isErrno(err, 'EPERM')) throw err;
  } finally {
    await fh.close();
  }
}

/** Appends whole lines and fsyncs: used for quarantine and dead-letter records. */
export async function appendDurable(
  dir: string,
  name: string,
  lines: string,
  fsyncHook?: () => void,
): Promise<void> {
  await writeSynced(join(dir, name), 'a', lines, fsyncHook);
}

async function writeSynced(
  path: string,
  flags: 'w' | 'a',
  text: string,
  fsyncHook?: () => void,
): Promise<void> {
  const fh = await open(path, flags);
  try {
    await fh.writeFile(text);
    await fh.sync();
    fsyncHook?.();
  } finally {
    await fh.close();
  }
}

export async function removeIfExists(path: string): Promise<void> {
  try {
    await unlink(path);
  } catch (err) {
    if (!isErrno(err, 'ENOENT')) throw err;
  }
}

/** The operation's result, or undefined when the file it opens or reads does not exist. */
export async function ifExists<T>(op: Promise<T>): Promise<T | undefined> {
  try {
    return await op;
  } catch (err) {
    if (isErrno(err, 'ENOENT')) return undefined;
    throw err;
  }
}

export function isErrno(err: unknown, code: string): boolean {
  return typeof err === 'object' && err !== null && (err as NodeJS.ErrnoException).code === code;
}
