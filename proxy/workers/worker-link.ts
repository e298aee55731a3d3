// A worker's side of `workers: n` (proxy/workers/primary.ts): what reaches "the gateway" reaches every
// worker. The primary supervises the one sidecar and tells each worker its state; it gathers every
// worker's metrics into one /metrics answer and knows how many workers listen; it relays the sidecar's
// subject state notices to every worker before the sidecar answers its webhook.

import cluster from 'node:cluster';
import type { MetricObjectWithValues, MetricValue } from 'prom-client';
import type { AdmitResult, RateLimitCounters } from '../../common/rate-limit-types.ts';
import type { ResponseStore } from '../../common/response-store-types.ts';
import type { SubjectRef } from '../../common/store-types.ts';
import { type SidecarState, SidecarTracker } from '../sidecar-status.ts';
import { Rpc } from './rpc.ts';

export type MetricsJson = MetricObjectWithValues<MetricValue<string>>[];

export interface WorkersReport {
  readonly configured: number;
  readonly listening: number;
  readonly restarts: number;
}

/** What a worker's gateway asks of the primary and answers for it. */
export interface ClusterLink {
  /** The sidecar the primary supervises, as the primary last reported it. */
  readonly sidecar: SidecarTracker;
  /** The main file's text the primary read and checked (undefined: the worker reads the file). */
  configSource(): Promise<string | undefined>;
  /** Every worker's metrics as one Prometheus exposition. */
  metricsText(): Promise<string>;
  workers(): Promise<WorkersReport>;
  /** File mode's rate-limit counters, kept by the primary for every worker of the host. */
  readonly rateLimits: RateLimitCounters;
  /** File mode's stored responses, kept by the primary for every worker of the host. */
  readonly responses: ResponseStore;
  /** What this worker answers the primary: its metrics, and applying a subject's new state. */
  serve(handlers: {
    metricsJson(): Promise<MetricsJson>;
    applySubjectState(subject: SubjectRef): Promise<void>;
  }): void;
  /** Called once on the primary's `stop` (drain and exit), and on every `reload` with the text to load. */
  onStop(listener: () => void): void;
  onReload(listener: (source: string | undefined) => void): void;
  /** Tells the primary this worker accepts connections (at `url`). */
  listening(url: string): void;
  /** Tells the primary this worker has shut its listener and is draining. */
  close(): void;
}

/** How long a worker waits for the primary's answer to /metrics or /readyz. */
export const PRIMARY_CALL_TIMEOUT_MS = 5000;

export function connectToPrimary(): ClusterLink {
  if (!cluster.isWorker) throw new Error('connectToPrimary() runs in a worker of the router primary');
  const rpc = new Rpc({
    send: (m) => process.send?.(m),
    onMessage: (listener) => process.on('message', listener),
  });
  const sidecar = new SidecarTracker();
  rpc.handle('sidecar', (body) => {
    const { supervised, state } = body as { supervised: boolean; state: SidecarState };
    sidecar.supervised = supervised;
    sidecar.set(state);
  });
  const stops: (() => void)[] = [];
  const reloads: ((source: string | undefined) => void)[] = [];
  // A stop can come while the gateway is still starting (it reports listening before it is returned):
  // it is kept for the listener registered then.
  let stopped = false;
  rpc.handle('stop', () => {
    stopped = true;
    for (const l of stops.splice(0)) l();
  });
  rpc.handle('reload', (body) => {
    const source = (body as { source?: string } | undefined)?.source;
    for (const l of reloads) l(source);
  });
  return {
    sidecar,
    async configSource() {
      return (await rpc.call('config-source', undefined, PRIMARY_CALL_TIMEOUT_MS)) as string | undefined;
    },
    async metricsText() {
      return (await rpc.call('metrics', undefined, PRIMARY_CALL_TIMEOUT_MS)) as string;
    },
    async workers() {
      return (await rpc.call('workers', undefined, PRIMARY_CALL_TIMEOUT_MS)) as WorkersReport;
    },
    rateLimits: {
      admit: async (admission, leaseMs) =>
        (await rpc.call('rate-limit-admit', { admission, leaseMs }, PRIMARY_CALL_TIMEOUT_MS)) as AdmitResult,
      finish: async (settlement) => {
        await rpc.call('rate-limit-finish', settlement, PRIMARY_CALL_TIMEOUT_MS);
      },
      renew: async (slots, leaseMs) => {
        await rpc.call('rate-limit-renew', { slots, leaseMs }, PRIMARY_CALL_TIMEOUT_MS);
      },
    },
    responses: {
      put: async (subject, response, ttlMs) => {
        await rpc.call('stored-response-put', { subject, response, ttlMs }, PRIMARY_CALL_TIMEOUT_MS);
      },
      get: async (subject, id) =>
        (await rpc.call('stored-response-get', { subject, id }, PRIMARY_CALL_TIMEOUT_MS)) as
          | string
          | undefined,
      getByItem: async (subject, id) =>
        (await rpc.call('stored-response-get-item', { subject, id }, PRIMARY_CALL_TIMEOUT_MS)) as
          | string
          | undefined,
      delete: async (subject, id) =>
        (await rpc.call('stored-response-delete', { subject, id }, PRIMARY_CALL_TIMEOUT_MS)) as boolean,
    },
    serve(handlers) {
      rpc.handle('metrics-json', () => handlers.metricsJson());
      rpc.handle('subject-state', (body) => handlers.applySubjectState(body as SubjectRef));
    },
    onStop(listener) {
      if (stopped) listener();
      else stops.push(listener);
    },
    onReload(listener) {
      reloads.push(listener);
    },
    listening(url) {
      rpc.notify('listening', { url });
    },
    close() {
      rpc.notify('draining');
    },
  };
}
