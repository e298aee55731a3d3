// Starting and stopping a gateway process: load and compile the configuration, listen, supervise the
// billing sidecar, reload on SIGHUP (atomically: an invalid new configuration is refused and the old
// one kept), drain on SIGTERM. Used by the CLI, the local stack and the end-to-end tests.

import type { AddressInfo } from 'node:net';
import { type Logger, pino } from 'pino';
import { pricingWarnings, unpricedModels } from '../billing/price-coverage.ts';
import { loadPricing } from '../billing/pricing.ts';
import { formatDiagnostic } from '../common/config-diagnostics.ts';
import type { RouterConfig } from '../common/config-types.ts';
import { errorText } from '../common/errors.ts';
import { GATEWAY_URL_ENV, loopbackUrl } from '../common/internal-notify.ts';
import {
  type LoadConfigOptions,
  loadConfig,
  loadConfigFromString,
  readConfigSource,
} from '../config/load.ts';
import { preloadEncodings } from '../hooks/usage/estimate.ts';
import { MemoryResponses } from '../store/memory-response-store.ts';
import { createBillingParts } from './billing-wiring.ts';
import { withBalanceEnforcement } from './enforcement-wiring.ts';
import { createLogger } from './logger.ts';
import { createGatewayMetrics } from './metrics.ts';
import { type BuildOptions, buildRuntime, checkRuntime, type Runtime } from './runtime.ts';
import { createGatewayServer, type GatewayServer } from './server.ts';
import { type SidecarStatus, SidecarTracker } from './sidecar-status.ts';
import { superviseSidecar } from './sidecar-supervisor.ts';
import type { UpstreamClient } from './upstream.ts';
import type { ClusterLink } from './workers/worker-link.ts';

export interface StartOptions {
  readonly env?: Record<string, string | undefined>;
  /** Override config values (CLI flags, tests), snake_case like the file. */
  readonly overrides?: LoadConfigOptions['overrides'];
  /** Start `router-billing` as a supervised child (default: config.sidecar.enabled && billing on). */
  readonly sidecar?: boolean;
  readonly logger?: Logger;
  readonly extraHooks?: BuildOptions['extraHooks'];
  /**
   * On close(), keep accepting and serving this long with /readyz failing before the listener closes,
   * so a load balancer that polls readiness stops sending first (default 0).
   */
  readonly shutdownDelayMs?: number;
  /** Set in a worker of `workers: n`: the primary supervises the sidecar and speaks for all workers. */
  readonly cluster?: ClusterLink;
  /**
   * The main file's text as the caller read and checked it: the first configuration is built from it
   * instead of reading the file again, so it is the one the caller decided on (reloads read the file).
   */
  readonly source?: string;
}

export interface RunningGateway {
  readonly url: string;
  readonly port: number;
  readonly gateway: GatewayServer;
  readonly log: Logger;
  config(): RouterConfig;
  /**
   * Re-read every file (the main file's text given: that text instead of the file); returns the
   * diagnostics that refused it (empty = applied).
   */
  reload(source?: string): Promise<string[]>;
  /** Stop accepting, let in-flight requests finish (up to limits.drain_timeout_ms), flush the outbox. */
  close(): Promise<void>;
}

export class ConfigError extends Error {
  readonly diagnostics: string[];
  constructor(diagnostics: string[]) {
    super(`invalid configuration:\n${diagnostics.join('\n')}`);
    this.name = 'ConfigError';
    this.diagnostics = diagnostics;
  }
}

