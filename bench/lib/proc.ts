// Child processes of the benchmark (simulators, gateways, nginx, Portkey, redis) and their resource use,
// read from /proc so the measurement costs the measured process nothing.

import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { closeSync, fstatSync, openSync, readFileSync, readSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { getPriority, setPriority } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';

const OUTPUT_KEEP = 16 * 1024;

export interface Service {
  readonly name: string;
  readonly pid: number;
  readonly child: ChildProcess;
  /** Last bytes of stdout + stderr, for error reports. */
  output(): string;
  alive(): boolean;
  /** SIGTERM, then SIGKILL after `graceMs`. Resolves once the process has exited. */
  stop(graceMs?: number): Promise<void>;
}

export interface StartServiceOptions {
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** stdout and stderr go to this file (not a pipe, so the bench reads nothing while it measures). */
  logFile: string;
}

function tail(file: string, bytes: number): string {
  try {
    const fd = openSync(file, 'r');
    try {
      const size = fstatSync(fd).size;
      const start = Math.max(0, size - bytes);
      const buf = Buffer.alloc(size - start);
      readSync(fd, buf, 0, buf.length, start);
      return buf.toString('utf8');
    } finally {
      closeSync(fd);
    }
  } catch {
    return '';
  }
}

export function startService(
  name: string,
  command: string,
  args: readonly string[],
  opts: StartServiceOptions,
): Service {
  const fd = openSync(opts.logFile, 'a');
  const child = spawn(command, args, {
    env: opts.env ?? process.env,
    cwd: opts.cwd,
    stdio: ['ignore', fd, fd],
  });
  closeSync(fd);
  let output = '';
  let exited = false;
  const exit = new Promise<void>((resolve) => {
    child.once('exit', () => {
      exited = true;
      resolve();
    });
    child.once('error', (err) => {
      output += `\nspawn error: ${err.message}`;
      exited = true;
      resolve();
    });
  });
  if (child.pid === undefined) exited = true;
  return {
    name,
    pid: child.pid ?? -1,
    child,
    output: () => tail(opts.logFile, OUTPUT_KEEP) + output,
    alive: () => !exited,
    async stop(graceMs = 8000) {
      if (exited) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await exit;
      clearTimeout(timer);
    },
  };
}

/** A port that was free a moment ago (bind port 0, read it, close). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/**
 * Polls `url` until it answers anything at all; fails early when the service exits. The default wait is
 * long: on a loaded machine a simulator took over 20 s to answer.
 */
export async function waitForHttp(url: string, service: Service, timeoutMs = 90_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (!service.alive()) {
      throw new Error(`${service.name} exited during start-up:\n${service.output().trim().slice(-2000)}`);
    }
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(1000) });
      await res.arrayBuffer();
      return;
    } catch {
      await sleep(100);
    }
  }
  throw new Error(
    `${service.name} did not answer ${url} within ${timeoutMs} ms:\n${service.output().slice(-2000)}`,
  );
}

let clockTicks: number | undefined;
function ticksPerSecond(): number {
  if (clockTicks === undefined) {
    try {
      clockTicks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      clockTicks = 100;
    }
  }
  return clockTicks;
}

interface ProcStat {
  ppid: number;
  cpuTicks: number;
}

