// Scenario: realtime sessions (docs/realtime.md). `sessions` OpenAI Realtime WebSocket sessions at once,
// against the simulator directly and through the gateway: each opens a session, waits for
// session.created, asks for one text response of `chunks` deltas `delayMs` apart (simulator knobs in the
// model name, routed with `x-router-provider: openai` so the registry need not list it), and stays open
// until every session has had its response, so that all of them are open together at the peak. The
// client runs in its own node process (this file, spawned) so that frame timestamps are not delayed by
// the bench runner; the peer's RSS and CPU are read from /proc meanwhile.

import { fileURLToPath } from 'node:url';
import { type RawData, WebSocket } from 'ws';
import type { BenchContext, Measured, Settings } from '../lib/context.ts';
import { BENCH_ACCESS_KEY, type Peer, type PeerId, SIM_KEY, waitForBillingDrain } from '../lib/peers.ts';
import { monitorResources, type ResourceUse, round, runJsonChild } from '../lib/proc.ts';
import { type Summary, summarize } from '../lib/stats.ts';

export const REALTIME_PEERS: PeerId[] = ['direct', 'gateway', 'gateway-billing'];
export const REALTIME_MODEL = 'gpt-realtime';

export interface RealtimeClientOptions {
  /** ws:// URL of the upgrade, query included. */
  url: string;
  headers: Record<string, string>;
  sessions: number;
  /** Session starts are spread evenly over this window. */
  rampMs: number;
  /** A session that has not had its response.done this long after it started has failed. */
  timeoutMs: number;
  /** Return the raw samples too (for pooling rounds). */
  keepSamples?: boolean;
  /**
   * Through a realtime translator (an OpenAI client on a Gemini Live model): the text modality is set
   * by a first session.update (a response.create may not carry settings there), then a user item and
   * a plain response.create.
   */
  translated?: boolean;
}

interface Samples {
  created: number[];
  firstDelta: number[];
  gaps: number[];
}

export interface RealtimeClientResult {
  sessions: number;
  /** Sessions that saw session.created, every delta and response.done with status completed. */
  completed: number;
  failed: number;
  /** Failures by kind (the first 100 characters of the message), most frequent first. */
  failures: { kind: string; count: number }[];
  /** Highest number of sessions open at once (WebSocket open, not yet closed). */
  peakOpen: number;
  /** Text deltas per completed session, averaged (detects truncated responses). */
  deltasPerSession: number;
  /** new WebSocket() -> session.created arrived, ms. */
  sessionCreatedMs: Summary;
  /** response.create sent -> first response.output_text.delta arrived, ms. */
  firstDeltaMs: Summary;
  /** Between consecutive response.output_text.delta messages of one session, ms. */
  gapMs: Summary;
  /** Start of the first session -> every session completed or failed, ms. */
  wallMs: number;
  samples?: Samples;
}

/** One peer over every measured round: `sessions`, `completed` and `failed` are totals of the rounds. */
export type RealtimeRun = Omit<RealtimeClientResult, 'samples'> & {
  /** Lowest peak of open sessions over the rounds. */
  peakOpen: number;
  /** Each round's own gap p99, in measuring order. */
  roundGapP99s: number[];
  /** Highest RSS over the rounds; CPU averaged over them. */
  resources: ResourceUse;
};

export interface RealtimeResult {
  model: string;
  sessions: number;
  chunks: number;
  delayMs: number;
  /** Session starts were spread over this window. */
  rampMs: number;
  /** Measured rounds per peer (after one warm-up round), interleaved between the peers. */
  rounds: number;
  runs: Partial<Record<PeerId, Measured<RealtimeRun>>>;
  /** The billing-off gateway with an OpenAI client on a Gemini Live model (every message translated). */
  translated?: Measured<RealtimeRun>;
}

/** The Gemini Live model of the translated variant, with the same pacing knobs. */
export const TRANSLATED_MODEL = 'gemini-live-2.5-flash';

export function realtimeModel(chunks: number, delayMs: number): string {
  return `${REALTIME_MODEL}-chunks-${chunks}-delay-${delayMs}`;
}

/** The upgrade request for a peer: the simulator's own key directly, the bench access key to a gateway. */
export function realtimeTarget(
  peer: Peer,
  model: string,
  translated = false,
): { url: string; headers: Record<string, string>; translated?: boolean } {
  const url = `${peer.origin.replace(/^http/, 'ws')}/v1/realtime?model=${encodeURIComponent(model)}`;
  if (translated)
    return {
      url,
      headers: { authorization: `Bearer ${BENCH_ACCESS_KEY}`, 'x-router-provider': 'gemini' },
      translated,
    };
  if (peer.kind === 'gateway')
    return { url, headers: { authorization: `Bearer ${BENCH_ACCESS_KEY}`, 'x-router-provider': 'openai' } };
  return { url, headers: { authorization: `Bearer ${SIM_KEY}` } };
}