/** Load + compile a configuration file; every problem as `file:line:col: message`. */
export async function compileConfig(
  file: string,
  opts: StartOptions & {
    log?: Logger;
    upstream?: UpstreamClient;
    metrics?: BuildOptions['metrics'];
    tracing?: BuildOptions['tracing'];
    sidecarStatus?: SidecarStatus;
    responseStore?: BuildOptions['responseStore'];
  },
): Promise<{ runtime: Runtime | undefined; config: RouterConfig | undefined; diagnostics: string[] }> {
  const loadOptions = { env: opts.env, overrides: opts.overrides };
  const loaded =
    opts.source === undefined
      ? await loadConfig(file, loadOptions)
      : await loadConfigFromString(opts.source, file, loadOptions);
  const diagnostics = loaded.diagnostics.map(formatDiagnostic);
  if (loaded.config === undefined) return { runtime: undefined, config: undefined, diagnostics };
  // The logger follows the configuration (log.level), unless the caller brings its own.
  const log = opts.log ?? createLogger('router', loaded.config.log.level);
  const built = await buildRuntime(loaded.config, {
    log,
    env: opts.env,
    upstream: opts.upstream,
    tracing: opts.tracing,
    metrics: opts.metrics,
    billing: withBalanceEnforcement(createBillingParts),
    extraHooks: opts.extraHooks,
    sidecar: opts.sidecarStatus,
    cluster: opts.cluster,
    responseStore: opts.responseStore,
  });
  return {
    runtime: built.runtime,
    config: loaded.config,
    diagnostics: [...diagnostics, ...built.diagnostics],
  };
}

/**
 * Every problem of a configuration as `file:line:col: message` (main file, provider files, registry,
 * keys, hook modules, pricing), with nothing opened, written or connected: what `router -t` runs, safe
 * beside a running gateway of the same configuration.
 */
export async function checkConfig(
  file: string,
  opts: { env?: StartOptions['env']; warnings?: string[] } = {},
): Promise<string[]> {
  return (await validateConfig(file, opts)).problems;
}

/**
 * checkConfig's checks, and the configuration when they found no problem. `source`: the main file's
 * text as the caller read it, checked instead of the file.
 */
export async function validateConfig(
  file: string,
  opts: { env?: StartOptions['env']; warnings?: string[]; source?: string } = {},
): Promise<{ config: RouterConfig | undefined; problems: string[] }> {
  const loaded =
    opts.source === undefined
      ? await loadConfig(file, { env: opts.env })
      : await loadConfigFromString(opts.source, file, { env: opts.env });
  const diagnostics = loaded.diagnostics.map(formatDiagnostic);
  if (loaded.config === undefined) return { config: undefined, problems: diagnostics };
  const log = pino({ level: 'silent' });
  // A routed provider without its upstream key is a warning: valid, but its requests will be refused.
  diagnostics.push(...(await checkRuntime(loaded.config, { log, env: opts.env, warnings: opts.warnings })));
  const pricing = await loadPricing(loaded.config.pricing.files);
  for (const d of pricing.diagnostics) diagnostics.push(`${d.file}:${d.line}:${d.col}: ${d.message}`);
  // Not problems: the configuration is valid, but with billing on these cost money (billing/price-coverage.ts).
  if (loaded.config.billing.enabled) {
    const unpriced = unpricedModels(loaded.config.models.entries, pricing.pricing);
    opts.warnings?.push(...pricingWarnings(unpriced, pricing.pricing));
  }
  return { config: diagnostics.length === 0 ? loaded.config : undefined, problems: diagnostics };
}

/** The main file's text, read once by a caller that hands it on; ConfigError when it cannot be read. */
export async function readMainFile(file: string): Promise<string> {
  const read = await readConfigSource(file);
  if ('diagnostics' in read) throw new ConfigError(read.diagnostics.map(formatDiagnostic));
  return read.source;
}

