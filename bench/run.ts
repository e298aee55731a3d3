// `npm run bench`: starts the upstream simulator, nginx, Portkey and the gateway variants, each in its own
// process on a free port, runs the scenarios of docs/benchmarks.md against each of them, and writes
// bench/results/<timestamp>.json plus docs/benchmarks.md.
//
//   npm run bench                      full run (about 12 minutes), rewrites docs/benchmarks.md
//   npm run bench -- --smoke           every scenario for about a second with tiny counts; no docs
//   npm run bench -- --only chat       one scenario (chat, stream, translate, growth, backlog, abuse, workers,
//                                      shards, realtime, spaceless); repeatable
//   npm run bench -- --peers direct,gateway   only these peers
//   npm run bench -- --profile         gateway processes run with --cpu-prof into bench/results/prof
//   npm run bench -- --no-docs         do not rewrite docs/benchmarks.md

import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { type BenchContext, FULL, SMOKE } from './lib/context.ts';
import { loadAverage, machineInfo } from './lib/machine.ts';
import { startOtlpSink } from './lib/otlp-sink.ts';
import {
  GATEWAY_V8_FLAGS,
  gatewayUsesRedis,
  type Peer,
  type PeerId,
  PORTKEY_VERSION,
  startBillingSimProcess,
  startGatewayProcess,
  startNginx,
  startNodeFloor,
  startPortkey,
  startRedis,
  startUpstreamSimProcess,
  type Unavailable,
  type Workspace,
} from './lib/peers.ts';
import { type Service, treeRssMb } from './lib/proc.ts';
import { type BenchResults, evaluateTargets, renderMarkdown } from './report.ts';
import { ABUSE_PEERS, runAbuse } from './scenarios/abuse.ts';
import { runBacklog } from './scenarios/backlog.ts';
import { CHAT_PEERS, runChat } from './scenarios/chat.ts';
import { GROWTH_PEERS, runGrowth } from './scenarios/growth.ts';
import { REALTIME_PEERS, runRealtime } from './scenarios/realtime.ts';
import { runShards } from './scenarios/shards.ts';
import {
  runSpacelessPrompt,
  SPACELESS_PEERS,
  type SpacelessPromptResult,
} from './scenarios/spaceless-prompt.ts';
import { runStream, STREAM_PEERS } from './scenarios/stream.ts';
import { runTranslate, TRANSLATE_PEERS } from './scenarios/translate.ts';
import { runWorkers, WORKERS_PEERS } from './scenarios/workers.ts';

const REPO = join(dirname(fileURLToPath(import.meta.url)), '..');
const SCENARIOS = [
  'chat',
  'stream',
  'translate',
  'growth',
  'backlog',
  'abuse',
  'workers',
  'shards',
  'realtime',
  'spaceless',
] as const;
type Scenario = (typeof SCENARIOS)[number];
const ALL_PEERS: PeerId[] = [
  'direct',
  'nginx',
  'gateway',
  'gateway-billing',
  'gateway-redis',
  'portkey',
  'gateway-info-log',
  'node-floor',
  'gateway-2w',
  'gateway-traced',
];

const PEERS_OF: Record<Scenario, PeerId[]> = {
  chat: CHAT_PEERS,
  stream: STREAM_PEERS,
  translate: TRANSLATE_PEERS,
  growth: GROWTH_PEERS,
  backlog: [],
  abuse: ABUSE_PEERS,
  workers: WORKERS_PEERS,
  shards: [],
  realtime: REALTIME_PEERS,
  spaceless: SPACELESS_PEERS,
};

/** docs/benchmarks.md does not render the spaceless scenario: its results are only in the raw JSON. */
type RunResults = BenchResults & { spaceless?: SpacelessPromptResult };

interface Options {
  smoke: boolean;
  scenarios: Scenario[];
  peers: PeerId[] | undefined;
  profile: boolean;
  docs: boolean;
  out: string | undefined;
  render: string | undefined;
}

function parseOptions(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    options: {
      smoke: { type: 'boolean', default: false },
      only: { type: 'string', multiple: true },
      peers: { type: 'string' },
      profile: { type: 'boolean', default: false },
      'no-docs': { type: 'boolean', default: false },
      out: { type: 'string' },
      render: { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
  });
  if (values.help) {
    console.log(
      'usage: npm run bench -- [--smoke] [--only chat|stream|translate|growth|backlog|abuse|workers|shards|realtime|spaceless]... [--peers a,b] [--profile] [--no-docs] [--out file.json]\n       npm run bench -- --render bench/results/<full run>.json   (rewrite docs/benchmarks.md from a saved full run; measures nothing)',
    );
    process.exit(0);
  }
  const only = (values.only ?? []).flatMap((s) => s.split(','));
  for (const s of only) if (!SCENARIOS.includes(s as Scenario)) throw new Error(`unknown scenario ${s}`);
  const peers = values.peers?.split(',').map((p) => p.trim());
  for (const p of peers ?? []) if (!ALL_PEERS.includes(p as PeerId)) throw new Error(`unknown peer ${p}`);
  return {
    smoke: values.smoke,
    scenarios: only.length > 0 ? (only as Scenario[]) : [...SCENARIOS],
    peers: peers as PeerId[] | undefined,
    profile: values.profile,
    // A smoke run or a partial run never replaces the committed results.
    docs: !values['no-docs'] && !values.smoke && only.length === 0 && peers === undefined,
    out: values.out,
    render: values.render,
  };
}

