// `workers: n` (n > 1): this process serves nothing itself. It forks n workers that share the one listen
// address through node:cluster, restarts a worker that dies (common/restart-policy.ts), and gives up
// (exit 1) only when they keep dying with none serving. It passes SIGHUP and SIGTERM on to all of them
// and runs the one billing sidecar, whose state it reports to every worker. It answers what no single
// worker can: /metrics of all workers (each worker asks it), how many workers listen, and the sidecar's
// subject state notice, which it applies in every worker before the sidecar answers its webhook.

import cluster, { type Worker } from 'node:cluster';
import { createServer, type Server } from 'node:http';
import { type AddressInfo, createServer as createNetServer } from 'node:net';
import type { Logger } from 'pino';
import { AggregatorRegistry } from 'prom-client';
import type { ListenAddress, RouterConfig } from '../../common/config-types.ts';
import { EXIT } from '../../common/exit-codes.ts';
import { createNoticeHandler, GATEWAY_URL_ENV, SUBJECT_STATE_PATH } from '../../common/internal-notify.ts';
import type { Admission, HeldSlot, Settlement } from '../../common/rate-limit-types.ts';
import type { StoredResponse } from '../../common/response-store-types.ts';
import { givesUp, keptCrashes, RESTART_POLICY, restartDelayMs } from '../../common/restart-policy.ts';
import type { SubjectRef } from '../../common/store-types.ts';
import { MemoryRateLimits } from '../../store/memory-rate-limits.ts';
import { MemoryResponses } from '../../store/memory-response-store.ts';
import { SidecarTracker } from '../sidecar-status.ts';
import { superviseSidecar } from '../sidecar-supervisor.ts';
import { Rpc } from './rpc.ts';
import type { MetricsJson, WorkersReport } from './worker-link.ts';

export interface PrimaryOptions {
  readonly configFile: string;
  readonly config: RouterConfig;
  /** The main file's text the config was checked from: workers build from it, not from the file. */
  readonly source?: string;
  readonly log: Logger;
  /** Run the billing sidecar (billing on, sidecar.enabled, no --no-sidecar). */
  readonly sidecar: boolean;
  readonly env?: Record<string, string | undefined>;
  /** How the primary ends when it gives up after the start (default process.exit); tests watch it. */
  readonly exit?: (code: number) => void;
}

export interface RunningPrimary {
  /** The address every worker listens on. */
  readonly url: string;
  readonly workerPids: () => number[];
  /**
   * Every worker reloads its configuration from `source`, the main file's text the primary read (each
   * refuses an invalid one on its own); `config` is what the primary checked it into.
   */
  reload(config: RouterConfig, source: string): void;
  /** Every worker drains and exits; then the sidecar stops. */
  stop(): Promise<void>;
}

/** How long the primary waits for one worker's metrics or for a relayed notice to be applied. */
const WORKER_CALL_TIMEOUT_MS = 2000;

interface Slot {
  readonly id: number;
  worker: Worker | undefined;
  rpc: Rpc | undefined;
  listening: boolean;
  /** When this slot's workers died unasked, within the policy's windows. */
  crashes: number[];
  timer: NodeJS.Timeout | undefined;
}

