// `node bench/fuzz.ts`: the long run of test/proxy/body-fuzz.test.ts. Truncated and corrupted bodies on
// every model route (bench/lib/body-fuzz-cases.ts), with and without a valid key, against the gateway as
// a child process in front of the upstream simulator (every shipped provider has a base URL and key).
// The report counts answers by route and status and lists every 5xx, every other answer the cases'
// rules refuse, every exit of the gateway (it is restarted and the run goes on) and its RSS before and
// after, from /proc.
//
//   node bench/fuzz.ts                        100,000 cases, seed 40001
//   node bench/fuzz.ts --cases 20000 --seed 7 --concurrency 6 --out bench/results/fuzz
//
// Cases are drawn in batches of 1,000, batch i from seed + i: the same seed gives the same cases.
// Writes <out>.json and <out>.txt (default bench/results/fuzz-<timestamp>); exits 1 when any case failed.

import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { startUpstreamSim } from '../sim/upstream/server.ts';
import {
  type BuiltCase,
  type CaseResult,
  describeCase,
  FUZZ_LIMITS,
  type FuzzGateway,
  hasValidKey,
  ROUTES,
  rssKb,
  runRecipes,
  sampleRecipes,
  startFuzzGateway,
} from './lib/body-fuzz-cases.ts';

const REPO = fileURLToPath(new URL('..', import.meta.url));
const ACCESS_KEY = 'ak_fuzz_0123456789abcdef';
const BATCH = 1000;
const TIMEOUT_MS = 15_000;
/** After this many exits the run stops: the gateway is not surviving the cases. */
const MAX_EXITS = 5;

interface Failure {
  /** How many cases had completed, this one included. */
  readonly atCase: number;
  readonly problem: string;
  readonly status: number | undefined;
  readonly case: string;
}

interface Exit {
  readonly afterCases: number;
  readonly code: number | null;
  readonly signal: string | null;
  readonly stderr: string;
  readonly inFlight: readonly string[];
}

function commitOf(): string {
  try {
    const head = execFileSync('git', ['rev-parse', '--short', 'HEAD'], {
      cwd: REPO,
      encoding: 'utf8',
    }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], {
      cwd: REPO,
      encoding: 'utf8',
    });
    return dirty.trim() === '' ? head : `${head} with uncommitted changes`;
  } catch {
    return 'unknown';
  }
}

/** ROUTER_* for every provider file shipped: its base URL (the simulator) and a key. */
async function providerEnv(simUrl: string): Promise<Record<string, string>> {
  const env: Record<string, string> = { ROUTER_ACCESS_KEY_FUZZ: ACCESS_KEY };
  for (const file of await readdir(join(REPO, 'deploy/config/providers'))) {
    if (!file.endsWith('.conf')) continue;
    const name = basename(file, '.conf').toUpperCase().replaceAll('-', '_');
    env[`ROUTER_PROVIDER_${name}_BASE_URL`] = simUrl;
    env[`ROUTER_PROVIDER_${name}_API_KEY`] = `sim-${name.toLowerCase()}-key`;
  }
  return env;
}

function bump(table: Map<string, Map<string, number>>, row: string, column: string): void {
  let counts = table.get(row);
  if (counts === undefined) {
    counts = new Map();
    table.set(row, counts);
  }
  counts.set(column, (counts.get(column) ?? 0) + 1);
}

function asObject(table: Map<string, Map<string, number>>): Record<string, Record<string, number>> {
  return Object.fromEntries(
    [...table].sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => [k, Object.fromEntries([...v].sort())]),
  );
}

