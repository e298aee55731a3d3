// docs/benchmarks.md from one run's results: machine, raw numbers per peer, ratios against the targets
// (docs/benchmarks.md "Targets") with PASS / FAIL, and notes.

import { isError, type Measured } from './lib/context.ts';
import type { ThroughputResult } from './lib/load.ts';
import type { MachineInfo } from './lib/machine.ts';
import { PEER_LABELS, type PeerId, type Unavailable } from './lib/peers.ts';
import type { StreamLoadResult } from './lib/stream-client.ts';
import type { AbuseResult } from './scenarios/abuse.ts';
import type { BacklogResult } from './scenarios/backlog.ts';
import type { ChatResult } from './scenarios/chat.ts';
import type { GrowthResult } from './scenarios/growth.ts';
import { type RealtimeResult, type RealtimeRun, TRANSLATED_MODEL } from './scenarios/realtime.ts';
import type { ShardsResult, ShardsRun } from './scenarios/shards.ts';
import type { StreamResult } from './scenarios/stream.ts';
import type { TranslateResult } from './scenarios/translate.ts';
import type { WorkersResult } from './scenarios/workers.ts';

export interface BenchResults {
  startedAt: string;
  finishedAt: string;
  smoke: boolean;
  machine: MachineInfo;
  portkeyVersion: string;
  unavailable: Unavailable[];
  profileDir?: string;
  /** RSS of each peer's process tree right after start-up, before any load, MB. */
  idleRssMb?: Partial<Record<PeerId, number>>;
  chat?: ChatResult;
  stream?: StreamResult;
  translate?: TranslateResult;
  growth?: GrowthResult;
  backlog?: Measured<BacklogResult>;
  abuse?: PeerMap<AbuseResult>;
  workers?: WorkersResult;
  shards?: ShardsResult;
  realtime?: RealtimeResult;
}

export interface TargetRow {
  target: string;
  measured: string;
  pass: boolean | undefined;
}

type PeerMap<T> = Partial<Record<PeerId, Measured<T>>>;

function ok<T>(m: Measured<T> | undefined): T | undefined {
  return m === undefined || isError(m) ? undefined : m;
}

function num(n: number | undefined, digits = 2): string {
  if (n === undefined || Number.isNaN(n)) return 'n/a';
  if (Math.abs(n) >= 1000) return Math.round(n).toLocaleString('en-US');
  return n.toFixed(digits).replace(/\.?0+$/, '') || '0';
}

function signed(n: number | undefined, digits = 3): string {
  if (n === undefined || Number.isNaN(n)) return 'n/a';
  return `${n >= 0 ? '+' : ''}${num(n, digits)}`;
}

function pct(n: number | undefined): string {
  return n === undefined || Number.isNaN(n) ? 'n/a' : `${(n * 100).toFixed(1)}%`;
}

/**
 * a / b: the median of the per-round ratios when both were measured in the same rounds, else the ratio
 * of their medians.
 */
export function pairedRatio(
  a: Pick<ThroughputResult, 'requestsPerSec' | 'rounds'> | undefined,
  b: Pick<ThroughputResult, 'requestsPerSec' | 'rounds'> | undefined,
): number | undefined {
  if (a === undefined || b === undefined) return undefined;
  const ra = a.rounds ?? [];
  const rb = b.rounds ?? [];
  if (ra.length > 1 && ra.length === rb.length) {
    const ratios: number[] = [];
    for (let i = 0; i < ra.length; i++) {
      const x = ra[i]!;
      const y = rb[i]!;
      if (Number.isFinite(x) && Number.isFinite(y) && y > 0) ratios.push(x / y);
    }
    if (ratios.length > 0) {
      ratios.sort((x, y) => x - y);
      const mid = Math.floor(ratios.length / 2);
      return ratios.length % 2 === 1 ? ratios[mid]! : (ratios[mid - 1]! + ratios[mid]!) / 2;
    }
  }
  return b.requestsPerSec === 0 ? undefined : a.requestsPerSec / b.requestsPerSec;
}

