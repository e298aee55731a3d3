// `node bench/instructions.ts [--modes off,billing,redis] [--warmup 4000] [--requests 4000] [--connections 16]
// [--count instructions|syscalls] [--request chat|stream] [--fsync-interval-ms n] [--node-flags '...']
// [--keep <dir>] [--repo <checkout>]`: what billing, the store and tracing cost per request, counted
// instead of timed. With `--count instructions` (the default) each gateway runs under valgrind's callgrind,
// which counts the instructions the process executes (every thread, and the main thread alone; user space
// only) whatever else the machine's cores are doing. Per mode: a warm-up, the idle gateway's own rate (the
// lower of two 10 s windows), then `--requests` chat requests; the count of that window, less the idle
// rate over its length, over the requests; beside it, the main thread's count of that window less libuv's
// timers phase (where the per-second work runs), which needs no idle rate and is the figure to compare on
// a loaded machine. With `--count syscalls` the gateway runs natively and strace
// counts its system calls in the window instead: the kernel's share, which instructions leave out.
// `--repo` runs the gateway (proxy/cli.ts, deploy/config) of another checkout, e.g. a `git worktree` of an
// older commit with node_modules linked, in front of this checkout's simulators.
// docs/benchmarks.md section 10 says how far either can be trusted on this machine.

import { execFile, spawn } from 'node:child_process';
import { cp, mkdir, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs, promisify } from 'node:util';
import autocannon from 'autocannon';
import { autocannonRequest, type HttpTarget } from './lib/load.ts';
import { billed, MODES, type Mode, modeVariant, startModeStores } from './lib/modes.ts';
import { startOtlpSink } from './lib/otlp-sink.ts';
import {
  GATEWAY_V8_FLAGS,
  startBillingSimProcess,
  startGatewayProcess,
  startUpstreamSimProcess,
  type Workspace,
} from './lib/peers.ts';
import { CHAT_MODEL, chatTarget, pacedModel, promptOfSize } from './lib/requests.ts';

const IDLE_MS = 10_000;
const REPO = fileURLToPath(new URL('..', import.meta.url));
const run = promisify(execFile);

/** Exactly `amount` requests (autocannon counts them), failing on any non-2xx. */
async function requests(target: HttpTarget, amount: number, connections: number): Promise<void> {
  const result = await autocannon({
    ...autocannonRequest(target),
    connections,
    amount,
    timeout: 120,
  });
  if (result['2xx'] !== amount) {
    throw new Error(
      `${amount} requests sent, ${result['2xx']} answered 2xx (${result.non2xx} non-2xx, ${result.errors} errors)`,
    );
  }
}

/** The instructions (Ir) of a callgrind dump file: its `totals:` line. */
async function fileTotal(file: string): Promise<number> {
  const text = await readFile(file, 'utf8');
  const line = /^(?:totals|summary): (\d+)/m.exec(text);
  if (line === null) throw new Error(`${file}: no totals line`);
  return Number(line[1]);
}

/** Instructions of every thread, and of the main (JavaScript) thread alone. */
interface Counts {
  all: number;
  main: number;
}

/**
 * Asks callgrind in `pid` for a dump (counts since the previous one) and sums its files: one per thread
 * (`--separate-threads`), the main thread's ending in `-01`.
 */
async function dump(pid: number, dir: string): Promise<Counts & { mainFile: string }> {
  const before = new Set(await readdir(dir));
  await run('callgrind_control', ['--dump', String(pid)], { timeout: 300_000 });
  const added = (await readdir(dir)).filter((f) => !before.has(f) && f.startsWith('callgrind.out'));
  const main = added.find((f) => f.endsWith('-01'));
  if (main === undefined)
    throw new Error(`callgrind dump: no main thread's file in ${dir} (${added.join(', ')})`);
  let all = 0;
  for (const f of added) all += await fileTotal(join(dir, f));
  return { all, main: await fileTotal(join(dir, main)), mainFile: join(dir, main) };
}

/** The instructions of a dump file spent in libuv's timers phase (inclusive), by callgrind_annotate. */
async function timersPhase(file: string): Promise<number> {
  const { stdout } = await run('callgrind_annotate', ['--threshold=100', '--inclusive=yes', file], {
    maxBuffer: 512 * 1024 * 1024,
  });
  const line = /^\s*([\d,]+) \([^)]*\)\s+\S*timer\.c:uv__run_timers \[/m.exec(stdout);
  return line === null ? 0 : Number(line[1]!.replaceAll(',', ''));
}