export async function startGateway(file: string, opts: StartOptions = {}): Promise<RunningGateway> {
  // Runtimes of every reload share it: readiness and webhook forwarding follow the one sidecar.
  const sidecarStatus = opts.cluster?.sidecar ?? new SidecarTracker();
  // File mode's stored responses outlive reloads, as the upstream pools do.
  const responseStore = new MemoryResponses();
  const first = await compileConfig(file, { ...opts, log: opts.logger, sidecarStatus, responseStore });
  if (first.runtime === undefined || first.config === undefined) throw new ConfigError(first.diagnostics);
  let config = first.config;
  let runtime = first.runtime;
  const log = runtime.log;
  const upstream = runtime.upstream;
  const metrics = runtime.metrics;
  const tracing = runtime.tracing;
  const gateway = createGatewayServer(runtime);
  opts.cluster?.serve({
    metricsJson: () => metrics.registry.getMetricsAsJSON(),
    applySubjectState: (subject) => runtime.applySubjectState(subject),
  });

  // Before accepting connections: an encoding's load would otherwise stall the first estimate's turn.
  preloadEncodings();
  await new Promise<void>((resolve, reject) => {
    gateway.server.once('error', reject);
    // A deep accept queue: a burst of new connections (a thousand clients opening streams at once)
    // must not overflow it while the event loop is busy, or clients wait out SYN retransmits (1 s, 3 s).
    // Workers bind the address each with SO_REUSEPORT: the kernel spreads new connections over them,
    // and a worker that dies takes only its own connections along (node:cluster's round robin in the
    // primary could leave a connection it was handing to a dying worker open and unanswered).
    const shared = opts.cluster === undefined ? {} : { exclusive: true, reusePort: true };
    gateway.server.listen(
      { port: config.listen.port, host: config.listen.host, backlog: 4096, ...shared },
      () => {
        gateway.server.off('error', reject);
        resolve();
      },
    );
  });
  const address = gateway.server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const url = `http://${host}:${address.port}`;
  opts.cluster?.listening(url);

  const wantSidecar =
    opts.cluster === undefined && (opts.sidecar ?? config.sidecar.enabled) && config.billing.enabled;
  // The sidecar tells this gateway about webhook state changes before answering them (file mode).
  const sidecarEnv = {
    ...(opts.env ?? process.env),
    [GATEWAY_URL_ENV]: loopbackUrl(address.address, address.port),
  };
  if (opts.cluster === undefined) sidecarStatus.supervised = wantSidecar;
  const sidecar = wantSidecar
    ? superviseSidecar(file, log, sidecarEnv, sidecarStatus, () => config.billing.listen)
    : undefined;

  let closed = false;
  // Reloads run one at a time; retired runtimes close once their last request ends.
  let reloading: Promise<string[]> = Promise.resolve([]);
  const retiring = new Set<Promise<void>>();
  const retire = (old: Runtime) => {
    const done: Promise<void> = gateway
      .settled(old)
      .then(() => old.close())
      .catch((err: unknown) => log.warn({ err: errorText(err) }, 'closing the previous configuration failed'))
      .finally(() => retiring.delete(done));
    retiring.add(done);
  };
  const reloadOnce = async (source: string | undefined): Promise<string[]> => {
    let next: Awaited<ReturnType<typeof compileConfig>>;
    try {
      // A reload may change log.level: the new runtime gets a logger of its own unless one was given.
      next = await compileConfig(file, {
        ...opts,
        source,
        log: opts.logger,
        upstream,
        metrics,
        tracing,
        sidecarStatus,
        responseStore,
      });
    } catch (err) {
      const message = errorText(err);
      log.error({ diagnostic: message }, 'reload refused: configuration could not be built');
      return [message];
    }
    if (next.runtime === undefined || next.config === undefined) {
      for (const d of next.diagnostics) log.error({ diagnostic: d }, 'reload refused: configuration invalid');
      return next.diagnostics;
    }
    const old = runtime;
    runtime = next.runtime;
    config = next.config;
    gateway.setRuntime(runtime);
    log.info({ providers: runtime.providers.size }, 'configuration reloaded');
    // Requests in flight finish on the runtime they started with; its resources close after them.
    retire(old);
    return [];
  };
  return {
    url,
    port: address.port,
    gateway,
    log,
    config: () => config,
    reload(source) {
      if (closed) return Promise.resolve(['the gateway is shutting down']);
      reloading = reloading.then(() => reloadOnce(source));
      return reloading;
    },
    async close() {
      if (closed) return;
      closed = true;
      opts.cluster?.close();
      // A shutdown that stalls says where, instead of hanging silently until the supervisor's kill.
      let stage = 'a reload in progress';
      const report = setInterval(
        () => log.warn({ stage, inFlight: gateway.inFlight() }, 'shutdown still waiting'),
        SHUTDOWN_REPORT_MS,
      ).unref();
      await reloading;
      const delay = opts.shutdownDelayMs ?? 0;
      if (delay > 0) {
        gateway.unready();
        log.info(
          { shutdownDelayMs: delay },
          'readiness failing; still serving until the shutdown delay ends',
        );
        stage = 'the shutdown delay';
        await new Promise((resolve) => setTimeout(resolve, delay));
      }
      stage = 'requests in flight';
      gateway.drain();
      log.info(
        { inFlight: gateway.inFlight(), drainTimeoutMs: config.limits.drainTimeoutMs },
        'listener closed; waiting for requests in flight',
      );
      await waitIdle(gateway, config.limits.drainTimeoutMs);
      if (gateway.inFlight() > 0) {
        log.warn({ inFlight: gateway.inFlight() }, 'drain timeout: closing the connections still open');
        // Closing a connection aborts its request (upstream call cancelled); each still completes
        // (usage settled on what was delivered, event queued) before the queue may close. Realtime
        // sessions still open get a close frame (1001, going away). Streams read on after their client
        // left (finish_upstream) stop too, as do those whose client the cut makes leave.
        stage = 'requests cut at the drain timeout';
        const sessionsClosed = gateway.closeSessions();
        upstream.stopOrphans();
        gateway.server.closeAllConnections();
        await sessionsClosed;
        await waitCompleting(gateway, COMPLETION_STALL_MS);
        if (gateway.inFlight() > 0)
          log.error(
            { inFlight: gateway.inFlight() },
            'requests cut at the drain timeout did not complete: their usage events may be lost',
          );
      }
      gateway.server.closeAllConnections();
      stage = 'configurations retired by reloads';
      await Promise.all(retiring);
      stage = 'the store and the outbox';
      await runtime.close();
      stage = 'upstream connections';
      await upstream.close().catch(() => undefined);
      stage = 'the span exporter';
      // The spans of the last requests go out before the process ends.
      await tracing.shutdown().catch(() => undefined);
      stage = 'the sidecar';
      await sidecar?.stop();
      clearInterval(report);
    },
  };
}