function log(message: string): void {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
}

async function startPeers(
  ws: Workspace,
  wanted: Set<PeerId>,
  upstreamUrl: string,
  helpers: Service[],
): Promise<{ peers: Map<PeerId, Peer>; unavailable: Unavailable[] }> {
  const peers = new Map<PeerId, Peer>();
  const unavailable: Unavailable[] = [];
  async function attempt(id: PeerId, start: () => Promise<Peer | Unavailable>): Promise<void> {
    if (!wanted.has(id)) return;
    log(`starting ${id}`);
    try {
      const p = await start();
      if ('reason' in p) unavailable.push(p);
      else peers.set(id, p);
    } catch (err) {
      unavailable.push({ id, reason: err instanceof Error ? err.message.slice(0, 800) : String(err) });
    }
  }
  await attempt('nginx', () => startNginx(ws, upstreamUrl));
  await attempt('node-floor', () => startNodeFloor(ws, upstreamUrl));
  await attempt('portkey', () => startPortkey(ws));
  await attempt('gateway', () => startGatewayProcess(ws, upstreamUrl, { id: 'gateway' }));
  await attempt('gateway-2w', () => startGatewayProcess(ws, upstreamUrl, { id: 'gateway-2w', workers: 2 }));
  await attempt('gateway-traced', async () => {
    // In this process, unref'd: it ends with the bench.
    const sink = await startOtlpSink();
    return startGatewayProcess(ws, upstreamUrl, { id: 'gateway-traced', tracesUrl: `${sink.url}/v1/traces` });
  });
  await attempt('gateway-info-log', () =>
    startGatewayProcess(ws, upstreamUrl, { id: 'gateway-info-log', logLevel: 'info' }),
  );
  let billingUrl: string | undefined;
  if (wanted.has('gateway-billing') || wanted.has('gateway-redis')) {
    const billing = await startBillingSimProcess(ws);
    helpers.push(billing.service);
    billingUrl = billing.url;
  }
  await attempt('gateway-billing', () =>
    startGatewayProcess(ws, upstreamUrl, { id: 'gateway-billing', billing: { url: billingUrl! } }),
  );
  await attempt('gateway-redis', async () => {
    const redis = await startRedis(ws);
    if ('reason' in redis) return redis;
    helpers.push(redis.service);
    let peer: Peer;
    try {
      peer = await startGatewayProcess(ws, upstreamUrl, {
        id: 'gateway-redis',
        billing: { url: billingUrl! },
        redisUrl: redis.url,
      });
    } catch (err) {
      return {
        id: 'gateway-redis',
        reason: `not available yet: the gateway refused the store configuration: ${(err as Error).message.slice(0, 400)}`,
      };
    }
    const check = await gatewayUsesRedis(peer, redis.url);
    if (!check.ok) {
      await peer.service.stop();
      return {
        id: 'gateway-redis',
        reason: `not available yet: the gateway starts with \`store.enabled: true\` but does not connect to Redis (${check.detail})`,
      };
    }
    return peer;
  });
  return { peers, unavailable };
}

