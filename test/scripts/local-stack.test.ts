// `npm start` stops cleanly however it is stopped, and a port in use is one line naming its variable.
// Each case runs the real `npm start` (npm -> sh -> node scripts/local-stack.ts -> router-billing) on free
// ports with its own state folder. The processes are those under npm once the stack printed its ready
// text; the case ends when npm has exited and every process that held its output pipes has closed them
// (the 'close' event: the stack, its shell and its sidecar inherit them); then none of those processes
// may be left (each is given the moment it takes to finish the exit that closed its pipes) and every port
// must bind.

import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, afterEach, before, test } from 'node:test';
import { freePort } from '../support/redis.ts';
import { ROOT } from '../support/stack.ts';

const READY = 'Ctrl-C stops everything';

interface Proc {
  readonly pid: number;
  /** Start time in clock ticks since boot: tells a pid reused later from the process seen. */
  readonly started: string;
  readonly cmdline: string;
}

function stat(pid: number): { ppid: number; state: string; started: string } | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return { state: fields[0]!, ppid: Number(fields[1]), started: fields[19]! };
  } catch {
    return undefined;
  }
}

/** Every process whose chain of parents leads to `root`, read from /proc. */
function descendants(root: number): Proc[] {
  const parents = new Map<number, number[]>();
  for (const name of readdirSync('/proc')) {
    const pid = Number(name);
    if (!Number.isInteger(pid)) continue;
    const s = stat(pid);
    if (s === undefined) continue;
    parents.set(s.ppid, [...(parents.get(s.ppid) ?? []), pid]);
  }
  const found: Proc[] = [];
  const queue = [...(parents.get(root) ?? [])];
  for (let pid = queue.shift(); pid !== undefined; pid = queue.shift()) {
    const s = stat(pid);
    let cmdline = '';
    try {
      cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
    } catch {
      continue;
    }
    if (s !== undefined) found.push({ pid, started: s.started, cmdline });
    queue.push(...(parents.get(pid) ?? []));
  }
  return found;
}

/** Still running: the same process (not a reused pid) and not a zombie waiting to be reaped. */
function alive(p: Proc): boolean {
  const s = stat(p.pid);
  return s !== undefined && s.started === p.started && s.state !== 'Z';
}

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen({ port, host: '127.0.0.1', exclusive: true }, () => server.close(() => resolve(true)));
  });
}

type Ports = Record<(typeof PORT_VARIABLES)[number], number>;

const PORT_VARIABLES = [
  'ROUTER_LISTEN',
  'ROUTER_BILLING_LISTEN',
  'LOCAL_UPSTREAM_PORT',
  'LOCAL_BILLING_PORT',
  'LOCAL_BILLING_PORTAL_PORT',
] as const;

async function freePorts(): Promise<Ports> {
  const ports: Partial<Ports> = {};
  for (const variable of PORT_VARIABLES) ports[variable] = await freePort();
  return ports as Ports;
}

interface Stack {
  readonly npm: ChildProcess;
  readonly ports: Ports;
  /** stdout and stderr as they came. */
  output(): string;
  stderr(): string;
  /** Resolves once npm exited and its output pipes closed (every process holding them is gone). */
  readonly closed: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

let stateDir: string;
before(async () => {
  stateDir = await mkdtemp(join(tmpdir(), 'router-local-stack-'));
});
after(() => rm(stateDir, { recursive: true, force: true }));

/** Stacks started by the case running now. */
const started: Stack[] = [];
// A case that failed before its stack stopped must not leave the stack running: its processes hold the
// file's output pipes and ports, and the file would not end.
afterEach(() => {
  for (const stack of started.splice(0)) {
    const left = descendants(stack.npm.pid!);
    for (const target of [-stack.npm.pid!, ...left.map((p) => p.pid)]) {
      try {
        process.kill(target, 'SIGKILL');
      } catch {
        // gone already
      }
    }
  }
});

function startNpm(ports: Ports, env: Record<string, string> = {}): Stack {
  const npm = spawn('npm', ['start'], {
    cwd: ROOT,
    // Its own process group, as a terminal's foreground job: Ctrl-C is SIGINT to the whole group.
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...process.env,
      ROUTER_LISTEN: `127.0.0.1:${ports.ROUTER_LISTEN}`,
      ROUTER_BILLING_LISTEN: `127.0.0.1:${ports.ROUTER_BILLING_LISTEN}`,
      LOCAL_UPSTREAM_PORT: String(ports.LOCAL_UPSTREAM_PORT),
      LOCAL_BILLING_PORT: String(ports.LOCAL_BILLING_PORT),
      LOCAL_BILLING_PORTAL_PORT: String(ports.LOCAL_BILLING_PORTAL_PORT),
      LOCAL_STACK_DIR: stateDir,
      ...env,
    },
  });
  let out = '';
  let err = '';
  npm.stdout!.on('data', (c: Buffer) => {
    out += c.toString();
  });
  npm.stderr!.on('data', (c: Buffer) => {
    out += c.toString();
    err += c.toString();
  });
  const closed = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    npm.once('close', (code, signal) => resolve({ code, signal })),
  );
  const stack = { npm, ports, output: () => out, stderr: () => err, closed };
  started.push(stack);
  return stack;
}