/** Evaluates the targets; a target without both numbers is n/a. */
export function evaluateTargets(r: BenchResults): TargetRow[] {
  const rows: TargetRow[] = [];
  const tp = r.chat?.throughput ?? {};
  const rps = (id: PeerId) => ok(tp[id])?.requestsPerSec;
  const gw = rps('gateway');
  const conn =
    Object.values(tp)
      .map(ok)
      .find((x) => x !== undefined)?.connections ?? 64;
  // Peers measured in the same interleaved rounds are compared round by round (the median of the
  // per-round ratios): a slow stretch of the shared machine then weighs on both sides of a ratio.
  const ratio = (aId: PeerId, bId: PeerId) => pairedRatio(ok(tp[aId]), ok(tp[bId]));
  const vsPortkey = ratio('gateway', 'portkey');
  rows.push({
    target: `Throughput (c=${conn}) >= 5x Portkey`,
    measured:
      vsPortkey === undefined ? 'n/a' : `${num(vsPortkey)}x (${num(gw)} vs ${num(rps('portkey'))} req/s)`,
    pass: vsPortkey === undefined ? undefined : vsPortkey >= 5,
  });
  const vsNginx = ratio('gateway', 'nginx');
  rows.push({
    target: `Throughput (c=${conn}) >= 25% of nginx proxy_pass`,
    measured: vsNginx === undefined ? 'n/a' : `${pct(vsNginx)} (${num(gw)} vs ${num(rps('nginx'))} req/s)`,
    pass: vsNginx === undefined ? undefined : vsNginx >= 0.25,
  });
  const lat = r.chat?.latency ?? {};
  const direct = ok(lat.direct)?.ms;
  const gwLat = ok(lat.gateway)?.ms;
  const addP50 = direct && gwLat ? gwLat.p50 - direct.p50 : undefined;
  const addP99 = direct && gwLat ? gwLat.p99 - direct.p99 : undefined;
  rows.push({
    target: 'Added latency at c=1, p50 <= 0.3 ms',
    measured: addP50 === undefined ? 'n/a' : `${signed(addP50)} ms`,
    pass: addP50 === undefined ? undefined : addP50 <= 0.3,
  });
  rows.push({
    target: 'Added latency at c=1, p99 <= 1 ms',
    measured: addP99 === undefined ? 'n/a' : `${signed(addP99)} ms`,
    pass: addP99 === undefined ? undefined : addP99 <= 1,
  });
  const many = r.stream?.many ?? {};
  const gwMany = ok(many.gateway);
  const directMany = ok(many.direct);
  const conc = gwMany?.concurrency ?? directMany?.concurrency;
  rows.push({
    target: `${num(conc)} concurrent streams: gateway RSS <= 300 MB`,
    measured: gwMany === undefined ? 'n/a' : `${num(gwMany.resources.peakRssMb, 1)} MB`,
    pass: gwMany === undefined ? undefined : gwMany.resources.peakRssMb <= 300,
  });
  const addGap = gwMany && directMany ? gwMany.gapMs.p99 - directMany.gapMs.p99 : undefined;
  // Gaps only mean something when the streams really ran at once: a peer that queues them (TTFB in the
  // hundreds of milliseconds) shows short gaps because fewer streams are live.
  const queuedMs = gwMany && directMany ? gwMany.ttfbMs.p50 - directMany.ttfbMs.p50 : undefined;
  const queued = queuedMs !== undefined && queuedMs > 100;
  rows.push({
    target: `${num(conc)} concurrent streams: added inter-chunk p99 <= 2 ms`,
    measured:
      addGap === undefined
        ? 'n/a'
        : `${signed(addGap)} ms${queued ? `, but streams were queued (added TTFB p50 ${signed(queuedMs, 0)} ms)` : ''}`,
    pass: addGap === undefined ? undefined : addGap <= 2 && !queued,
  });
  const billingRatio = ratio('gateway-billing', 'gateway');
  const billingCost = billingRatio === undefined ? undefined : 1 - billingRatio;
  rows.push({
    target: 'Billing on costs <= 10% of throughput',
    measured:
      billingCost === undefined ? 'n/a' : `${pct(billingCost)} (${num(rps('gateway-billing'))} req/s)`,
    pass: billingCost === undefined ? undefined : billingCost <= 0.1,
  });
  const tracedRatio = ratio('gateway-traced', 'gateway');
  const tracedCost = tracedRatio === undefined ? undefined : 1 - tracedRatio;
  rows.push({
    target: 'Tracing on (sampling 1.0) costs <= 10% of throughput',
    measured: tracedCost === undefined ? 'n/a' : `${pct(tracedCost)} (${num(rps('gateway-traced'))} req/s)`,
    pass: tracedCost === undefined ? undefined : tracedCost <= 0.1,
  });
  const redisRatio = ratio('gateway-redis', 'gateway');
  const redisCost = redisRatio === undefined ? undefined : 1 - redisRatio;
  const redisNote = r.unavailable.find((u) => u.id === 'gateway-redis');
  rows.push({
    target: 'Redis mode costs <= 15% of throughput',
    measured:
      redisCost === undefined
        ? redisNote
          ? 'not available yet'
          : 'n/a'
        : `${pct(redisCost)} (${num(rps('gateway-redis'))} req/s)`,
    pass: redisCost === undefined ? undefined : redisCost <= 0.15,
  });
  for (const [id, m] of Object.entries(r.abuse ?? {}) as [PeerId, Measured<AbuseResult>][]) {
    const a = ok(m);
    const idle = a?.idle;
    rows.push({
      target: `/healthz p99 < 100 ms while ${num(idle?.opened)} idle connections are opened (${id})`,
      measured:
        idle === undefined
          ? 'n/a'
          : `${num(idle.healthz.ms.p99)} ms; chat ${num(idle.chat.ok)} ok / ${num(idle.chat.failed)} failed`,
      pass: idle === undefined ? undefined : idle.healthz.ms.p99 < 100 && idle.chat.failed === 0,
    });
    const ab = a?.aborts;
    rows.push({
      target: `/healthz p99 < 100 ms while streams with ${num((ab?.promptBytes ?? 0) / 1024)} KB prompts are aborted (${id})`,
      measured:
        ab === undefined
          ? 'n/a'
          : `${num(ab.healthz.ms.p99)} ms (max ${num(ab.healthz.ms.max)} ms${slowestText(ab.healthz, ': ')})`,
      pass: ab === undefined ? undefined : ab.healthz.ms.p99 < 100,
    });
  }
  return rows;
}

/** Where the slowest request's time went: the gateway's main thread and the probe's (/proc schedstat). */
function slowestText(l: AbuseResult['baseline'], lead: string): string {
  const w = l.slowest?.[0];
  if (w?.gatewayRunMs === undefined) return '';
  return `${lead}the gateway's main thread ran ${num(w.gatewayRunMs)} ms of it and waited ${num(w.gatewayWaitMs)} ms for a CPU, the probe waited ${num(w.probeWaitMs)} ms and sent it ${num(w.lateMs)} ms late`;
}