function renderTable(title: string, table: Record<string, Record<string, number>>): string[] {
  const columns = [...new Set(Object.values(table).flatMap((row) => Object.keys(row)))].sort();
  const width = Math.max(...Object.keys(table).map((k) => k.length), title.length);
  const lines = [[title.padEnd(width), ...columns.map((c) => c.padStart(7))].join(' ')];
  for (const [row, counts] of Object.entries(table)) {
    lines.push([row.padEnd(width), ...columns.map((c) => String(counts[c] ?? '').padStart(7))].join(' '));
  }
  return lines;
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      cases: { type: 'string', default: '100000' },
      seed: { type: 'string', default: '40001' },
      concurrency: { type: 'string', default: '6' },
      out: { type: 'string' },
    },
  });
  const total = Number(values.cases);
  const seed = Number(values.seed);
  const concurrency = Number(values.concurrency);
  if (![total, seed, concurrency].every(Number.isSafeInteger) || total < 1 || concurrency < 1) {
    console.error('usage: node bench/fuzz.ts [--cases N] [--seed S] [--concurrency C] [--out PATH]');
    return 2;
  }
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const out = values.out ?? join(REPO, 'bench/results', `fuzz-${stamp}`);
  await mkdir(dirname(out), { recursive: true });

  // Without its key check: azure-openai sends `api-key` and ollama no key, which the simulator's OpenAI
  // dialect would refuse (a 502 of the provider's credentials, not of the client's input).
  const sim = await startUpstreamSim({ record: false, requireAuth: false });
  const dir = await mkdtemp(join(tmpdir(), 'router-fuzz-'));
  const env = await providerEnv(sim.url);
  const inFlight = new Set<BuiltCase>();
  let inFlightAtExit: string[] = [];
  const start = async () => {
    const g = await startFuzzGateway(REPO, dir, env);
    g.child.once('exit', () => {
      inFlightAtExit = [...inFlight].map(describeCase).slice(0, 20);
    });
    return g;
  };
  let gateway: FuzzGateway = await start();
  const rssBefore = await rssKb(gateway.pid);
  let rssPeak = rssBefore ?? 0;
  const rssSamples: { cases: number; kb: number }[] = [];

  const byRoute = new Map<string, Map<string, number>>();
  const byMutation = new Map<string, Map<string, number>>();
  const byAuth = new Map<string, Map<string, number>>();
  const fiveXX: Failure[] = [];
  const failures: Failure[] = [];
  let failureCount = 0;
  const exits: Exit[] = [];
  let done = 0;
  const started = performance.now();

  const onResult = (r: CaseResult) => {
    inFlight.delete(r.case);
    done++;
    const status = String(r.outcome.status ?? (r.outcome.timedOut ? 'timeout' : 'closed'));
    bump(byRoute, r.case.route.name, status);
    bump(byMutation, `${r.case.route.body} ${r.case.recipe.mutation}`, status);
    bump(byAuth, `${hasValidKey(r.case) ? 'key' : 'no valid key'} ${r.case.recipe.delivery}`, status);
    if (r.problem === undefined) return;
    failureCount++;
    const failure = {
      atCase: done,
      problem: r.problem,
      status: r.outcome.status,
      case: describeCase(r.case),
    };
    if ((r.outcome.status ?? 0) >= 500 && fiveXX.length < 500) fiveXX.push(failure);
    else if (failures.length < 200) failures.push(failure);
  };

  try {
    for (let batch = 0; done < total && exits.length < MAX_EXITS; batch++) {
      const recipes = sampleRecipes(seed + batch, Math.min(BATCH, total - batch * BATCH));
      if (recipes.length === 0) break;
      await runRecipes(gateway.port, recipes, ACCESS_KEY, {
        concurrency,
        timeoutMs: TIMEOUT_MS,
        onStart: (c) => inFlight.add(c),
        onResult,
      });
      const rss = (await rssKb(gateway.pid)) ?? 0;
      rssPeak = Math.max(rssPeak, rss);
      if (done % 5000 < BATCH) rssSamples.push({ cases: done, kb: rss });
      if (gateway.exit !== undefined) {
        exits.push({
          afterCases: done,
          code: gateway.exit.code,
          signal: gateway.exit.signal,
          stderr: gateway.stderr().slice(-4000),
          inFlight: inFlightAtExit,
        });
        console.error(`gateway exited after ${done} cases: ${gateway.stderr().slice(-1000)}`);
        gateway = await start();
      }
      if (done % 5000 < BATCH) {
        const s = (performance.now() - started) / 1000;
        console.error(`${done} cases in ${s.toFixed(0)} s, ${failureCount} failed`);
      }
    }
    const health = await fetch(`${gateway.url}/healthz`).then(
      (res) => res.status,
      (err: Error) => err.message,
    );
    const rssAfter = await rssKb(gateway.pid);
    const durationS = (performance.now() - started) / 1000;
    const report = {
      command: `node bench/fuzz.ts --cases ${total} --seed ${seed} --concurrency ${concurrency}`,
      commit: commitOf(),
      node: process.version,
      limits: FUZZ_LIMITS,
      routes: ROUTES.map((r) => r.name),
      cases: done,
      durationS: Math.round(durationS * 10) / 10,
      casesPerSecond: Math.round(done / durationS),
      failed: failureCount,
      fiveXX,
      otherFailures: failures,
      exits,
      healthzAfter: health,
      rssKb: {
        before: rssBefore,
        after: rssAfter,
        peak: Math.max(rssPeak, rssAfter ?? 0),
        samples: rssSamples,
      },
      gatewayErrorLogs: gateway.errorLogs().slice(0, 20),
      byRoute: asObject(byRoute),
      byMutation: asObject(byMutation),
      byAuthAndDelivery: asObject(byAuth),
    };
    const mb = (kb: number | undefined) => (kb === undefined ? '?' : `${(kb / 1024).toFixed(1)} MB`);
    const text = [
      `${report.command}`,
      `commit ${report.commit}, node ${report.node}, ${FUZZ_LIMITS}`,
      `${done} cases on ${ROUTES.length} routes in ${report.durationS} s (${report.casesPerSecond}/s), concurrency ${concurrency}`,
      `failed: ${failureCount} (5xx: ${fiveXX.length}); gateway exits: ${exits.length}; /healthz after: ${health}`,
      `gateway RSS: before ${mb(rssBefore)}, after ${mb(rssAfter)}, peak between batches ${mb(report.rssKb.peak)}`,
      `gateway RSS every 5,000 cases: ${rssSamples.map((r) => mb(r.kb)).join(', ')}`,
      '',
      ...renderTable('route', report.byRoute),
      '',
      ...renderTable('mutation', report.byMutation),
      '',
      ...renderTable('key, delivery', report.byAuthAndDelivery),
      '',
      ...(exits.length > 0 ? ['Exits:', ...exits.map((e) => JSON.stringify(e, null, 2)), ''] : []),
      ...(fiveXX.length > 0 ? ['5xx:', ...fiveXX.map((f) => `- ${f.problem} <- ${f.case}`), ''] : []),
      ...(failures.length > 0
        ? ['Other failures:', ...failures.map((f) => `- ${f.problem} <- ${f.case}`), '']
        : []),
      ...(report.gatewayErrorLogs.length > 0 ? ['Gateway error logs:', ...report.gatewayErrorLogs, ''] : []),
    ].join('\n');
    await writeFile(`${out}.json`, `${JSON.stringify(report, null, 2)}\n`);
    await writeFile(`${out}.txt`, `${text}\n`);
    console.log(text.split('\n').slice(0, 5).join('\n'));
    console.log(`report: ${out}.json, ${out}.txt`);
    return failureCount === 0 && exits.length === 0 ? 0 : 1;
  } finally {
    await gateway.stop();
    await sim.close();
    await rm(dir, { recursive: true, force: true });
  }
}

process.exitCode = await main();
