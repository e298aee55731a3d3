// Noticing that whoever started this process is gone, however it went. `npm start` runs the script as
// `sh -c "node scripts/local-stack.ts"` with its own stdio, so no pipe closes when npm ends: on SIGTERM
// npm passes the signal to that shell only, and dash dies of it without passing it on (this process is
// re-parented); npm killed with SIGKILL leaves the shell waiting on this process (the shell is
// re-parented). Either way a link of the chain this process -> shell(s) npm started -> npm changes its
// parent, so that chain is what is watched (Linux reads it from /proc; elsewhere only this process's
// own parent is watched).

import { readFileSync } from 'node:fs';

/** A process and the parent it had when the watch began. */
export interface ParentLink {
  readonly pid: number;
  readonly parent: number;
}

/** The parent of `pid` as /proc tells it, or undefined (gone, not permitted, not Linux). */
export function parentOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses, the last ')' ends it.
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    return Number.isInteger(ppid) ? ppid : undefined;
  } catch {
    return undefined;
  }
}

/** True when `pid` was started by npm for this very script (it carries the script in its environment). */
function startedForScript(pid: number, script: string): boolean {
  try {
    return readFileSync(`/proc/${pid}/environ`, 'utf8')
      .split('\0')
      .includes(`npm_lifecycle_script=${script}`);
  } catch {
    return false;
  }
}

/**
 * This process and its parent; when npm runs it (npm_lifecycle_script is set), also each process npm
 * started for the script (the shell) and its parent, up to npm itself.
 */
export function launcherChain(env: Record<string, string | undefined> = process.env): ParentLink[] {
  const links: ParentLink[] = [{ pid: process.pid, parent: process.ppid }];
  const script = env.npm_lifecycle_script;
  if (script === undefined) return links;
  let pid = process.ppid;
  // A few levels at most: npm -> sh -> node, or a shell script that did not exec.
  for (let depth = 0; depth < 4 && pid > 1 && startedForScript(pid, script); depth++) {
    const parent = parentOf(pid);
    if (parent === undefined || parent <= 1) break;
    links.push({ pid, parent });
    pid = parent;
  }
  return links;
}

/**
 * Calls `onGone` once, when a link of the launcher chain breaks (a process of it died and its child was
 * re-parented). The check reads a few /proc files every `intervalMs` and never keeps the process alive.
 * Returns a function that ends the watch.
 */
export function watchLauncher(onGone: () => void, intervalMs = 200): () => void {
  const links = launcherChain();
  const timer = setInterval(() => {
    const broken = links.some((l) => (l.pid === process.pid ? process.ppid : parentOf(l.pid)) !== l.parent);
    if (!broken) return;
    clearInterval(timer);
    onGone();
  }, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