/** Section 6 of docs/benchmarks.md: serving while clients misbehave. */
export function renderAbuse(r: BenchResults): string[] {
  const out: string[] = ['## 6. Abuse: idle connections and aborted large-prompt streams', ''];
  for (const [id, m] of Object.entries(r.abuse ?? {}) as [PeerId, Measured<AbuseResult>][]) {
    if (isError(m)) {
      out.push(`${PEER_LABELS[id]}: error: ${m.error}`, '');
      continue;
    }
    const { baseline, idle, aborts } = m;
    const loopCells = (l: AbuseResult['baseline']) => [
      num(l.ok),
      num(l.failed),
      num(l.ms.p50),
      num(l.ms.p99),
      num(l.ms.max),
    ];
    const shed = Object.entries(idle.gatewayMetrics)
      .filter(([k]) => k.startsWith('router_connections_shed_total'))
      .map(([k, v]) => `${k.replace('router_connections_shed_total', '')} ${num(v)}`)
      .join(', ');
    out.push(
      `${PEER_LABELS[id]}. (a) ${num(idle.opened)} idle TCP connections opened from the bench process (${num(idle.connectErrors)} connects failed), held ${num(idle.holdMs / 1000, 1)} s while /healthz was requested every 10 ms (up to 8 keep-alive connections, each request timed from when it was due) and a chat loop ran on one connection; the gateway closed ${num(idle.closedByGateway)} of them (shed: ${shed || 'none'}; cap in force ${num(idle.gatewayMetrics.router_client_connections_max)}). (b) ${num(aborts.aborted)} streams with a ${num(aborts.promptBytes / 1024)} KB space-less prompt aborted after their first chunk, ${aborts.concurrency} at a time for ${num(aborts.durationMs / 1000, 1)} s (${num(aborts.failed)} failed), billing on, while /healthz was requested on the same schedule${aborts.healthz.probeNice === undefined ? '' : ` (the probe at nice ${aborts.healthz.probeNice})`}${aborts.loadNice === undefined ? '' : ` (the load client and the upstream simulator at nice ${aborts.loadNice})`}${slowestText(aborts.healthz, '; in the slowest request ')}.`,
      '',
      table(
        ['phase', 'loop', 'ok', 'failed', 'p50 ms', 'p99 ms', 'max ms', 'gateway peak RSS MB', 'CPU %'],
        [
          ['baseline', '/healthz', ...loopCells(baseline), '', ''],
          [
            'idle connections',
            '/healthz',
            ...loopCells(idle.healthz),
            num(idle.resources.peakRssMb, 1),
            num(idle.resources.cpuPercent, 1),
          ],
          ['idle connections', 'chat', ...loopCells(idle.chat), '', ''],
          // Results from before the release was measured on its own have none.
          ...(idle.release === undefined
            ? []
            : [
                [
                  `their release (${num(idle.release.ms)} ms)`,
                  '/healthz',
                  ...loopCells(idle.release.healthz),
                  '',
                  '',
                ],
              ]),
          [
            'aborted streams',
            '/healthz',
            ...loopCells(aborts.healthz),
            num(aborts.resources.peakRssMb, 1),
            num(aborts.resources.cpuPercent, 1),
          ],
        ],
      ),
      '',
    );
  }
  return out;
}

/**
 * What the many-streams gap target is up against on this machine: the same added p99 for nginx, and the
 * CPU the simulator itself needed to produce the events (every peer shares the same two cores with it
 * and with the streaming client).
 */
function manyStreamsNote(r: BenchResults): string | undefined {
  const many = r.stream?.many ?? {};
  const direct = ok(many.direct);
  const nginx = ok(many.nginx);
  const gateway = ok(many.gateway);
  if (direct === undefined || gateway === undefined) return undefined;
  const eventsPerSec = Math.round((direct.streams * direct.eventsPerStream) / (direct.wallMs / 1000));
  const parts = [
    `- ${num(direct.concurrency)} streams: the simulator alone produced about ${num(eventsPerSec)} events/s`,
  ];
  if (direct.resources !== undefined) parts.push(` using ${num(direct.resources.cpuPercent, 1)}% of a core`);
  parts.push(
    `, and the streaming client parses every one of them, on the same two cores as the proxy under test. Measured directly (no proxy), the inter-chunk p99 was already ${num(direct.gapMs.p99, 1)} ms against the 10 ms pacing.`,
  );
  if (nginx !== undefined)
    parts.push(
      ` nginx proxy_pass added ${signed(nginx.gapMs.p99 - direct.gapMs.p99)} ms to that p99 in the same run; the gateway ${signed(gateway.gapMs.p99 - direct.gapMs.p99)} ms.`,
    );
  return parts.join('');
}

function verdict(pass: boolean | undefined): string {
  return pass === undefined ? 'n/a' : pass ? 'PASS' : 'FAIL';
}

function table(head: string[], rows: string[][]): string {
  const line = (cells: string[]) => `| ${cells.join(' | ')} |`;
  return [line(head), line(head.map(() => '---')), ...rows.map(line)].join('\n');
}