/** What one row measures: a peer, and through the billing-off gateway the translated variant too. */
interface Lane {
  readonly peer: Peer;
  readonly model: string;
  readonly translated: boolean;
  readonly done: RoundResult[];
}

export async function runRealtime(ctx: BenchContext): Promise<RealtimeResult> {
  const s = ctx.settings.realtime;
  const model = realtimeModel(s.chunks, s.delayMs);
  const translatedModel = `${TRANSLATED_MODEL}-chunks-${s.chunks}-delay-${s.delayMs}`;
  const runs: RealtimeResult['runs'] = {};
  let translatedRun: Measured<RealtimeRun> | undefined;
  const lanes = new Map<PeerId | 'translated', Lane>();
  const candidates: [PeerId | 'translated', Peer | undefined, string, boolean][] = [
    ...REALTIME_PEERS.map(
      (id) => [id, ctx.peers.get(id), model, false] as [PeerId, Peer | undefined, string, boolean],
    ),
    ['translated', ctx.peers.get('gateway'), translatedModel, true],
  ];
  const fail = (key: PeerId | 'translated', error: string) => {
    if (key === 'translated') translatedRun = { error };
    else runs[key] = { error };
    lanes.delete(key);
  };
  for (const [key, peer, laneModel, translated] of candidates) {
    if (peer === undefined) continue;
    // One quick session first: a peer that cannot serve realtime at all is reported with its answer.
    try {
      const probe = await runRealtimeClient({
        ...realtimeTarget(
          peer,
          translated ? `${TRANSLATED_MODEL}-chunks-2-delay-0` : realtimeModel(2, 0),
          translated,
        ),
        sessions: 1,
        rampMs: 0,
        timeoutMs: 10_000,
      });
      if (probe.completed === 1) lanes.set(key, { peer, model: laneModel, translated, done: [] });
      else fail(key, `probe session failed: ${probe.failures[0]?.kind ?? 'unknown'}`);
    } catch (err) {
      fail(key, describe(err));
    }
  }
  // Round 0 warms up the simulator, the peer and the code paths (the simulator serves every peer, so
  // without it the first peer measured would carry its JIT warm-up); then the peers take turns, so that
  // a slow stretch of the shared machine weighs on all of them.
  for (let pass = 0; pass <= s.rounds; pass++) {
    for (const [key, lane] of lanes) {
      ctx.log(
        `  realtime ${s.sessions} sessions, ${pass === 0 ? 'warm-up' : `round ${pass}/${s.rounds}`}: ${key}`,
      );
      try {
        const result = await oneRound(lane.peer, lane.model, s, lane.translated);
        if (pass > 0) lane.done.push(result);
        // The events of a billing-on gateway are delivered before the next peer is measured.
        if (key === 'gateway-billing') await waitForBillingDrain(lane.peer, 60_000);
      } catch (err) {
        fail(key, describe(err));
        continue;
      }
      if (!lane.peer.service.alive())
        fail(key, `${lane.peer.id} process died: ${lane.peer.service.output().slice(-800)}`);
      await new Promise((r) => setTimeout(r, ctx.settings.smoke ? 50 : 500));
    }
  }
  for (const [key, lane] of lanes) {
    if (key === 'translated') translatedRun = pool(lane.done);
    else runs[key] = pool(lane.done);
  }
  return {
    model,
    sessions: s.sessions,
    chunks: s.chunks,
    delayMs: s.delayMs,
    rampMs: s.rampMs,
    rounds: s.rounds,
    runs,
    ...(translatedRun === undefined ? {} : { translated: translatedRun }),
  };
}

type RoundResult = RealtimeClientResult & { samples: Samples; resources: ResourceUse };

async function oneRound(
  peer: Peer,
  model: string,
  s: Settings['realtime'],
  translated: boolean,
): Promise<RoundResult> {
  const monitor = await monitorResources(peer.service.pid, 100);
  try {
    const result = await runRealtimeClient({
      ...realtimeTarget(peer, model, translated),
      sessions: s.sessions,
      rampMs: s.rampMs,
      timeoutMs: s.timeoutMs,
      keepSamples: true,
    });
    const resources = await monitor.stop();
    if (result.samples === undefined) throw new Error('the realtime client returned no samples');
    return { ...result, samples: result.samples, resources };
  } catch (err) {
    await monitor.stop();
    throw err;
  }
}