/** The system calls of every thread of `pid` while `during` runs, by name (strace -c). */
async function syscalls(
  pid: number,
  file: string,
  during: () => Promise<void>,
): Promise<Map<string, number>> {
  const tracer = spawn('strace', ['-f', '-c', '-o', file, '-p', String(pid)], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  // strace names each thread it has attached on stderr; the first line means it is in place.
  await new Promise<void>((resolve, reject) => {
    tracer.once('error', reject);
    tracer.stderr.once('data', () => resolve());
  });
  await during();
  const exited = new Promise((resolve) => tracer.once('exit', resolve));
  tracer.kill('SIGINT');
  await exited;
  const calls = new Map<string, number>();
  for (const line of (await readFile(file, 'utf8')).split('\n')) {
    // % time, seconds, usecs/call, calls, [errors,] syscall
    const m = /^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?([a-z_0-9]+)$/.exec(line);
    if (m !== null && m[2] !== 'total') calls.set(m[2]!, Number(m[1]));
  }
  return calls;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      modes: { type: 'string', default: 'off,off,billing,outbox,redis,cluster,traced' },
      warmup: { type: 'string', default: '4000' },
      requests: { type: 'string', default: '4000' },
      connections: { type: 'string', default: '16' },
      'node-flags': { type: 'string', default: '' },
      // Keep the callgrind dumps here (one folder per mode), for callgrind_annotate.
      keep: { type: 'string' },
      repo: { type: 'string' },
      // `syscalls`: the gateway runs natively and strace counts its system calls (every thread) instead.
      count: { type: 'string', default: 'instructions' },
      // `stream`: a streamed reply of 20 chunks to a 2 KB prompt instead of the smallest chat request, to
      // see what the per-request costs weigh on a larger request.
      request: { type: 'string', default: 'chat' },
      // billing.outbox_fsync_interval_ms of the gateways. Valgrind slows a gateway many times over while
      // the interval is wall-clock time, so at the default few events share each fdatasync: a longer
      // interval gives them the share they have at full speed (docs/benchmarks.md section 10).
      'fsync-interval-ms': { type: 'string' },
    },
  });
  const modes = values.modes.split(',') as Mode[];
  const streamed = values.request === 'stream';
  if (!modes.every((m) => MODES.includes(m)) || (!streamed && values.request !== 'chat')) {
    console.error(
      `usage: node bench/instructions.ts [--modes ${MODES.join(',')}] [--request chat|stream] [--fsync-interval-ms n] [--warmup n] [--requests n] [--connections n] [--keep dir] [--repo checkout]`,
    );
    process.exit(2);
  }
  const [warmup, count, connections] = [
    Number(values.warmup),
    Number(values.requests),
    Number(values.connections),
  ];
  const gatewayRepo = values.repo === undefined ? REPO : resolve(values.repo);
  const tmp = await mkdtemp(join(tmpdir(), 'llm-router-instructions-'));
  const stops: (() => Promise<void>)[] = [];
  const workspace = async (
    name: string,
    repo: string,
    launcher?: Workspace['gatewayLauncher'],
  ): Promise<Workspace> => {
    const dir = join(tmp, name);
    await mkdir(dir, { recursive: true });
    return {
      repo,
      tmp: dir,
      // The young generation at its largest from the start: left to grow, it settled at a different size
      // in each process, and the count per request with it.
      gatewayNodeFlags: () => [
        ...GATEWAY_V8_FLAGS,
        '--min-semi-space-size=16',
        // Under valgrind the idle window lasts long enough for V8's memory reducer to run a full
        // collection and flush bytecode, after which the counted requests rerun unoptimized code.
        ...(values.count === 'syscalls' ? [] : ['--no-memory-reducer', '--no-flush-bytecode']),
        ...values['node-flags'].split(' ').filter(Boolean),
      ],
      sidecarNodeFlags: () => [],
      ...(launcher === undefined ? {} : { gatewayLauncher: launcher }),
    };
  };
  try {
    const shared = await workspace('shared', REPO);
    const up = await startUpstreamSimProcess(shared);
    stops.push(() => up.service.stop());
    // Only when a mode bills: one process fewer on a busy machine.
    let billingUrl: string | undefined;
    if (modes.some(billed)) {
      const billing = await startBillingSimProcess(shared);
      stops.push(() => billing.service.stop());
      billingUrl = billing.url;
    }
    const otlp = await startOtlpSink();
    stops.push(() => otlp.close());
    const stores = await startModeStores(shared, modes, stops);
    console.log(
      `${warmup} warm-up requests, then ${count} counted, at c=${connections}; ${streamed ? 'chat, streamed (20 chunks, 2 KB prompt)' : 'chat, non-streaming'}; gateway of ${gatewayRepo}`,
    );
    const rows: { mode: Mode; perRequest: number; mainPerRequest?: number; mainServing?: number }[] = [];
    for (const [i, mode] of modes.entries()) {
      const name = `${i}-${mode}`;
      const dumps = join(tmp, name, 'callgrind');
      await mkdir(dumps, { recursive: true });
      const ws = await workspace(
        name,
        gatewayRepo,
        values.count === 'syscalls'
          ? undefined
          : {
              command: [
                'valgrind',
                '--tool=callgrind',
                // V8 rewrites its generated code in place; valgrind must notice.
                '--smc-check=all-non-file',
                '--dump-instr=no',
                '--dump-line=no',
                // A file per thread: the main thread's count is the work that bounds throughput; the
                // compiler and GC helper threads run on valgrind's schedule, many times slower.
                '--separate-threads=yes',
                `--callgrind-out-file=${join(dumps, 'callgrind.out')}`,
              ],
              startTimeoutMs: 1_800_000,
            },
      );
      const fsync = values['fsync-interval-ms'];
      const peer = await startGatewayProcess(ws, up.url, {
        ...modeVariant(mode, String(i), {
          ...stores,
          billingUrl,
          tracesUrl: `${otlp.url}/v1/traces`,
          operationTimeoutMs: 30_000,
        }),
        ...(fsync === undefined ? {} : { outboxFsyncIntervalMs: Number(fsync) }),
      });
      try {
        const target = streamed
          ? chatTarget(peer, up.url, {
              stream: true,
              model: pacedModel(CHAT_MODEL, 20, 0),
              content: promptOfSize(2000),
            })
          : chatTarget(peer, up.url);
        await requests(target, warmup, connections);
        if (values.count === 'syscalls') {
          const calls = await syscalls(peer.service.pid, join(tmp, name, 'strace.txt'), () =>
            requests(target, count, connections),
          );
          const total = [...calls.values()].reduce((a, b) => a + b, 0);
          rows.push({ mode, perRequest: total / count });
          const top = [...calls]
            .sort((a, b) => b[1] - a[1])
            .slice(0, 8)
            .map(([call, n]) => `${call} ${(n / count).toFixed(2)}`)
            .join(', ');
          console.log(`${mode}: ${(total / count).toFixed(2)} system calls per request (${top})`);
        } else {
          // The idle gateway's own rate first (timers, the event-loop monitor, V8's idle tasks): under
          // valgrind a request takes many times its real time, so work that runs per second would be
          // charged to requests as many times over, and by how loaded the machine is. It is taken out.
          // The warm-up's last events are synced up to an interval later: not in the idle window.
          if (fsync !== undefined) await sleep(2 * Number(fsync));
          // The lower of two windows' rates: a late compilation or collection that falls in one is
          // not a rate, and charged over the counted window it would move the result by percents.
          await dump(peer.service.pid, dumps);
          const rates: Counts[] = [];
          for (let w = 0; w < 2; w++) {
            const started = performance.now();
            await sleep(IDLE_MS);
            const counts = await dump(peer.service.pid, dumps);
            const ms = performance.now() - started;
            rates.push({ all: counts.all / ms, main: counts.main / ms });
          }
          const idle = (k: keyof Counts) => Math.min(...rates.map((r) => r[k]));
          const start = performance.now();
          await requests(target, count, connections);
          const busy = await dump(peer.service.pid, dumps);
          const busyMs = performance.now() - start;
          const net = (k: keyof Counts) => (busy[k] - idle(k) * busyMs) / count;
          const perRequest = net('all');
          const mainPerRequest = net('main');
          // The main thread's count in the window less its timers phase, where the per-second work runs:
          // it needs no idle rate. On a loaded machine the idle windows caught late compilations and
          // deoptimizations, and their rate, charged over a long window, took out percents of real work.
          const timers = await timersPhase(busy.mainFile);
          const mainServing = (busy.main - timers) / count;
          rows.push({ mode, perRequest, mainPerRequest, mainServing });
          const n = (v: number) => Math.round(v).toLocaleString('en');
          console.log(
            `${mode}: ${n(perRequest)} instructions per request, ${n(mainPerRequest)} on the main thread (${n(busy.all / count)} before the idle rate, ${n(idle('all') * 1000)}/s (windows ${rates.map((r) => n(r.all * 1000)).join(', ')}), is taken out; ${(busyMs / count).toFixed(1)} ms per request); main thread less its timers phase ${n(mainServing)} (timers ${n(timers / count)})`,
          );
        }
      } finally {
        await peer.service.stop(60_000);
        if (values.keep !== undefined) await cp(dumps, join(values.keep, name), { recursive: true });
      }
    }
    const base = rows.find((r) => r.mode === 'off');
    if (base !== undefined) {
      const main =
        values.count === 'syscalls' ? '' : '  main thread  vs the first off  less timers  vs the first off';
      console.log(`\nmode      ${values.count} per request  vs the first off${main}`);
      for (const r of rows) {
        const vs = (v: number, b: number) => `${((v / b - 1) * 100).toFixed(1)}%`;
        const mainCells =
          r.mainPerRequest === undefined || base.mainPerRequest === undefined
            ? ''
            : `  ${Math.round(r.mainPerRequest).toLocaleString('en').padStart(11)}  ${vs(r.mainPerRequest, base.mainPerRequest).padStart(15)}  ${Math.round(r.mainServing!).toLocaleString('en').padStart(11)}  ${vs(r.mainServing!, base.mainServing!)}`;
        console.log(
          `${r.mode.padEnd(9)} ${(values.count === 'syscalls' ? r.perRequest.toFixed(2) : Math.round(r.perRequest).toLocaleString('en')).padStart(20)}  ${vs(r.perRequest, base.perRequest)}${mainCells}`,
        );
      }
    }
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
    await rm(tmp, { recursive: true, force: true });
  }
}

await main();
