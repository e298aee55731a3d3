// `router -c FILE` runs the gateway; `router -t FILE` validates the whole configuration (main file,
// provider files, registry, keys, pricing) without opening anything, and prints every problem as
// `file:line:col: message`. Exit codes: common/exit-codes.ts.

import '../common/early-async-context.ts';
import '../common/compile-cache.ts';
import cluster from 'node:cluster';
import { Command, Option, UsageError } from 'clipanion';
import type { Logger } from 'pino';
import { CliCommand } from '../common/cli-usage.ts';
import { errorText } from '../common/errors.ts';
import { EXIT, EXIT_CODES_HELP } from '../common/exit-codes.ts';
import { handleSignals } from '../common/signals.ts';
import { runSingleCommand } from '../common/single-command-cli.ts';

export class RouterCommand extends CliCommand {
  static override usage = Command.Usage({
    description: 'the LLM routing gateway',
    details: `
      Signals: SIGTERM/SIGINT drain and exit 0 (a second one, a second or more later, exits 1 at once);
      SIGHUP reloads the configuration (an invalid one is refused and the running one kept).

      ${EXIT_CODES_HELP}
    `,
    examples: [
      [
        'Validate a configuration (every problem as file:line:col; exit 0 valid, 2 invalid)',
        '$0 -t router.yaml',
      ],
      ['Serve, starting the billing sidecar (router-billing) when billing is on', '$0 -c router.yaml'],
      [
        'Serve with router-billing run as its own unit, readiness failing 5 s before the listener closes',
        '$0 -c router.yaml --no-sidecar --shutdown-delay-ms 5000',
      ],
    ],
  });

  config = Option.String('-c,--config', { description: 'Run the gateway with this configuration' });
  test = Option.String('-t,--test', { description: 'Validate this configuration and exit' });
  noSidecar = Option.Boolean('--no-sidecar', false, {
    description: 'Do not start the billing sidecar (run router-billing separately)',
  });
  shutdownDelayMs = Option.String('--shutdown-delay-ms', {
    description: 'On SIGTERM, fail /readyz but keep serving this many ms before closing the listener',
  });

  async execute(): Promise<number> {
    if (this.test !== undefined) return this.validate(this.test);
    if (this.config === undefined) throw new UsageError('-c <config.yaml> or -t <config.yaml> is required');
    const shutdownDelayMs = Number(this.shutdownDelayMs ?? '0');
    if (!Number.isSafeInteger(shutdownDelayMs) || shutdownDelayMs < 0)
      throw new UsageError('--shutdown-delay-ms wants a whole number of milliseconds');
    // Loaded here, not at the top, so --help and --version do not compile the gateway.
    if (cluster.isWorker) return this.serveAsWorker(this.config, shutdownDelayMs);
    const { ConfigError, readMainFile, startGateway } = await import('./gateway.ts');
    try {
      // Read once: the checks, the worker count and what serves all go by this text, whatever happens
      // to the file meanwhile.
      const source = await readMainFile(this.config);
      const workers = await this.workerCount(this.config, source);
      if (workers > 1) return await this.serveAsPrimary(this.config, source);
      const running = await startGateway(this.config, {
        sidecar: this.noSidecar ? false : undefined,
        shutdownDelayMs,
        source,
      });
      running.log.info({ url: running.url }, 'router listening');
      onSignals(
        running.log,
        () => running.close(),
        () => void running.reload(),
      );
      return -1;
    } catch (err) {
      if (err instanceof ConfigError) {
        for (const d of err.diagnostics) this.err(d);
        return EXIT.usage;
      }
      this.err(`router: ${errorText(err)}`);
      return EXIT.failed;
    }
  }

  /** The configured `workers`, after the whole configuration was checked (invalid: ConfigError). */
  private async workerCount(file: string, source: string): Promise<number> {
    const { ConfigError } = await import('./gateway.ts');
    const { loadConfigFromString } = await import('../config/load.ts');
    const { formatDiagnostic } = await import('../common/config-diagnostics.ts');
    const loaded = await loadConfigFromString(source, file);
    if (loaded.config === undefined) throw new ConfigError(loaded.diagnostics.map(formatDiagnostic));
    return loaded.config.workers;
  }