/** The rounds of one peer as one result: counts summed, percentiles over every round's samples. */
function pool(done: RoundResult[]): RealtimeRun {
  const failures = new Map<string, number>();
  for (const r of done)
    for (const f of r.failures) failures.set(f.kind, (failures.get(f.kind) ?? 0) + f.count);
  const completed = done.reduce((n, r) => n + r.completed, 0);
  const deltas = done.reduce((n, r) => n + r.deltasPerSession * r.completed, 0);
  const rounds = done.length;
  return {
    sessions: done.reduce((n, r) => n + r.sessions, 0),
    completed,
    failed: done.reduce((n, r) => n + r.failed, 0),
    failures: [...failures]
      .map(([kind, count]) => ({ kind, count }))
      .sort((a, b) => b.count - a.count)
      .slice(0, 5),
    peakOpen: Math.min(...done.map((r) => r.peakOpen)),
    deltasPerSession: completed === 0 ? 0 : Math.round((deltas / completed) * 10) / 10,
    sessionCreatedMs: summarize(done.flatMap((r) => r.samples.created)),
    firstDeltaMs: summarize(done.flatMap((r) => r.samples.firstDelta)),
    gapMs: summarize(done.flatMap((r) => r.samples.gaps)),
    wallMs: Math.round(done.reduce((n, r) => n + r.wallMs, 0) / Math.max(1, rounds)),
    roundGapP99s: done.map((r) => r.gapMs.p99),
    resources: {
      peakRssMb: Math.max(...done.map((r) => r.resources.peakRssMb)),
      endRssMb: done.at(-1)?.resources.endRssMb ?? 0,
      cpuPercent: round(done.reduce((n, r) => n + r.resources.cpuPercent, 0) / Math.max(1, rounds), 1),
      rootHwmMb: Math.max(...done.map((r) => r.resources.rootHwmMb)),
    },
  };
}

function describe(err: unknown): string {
  return err instanceof Error ? `${err.name}: ${err.message}` : String(err);
}

// ---- the client, in its own process ----

interface Collector {
  created: number[];
  firstDelta: number[];
  gaps: number[];
  deltas: number;
  completed: number;
  failures: Map<string, number>;
  open: number;
  peakOpen: number;
}

function fail(c: Collector, message: string): void {
  // Request ids and the like would make every failure a kind of its own.
  const kind = message
    .replaceAll(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi, '<id>')
    .replaceAll(/\b(event|sess|resp|item)_[A-Za-z0-9]+/g, '$1_<id>')
    .replaceAll(/\s+/g, ' ')
    .slice(0, 100);
  c.failures.set(kind, (c.failures.get(kind) ?? 0) + 1);
}

/**
 * One session: resolves when it has completed its response (the socket is then still open; `close`
 * ends it) or failed (the socket is gone). Never rejects.
 */