export async function main(argv: string[]): Promise<number> {
  const opts = parseOptions(argv);
  if (opts.render !== undefined) return render(opts.render);
  const settings = opts.smoke ? SMOKE : FULL;
  const startedAt = new Date();
  const tmp = await mkdtemp(join(tmpdir(), 'llm-router-bench-'));
  const profDir = join(REPO, 'bench/results/prof');
  if (opts.profile) await mkdir(profDir, { recursive: true });
  const stamp = startedAt.toISOString().replace(/[:.]/g, '-');
  const ws: Workspace = {
    repo: REPO,
    tmp,
    // The flags `router` (bin/router.js) and the shipped units run the gateway with.
    gatewayNodeFlags: (variant) => [
      ...GATEWAY_V8_FLAGS,
      ...(opts.profile
        ? ['--cpu-prof', `--cpu-prof-dir=${profDir}`, `--cpu-prof-name=${variant}-${stamp}.cpuprofile`]
        : []),
    ],
    sidecarNodeFlags: (variant) =>
      opts.profile
        ? [
            '--cpu-prof',
            `--cpu-prof-dir=${profDir}`,
            `--cpu-prof-name=sidecar-${variant}-${stamp}.cpuprofile`,
          ]
        : [],
  };
  const wanted = new Set<PeerId>(opts.scenarios.flatMap((s) => PEERS_OF[s]));
  if (opts.peers) for (const id of [...wanted]) if (!opts.peers.includes(id)) wanted.delete(id);
  log(`${opts.smoke ? 'smoke' : 'full'} run: ${opts.scenarios.join(', ')}; work folder ${tmp}`);

  const helpers: Service[] = [];
  const results: RunResults = {
    startedAt: startedAt.toISOString(),
    finishedAt: '',
    smoke: opts.smoke,
    machine: await machineInfo(),
    portkeyVersion: PORTKEY_VERSION,
    unavailable: [],
    profileDir: opts.profile ? 'bench/results/prof' : undefined,
  };
  let peers = new Map<PeerId, Peer>();
  let failed = false;
  try {
    const upstream = await startUpstreamSimProcess(ws);
    helpers.push(upstream.service);
    const started = await startPeers(ws, wanted, upstream.url, helpers);
    peers = started.peers;
    if (wanted.has('direct'))
      peers.set('direct', { id: 'direct', kind: 'direct', origin: upstream.url, service: upstream.service });
    results.unavailable = started.unavailable;
    results.idleRssMb = {};
    for (const [id, peer] of peers) results.idleRssMb[id] = await treeRssMb(peer.service.pid);
    for (const u of started.unavailable) log(`not measured: ${u.id}: ${u.reason.split('\n')[0]}`);
    const ctx: BenchContext = {
      settings,
      workspace: ws,
      upstream,
      peers,
      unavailable: started.unavailable,
      log,
    };
    for (const scenario of opts.scenarios) {
      log(`scenario ${scenario}`);
      if (scenario === 'chat') results.chat = await runChat(ctx);
      else if (scenario === 'stream') results.stream = await runStream(ctx);
      else if (scenario === 'translate') results.translate = await runTranslate(ctx);
      else if (scenario === 'growth') results.growth = await runGrowth(ctx);
      else if (scenario === 'abuse') results.abuse = await runAbuse(ctx);
      else if (scenario === 'workers') results.workers = await runWorkers(ctx, results.machine.cpus);
      else if (scenario === 'shards') results.shards = await runShards(ctx);
      else if (scenario === 'realtime') results.realtime = await runRealtime(ctx);
      else if (scenario === 'spaceless') results.spaceless = await runSpacelessPrompt(ctx);
      else if (scenario === 'backlog') {
        results.backlog = await runBacklog(ctx).catch((err: unknown) => ({
          error: err instanceof Error ? err.message : String(err),
        }));
      }
    }
  } catch (err) {
    failed = true;
    log(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  } finally {
    // Gateways first (they flush to the billing simulator), then helpers. SIGTERM lets --cpu-prof write.
    for (const peer of peers.values()) if (peer.id !== 'direct') await peer.service.stop();
    for (const h of helpers.reverse()) await h.stop();
    await rm(tmp, { recursive: true, force: true });
  }
  results.finishedAt = new Date().toISOString();
  results.machine.loadAvgEnd = loadAverage();

  const outFile = opts.out ?? join(REPO, 'bench/results', `${stamp}.json`);
  await mkdir(dirname(outFile), { recursive: true });
  await writeFile(outFile, `${JSON.stringify(results, null, 2)}\n`);
  log(`raw results: ${outFile}`);
  for (const t of evaluateTargets(results)) {
    log(`${t.pass === undefined ? 'n/a ' : t.pass ? 'PASS' : 'FAIL'}  ${t.target}: ${t.measured}`);
  }
  if (opts.docs && !failed) {
    await mkdir(join(REPO, 'docs'), { recursive: true });
    await writeFile(join(REPO, 'docs/benchmarks.md'), renderMarkdown(results));
    log('wrote docs/benchmarks.md');
  }
  return failed ? 1 : 0;
}

/**
 * docs/benchmarks.md again from a saved full run (after a change to the page's wording): the numbers are
 * that run's, with its date. Partial runs are refused, as they are for the page itself.
 */
async function render(file: string): Promise<number> {
  const results = JSON.parse(await readFile(file, 'utf8')) as RunResults;
  // Runs saved before the abuse, shards, realtime and spaceless scenarios existed still render (without their sections).
  const optional: Scenario[] = ['abuse', 'shards', 'realtime', 'spaceless'];
  const missing = SCENARIOS.filter((s) => !optional.includes(s) && results[s] === undefined);
  if (missing.length > 0 || results.smoke) {
    log(`${file} is not a full run (missing: ${missing.join(', ') || 'none'}; smoke: ${results.smoke})`);
    return 1;
  }
  await writeFile(join(REPO, 'docs/benchmarks.md'), renderMarkdown(results));
  log(`wrote docs/benchmarks.md from ${file}`);
  return 0;
}

if (import.meta.main) {
  process.exitCode = await main(process.argv.slice(2));
}