/** CPU the peer spent per relayed SSE event while the streams ran (its CPU share over the wall time). */
function cpuUsPerEvent(m: StreamLoadResult & { resources?: { cpuPercent: number } }): number | undefined {
  const events = m.streams * m.eventsPerStream;
  if (m.resources === undefined || events === 0) return undefined;
  return ((m.resources.cpuPercent / 100) * m.wallMs * 1000) / events;
}

/**
 * The Node.js floor beside the gateway: a bare forwarder (node:http in, undici out, no gateway work)
 * measured in the same rounds. It bounds what any Node.js proxy reaches on this machine, so it says how
 * much of a ratio target is the platform and how much is the gateway's own work.
 */
function floorNote(r: BenchResults): string | undefined {
  const tp = r.chat?.throughput ?? {};
  const floor = ok(tp['node-floor']);
  const gateway = ok(tp.gateway);
  if (floor === undefined || gateway === undefined) return undefined;
  const parts = [
    `- The bare Node forwarder (node:http in, undici out, no gateway work) did ${num(floor.requestsPerSec, 0)} req/s at c=${floor.connections}`,
  ];
  const vsPortkey = pairedRatio(floor, ok(tp.portkey));
  if (vsPortkey !== undefined) parts.push(`, ${num(vsPortkey)}x Portkey`);
  const share = pairedRatio(gateway, floor);
  if (share !== undefined)
    parts.push(`; the gateway reached ${pct(share)} of it (median of the per-round ratios)`);
  const lat = r.chat?.latency ?? {};
  const direct = ok(lat.direct)?.ms;
  const floorLat = ok(lat['node-floor'])?.ms;
  if (direct !== undefined && floorLat !== undefined)
    parts.push(
      `. At c=1 it added ${signed(floorLat.p50 - direct.p50)} ms p50 and ${signed(floorLat.p99 - direct.p99)} ms p99 by itself`,
    );
  const many = r.stream?.many ?? {};
  const perEvent: string[] = [];
  for (const id of ['nginx', 'node-floor', 'gateway'] as PeerId[]) {
    const m = ok(many[id]);
    if (m !== undefined) perEvent.push(`${PEER_LABELS[id]} ${num(cpuUsPerEvent(m), 1)} µs`);
  }
  if (perEvent.length > 0)
    parts.push(
      `. CPU per relayed event at ${num(ok(many.gateway)?.concurrency)} streams: ${perEvent.join(', ')}`,
    );
  parts.push('.');
  return parts.join('');
}

function errorRow(id: PeerId, error: string, width: number): string[] {
  return [
    PEER_LABELS[id],
    `error: ${error.replaceAll('|', '\\|').replaceAll('\n', ' ').slice(0, 300)}`,
    ...Array(width - 2).fill(''),
  ];
}

function streamTable(
  runs: PeerMap<StreamLoadResult & { resources?: { peakRssMb: number; cpuPercent: number } }>,
  withResources: boolean,
): string {
  const base = ok(runs.direct);
  const head = [
    'peer',
    'streams',
    'errors',
    'events/stream',
    'TTFB p50 ms',
    'TTFB p99 ms',
    'added TTFB p50/p99',
    'gap p50 ms',
    'gap p99 ms',
    'added gap p99',
  ];
  if (withResources) head.push('peak RSS MB', 'CPU % of a core', 'CPU µs/event');
  const rows: string[][] = [];
  for (const [id, m] of Object.entries(runs) as [
    PeerId,
    Measured<StreamLoadResult & { resources?: { peakRssMb: number; cpuPercent: number } }>,
  ][]) {
    if (isError(m)) {
      rows.push(errorRow(id, m.error, head.length));
      continue;
    }
    const row = [
      PEER_LABELS[id],
      num(m.streams),
      m.errors === 0 ? '0' : `${m.errors} (${(m.firstError ?? '').replaceAll('|', '\\|').slice(0, 120)})`,
      num(m.eventsPerStream, 1),
      num(m.ttfbMs.p50),
      num(m.ttfbMs.p99),
      base && id !== 'direct'
        ? `${signed(m.ttfbMs.p50 - base.ttfbMs.p50)} / ${signed(m.ttfbMs.p99 - base.ttfbMs.p99)}`
        : '',
      num(m.gapMs.p50),
      num(m.gapMs.p99),
      base && id !== 'direct' ? signed(m.gapMs.p99 - base.gapMs.p99) : '',
    ];
    if (withResources)
      row.push(num(m.resources?.peakRssMb, 1), num(m.resources?.cpuPercent, 1), num(cpuUsPerEvent(m), 1));
    rows.push(row);
  }
  return table(head, rows);
}