function oneSession(
  opts: RealtimeClientOptions,
  c: Collector,
): Promise<{ ws: WebSocket | undefined; ok: boolean }> {
  return new Promise((resolve) => {
    const t0 = performance.now();
    let settled = false;
    let opened = false;
    let ws: WebSocket | undefined;
    const finish = (ok: boolean, error?: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (!ok) {
        fail(c, error ?? 'failed');
        ws?.terminate();
      }
      resolve({ ws, ok });
    };
    let stage = 'waiting for the upgrade';
    const timer = setTimeout(() => finish(false, `timeout ${opts.timeoutMs} ms ${stage}`), opts.timeoutMs);
    let socket: WebSocket;
    try {
      socket = new WebSocket(opts.url, { headers: opts.headers, perMessageDeflate: false });
    } catch (err) {
      finish(false, `connect: ${(err as Error).message}`);
      return;
    }
    ws = socket;
    let sentAt = 0;
    let last = -1;
    let deltas = 0;
    const gaps: number[] = [];
    socket.on('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (d: Buffer) => {
        if (body.length < 300) body += d.toString();
      });
      res.on('end', () => finish(false, `upgrade refused: ${res.statusCode} ${body.slice(0, 200)}`));
      res.on('error', () => finish(false, `upgrade refused: ${res.statusCode}`));
    });
    socket.on('error', (err) => finish(false, `${stage}: ${err.message}`));
    socket.on('open', () => {
      opened = true;
      c.open++;
      if (c.open > c.peakOpen) c.peakOpen = c.open;
      stage = 'waiting for session.created';
    });
    socket.on('close', (code, reason) => {
      if (opened) c.open--;
      finish(false, `closed ${code} ${reason.toString().slice(0, 80)} ${stage}`);
    });
    socket.on('message', (data: RawData) => {
      const now = performance.now();
      const text = data.toString();
      // Deltas are the hot path: recognised without a full parse.
      if (text.includes('"type":"response.output_text.delta"')) {
        if (last >= 0) gaps.push(now - last);
        else c.firstDelta.push(now - sentAt);
        last = now;
        deltas++;
        return;
      }
      let type: string | undefined;
      let msg: { type?: string; response?: { status?: string }; error?: { message?: string } };
      try {
        msg = JSON.parse(text) as typeof msg;
        type = msg.type;
      } catch {
        finish(false, `not JSON: ${text.slice(0, 80)}`);
        return;
      }
      if (type === 'session.created') {
        c.created.push(now - t0);
        if (opts.translated) {
          stage = 'waiting for session.updated';
          socket.send(
            JSON.stringify({
              type: 'session.update',
              session: { type: 'realtime', output_modalities: ['text'] },
            }),
          );
          return;
        }
        stage = 'waiting for the response';
        sentAt = performance.now();
        socket.send(JSON.stringify({ type: 'response.create', response: { output_modalities: ['text'] } }));
      } else if (type === 'session.updated' && opts.translated) {
        stage = 'waiting for the response';
        sentAt = performance.now();
        socket.send(
          JSON.stringify({
            type: 'conversation.item.create',
            item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'hello' }] },
          }),
        );
        socket.send(JSON.stringify({ type: 'response.create' }));
      } else if (type === 'error') {
        finish(false, `error event: ${msg.error?.message ?? text.slice(0, 120)}`);
      } else if (type === 'response.done') {
        if (msg.response?.status !== 'completed') {
          finish(false, `response.done status ${msg.response?.status}`);
          return;
        }
        for (const g of gaps) c.gaps.push(g);
        c.deltas += deltas;
        c.completed++;
        stage = 'after its response';
        finish(true);
      }
    });
  });
}

export async function realtimeLoad(opts: RealtimeClientOptions): Promise<RealtimeClientResult> {
  const c: Collector = {
    created: [],
    firstDelta: [],
    gaps: [],
    deltas: 0,
    completed: 0,
    failures: new Map(),
    open: 0,
    peakOpen: 0,
  };
  const started = performance.now();
  const sessions = await Promise.all(
    Array.from({ length: opts.sessions }, async (_, i) => {
      await new Promise((r) => setTimeout(r, (i * opts.rampMs) / opts.sessions));
      return oneSession(opts, c);
    }),
  );
  const wallMs = performance.now() - started;
  const samples = opts.keepSamples
    ? { created: [...c.created], firstDelta: [...c.firstDelta], gaps: [...c.gaps] }
    : undefined;
  // Every session that completed is still open: close them all now (bounded wait for the close frames).
  await Promise.all(
    sessions.map(({ ws, ok }) =>
      ok && ws !== undefined && ws.readyState === WebSocket.OPEN
        ? new Promise<void>((resolve) => {
            const t = setTimeout(() => {
              ws.terminate();
              resolve();
            }, 5000);
            ws.removeAllListeners('close');
            ws.once('close', () => {
              clearTimeout(t);
              resolve();
            });
            ws.close(1000);
          })
        : undefined,
    ),
  );
  return {
    sessions: opts.sessions,
    completed: c.completed,
    failed: opts.sessions - c.completed,
    failures: [...c.failures]
      .map(([kind, count]) => ({ kind, count }))
      .sort((a, b) => b.count - a.count)
      .slice(0, 5),
    peakOpen: c.peakOpen,
    deltasPerSession: c.completed === 0 ? 0 : Math.round((c.deltas / c.completed) * 10) / 10,
    sessionCreatedMs: summarize(c.created),
    firstDeltaMs: summarize(c.firstDelta),
    gapMs: summarize(c.gaps),
    wallMs: Math.round(wallMs),
    samples,
  };
}

const SELF = fileURLToPath(import.meta.url);

/** Runs realtimeLoad in a separate node process and returns its result. */
export function runRealtimeClient(opts: RealtimeClientOptions): Promise<RealtimeClientResult> {
  return runJsonChild<RealtimeClientResult>(SELF, opts, 'realtime client');
}

if (import.meta.main) {
  const opts = JSON.parse(process.argv[2] ?? '{}') as RealtimeClientOptions;
  const result = await realtimeLoad(opts);
  // Exits once the line is written (it can be larger than a pipe's buffer): sockets that did not close in
  // time must not keep the process alive.
  process.stdout.write(`${JSON.stringify(result)}\n`, () => process.exit(0));
}
