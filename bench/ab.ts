// `node bench/ab.ts --base <checkout> [--mode off|billing|outbox|redis|cluster|traced] [--rounds 8] [--seconds 3]
// [--profile <dir>] [--together] [--node-flags '...'] [--processes N] [--sampler S] [--pin] [--warmup 2] [--swap]
// [--fsync-interval-ms n]`: before /
// after for one change; `--modes off,billing` (or any two modes) pairs two modes instead, of this
// checkout or of --base against this one: what billing or the store costs per request. The gateway of another checkout (A, e.g. `git worktree add ../base HEAD~1` with
// node_modules linked) and this checkout's (B) run side by side in front of one upstream simulator, in
// interleaved rounds of chat throughput at c=64 (`--connections`; the order flips every round). Per round: requests/s of
// each, the ratio B/A, and each gateway's CPU time per request (utime + stime of its process from /proc,
// so less sensitive than requests/s to what else the VM's cores are doing). Prints the medians.
// Nothing is written to docs/: this answers "did this change help", `npm run bench` the targets.

import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { availableParallelism, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs, promisify } from 'node:util';
import { Redis } from 'ioredis';
import { throughput } from './lib/load.ts';
import { billed, MODES, type Mode, modeVariant, startModeStores } from './lib/modes.ts';
import { startOtlpSink } from './lib/otlp-sink.ts';
import {
  GATEWAY_V8_FLAGS,
  type Peer,
  startBillingSimProcess,
  startGatewayProcess,
  startUpstreamSimProcess,
  type Workspace,
} from './lib/peers.ts';
import { chatTarget } from './lib/requests.ts';

const run = promisify(execFile);
const REPO = fileURLToPath(new URL('..', import.meta.url));

/** CPU time of a process so far, user and system, in clock ticks (1/100 s on Linux). */
async function cpuTicks(pid: number): Promise<{ user: number; system: number }> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { user: Number(fields[11]), system: Number(fields[12]) };
}

/**
 * CPU ticks per thread kind so far: the main thread, V8's helpers (GC, compiler), libuv's pool; and the
 * main thread's system time alone.
 */
async function threadTicks(pid: number): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const tid of await readdir(`/proc/${pid}/task`).catch(() => [] as string[])) {
    const stat = await readFile(`/proc/${pid}/task/${tid}/stat`, 'utf8').catch(() => '');
    if (stat === '') continue;
    const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    const kind =
      Number(tid) === pid
        ? 'main'
        : name.startsWith('libuv')
          ? 'libuv'
          : name.startsWith('V8')
            ? 'v8'
            : 'other';
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    out.set(kind, (out.get(kind) ?? 0) + Number(fields[11]) + Number(fields[12]));
    // The main thread's kernel share (its writes, reads, epoll) apart: included in `main` above.
    if (kind === 'main') out.set('main system', Number(fields[12]));
  }
  return out;
}

/** Every thread of `pid` (and what it starts later) on these CPUs. */
async function pin(pid: number, cpus: string): Promise<void> {
  await run('taskset', ['--all-tasks', '--cpu-list', '--pid', cpus, String(pid)]);
}

function quantile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * q))] ?? Number.NaN;
}