export function renderMarkdown(r: BenchResults): string {
  const out: string[] = [];
  const m = r.machine;
  out.push('# Benchmarks', '');
  out.push(
    `Generated by \`npm run bench\` on ${r.startedAt} (finished ${r.finishedAt}). Do not edit by hand: run the bench again.`,
    '',
  );
  out.push('## Machine', '');
  out.push(
    table(
      ['', ''],
      [
        ['CPU', `${m.cpuModel}, ${m.cpus} cores`],
        ['Memory', `${m.memoryGiB} GiB`],
        ['Kernel', m.kernel],
        ['Node.js', m.node],
        ['nginx', m.nginx],
        ['Portkey', `@portkey-ai/gateway ${r.portkeyVersion}`],
        [
          'Load average (1 min)',
          `${num(m.loadAvgStart)} at start, ${num(m.loadAvgEnd)} at end (anything above ~1 at start means other work shared the cores)`,
        ],
      ],
    ),
    '',
  );
  if (r.idleRssMb && Object.keys(r.idleRssMb).length > 0) {
    out.push('Resident memory of each peer after start-up, before any request:', '');
    out.push(
      table(
        ['peer', 'idle RSS MB'],
        (Object.entries(r.idleRssMb) as [PeerId, number][]).map(([id, mb]) => [PEER_LABELS[id], num(mb, 1)]),
      ),
      '',
    );
  }
  out.push('## Targets', '');
  out.push('Ratios come from one run on the machine above; every peer ran on the same two cores.', '');
  out.push(
    table(
      ['target', 'measured', 'result'],
      evaluateTargets(r).map((t) => [t.target, t.measured, verdict(t.pass)]),
    ),
    '',
  );
  out.push('## How it was measured', '');
  out.push(
    [
      '- Every peer is its own process: the upstream simulator (`sim/upstream`), nginx (`worker_processes auto`,',
      "  upstream keep-alive, `proxy_buffering off`), Portkey's gateway (`--headless`), and the gateway (`proxy/cli.ts`,",
      '  `log.level: warn`) in file mode with billing off, with billing on (sidecar delivering to `sim/billing` in its',
      '  own process), and in Redis mode. A bare Node forwarder (`bench/lib/bare-forwarder.ts`: node:http in,',
      '  undici out, no gateway work) runs beside them as the Node.js floor. Peers are measured one after',
      '  another, never two at once.',
      '- With billing on, the sidecar runs under SCHED_IDLE at nice 19, as `router` starts it by default',
      '  (delivery is asynchronous and yields CPU to serving; the durable outbox absorbs the difference), and',
      '  the billing simulator, which stands in for a remote service, runs the same way so its CPU comes out of',
      '  idle time.',
      '  The billing-on rows therefore measure what billing costs the serving path, not the drain rate, which',
      '  scenario 5 measures on its own. After each chat throughput round of a billing-on gateway the bench',
      "  waits until its queue is empty (`billing.pending` of its /readyz), so that the drain of that round's",
      "  events is not charged to the next peer's round.",
      '- Load comes from the bench process: autocannon for throughput (after a warm-up), a sequential undici loop',
      '  for latency at concurrency 1 (sub-millisecond resolution), and a separate node process with undici for',
      '  streams, which timestamps every SSE event when the chunk carrying it arrives. TTFB is request sent to',
      '  first body byte; gaps are between consecutive events that carry text (OpenAI `delta.content`, Anthropic',
      '  `text_delta`), so events a proxy adds or drops (usage chunk, `[DONE]`, `ping`) are not counted as delay.',
      '  "Added" numbers are the peer minus the simulator measured directly in the same run.',
      "- RSS and CPU are read from /proc for the peer process and its children (nginx workers; the gateway's",
      '  billing sidecar when billing is on). CPU is a percentage of one core.',
      '- Simulator knobs travel in the model name (`gpt-5.4-mini-chunks-50-delay-10` = 50 deltas 10 ms apart),',
      '  so the same request works through every proxy.',
      '- Everything shares two cores: the load generator, the simulator and the peer. Absolute numbers are lower',
      '  than on separate machines; the ratios are the point.',
      '- The machine is a small VM whose speed drifts by tens of percent within minutes (the same peer can do',
      '  twice the requests/s in one round as in the next). Chat throughput and c=1 latency are therefore measured',
      '  in interleaved rounds (every peer once per round, the order reversed every other round): throughput',
      '  targets use the median of the per-round ratios (both peers measured within seconds of each other), and',
      '  latency percentiles pool every round. Before its first chat round each peer takes 25 s of load: a',
      "  gateway's V8 still compiles and deoptimizes over its first 20 to 30 s of load.",
    ].join('\n'),
    '',
  );

  if (r.chat) {
    out.push('## 1. Non-streaming chat, small body', '');
    const tp = r.chat.throughput;
    const gw = ok(tp.gateway)?.requestsPerSec;
    const c = Object.values(tp)
      .map(ok)
      .find((x) => x !== undefined);
    const rounds = c?.rounds?.length ?? 1;
    out.push(
      rounds > 1
        ? `Throughput at concurrency ${c?.connections ?? '?'}: ${rounds} interleaved rounds of ${c?.durationS ?? '?'} s per peer, median round shown (every round, in measuring order, in the last column). "gateway is" is the median of the per-round ratios, which is what the targets use:`
        : `Throughput at concurrency ${c?.connections ?? '?'}, ${c?.durationS ?? '?'} s per peer:`,
      '',
    );
    const rows: string[][] = [];
    for (const [id, mm] of Object.entries(tp) as [PeerId, Measured<unknown>][]) {
      const t = ok(tp[id]);
      if (t === undefined) {
        rows.push(errorRow(id, isError(mm) ? mm.error : 'missing', 8));
        continue;
      }
      rows.push([
        PEER_LABELS[id],
        num(t.requestsPerSec, 0),
        num(t.latencyP50Ms),
        num(t.latencyP99Ms),
        `${t.non2xx} / ${t.errors + t.timeouts}`,
        num(t.mbPerSec),
        gw === undefined || id === 'gateway' ? '' : `${num(pairedRatio(ok(tp.gateway), t))}x`,
        (t.rounds ?? []).map((x) => num(x, 0)).join(' · '),
      ]);
    }
    out.push(
      table(
        ['peer', 'req/s', 'p50 ms', 'p99 ms', 'non-2xx / errors', 'MB/s', 'gateway is', 'rounds req/s'],
        rows,
      ),
      '',
    );
    const lat = r.chat.latency;
    const base = ok(lat.direct)?.ms;
    const n = Object.values(lat)
      .map(ok)
      .find((x) => x !== undefined)?.requests;
    const latRounds = Object.values(lat)
      .map(ok)
      .find((x) => x !== undefined)?.roundP50s?.length;
    out.push(
      latRounds !== undefined && latRounds > 1
        ? `Latency at concurrency 1 (${n ?? '?'} sequential requests per peer on one keep-alive connection, in ${latRounds} interleaved rounds, percentiles over all of them; the last column has each round's p50):`
        : `Latency at concurrency 1 (${n ?? '?'} sequential requests per peer on one keep-alive connection):`,
      '',
    );
    const lrows: string[][] = [];
    for (const [id, mm] of Object.entries(lat) as [PeerId, Measured<unknown>][]) {
      const l = ok(lat[id]);
      if (l === undefined) {
        lrows.push(errorRow(id, isError(mm) ? mm.error : 'missing', 8));
        continue;
      }
      lrows.push([
        PEER_LABELS[id],
        num(l.ms.p50, 3),
        num(l.ms.p90, 3),
        num(l.ms.p99, 3),
        base && id !== 'direct' ? signed(l.ms.p50 - base.p50) : '',
        base && id !== 'direct' ? signed(l.ms.p99 - base.p99) : '',
        l.errors === 0 ? '0' : `${l.errors} (${(l.firstError ?? '').slice(0, 120)})`,
        (l.roundP50s ?? []).map((x) => num(x, 3)).join(' · '),
      ]);
    }
    out.push(
      table(
        ['peer', 'p50 ms', 'p90 ms', 'p99 ms', 'added p50 ms', 'added p99 ms', 'errors', 'round p50s'],
        lrows,
      ),
      '',
    );
    const info = ok(tp['gateway-info-log'])?.requestsPerSec;
    if (r.chat.accessLogAtWarn) {
      out.push(
        'The gateway wrote a JSON access-log line per request although its configuration says `log.level: warn`,',
        'so every gateway row above includes access logging, and the info-level row measures nothing different.',
        '',
      );
    } else if (gw !== undefined && info !== undefined) {
      out.push(
        `Access logging at \`log.level: info\` (one JSON line per request to stdout, here a file) costs ${pct(1 - info / gw)} of throughput (${num(info, 0)} vs ${num(gw, 0)} req/s); the other gateway rows run at \`warn\`.`,
        '',
      );
    }
  }

  if (r.stream) {
    out.push('## 2. Streaming chat', '');
    out.push(`Model \`${r.stream.model}\`. Low concurrency:`, '');
    out.push(streamTable(r.stream.low, false), '');
    const many = Object.values(r.stream.many)
      .map(ok)
      .find((x) => x !== undefined);
    out.push(`${many?.concurrency ?? '?'} concurrent streams (RSS and CPU of the peer while they run):`, '');
    out.push(streamTable(r.stream.many, true), '');
  }

  if (r.translate) {
    out.push('## 3. Translation path (chat.completions -> Anthropic stream)', '');
    out.push(
      'The gateway and Portkey turn a completion-style streaming request into an Anthropic Messages call and the',
      'Messages stream back into completion chunks. The direct and nginx rows are the native Messages stream',
      `without translation, the baseline. Paced: \`${r.translate.pacedModel}\`.`,
      '',
    );
    out.push(streamTable(r.translate.paced, false), '');
    out.push(`Unpaced (\`${r.translate.unpacedModel}\`), streams per second at full load:`, '');
    const rows: string[][] = [];
    for (const [id, mm] of Object.entries(r.translate.unpaced) as [
      PeerId,
      Measured<{ streamsPerSec: number }>,
    ][]) {
      const u = ok(r.translate.unpaced[id]);
      if (u === undefined) {
        rows.push(errorRow(id, isError(mm) ? mm.error : 'missing', 5));
        continue;
      }
      rows.push([
        PEER_LABELS[id],
        num(u.concurrency),
        num(u.streamsPerSec, 1),
        num(u.ttfbMs.p99),
        String(u.errors),
      ]);
    }
    out.push(table(['peer', 'concurrency', 'streams/s', 'TTFB p99 ms', 'errors'], rows), '');
    const cpu = r.translate.gatewayCpu;
    if (cpu !== undefined) {
      out.push(
        'CPU of the gateway per stream, the same upstream stream translated (completion-style client) and',
        'passed through (native Messages client), the median of three alternating rounds; the goal is at most 2x:',
        '',
      );
      if (isError(cpu)) out.push(`Not measured: ${cpu.error}`, '');
      else {
        const row = (label: string, c: { streams: number; cpuPercent: number; cpuUsPerStream: number }) => [
          label,
          num(c.streams),
          num(c.cpuPercent, 1),
          num(c.cpuUsPerStream),
        ];
        out.push(
          table(
            ['client', 'streams', 'CPU %', 'CPU µs/stream'],
            [
              row('native Messages (passthrough)', cpu.native),
              row('chat.completions (translated)', cpu.translated),
            ],
          ),
          '',
          `Translated / native: ${num(cpu.ratio, 2)}x (${cpu.ratio <= 2 ? 'PASS' : 'FAIL'}).`,
          '',
        );
      }
    }
  }

  if (r.growth) {
    out.push('## 4. Growth', '');
    for (const [size, runs] of Object.entries(r.growth.prompts)) {
      out.push(`Prompt of ${size}, non-streaming:`, '');
      const rows: string[][] = [];
      for (const [id, mm] of Object.entries(runs) as [PeerId, Measured<unknown>][]) {
        const p = ok(runs[id]);
        if (p === undefined) {
          rows.push(errorRow(id, isError(mm) ? mm.error : 'missing', 8));
          continue;
        }
        rows.push([
          PEER_LABELS[id],
          num(p.connections),
          num(p.requestsPerSec, 1),
          num(p.latencyP50Ms),
          num(p.latencyP99Ms),
          num(p.resources.peakRssMb, 1),
          num(p.resources.cpuPercent, 1),
        ]);
      }
      out.push(table(['peer', 'concurrency', 'req/s', 'p50 ms', 'p99 ms', 'peak RSS MB', 'CPU %'], rows), '');
    }
    for (const [n, runs] of Object.entries(r.growth.streams)) {
      out.push(`${n} concurrent streams of \`${r.growth.streamModel}\`:`, '');
      out.push(streamTable(runs, true), '');
    }
  }

  if (r.backlog) {
    out.push('## 5. Billing backlog', '');
    if (isError(r.backlog)) out.push(`error: ${r.backlog.error}`, '');
    else {
      const b = r.backlog;
      out.push(
        table(
          [
            'events',
            'outbox write',
            'drain (from ready)',
            'events/s',
            'delivered / accepted',
            'sidecar peak RSS',
            'sidecar VmHWM',
            'drained',
          ],
          [
            [
              num(b.events),
              `${num(b.writeMs)} ms (${num(b.writeEventsPerSec)}/s)`,
              `${num(b.drainAfterReadyMs)} ms (spawn to empty ${num(b.drainMs)} ms)`,
              num(b.eventsPerSec),
              `${num(b.delivered)} / ${num(b.acceptedByBillingSim)}`,
              `${num(b.sidecarPeakRssMb, 1)} MB`,
              `${num(b.sidecarHwmMb, 1)} MB`,
              b.drained ? 'yes' : `no (${b.lastReadyz ?? ''})`,
            ],
          ],
        ),
        '',
      );
    }
  }

  if (r.abuse) out.push(...renderAbuse(r));
  if (r.workers) out.push(...renderWorkers(r.workers));
  if (r.shards) out.push(...renderShards(r.shards));
  if (r.realtime) out.push(...renderRealtime(r.realtime));

  out.push('## Notes', '');
  const notes: string[] = [];
  for (const u of r.unavailable)
    notes.push(`- ${PEER_LABELS[u.id]}: not measured: ${u.reason.replaceAll('\n', ' ')}`);
  notes.push(
    `- Portkey runs with \`@hono/node-server\` pinned by an npm override: its current releases make Portkey's streaming path fail with \`TypeError: immutable\` (Portkey-AI/gateway issues 1389 and 1550). Portkey's Node stream reader also waits 25 ms before its first chunk, which shows in its TTFB.`,
  );
  notes.push(
    '- nginx runs one worker per core (`worker_processes auto`); the gateway and Portkey are one Node.js process each.',
  );
  const floor = floorNote(r);
  if (floor !== undefined) notes.push(floor);
  const streamsNote = manyStreamsNote(r);
  if (streamsNote !== undefined) notes.push(streamsNote);
  if (r.profileDir)
    notes.push(
      `- CPU profiles of the gateway processes: \`${r.profileDir}\` (\`node bench/top-profile.ts <file>\`).`,
    );
  out.push(notes.join('\n'), '');
  return out.join('\n');
}

