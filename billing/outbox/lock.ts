// A pid lock file: one owner process per role (writer or reader) and outbox directory. Created with
// O_EXCL so two live processes cannot both hold it. The file holds the owner's pid and its start time
// (field 22 of /proc/<pid>/stat), so a holder is alive only while that pid exists, is not a zombie and
// started at that time: a process killed with -9 and not yet reaped, or a pid reused by another
// process, never blocks the next owner. A holder that looks alive is asked again for a short while
// before giving up (a process that is exiting releases or loses the lock within moments). Without /proc
// (not Linux) only the pid is checked. The check is only meaningful on one host, as is the outbox.

import { open, readFile, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { backoffDelay } from '../../common/backoff.ts';
import { ifExists, isErrno } from '../../common/durable-fs.ts';

export class OutboxLockedError extends Error {
  readonly code = 'OUTBOX_LOCKED';
  readonly pid: number;
  constructor(path: string, role: string, pid: number) {
    super(
      `outbox lock ${path} is held by live process ${pid}: only one ${role} may use an outbox directory ` +
        '(gateways of one host share billing.outbox_dir through slots; one sidecar delivers them all)',
    );
    this.name = 'OutboxLockedError';
    this.pid = pid;
  }
}

export interface PidLock {
  readonly path: string;
  release(): Promise<void>;
}

export interface PidLockOptions {
  /** How long a holder that looks alive is waited for (default 2000 ms). */
  waitMs?: number;
}

interface Holder {
  pid: number;
  /** /proc start time in clock ticks since boot; undefined in a lock written without it. */
  startTime: number | undefined;
}

export async function acquirePidLock(
  dir: string,
  name: string,
  role: string,
  opts: PidLockOptions = {},
): Promise<PidLock> {
  const path = join(dir, name);
  const self = await ownIdentity();
  const deadline = Date.now() + (opts.waitMs ?? 2000);
  let waits = 0;
  for (;;) {
    try {
      const fh = await open(path, 'wx');
      try {
        await fh.writeFile(`${self}\n`);
        await fh.sync();
      } finally {
        await fh.close();
      }
      return { path, release: () => releaseLock(path) };
    } catch (err) {
      if (!isErrno(err, 'EEXIST')) throw err;
    }
    const holder = await readHolder(path);
    if (holder !== undefined && holder.pid === process.pid)
      throw new OutboxLockedError(path, role, holder.pid);
    if (holder !== undefined && (await isAlive(holder))) {
      if (Date.now() >= deadline) throw new OutboxLockedError(path, role, holder.pid);
      await delay(backoffDelay(++waits, 10, 200));
      continue;
    }
    // Stale (dead, zombie or recycled owner, or unreadable): take it over.
    try {
      await unlink(path);
    } catch (err) {
      if (!isErrno(err, 'ENOENT')) throw err;
    }
  }
}

/** `<pid> <start time>`, or just the pid where /proc is not available. */
async function ownIdentity(): Promise<string> {
  const stat = await procStat(process.pid);
  return stat === undefined ? String(process.pid) : `${process.pid} ${stat.startTime}`;
}

async function readHolder(path: string): Promise<Holder | undefined> {
  const text = await ifExists(readFile(path, 'utf8'));
  if (text === undefined) return undefined;
  const [pidText, startText] = text.trim().split(/\s+/);
  const pid = Number(pidText);
  if (!Number.isSafeInteger(pid) || pid <= 0) return undefined;
  const startTime = startText === undefined ? undefined : Number(startText);
  return { pid, startTime: Number.isSafeInteger(startTime) ? startTime : undefined };
}

interface ProcStat {
  state: string;
  startTime: number;
}

/** State and start time of a process from /proc; undefined when it does not exist (or no /proc). */
export async function procStat(pid: number): Promise<ProcStat | undefined> {
  let text: string;
  try {
    text = await readFile(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // The command name (field 2) is in parentheses and may itself hold spaces or parentheses.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  // fields[0] is field 3 (state); field 22 (starttime) is fields[19].
  const startTime = Number(fields[19]);
  if (fields[0] === undefined || !Number.isSafeInteger(startTime)) return undefined;
  return { state: fields[0], startTime };
}

let procAvailable: boolean | undefined;

async function isAlive(holder: Holder): Promise<boolean> {
  procAvailable ??= (await procStat(process.pid)) !== undefined;
  if (!procAvailable) return signalable(holder.pid);
  const stat = await procStat(holder.pid);
  if (stat === undefined) return false;
  // Z: exited, not yet reaped by its parent; X: being torn down.
  if (stat.state === 'Z' || stat.state === 'X') return false;
  return holder.startTime === undefined || holder.startTime === stat.startTime;
}

function signalable(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists but belongs to someone else.
    return isErrno(err, 'EPERM');
  }
}

async function releaseLock(path: string): Promise<void> {
  if ((await readHolder(path))?.pid !== process.pid) return;
  try {
    await unlink(path);
  } catch (err) {
    if (!isErrno(err, 'ENOENT')) throw err;
  }
}