/** Waits for the ready text; then the processes under npm: the stack's node and its sidecar among them. */
async function ready(stack: Stack): Promise<Proc[]> {
  await new Promise<void>((resolve, reject) => {
    const check = () => {
      if (!stack.output().includes(READY)) return;
      stack.npm.stdout!.off('data', check);
      resolve();
    };
    stack.npm.stdout!.on('data', check);
    stack.npm.once('exit', (code) =>
      reject(new Error(`npm start exited (${code}) before ready:\n${stack.output()}`)),
    );
    check();
  });
  // A child caught between fork and exec has an empty cmdline: read again until both are named.
  let procs = descendants(stack.npm.pid!);
  const named = (p: Proc[]) =>
    p.some((x) => x.cmdline.includes('scripts/local-stack.ts') && !x.cmdline.startsWith('sh ')) &&
    p.some((x) => x.cmdline.includes('bin/sidecar-main.ts'));
  for (let i = 0; i < 100 && !named(procs); i++) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    procs = descendants(stack.npm.pid!);
  }
  assert.ok(
    procs.some((p) => p.cmdline.includes('scripts/local-stack.ts') && !p.cmdline.startsWith('sh ')),
    `the stack's node is under npm: ${JSON.stringify(procs)}`,
  );
  assert.ok(
    procs.some((p) => p.cmdline.includes('bin/sidecar-main.ts')),
    `the sidecar is under npm: ${JSON.stringify(procs)}`,
  );
  return procs;
}

/** How long a stop may take before the case fails (the gateway's drain has nothing to wait for here). */
const STOP_DEADLINE_MS = 30_000;

/**
 * `stack.closed`, or a failure naming what still runs after STOP_DEADLINE_MS; then its process group
 * (npm's, which every process of the stack keeps) is killed, so a failing case leaves no stack behind.
 */
async function stopped(
  stack: Stack,
  procs: Proc[] = [],
): Promise<{ code: number | null; signal: string | null }> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => resolve('late'), STOP_DEADLINE_MS);
  });
  const result = await Promise.race([stack.closed, deadline]);
  clearTimeout(timer);
  if (result !== 'late') return result;
  const left = [...procs, ...descendants(stack.npm.pid!)].filter(alive);
  try {
    process.kill(-stack.npm.pid!, 'SIGKILL');
  } catch {
    // the group is gone already
  }
  assert.fail(
    `still running ${STOP_DEADLINE_MS} ms after the stop: ${JSON.stringify(left)}\n${stack.output().slice(-2000)}`,
  );
}

/** A process whose output pipes closed has finished its exit by then. */
const EXIT_GRACE_MS = 2000;

/** Nothing is left: every process seen under npm is gone and every port binds; the stack said it stopped. */
async function assertAllGone(
  stack: Stack,
  procs: Proc[],
  opts: { sidecarSignalled?: boolean } = {},
): Promise<void> {
  // The pipes close as the last process ends; the kernel closes a process's files before it turns into a
  // zombie, so the last ones may still be finishing their exit: a short bounded wait for that.
  const until = Date.now() + EXIT_GRACE_MS;
  while (procs.some(alive) && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 10));
  const left = procs.filter(alive);
  assert.deepEqual(left, [], `processes left behind:\n${stack.output().slice(-2000)}`);
  for (const [variable, port] of Object.entries(stack.ports))
    assert.equal(await bindable(port), true, `the port of ${variable} (${port}) is free`);
  const out = stack.output();
  assert.match(out, /Stopping the local stack/);
  assert.match(out, /Local stack stopped\./);
  assert.doesNotMatch(out, /\n\s+at /, 'no stack trace');
  // Ctrl-C reaches the sidecar too (the same process group), which may then end before the gateway
  // stops it: the gateway says it restarts it, and its close ends that.
  if (!opts.sidecarSignalled)
    assert.doesNotMatch(out, /restarting/, 'the sidecar was stopped, not restarted');
}