function renderWorkers(w: WorkersResult): string[] {
  const rows: string[][] = [];
  for (const [id, m] of Object.entries(w.runs) as [PeerId, Measured<WorkersResult['runs'][PeerId]>][]) {
    const run = ok(m);
    if (run === undefined) {
      rows.push(errorRow(id, isError(m) ? m.error : 'missing', 4));
      continue;
    }
    rows.push([
      PEER_LABELS[id],
      num(run.requestsPerSec, 1),
      `${num(run.cpuUsPerRequest, 1)} µs`,
      run.rounds.map((x) => `${num(x.cpuUsPerRequest, 1)}`).join(', '),
    ]);
  }
  return [
    '## Workers: one process against `workers: 2`',
    '',
    `Chat at c=${w.connections} on ${w.cores} cores shared with the load generator and the simulator, in interleaved rounds; CPU of the whole process tree (the primary included) per request served, from /proc. On so few shared cores a second worker cannot add throughput: CPU per request is the figure that carries to larger hosts.`,
    '',
    table(
      ['peer', 'req/s (median round)', 'CPU per request (median)', 'CPU per request, each round (µs)'],
      rows,
    ),
    '',
  ];
}

function renderShards(s: ShardsResult): string[] {
  const rows: string[][] = [];
  for (const [label, m] of Object.entries(s.runs) as [string, Measured<ShardsRun>][]) {
    const run = ok(m);
    if (run === undefined) {
      const error = isError(m) ? m.error : 'missing';
      rows.push([
        label,
        `error: ${error.replaceAll('|', '\\|').replaceAll('\n', ' ').slice(0, 300)}`,
        ...Array(7).fill(''),
      ]);
      continue;
    }
    rows.push([
      run.drained ? label : `${label} (not drained)`,
      num(run.shards),
      num(run.events),
      num(run.eventsPerSec),
      num(run.eventsPerSecPerShard),
      `${num(run.sidecarCpuUsPerEvent, 1)} µs`,
      `${num(run.redisCpuUsPerEvent, 1)} µs`,
      `${num(run.sidecarPeakRssMb, 1)} MB`,
      `${num(run.billingSimCpuUsPerEvent, 1)} µs`,
    ]);
  }
  return [
    '## Billing stream shards: events/s per shard',
    '',
    `For each variant a fresh Redis (one endpoint, or a cluster of three primaries), N usage events written into the \`billing_stream_shards\` streams round-robin, then one sidecar (one consumer per shard) draining them into the billing simulator. Rates and CPU cover sidecar ready (first /readyz answer) to streams empty; CPU per event is from /proc, Redis summed over its servers. The sidecar, the billing simulator (SCHED_IDLE, nice 19) and every Redis server share the machine's ${s.cores} cores.`,
    '',
    table(
      [
        'variant',
        'shards',
        'events',
        'drain events/s',
        'events/s per shard',
        'sidecar CPU per event',
        'Redis CPU per event',
        'sidecar peak RSS',
        'billing sim CPU per event',
      ],
      rows,
    ),
    '',
  ];
}

