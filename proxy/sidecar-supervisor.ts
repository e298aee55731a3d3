// `router` runs `router-billing` as its child when billing is on (the primary process when there are
// several workers): restarted when it dies under the workers' restart policy (common/restart-policy.ts),
// stopped with the gateway, and up once it answers /healthz on its listen address. Its state feeds
// /readyz and the webhook pass-through. It is never given up on: the gateway serves without it (events
// wait in the outbox), so it is tried again every 5 s at most for as long as the gateway runs.

import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { get as httpGet } from 'node:http';
import { setPriority } from 'node:os';
import { fileURLToPath } from 'node:url';
import type { Logger } from 'pino';
import type { ListenAddress } from '../common/config-types.ts';
import { SUPERVISED_ENV } from '../common/internal-notify.ts';
import { keptCrashes, restartDelayMs } from '../common/restart-policy.ts';
import type { SidecarTracker } from './sidecar-status.ts';

/** Niceness of the supervised sidecar: ROUTER_SIDECAR_NICE, 0 (same as the gateway) to 19 (default). */
function sidecarNice(env: Record<string, string | undefined>): number {
  const n = Number(env.ROUTER_SIDECAR_NICE ?? 19);
  return Number.isInteger(n) && n >= 0 && n <= 19 ? n : 19;
}

/**
 * Extra node flags for the supervised sidecar: ROUTER_SIDECAR_NODE_FLAGS, space-separated (diagnostics,
 * e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`; NODE_OPTIONS refuses --cpu-prof).
 */
function sidecarNodeFlags(env: Record<string, string | undefined>): string[] {
  return (env.ROUTER_SIDECAR_NODE_FLAGS ?? '').split(' ').filter((f) => f !== '');
}

/**
 * The sidecar's CPU policy: ROUTER_SIDECAR_SCHED=idle (default) runs it under SCHED_IDLE through
 * util-linux `chrt` when present: the kernel then preempts it at once whenever the gateway wants a core,
 * where a nice-19 task may still finish its time slice (milliseconds) first. `normal` keeps only the
 * niceness. Either way delivery uses CPU the gateway does not need, and a gateway pegged at 100% of every
 * core lets the outbox grow until load eases.
 */
export function sidecarLauncher(env: Record<string, string | undefined>): string[] {
  if ((env.ROUTER_SIDECAR_SCHED ?? 'idle') !== 'idle') return [];
  for (const chrt of ['/usr/bin/chrt', '/bin/chrt']) if (existsSync(chrt)) return [chrt, '--idle', '0'];
  return [];
}

/** V8 flags of the sidecar, as bin/router-billing.js and router-billing.service give them. */
export const SIDECAR_V8_FLAGS: readonly string[] = ['--max-semi-space-size=8'];

/** How often a starting sidecar is asked whether it listens yet; less often once it is late. */
const SIDECAR_PROBE_INTERVAL_MS = 20;
const SIDECAR_LATE_PROBE_INTERVAL_MS = 1000;
const SIDECAR_LATE_AFTER_MS = 5000;

const SIDECAR_MAIN = fileURLToPath(new URL('../bin/sidecar-main.ts', import.meta.url));

/** Run `router-billing` as a child; restart it under the restart policy when it dies; stop it on close. */
export function superviseSidecar(
  configFile: string,
  log: Logger,
  env: Record<string, string | undefined> | undefined,
  status: SidecarTracker,
  listen: () => ListenAddress,
): { stop(): Promise<void> } {
  let child: ChildProcess | undefined;
  let stopping = false;
  let crashes: number[] = [];
  let timer: NodeJS.Timeout | undefined;
  const start = () => {
    const flags = [...SIDECAR_V8_FLAGS, ...sidecarNodeFlags(env ?? process.env)];
    const [launcher, ...launcherArgs] = [...sidecarLauncher(env ?? process.env), process.execPath];
    // stdin is a pipe the gateway never writes to: when the gateway dies, even by SIGKILL, the pipe
    // closes and the sidecar stops (SUPERVISED_ENV), instead of living on as an orphan that holds the
    // billing port and keeps the next gateway's sidecar from starting.
    child = spawn(launcher, [...launcherArgs, ...flags, SIDECAR_MAIN, '-c', configFile], {
      stdio: ['pipe', 'inherit', 'inherit'],
      env: { ...(env ?? process.env), [SUPERVISED_ENV]: '1' } as NodeJS.ProcessEnv,
    });
    // Delivery is asynchronous by design: under CPU contention it yields to serving requests (the
    // outbox is durable, so a slower drain loses nothing) and catches up when load eases. Watch the
    // queue depth: a gateway pegged at 100% for long lets the backlog grow.
    if (child.pid !== undefined) {
      try {
        setPriority(child.pid, sidecarNice(env ?? process.env));
      } catch {
        // not permitted here: run at the same priority
      }
    }
    status.set('starting');
    awaitListening(child);
    child.once('exit', (code, signal) => {
      child = undefined;
      status.set('down');
      if (stopping) return;
      const now = Date.now();
      crashes = keptCrashes([...crashes, now], now);
      const delay = restartDelayMs(crashes, now);
      log.error({ code, signal, restartInMs: delay }, 'billing sidecar exited; restarting');
      timer = setTimeout(start, delay);
    });
  };
  // Up once it answers /healthz on its listen address: it listens only when it can take webhooks.
  const awaitListening = (proc: ChildProcess) => {
    const spawned = Date.now();
    const attempt = () => {
      if (stopping || child !== proc) return;
      let settled = false;
      const again = () => {
        if (settled) return;
        settled = true;
        if (stopping || child !== proc) return;
        const late = Date.now() - spawned > SIDECAR_LATE_AFTER_MS;
        setTimeout(attempt, late ? SIDECAR_LATE_PROBE_INTERVAL_MS : SIDECAR_PROBE_INTERVAL_MS);
      };
      const { host, port } = listen();
      const probe = httpGet({ host, port, path: '/healthz', agent: false, timeout: 1000 }, (res) => {
        res.resume();
        if (res.statusCode !== 200) return again();
        settled = true;
        if (stopping || child !== proc) return;
        status.set('up');
        log.info({ pid: proc.pid }, 'billing sidecar up');
      });
      probe.on('error', again);
      probe.on('timeout', () => probe.destroy());
    };
    attempt();
  };
  start();
  return {
    stop() {
      stopping = true;
      if (timer !== undefined) clearTimeout(timer);
      const c = child;
      if (c === undefined) return Promise.resolve();
      return new Promise((resolve) => {
        c.once('exit', () => resolve());
        c.kill('SIGTERM');
      });
    },
  };
}