/**
 * Requests cut at the drain timeout get to complete for as long as some of them keep completing; the
 * wait ends when none has for this long (docs/operations.md "Reload and drain"). A fixed total would
 * drop the last events of a busy machine, where completing many cut requests takes longer.
 */
const COMPLETION_STALL_MS = 5000;

/** How often a shutdown that has not ended logs the step it waits on. */
const SHUTDOWN_REPORT_MS = 10_000;

/** Resolves when no request is in flight, or once none has completed for `stallMs`. */
function waitCompleting(gateway: GatewayServer, stallMs: number): Promise<void> {
  if (gateway.inFlight() === 0) return Promise.resolve();
  return new Promise((resolve) => {
    let left = gateway.inFlight();
    let deadline = Date.now() + stallMs;
    const timer = setInterval(() => {
      const now = gateway.inFlight();
      if (now < left) {
        left = now;
        deadline = Date.now() + stallMs;
      }
      if (now === 0 || Date.now() >= deadline) {
        clearInterval(timer);
        resolve();
      }
    }, 25);
  });
}

/** Resolves when no request is in flight (nor completing), or after `timeoutMs`. */
function waitIdle(gateway: GatewayServer, timeoutMs: number): Promise<void> {
  if (gateway.inFlight() === 0) return Promise.resolve();
  return new Promise((resolve) => {
    const deadline = Date.now() + timeoutMs;
    const timer = setInterval(() => {
      if (gateway.inFlight() === 0 || Date.now() >= deadline) {
        clearInterval(timer);
        resolve();
      }
    }, 25);
  });
}

export { createGatewayMetrics };