/** Realtime sessions: N OpenAI Realtime sessions at once, directly and through the gateway. */
export function renderRealtime(rt: RealtimeResult): string[] {
  const base = ok(rt.runs.direct);
  const head = [
    'peer',
    'sessions',
    'completed',
    'failed',
    'peak open',
    'deltas/session',
    'session.created p50 / p99 ms',
    'first delta p50 / p99 ms',
    'gap p50 ms',
    'gap p99 ms',
    'added gap p50 / p99 ms',
    'gap p99 each round',
    'peak RSS MB',
    'CPU % of a core',
  ];
  const rows: string[][] = [];
  const failures: string[] = [];
  const TRANSLATED = 'gateway, billing off, OpenAI client on a Gemini Live model (translated)';
  const entries: [PeerId | 'translated', Measured<RealtimeRun> | undefined][] = [
    ...(Object.entries(rt.runs) as [PeerId, Measured<RealtimeRun> | undefined][]),
    ...(rt.translated === undefined
      ? []
      : [['translated', rt.translated] as ['translated', Measured<RealtimeRun>]]),
  ];
  for (const [id, m] of entries) {
    const label = id === 'translated' ? TRANSLATED : PEER_LABELS[id];
    const run = ok(m);
    if (run === undefined) {
      const error = isError(m) ? m.error : 'missing';
      rows.push(
        id === 'translated'
          ? [label, ...errorRow('gateway', error, head.length).slice(1)]
          : errorRow(id, error, head.length),
      );
      continue;
    }
    rows.push([
      label,
      num(run.sessions),
      num(run.completed),
      num(run.failed),
      num(run.peakOpen),
      num(run.deltasPerSession, 1),
      `${num(run.sessionCreatedMs.p50)} / ${num(run.sessionCreatedMs.p99)}`,
      `${num(run.firstDeltaMs.p50)} / ${num(run.firstDeltaMs.p99)}`,
      num(run.gapMs.p50),
      num(run.gapMs.p99),
      base && id !== 'direct'
        ? `${signed(run.gapMs.p50 - base.gapMs.p50)} / ${signed(run.gapMs.p99 - base.gapMs.p99)}`
        : '',
      (run.roundGapP99s ?? []).map((x) => num(x, 1)).join(' · '),
      num(run.resources.peakRssMb, 1),
      num(run.resources.cpuPercent, 1),
    ]);
    if (run.failures.length > 0)
      failures.push(
        `- ${label}: ${run.failures.map((f) => `${num(f.count)} × \`${f.kind.replaceAll('`', "'")}\``).join('; ')}`,
      );
  }
  return [
    '## Realtime sessions (WebSocket)',
    '',
    `${num(rt.sessions)} OpenAI Realtime sessions at once (\`GET /v1/realtime?model=${rt.model}\`, started evenly over ${num(rt.rampMs)} ms), each waiting for \`session.created\`, then asking for one text response of ${rt.chunks} deltas ${rt.delayMs} ms apart, and staying open until every session has had its response, so that all of them are open together at the peak ("peak open" is the lowest such peak over the rounds). Through the gateway the model is routed with \`x-router-provider: openai\`. After a warm-up round the peers take turns for ${rt.rounds} round${rt.rounds === 1 ? '' : 's'}; sessions, completed and failed are totals over them, percentiles pool every round's samples. The client is the \`ws\` package in its own node process, timestamping every frame when it arrives: session.created is from \`new WebSocket()\`, first delta from \`response.create\` sent, and gaps are between consecutive \`response.output_text.delta\` messages of a session; the added gap is the peer minus the simulator measured directly (the frame latency the relay adds). RSS (the highest over the rounds) and CPU (their mean) are the peer's process tree (billing on: with its sidecar) while the sessions run. The translated row is the billing-off gateway with the same client on \`${TRANSLATED_MODEL}\` with the same pacing (\`x-router-provider: gemini\`): the text modality is set by a first \`session.update\`, then a user item and a plain \`response.create\`; every message of both sides goes through the realtime translator to the simulator's Gemini Live endpoint, and its added gap is against the OpenAI simulator measured directly.`,
    '',
    table(head, rows),
    '',
    ...(failures.length > 0 ? ['Failures by kind:', '', failures.join('\n'), ''] : []),
  ];
}
