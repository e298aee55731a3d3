// A pid lock file: one owner process per role (writer or reader) and outbox directory. Created with
// O_EXCL so two live processes cannot both hold it; a lock left by a dead process (kill -9) is taken
// over. Limits: the pid check is only meaningful on one host (the outbox is local disk anyway), and a
// recycled pid of an unrelated live process makes the lock look held: remove the file by hand then.

import { open, readFile, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { isErrno } from './layout.ts';

export class OutboxLockedError extends Error {
  readonly code = 'OUTBOX_LOCKED';
  readonly pid: number;
  constructor(path: string, role: string, pid: number) {
    super(
      `outbox lock ${path} is held by live process ${pid}: only one ${role} may use an outbox directory ` +
        '(give each gateway its own billing.outbox_dir)',
    );
    this.name = 'OutboxLockedError';
    this.pid = pid;
  }
}

export interface PidLock {
  readonly path: string;
  release(): Promise<void>;
}

export async function acquirePidLock(dir: string, name: string, role: string): Promise<PidLock> {
  const path = join(dir, name);
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const fh = await open(path, 'wx');
      try {
        await fh.writeFile(`${process.pid}\n`);
        await fh.sync();
      } finally {
        await fh.close();
      }
      return { path, release: () => releaseLock(path) };
    } catch (err) {
      if (!isErrno(err, 'EEXIST')) throw err;
    }
    const holder = await readLockPid(path);
    if (holder !== undefined && (holder === process.pid || isProcessAlive(holder))) {
      throw new OutboxLockedError(path, role, holder);
    }
    // Stale (dead owner or unreadable): take it over.
    try {
      await unlink(path);
    } catch (err) {
      if (!isErrno(err, 'ENOENT')) throw err;
    }
  }
  throw new Error(`could not acquire outbox lock ${path}`);
}

async function readLockPid(path: string): Promise<number | undefined> {
  try {
    const pid = Number.parseInt((await readFile(path, 'utf8')).trim(), 10);
    return Number.isSafeInteger(pid) && pid > 0 ? pid : undefined;
  } catch (err) {
    if (isErrno(err, 'ENOENT')) return undefined;
    throw err;
  }
}

function isProcessAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists but belongs to someone else.
    return isErrno(err, 'EPERM');
  }
}

async function releaseLock(path: string): Promise<void> {
  if ((await readLockPid(path)) !== process.pid) return;
  try {
    await unlink(path);
  } catch (err) {
    if (!isErrno(err, 'ENOENT')) throw err;
  }
}
