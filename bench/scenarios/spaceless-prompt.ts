// Scenario: a 190 KB prompt without spaces, replayed to the upstream simulator's /v1/completions one
// request at a time, directly and through the gateway: the simulator's CPU per request (from /proc,
// every thread) and the token counts it reports. Each replay is a different prompt, as in a load test,
// so that nothing the simulator remembers from one replay spares it the next. Two kinds: base64 of
// pseudo-random bytes (many distinct tokenizer pieces) and one run of "x" after the replay's number.
//
//   npm run bench -- --only spaceless      in the bench: a fresh simulator, then the gateway peer
//   node bench/scenarios/spaceless-prompt.ts [--sim-repo ../base] [--replays 10] [--kb 190] [--no-gateway]
//                                          alone: a simulator from --sim-repo's checkout (default this
//                                          one) and this checkout's gateway in front of it

import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { BenchContext, Measured } from '../lib/context.ts';
import {
  BENCH_ACCESS_KEY,
  GATEWAY_V8_FLAGS,
  type Peer,
  type PeerId,
  SIM_KEY,
  startGatewayProcess,
  startUpstreamSimProcess,
  type Workspace,
} from '../lib/peers.ts';
import { round } from '../lib/proc.ts';
import { CHAT_MODEL } from '../lib/requests.ts';

export const SPACELESS_PEERS: PeerId[] = ['gateway'];

export type PromptKind = 'base64' | 'x-run';

export interface Replay {
  kind: PromptKind;
  /** CPU time of the simulator process (all its threads) over the request, ms. */
  simCpuMs: number;
  /** The same for the gateway, when the request went through it. */
  gatewayCpuMs?: number;
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
}

export interface ReplaySeries {
  replays: Replay[];
  /** Median simulator CPU per request of each kind, ms. */
  medianSimCpuMs: Partial<Record<PromptKind, number>>;
  maxSimCpuMs: Partial<Record<PromptKind, number>>;
}

export interface SpacelessPromptResult {
  promptBytes: number;
  direct: Measured<ReplaySeries>;
  gateway?: Measured<ReplaySeries>;
}

/** `chars` characters of base64 of xorshift32 bytes: no spaces, and not one token repeated. */
export function spacelessPrompt(chars: number, seed: number): string {
  const bytes = Buffer.alloc(Math.ceil((chars * 3) / 4));
  let x = seed >>> 0 || 1;
  for (let i = 0; i < bytes.length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    bytes[i] = x & 0xff;
  }
  return bytes.toString('base64').slice(0, chars);
}

function promptOf(kind: PromptKind, chars: number, n: number): string {
  return kind === 'base64' ? spacelessPrompt(chars, 0x9e3779b9 + n * 7919) : `${n}`.padEnd(chars, 'x');
}

/** CPU time of every thread of `pid` so far, ns (schedstat: nanoseconds, not clock ticks). */
async function cpuNs(pid: number): Promise<number> {
  let ns = 0;
  for (const task of await readdir(`/proc/${pid}/task`).catch(() => [])) {
    const stat = await readFile(`/proc/${pid}/task/${task}/schedstat`, 'utf8').catch(() => '0');
    ns += Number(stat.split(' ')[0]);
  }
  return ns;
}

function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

interface Leg {
  origin: string;
  headers: Record<string, string>;
  simPid: number;
  gatewayPid?: number;
}

async function replaySeries(
  leg: Leg,
  chars: number,
  replays: number,
  log: (m: string) => void,
): Promise<ReplaySeries> {
  const rows: Replay[] = [];
  for (const kind of ['base64', 'x-run'] as const) {
    for (let n = 0; n < replays; n++) {
      const body = JSON.stringify({ model: CHAT_MODEL, prompt: promptOf(kind, chars, n), max_tokens: 16 });
      const simBefore = await cpuNs(leg.simPid);
      const gatewayBefore = leg.gatewayPid === undefined ? 0 : await cpuNs(leg.gatewayPid);
      const res = await fetch(`${leg.origin}/v1/completions`, { method: 'POST', headers: leg.headers, body });
      const text = await res.text();
      if (res.status !== 200) throw new Error(`/v1/completions -> ${res.status} ${text.slice(0, 300)}`);
      // Helper threads (GC) may still be finishing the request's work.
      await sleep(50);
      const usage = (JSON.parse(text) as { usage: Record<string, number> }).usage;
      const row: Replay = {
        kind,
        simCpuMs: round(((await cpuNs(leg.simPid)) - simBefore) / 1e6, 1),
        promptTokens: usage.prompt_tokens!,
        completionTokens: usage.completion_tokens!,
        totalTokens: usage.total_tokens!,
      };
      if (leg.gatewayPid !== undefined) {
        row.gatewayCpuMs = round(((await cpuNs(leg.gatewayPid)) - gatewayBefore) / 1e6, 1);
      }
      rows.push(row);
      log(
        `    ${kind} #${n}: simulator ${row.simCpuMs} ms CPU${row.gatewayCpuMs === undefined ? '' : `, gateway ${row.gatewayCpuMs} ms`}; prompt_tokens ${row.promptTokens}, completion_tokens ${row.completionTokens}, total_tokens ${row.totalTokens}`,
      );
    }
  }
  const series: ReplaySeries = { replays: rows, medianSimCpuMs: {}, maxSimCpuMs: {} };
  for (const kind of ['base64', 'x-run'] as const) {
    const cpu = rows.filter((r) => r.kind === kind).map((r) => r.simCpuMs);
    series.medianSimCpuMs[kind] = round(median(cpu), 1);
    series.maxSimCpuMs[kind] = Math.max(...cpu);
  }
  return series;
}