function median(values: number[]): number {
  return quantile(values, 0.5);
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      base: { type: 'string' },
      mode: { type: 'string', default: 'off' },
      modes: { type: 'string' },
      rounds: { type: 'string', default: '8' },
      seconds: { type: 'string', default: '3' },
      // A CPU profile of each gateway into this folder (`node bench/top-profile.ts <file>` reads one).
      profile: { type: 'string' },
      // Load both gateways at once (c=32 each) instead of one after the other: whatever else the VM's
      // cores are doing then weighs on both alike, which pairs the rounds more tightly.
      together: { type: 'boolean', default: false },
      // More V8 flags for both gateways, e.g. '--min-semi-space-size=16'.
      'node-flags': { type: 'string', default: '' },
      // Fresh gateways this many times over the rounds (each pair warmed up): samples the processes too.
      processes: { type: 'string', default: '1' },
      // OTEL_TRACES_SAMPLER of the traced gateway (always_on; always_off measures the unsampled path).
      sampler: { type: 'string' },
      // The gateways on CPU 0, everything else (load, simulators, Redis, sidecars) on the others: what
      // else runs then neither takes the gateway's core nor evicts its caches, and CPU per request is
      // the gateway's own.
      pin: { type: 'boolean', default: false },
      // Seconds of load on each new gateway before its rounds: its compiled code settles over the first
      // seconds, and a short warm-up leaves that trend in the first rounds.
      warmup: { type: 'string', default: '2' },
      // Requests in flight: 64 saturates the gateway; 1 shows a request alone in its event-loop turn.
      connections: { type: 'string', default: '64' },
      // In every other pair of processes the two trade places: the one started first, named `a`, runs
      // B's mode and checkout. Whichever place reads dearer (docs/benchmarks.md section 10: the second
      // gateway did, by a few percent) then weighs on both sides alike; use an even --processes.
      swap: { type: 'boolean', default: false },
      // billing.outbox_fsync_interval_ms of both gateways: how much of billing's cost is the outbox's sync.
      'fsync-interval-ms': { type: 'string' },
    },
  });
  const modes = (values.modes ?? `${values.mode},${values.mode}`).split(',') as Mode[];
  if (
    (values.base === undefined && values.modes === undefined) ||
    modes.length !== 2 ||
    !modes.every((m) => MODES.includes(m))
  ) {
    console.error(
      'usage: node bench/ab.ts --base <checkout> [--mode off|billing|outbox|redis|cluster|traced] [--rounds 8] [--seconds 3]\n' +
        '       node bench/ab.ts --modes <a>,<b> [--base <checkout>] [--rounds 8] [--seconds 3]   (e.g. off,billing)',
    );
    process.exit(2);
  }
  const rounds = Number(values.rounds);
  const connections = Number(values.connections);
  const seconds = Number(values.seconds);
  const tmp = await mkdtemp(join(tmpdir(), 'llm-router-ab-'));
  const workspace = async (repo: string, name: string): Promise<Workspace> => {
    const dir = join(tmp, name);
    await mkdir(dir, { recursive: true });
    const profile =
      values.profile === undefined ? [] : ['--cpu-prof', `--cpu-prof-dir=${resolve(values.profile, name)}`];
    return {
      repo,
      tmp: dir,
      gatewayNodeFlags: () => [
        ...GATEWAY_V8_FLAGS,
        ...values['node-flags'].split(' ').filter(Boolean),
        ...profile,
      ],
      sidecarNodeFlags: () => [],
    };
  };
  if (values.pin) await pin(process.pid, `1-${availableParallelism() - 1}`);
  const shared = await workspace(REPO, 'shared');
  const stops: (() => Promise<void>)[] = [];
  try {
    const up = await startUpstreamSimProcess(shared);
    stops.push(() => up.service.stop());
    let billingUrl: string | undefined;
    if (modes.some(billed)) {
      const billing = await startBillingSimProcess(shared);
      stops.push(() => billing.service.stop());
      billingUrl = billing.url;
    }
    let tracesUrl: string | undefined;
    if (modes.includes('traced')) tracesUrl = `${(await startOtlpSink()).url}/v1/traces`;
    const stores = await startModeStores(shared, modes, stops);
    // Scripts the store ran per request (the gateways run one at a time, so each round's are its own).
    // Commands a script runs count in INFO commandstats too: EVALSHA is only ever sent by a gateway.
    const monitor = stores.redisUrl === undefined ? undefined : new Redis(stores.redisUrl);
    if (monitor !== undefined) stops.push(async () => void monitor.disconnect());
    const storeCalls = async (): Promise<number> => {
      if (monitor === undefined) return 0;
      const info = await monitor.info('commandstats');
      return Number(/^cmdstat_evalsha:calls=(\d+)/m.exec(info)?.[1] ?? 0);
    };
    const commands: [number[], number[]] = [[], []];
    const running = new Set<Peer>();
    stops.push(async () => {
      for (const peer of running) await peer.service.stop();
    });
    const start = async (name: 'a' | 'b', pair: number, repo: string, mode: Mode): Promise<Peer> => {
      // Each in its own folder, so each has its own outbox; in Redis mode each its own key prefix.
      const peer = await startGatewayProcess(
        await workspace(repo, pair === 0 ? name : `${name}${pair}`),
        up.url,
        {
          ...modeVariant(mode, name, { ...stores, billingUrl, tracesUrl, tracesSampler: values.sampler }),
          ...(values['fsync-interval-ms'] === undefined
            ? {}
            : { outboxFsyncIntervalMs: Number(values['fsync-interval-ms']) }),
        },
      );
      running.add(peer);
      if (values.pin) await pin(peer.service.pid, '0');
      return peer;
    };
    console.log(`A: ${values.base ?? 'this checkout'}, ${modes[0]}; B: this checkout, ${modes[1]}`);
    // Every request served, the warm-ups' too: a profile covers them all.
    const served: [number, number] = [0, 0];
    let gateways!: [Peer, Peer];
    let targets!: readonly [ReturnType<typeof chatTarget>, ReturnType<typeof chatTarget>];
    // A gateway process settles at its own level of CPU per request (its compiled code, its heap), which
    // can differ by more than the effect measured: new processes for each pair of rounds sample that.
    const processes = Math.max(1, Math.min(rounds, Number(values.processes)));
    const pairAt = (round: number) => Math.floor((round * processes) / rounds);
    const pairRatios: number[][] = Array.from({ length: processes }, () => []);
    const swapped = (pair: number) => values.swap && pair % 2 === 1;
    const newPair = async (pair: number): Promise<void> => {
      for (const peer of running) await peer.service.stop();
      running.clear();
      const sides: [string, Mode][] = [
        [resolve(values.base ?? REPO), modes[0]!],
        [REPO, modes[1]!],
      ];
      if (swapped(pair)) sides.reverse();
      const first = await start('a', pair, ...sides[0]!);
      const second = await start('b', pair, ...sides[1]!);
      gateways = swapped(pair) ? [second, first] : [first, second];
      targets = [chatTarget(gateways[0], up.url), chatTarget(gateways[1], up.url)];
      for (const i of [0, 1] as const)
        served[i] += (await throughput(targets[i], connections, Number(values.warmup))).total2xx;
    };
    const ratios: number[] = [];
    const cpu: [number[], number[]] = [[], []];
    // The kernel's share (system time): sockets, files, wake-ups.
    const sys: [number[], number[]] = [[], []];
    // Per thread kind, µs per request, every round: which thread a difference is on.
    const threads: [Map<string, number[]>, Map<string, number[]>] = [new Map(), new Map()];
    for (let round = 0; round < rounds; round++) {
      if (round === 0 || pairAt(round) !== pairAt(round - 1)) await newPair(pairAt(round));
      const rps: [number, number] = [0, 0];
      const roundCpu: [number, number] = [0, 0];
      const order: readonly (0 | 1)[] = round % 2 === 0 ? [0, 1] : [1, 0];
      const measure = async (i: 0 | 1, connections: number): Promise<void> => {
        const pid = gateways[i].service.pid;
        const [before, threadsBefore] = [await cpuTicks(pid), await threadTicks(pid)];
        const callsBefore = await storeCalls();
        const r = await throughput(targets[i], connections, seconds);
        const [after, threadsAfter] = [await cpuTicks(pid), await threadTicks(pid)];
        commands[i].push(((await storeCalls()) - callsBefore) / Math.max(1, r.total2xx));
        for (const [kind, ticks] of threadsAfter) {
          const list = threads[i].get(kind) ?? [];
          list.push(((ticks - (threadsBefore.get(kind) ?? 0)) * 10_000) / Math.max(1, r.total2xx));
          threads[i].set(kind, list);
        }
        const ticks = after.user + after.system - before.user - before.system;
        rps[i] = r.requestsPerSec;
        served[i] += r.total2xx;
        roundCpu[i] = (ticks * 10_000) / Math.max(1, r.total2xx); // µs per request
        cpu[i].push(roundCpu[i]);
        sys[i].push(((after.system - before.system) * 10_000) / Math.max(1, r.total2xx));
      };
      if (values.together) await Promise.all([measure(0, 32), measure(1, 32)]);
      else for (const i of order) await measure(i, connections);
      ratios.push(rps[1] / rps[0]);
      pairRatios[pairAt(round)]!.push(roundCpu[1] / roundCpu[0]);
      console.log(
        `round ${round + 1}: A ${Math.round(rps[0])} req/s, B ${Math.round(rps[1])} req/s, B/A ${(rps[1] / rps[0]).toFixed(3)}; CPU per request A ${roundCpu[0].toFixed(1)} µs, B ${roundCpu[1].toFixed(1)} µs`,
      );
    }
    // Each round's B over A, paired: steadier than the ratio of the medians when the machine drifts.
    const cpuRatios = cpu[1].map((b, i) => b / cpu[0][i]!);
    console.log(
      `median B/A ${median(ratios).toFixed(3)}; median CPU per request A ${median(cpu[0]).toFixed(1)} µs, B ${median(cpu[1]).toFixed(1)} µs (system: A ${median(sys[0]).toFixed(1)}, B ${median(sys[1]).toFixed(1)} µs); median of the rounds' CPU B/A ${median(cpuRatios).toFixed(3)} (quartiles ${quantile(cpuRatios, 0.25).toFixed(3)}–${quantile(cpuRatios, 0.75).toFixed(3)})`,
    );
    const split = (i: 0 | 1) =>
      [...threads[i]].map(([kind, list]) => `${kind} ${median(list).toFixed(1)}`).join(', ');
    if (processes > 1)
      console.log(
        `median CPU B/A of each pair of processes: ${pairRatios.map((r, pair) => `${median(r).toFixed(3)}${swapped(pair) ? ' (swapped)' : ''}`).join(', ')}`,
      );
    console.log(`requests served: A ${served[0]}, B ${served[1]}`);
    if (monitor !== undefined && !values.together)
      console.log(
        `EVALSHA per request (median): A ${median(commands[0]).toFixed(3)}, B ${median(commands[1]).toFixed(3)}`,
      );
    console.log(`median µs per request by thread: A ${split(0)}; B ${split(1)}`);
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
    await rm(tmp, { recursive: true, force: true });
  }
}

await main();