export async function startPrimary(opts: PrimaryOptions): Promise<RunningPrimary> {
  const { log } = opts;
  let config = opts.config;
  let source = opts.source;
  const count = config.workers;
  // File mode's rate-limit counters for every worker (Redis mode counts in the store instead).
  const rateLimits = new MemoryRateLimits();
  // File mode's stored responses, for every worker: a conversation may continue on any of them.
  const responses = new MemoryResponses();
  const slots: Slot[] = Array.from({ length: count }, (_, i) => ({
    id: i + 1,
    worker: undefined,
    rpc: undefined,
    listening: false,
    crashes: [],
    timer: undefined,
  }));
  let stopping = false;
  let restartsTotal = 0;
  /** Every slot's crashes: the primary gives up on these. */
  let allCrashes: number[] = [];
  /** The workers running now, with their channel. */
  const live = () => slots.flatMap((slot) => (slot.rpc === undefined ? [] : [{ slot, rpc: slot.rpc }]));

  const sidecarState = new SidecarTracker();
  sidecarState.supervised = opts.sidecar;
  sidecarState.onChange = (state) => {
    for (const { rpc } of live()) rpc.notify('sidecar', { supervised: true, state });
  };

  const relaySubjectState = async (subject: SubjectRef) => {
    await Promise.all(live().map(({ rpc }) => rpc.call('subject-state', subject, WORKER_CALL_TIMEOUT_MS)));
  };
  const notices = opts.sidecar ? await listenForNotices(() => config, log, relaySubjectState) : undefined;

  const metricsText = async (): Promise<string> => {
    const parts = await Promise.all(
      live()
        .filter(({ slot }) => slot.listening)
        .map(({ rpc }) =>
          (rpc.call('metrics-json', undefined, WORKER_CALL_TIMEOUT_MS) as Promise<MetricsJson>).catch(
            () => undefined,
          ),
        ),
    );
    return AggregatorRegistry.aggregate(parts.filter((p) => p !== undefined)).metrics();
  };
  const report = (): WorkersReport => ({
    configured: count,
    listening: slots.filter((s) => s.listening).length,
    restarts: restartsTotal,
  });

  // The start is done once one worker listens: one that fails meanwhile is restarted like any other.
  let firstListening: ((url: string) => void) | undefined;
  let startFailed: ((err: Error) => void) | undefined;
  const started = new Promise<string>((resolve, reject) => {
    firstListening = resolve;
    startFailed = reject;
  });
  let everListened = false;

  const giveUp = () => {
    const err = new Error(
      `workers crashed ${allCrashes.length} times within ${RESTART_POLICY.giveUpWindowMs / 60_000} minutes with none listening`,
    );
    log.fatal({ crashes: allCrashes.length }, 'workers keep crashing with none serving; giving up');
    stopping = true;
    if (!everListened) {
      startFailed?.(err);
      return;
    }
    void stop().then(() => (opts.exit ?? process.exit)(EXIT.failed));
  };

  const fork = (slot: Slot) => {
    slot.timer = undefined;
    if (stopping) return;
    const worker = cluster.fork({
      ...(opts.env ?? {}),
      ROUTER_WORKER_ID: String(slot.id),
      // Every worker binds this address itself (SO_REUSEPORT): port 0 is resolved once, here.
      ROUTER_LISTEN: listenAddress,
    });
    const rpc = new Rpc({
      send: (m) => worker.send(m),
      onMessage: (listener) => worker.on('message', listener),
    });
    slot.worker = worker;
    slot.rpc = rpc;
    slot.listening = false;
    rpc.handle('config-source', () => source);
    rpc.handle('metrics', metricsText);
    rpc.handle('workers', report);
    rpc.handle('rate-limit-admit', (body) => {
      const { admission, leaseMs } = body as { admission: Admission; leaseMs: number };
      return rateLimits.admitNow(admission, leaseMs);
    });
    rpc.handle('rate-limit-finish', (body) => rateLimits.finishNow(body as Settlement));
    rpc.handle('rate-limit-renew', (body) => {
      const { slots, leaseMs } = body as { slots: HeldSlot[]; leaseMs: number };
      rateLimits.renewNow(slots, leaseMs);
    });
    serveResponses(rpc, responses);
    rpc.handle('draining', () => {
      slot.listening = false;
    });
    worker.once('online', () => {
      if (opts.sidecar) rpc.notify('sidecar', { supervised: true, state: sidecarState.state });
    });
    rpc.handle('listening', (body) => {
      slot.listening = true;
      log.info({ worker: slot.id, pid: worker.process.pid }, 'worker listening');
      if (!everListened) {
        everListened = true;
        firstListening?.((body as { url: string }).url);
      }
    });
    worker.once('exit', (code, signal) => {
      rpc.close();
      slot.worker = undefined;
      slot.rpc = undefined;
      slot.listening = false;
      if (stopping) return;
      const now = Date.now();
      slot.crashes = keptCrashes([...slot.crashes, now], now);
      allCrashes = keptCrashes([...allCrashes, now], now);
      const serving = slots.some((s) => s.listening);
      if (givesUp(allCrashes, now, serving)) {
        giveUp();
        return;
      }
      const delay = restartDelayMs(slot.crashes, now);
      restartsTotal++;
      log.error({ worker: slot.id, code, signal, restartInMs: delay }, 'worker exited; restarting');
      slot.timer = setTimeout(() => fork(slot), delay);
    });
  };

  const listenAddress = await resolvePort(config.listen);
  const sidecar = opts.sidecar
    ? superviseSidecar(
        opts.configFile,
        log,
        { ...(opts.env ?? process.env), [GATEWAY_URL_ENV]: notices?.url },
        sidecarState,
        () => config.billing.listen,
      )
    : undefined;
  for (const slot of slots) fork(slot);

  const stop = async (): Promise<void> => {
    stopping = true;
    const exits: Promise<void>[] = [];
    for (const slot of slots) {
      if (slot.timer !== undefined) clearTimeout(slot.timer);
      const w = slot.worker;
      if (w === undefined) continue;
      exits.push(new Promise((resolve) => w.once('exit', () => resolve())));
      slot.rpc?.notify('stop');
    }
    // Each worker bounds its own drain; this only says which ones a stalled stop waits on.
    const report = setInterval(() => {
      const left = slots.flatMap((s) => (s.worker === undefined ? [] : [s.worker.process.pid]));
      log.warn({ pids: left }, 'waiting for workers to drain');
    }, 10_000).unref();
    await Promise.all(exits);
    clearInterval(report);
    // After the workers: their last events are in the outbox for the sidecar to deliver next start.
    await sidecar?.stop();
    await new Promise<void>((resolve) =>
      notices === undefined ? resolve() : notices.server.close(() => resolve()),
    );
  };

  let url: string;
  try {
    url = await started;
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    url,
    workerPids: () =>
      slots.flatMap((s) => (s.worker?.process.pid === undefined ? [] : [s.worker.process.pid])),
    reload(next, nextSource) {
      config = next;
      source = nextSource;
      for (const { rpc } of live()) rpc.notify('reload', { source: nextSource });
    },
    stop,
  };
}