async function measured<T>(run: () => Promise<T>): Promise<Measured<T>> {
  try {
    return await run();
  } catch (err) {
    return { error: err instanceof Error ? err.message : String(err) };
  }
}

function directLeg(url: string, pid: number): Leg {
  return {
    origin: url,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${SIM_KEY}` },
    simPid: pid,
  };
}

function gatewayLeg(gateway: Peer, simPid: number): Leg {
  return {
    origin: gateway.origin,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${BENCH_ACCESS_KEY}` },
    simPid,
    gatewayPid: gateway.service.pid,
  };
}

const PROMPT_BYTES = 190 * 1024;

/** In the bench: a simulator of its own for the direct replays; the gateway peer and its simulator after. */
export async function runSpacelessPrompt(ctx: BenchContext): Promise<SpacelessPromptResult> {
  const replays = ctx.settings.smoke ? 2 : 10;
  const sim = await startUpstreamSimProcess(ctx.workspace);
  ctx.log('  spaceless prompt: direct (a fresh simulator)');
  let direct: Measured<ReplaySeries>;
  try {
    direct = await measured(() =>
      replaySeries(directLeg(sim.url, sim.service.pid), PROMPT_BYTES, replays, ctx.log),
    );
  } finally {
    await sim.service.stop();
  }
  const peer = ctx.peers.get('gateway');
  if (peer === undefined) return { promptBytes: PROMPT_BYTES, direct };
  ctx.log('  spaceless prompt: through the gateway');
  const gateway = await measured(() =>
    replaySeries(gatewayLeg(peer, ctx.upstream.service.pid), PROMPT_BYTES, replays, ctx.log),
  );
  return { promptBytes: PROMPT_BYTES, direct, gateway };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      'sim-repo': { type: 'string' },
      replays: { type: 'string', default: '10' },
      kb: { type: 'string', default: '190' },
      'no-gateway': { type: 'boolean', default: false },
    },
  });
  const repo = join(dirname(fileURLToPath(import.meta.url)), '../..');
  const log = (m: string): void => {
    process.stderr.write(`${m}\n`);
  };
  const tmp = await mkdtemp(join(tmpdir(), 'llm-router-spaceless-'));
  const ws: Workspace = {
    repo,
    tmp,
    gatewayNodeFlags: () => [...GATEWAY_V8_FLAGS],
    sidecarNodeFlags: () => [],
  };
  const simRepo = resolve(values['sim-repo'] ?? repo);
  const chars = Number(values.kb) * 1024;
  const replays = Number(values.replays);
  const sim = await startUpstreamSimProcess({ ...ws, repo: simRepo });
  let gateway: Peer | undefined;
  try {
    log(`simulator of ${simRepo}, ${chars} character prompts, ${replays} replays of each kind`);
    log('  direct');
    const result: SpacelessPromptResult = {
      promptBytes: chars,
      direct: await replaySeries(directLeg(sim.url, sim.service.pid), chars, replays, log),
    };
    if (!values['no-gateway']) {
      gateway = await startGatewayProcess(ws, sim.url, { id: 'gateway' });
      log('  through the gateway (same simulator)');
      result.gateway = await replaySeries(gatewayLeg(gateway, sim.service.pid), chars, replays, log);
    }
    for (const [leg, series] of Object.entries({ direct: result.direct, gateway: result.gateway })) {
      if (series === undefined || 'error' in series) continue;
      log(
        `${leg}: simulator CPU per request, median / max: base64 ${series.medianSimCpuMs.base64} / ${series.maxSimCpuMs.base64} ms, x-run ${series.medianSimCpuMs['x-run']} / ${series.maxSimCpuMs['x-run']} ms`,
      );
    }
    process.stdout.write(`${JSON.stringify(result)}\n`);
  } finally {
    await gateway?.service.stop();
    await sim.service.stop();
    await rm(tmp, { recursive: true, force: true });
  }
}

if (import.meta.main) await main();