async function readStat(pid: number): Promise<ProcStat | undefined> {
  try {
    const text = await readFile(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name, which may itself contain spaces and parentheses.
    const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return { ppid: Number(rest[1]), cpuTicks: Number(rest[11]) + Number(rest[12]) };
  } catch {
    return undefined;
  }
}

async function readStatusKb(pid: number, field: 'VmRSS' | 'VmHWM'): Promise<number> {
  try {
    const text = await readFile(`/proc/${pid}/status`, 'utf8');
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text);
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

/**
 * Sets the nice value of every thread of `pid` (on Linux each thread has its own; threads started later
 * inherit their creator's) and resolves to what undoes it, or to undefined when this process may not.
 */
export async function reniceThreads(pid: number, nice: number): Promise<(() => void) | undefined> {
  const before: [number, number][] = [];
  const undo = () => {
    for (const [tid, value] of before) {
      try {
        setPriority(tid, value);
      } catch {
        // the thread has ended
      }
    }
  };
  try {
    for (const entry of await readdir(`/proc/${pid}/task`)) {
      const tid = Number(entry);
      before.push([tid, getPriority(tid)]);
      setPriority(tid, nice);
    }
  } catch {
    undo();
    return undefined;
  }
  return undo;
}

/** Cumulative milliseconds one thread has run and has waited for a CPU while runnable (schedstat). */
export function threadSchedMs(path: string): { runMs: number; waitMs: number } | undefined {
  try {
    const [run, wait] = readFileSync(path, 'latin1').split(' ');
    return { runMs: Number(run) / 1e6, waitMs: Number(wait) / 1e6 };
  } catch {
    return undefined;
  }
}

/** `root` and all its descendants (nginx workers, the gateway's billing sidecar). */
export async function processTree(root: number): Promise<number[]> {
  const parents = new Map<number, number>();
  for (const entry of await readdir('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid)) continue;
    const stat = await readStat(pid);
    if (stat) parents.set(pid, stat.ppid);
  }
  const tree = [root];
  for (let i = 0; i < tree.length; i++) {
    for (const [pid, ppid] of parents) if (ppid === tree[i]) tree.push(pid);
  }
  return tree;
}

export interface ResourceUse {
  /** Highest resident set size seen while sampling, summed over the process tree, in MB. */
  peakRssMb: number;
  /** RSS at the end of the window, MB. */
  endRssMb: number;
  /** CPU time over the window as a percentage of one core (200 = both cores of a 2-core machine). */
  cpuPercent: number;
  /** Highest RSS of the root process over its whole life (VmHWM), MB. */
  rootHwmMb: number;
}

export interface ResourceMonitor {
  stop(): Promise<ResourceUse>;
}

/** Samples the tree under `root` every `intervalMs` until stopped. */
export async function monitorResources(root: number, intervalMs = 200): Promise<ResourceMonitor> {
  const pids = await processTree(root);
  const cpuStart = await treeCpuTicks(pids);
  const started = performance.now();
  let peakKb = 0;
  let lastKb = 0;
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      let kb = 0;
      for (const pid of pids) kb += await readStatusKb(pid, 'VmRSS');
      lastKb = kb;
      if (kb > peakKb) peakKb = kb;
      await sleep(intervalMs);
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
      const wallS = (performance.now() - started) / 1000;
      const cpuEnd = await treeCpuTicks(pids);
      return {
        peakRssMb: round(peakKb / 1024, 1),
        endRssMb: round(lastKb / 1024, 1),
        cpuPercent: round(((cpuEnd - cpuStart) / ticksPerSecond() / wallS) * 100, 1),
        rootHwmMb: round((await readStatusKb(root, 'VmHWM')) / 1024, 1),
      };
    },
  };
}

async function treeCpuTicks(pids: readonly number[]): Promise<number> {
  let ticks = 0;
  for (const pid of pids) ticks += (await readStat(pid))?.cpuTicks ?? 0;
  return ticks;
}

export async function rssMb(pid: number): Promise<number> {
  return round((await readStatusKb(pid, 'VmRSS')) / 1024, 1);
}

/** Current RSS of `root` and its descendants, MB. */
export async function treeRssMb(root: number): Promise<number> {
  let kb = 0;
  for (const pid of await processTree(root)) kb += await readStatusKb(pid, 'VmRSS');
  return round(kb / 1024, 1);
}

export async function hwmMb(pid: number): Promise<number> {
  return round((await readStatusKb(pid, 'VmHWM')) / 1024, 1);
}

export function round(n: number, digits = 3): number {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}

/**
 * Runs `node <script> <options as JSON>`, a load client in a process of its own, and resolves with the
 * JSON object its last stdout line holds; `what` names it in the error when it fails.
 */
export function runJsonChild<T>(script: string, options: unknown, what: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [script, JSON.stringify(options)], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
    });
    child.stderr?.on('data', (d: Buffer) => {
      err += d.toString();
    });
    child.once('error', reject);
    child.once('exit', (code) => {
      const line = out.trim().split('\n').pop() ?? '';
      try {
        if (code === 0 && line.startsWith('{')) return resolve(JSON.parse(line) as T);
      } catch {
        // reported below
      }
      reject(
        new Error(
          `${what} exited with ${code}: ${err.slice(-1000)} (stdout ${out.length} bytes: ${out.slice(0, 200)})`,
        ),
      );
    });
  });
}