/**
 * `host:port` for the workers, a free port in place of port 0 (tests, local runs): with SO_REUSEPORT each
 * worker binding port 0 would get a port of its own.
 */
async function resolvePort(listen: ListenAddress): Promise<string> {
  const hostPart = listen.host.includes(':') ? `[${listen.host}]` : listen.host;
  if (listen.port !== 0) return `${hostPart}:${listen.port}`;
  const probe = createNetServer();
  const port = await new Promise<number>((resolve, reject) => {
    probe.once('error', reject);
    probe.listen(0, listen.host, () => resolve((probe.address() as AddressInfo).port));
  });
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return `${hostPart}:${port}`;
}

/**
 * The sidecar's subject state notices come to the primary, on a loopback port of its own: a notice sent
 * to the shared listen address would reach one worker only.
 */
async function listenForNotices(
  config: () => RouterConfig,
  log: Logger,
  apply: (subject: SubjectRef) => Promise<void>,
): Promise<{ server: Server; url: string }> {
  let handler = createNoticeHandler({
    secret: config().billing.balanceEnforcement.webhookSecret,
    log,
    apply,
  });
  let secret = config().billing.balanceEnforcement.webhookSecret;
  const server = createServer((req, res) => {
    const current = config().billing.balanceEnforcement.webhookSecret;
    if (current !== secret) {
      secret = current;
      handler = createNoticeHandler({ secret, log, apply });
    }
    if (req.method !== 'POST' || (req.url ?? '').split('?')[0] !== SUBJECT_STATE_PATH) {
      req.resume();
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end('{"error":{"message":"Unknown endpoint","type":"internal_notice_error"}}');
      return;
    }
    void handler(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

interface ResponseCall {
  readonly subject: SubjectRef;
  readonly id: string;
}

/** The workers' calls on the stored responses the primary holds (proxy/workers/worker-link.ts). */
function serveResponses(rpc: Rpc, responses: MemoryResponses): void {
  rpc.handle('stored-response-put', (body) => {
    const { subject, response, ttlMs } = body as {
      subject: SubjectRef;
      response: StoredResponse;
      ttlMs: number;
    };
    responses.putNow(subject, response, ttlMs);
  });
  rpc.handle('stored-response-get', (body) => {
    const { subject, id } = body as ResponseCall;
    return responses.getNow(subject, id);
  });
  rpc.handle('stored-response-get-item', (body) => {
    const { subject, id } = body as ResponseCall;
    return responses.getByItemNow(subject, id);
  });
  rpc.handle('stored-response-delete', (body) => {
    const { subject, id } = body as ResponseCall;
    return responses.deleteNow(subject, id);
  });
}