  /** `workers: n`: start n workers and the sidecar, serve nothing here (proxy/workers/primary.ts). */
  private async serveAsPrimary(file: string, source: string): Promise<number> {
    const { ConfigError, readMainFile, validateConfig } = await import('./gateway.ts');
    const { startPrimary } = await import('./workers/primary.ts');
    // Checked whole here, once, so that a broken configuration is reported once and not by every worker.
    const checked = await validateConfig(file, { source });
    if (checked.config === undefined) throw new ConfigError(checked.problems);
    const config = checked.config;
    const { createLogger } = await import('./logger.ts');
    const log = createLogger('router', config.log.level);
    const primary = await startPrimary({
      configFile: file,
      config,
      source,
      log,
      sidecar: !this.noSidecar && config.sidecar.enabled && config.billing.enabled,
    });
    log.info({ url: primary.url, workers: config.workers, pids: primary.workerPids() }, 'router listening');
    onSignals(
      log,
      () => primary.stop(),
      async () => {
        // Read and checked once, here: every worker reloads this text.
        let problems: string[];
        try {
          const text = await readMainFile(file);
          const next = await validateConfig(file, { source: text });
          if (next.config !== undefined) {
            primary.reload(next.config, text);
            return;
          }
          problems = next.problems;
        } catch (err) {
          problems = err instanceof ConfigError ? err.diagnostics : [errorText(err)];
        }
        for (const d of problems) log.error({ diagnostic: d }, 'reload refused: configuration invalid');
      },
    );
    return -1;
  }

  /** One worker of a primary: serves on the shared address; the primary supervises the sidecar. */
  private async serveAsWorker(file: string, shutdownDelayMs: number): Promise<number> {
    const { startGateway } = await import('./gateway.ts');
    const { connectToPrimary } = await import('./workers/worker-link.ts');
    const link = connectToPrimary();
    try {
      // The text the primary read and checked, not the file again (it may have changed since).
      const source = await link.configSource();
      const running = await startGateway(file, { shutdownDelayMs, cluster: link, source });
      running.log.info({ url: running.url, worker: process.env.ROUTER_WORKER_ID }, 'worker serving');
      const stop = onSignals(
        running.log,
        () => running.close(),
        () => void running.reload(),
        true,
      );
      link.onStop(() => void stop('primary'));
      link.onReload((source) => void running.reload(source));
      return -1;
    } catch (err) {
      this.err(`router worker: ${errorText(err)}`);
      // Its channel to the primary would keep it running: it exits, and the primary restarts it.
      process.exit(EXIT.failed);
    }
  }

  /** A dry run: nothing is opened, written or connected (the gateway of this file may be running). */
  private async validate(file: string): Promise<number> {
    const { checkConfig } = await import('./gateway.ts');
    let problems: string[];
    const warnings: string[] = [];
    try {
      problems = await checkConfig(file, { warnings });
    } catch (err) {
      this.err(`router: cannot check ${file}: ${errorText(err)}`);
      return EXIT.failed;
    }
    for (const w of warnings) this.err(`warning: ${w}`);
    if (problems.length > 0) {
      for (const p of problems) this.err(p);
      this.err(
        `router: configuration invalid (${problems.length} problem${problems.length === 1 ? '' : 's'})`,
      );
      return EXIT.usage;
    }
    this.context.stdout.write(`router: configuration ${file} is valid\n`);
    return EXIT.ok;
  }

  private err(line: string): void {
    this.context.stderr.write(`${line}\n`);
  }
}

/**
 * common/signals.ts's rule with the gateway's log lines; a worker (`supervised`) leaves SIGINT and SIGHUP
 * to its primary. The returned stop, for the primary's word, drains once however often it is asked.
 */
function onSignals(
  log: Logger,
  close: () => Promise<void>,
  reload: () => void | Promise<void>,
  supervised = false,
): (why: string) => Promise<void> {
  return handleSignals({
    supervised,
    stop: async (why) => {
      log.info({ signal: why }, 'draining');
      await close();
      log.info({ signal: why }, 'stopped');
    },
    reload: () => void reload(),
    note: (what, signal) => {
      if (what === 'forced') log.warn({ signal }, 'second signal: exiting at once');
      else if (what === 'ignored') log.info({ signal }, 'signal left to the primary');
    },
  });
}

/** The exit code, or -1 while the gateway runs (it exits on its own after a signal). */
export function main(argv: readonly string[]): Promise<number> {
  return runSingleCommand('router', RouterCommand, argv);
}

if (import.meta.main) {
  const code = await main(process.argv.slice(2));
  if (code >= 0) process.exitCode = code;
}