test('SIGTERM to npm (the natural `kill` of a backgrounded `npm start`): nothing is left', async () => {
  const stack = startNpm(await freePorts());
  const procs = await ready(stack);
  stack.npm.kill('SIGTERM');
  const { code, signal } = await stopped(stack, procs);
  // npm passes the signal to the shell it runs the script in, and ends as that shell does.
  assert.ok(code === 0 || signal === 'SIGTERM' || code === 143, `npm ended: ${code} ${signal}`);
  await assertAllGone(stack, procs);
});

test('Ctrl-C (SIGINT to the foreground process group): nothing is left', async () => {
  const stack = startNpm(await freePorts());
  const procs = await ready(stack);
  process.kill(-stack.npm.pid!, 'SIGINT');
  await stopped(stack, procs);
  await assertAllGone(stack, procs, { sidecarSignalled: true });
  assert.match(stack.output(), /Stopping the local stack \(SIGINT\)/);
});

test('SIGKILL to npm: the stack notices its launcher is gone and stops; nothing is left', async () => {
  const stack = startNpm(await freePorts());
  const procs = await ready(stack);
  stack.npm.kill('SIGKILL');
  const { signal } = await stopped(stack, procs);
  assert.equal(signal, 'SIGKILL');
  await assertAllGone(stack, procs);
  assert.match(stack.output(), /Stopping the local stack \(the npm process that started it is gone\)/);
});

test('SIGTERM to the stack’s node process: it stops, npm exits 0, nothing is left', async () => {
  const stack = startNpm(await freePorts());
  const procs = await ready(stack);
  const node = procs.find((p) => p.cmdline.startsWith('node scripts/local-stack.ts'));
  assert.ok(node, JSON.stringify(procs));
  process.kill(node.pid, 'SIGTERM');
  const { code } = await stopped(stack, procs);
  assert.equal(code, 0, stack.output().slice(-2000));
  await assertAllGone(stack, procs);
  assert.match(stack.output(), /Stopping the local stack \(SIGTERM\)/);
});

/** stderr of npm start without its empty lines. */
function problemLines(stderr: string): string[] {
  return stderr.split('\n').filter((l) => l.trim() !== '');
}

test('a port in use: one line on stderr naming the variable that moves it, exit 1, nothing started', async () => {
  for (const variable of PORT_VARIABLES) {
    const ports = await freePorts();
    const holder = createServer();
    await new Promise<void>((resolve) =>
      holder.listen({ port: ports[variable], host: '127.0.0.1' }, resolve),
    );
    try {
      const stack = startNpm(ports);
      const { code } = await stopped(stack);
      assert.equal(code, 1, `${variable}: ${stack.output()}`);
      const lines = problemLines(stack.stderr());
      assert.equal(lines.length, 1, `${variable}: one line:\n${stack.stderr()}`);
      assert.match(
        lines[0]!,
        new RegExp(`^npm start: 127\\.0\\.0\\.1:${ports[variable]} \\(.+\\) is already in use`),
      );
      assert.match(lines[0]!, new RegExp(`: set ${variable} to a free (port|host:port)$`));
      assert.doesNotMatch(stack.output(), /EADDRINUSE|\n\s+at /);
      assert.ok(!stack.output().includes(READY), `${variable}: never ready`);
      for (const other of PORT_VARIABLES)
        if (other !== variable)
          assert.equal(await bindable(ports[other]), true, `${variable}: ${other} not left bound`);
    } finally {
      await new Promise((resolve) => holder.close(resolve));
    }
  }
});

test('a malformed port variable: one line naming it, exit 2 (a configuration error)', async () => {
  const stack = startNpm(await freePorts(), { LOCAL_BILLING_PORT: 'ninety' });
  const { code } = await stopped(stack);
  assert.equal(code, 2, stack.output());
  assert.deepEqual(problemLines(stack.stderr()), [
    'npm start: LOCAL_BILLING_PORT must be a port number (0-65535), not "ninety"',
  ]);
});
