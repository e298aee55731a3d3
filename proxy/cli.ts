// `router -c FILE` runs the gateway; `router -t FILE` validates the whole configuration (main file,
// provider files, registry, keys, pricing) without opening anything, and prints every problem as
// `file:line:col: message`.
// Exit codes: 0 ok, 1 runtime failure, 2 invalid configuration or usage.

import { Command, Option } from 'clipanion';
import { EXIT_USAGE, runSingleCommand } from '../common/single-command-cli.ts';

export class RouterCommand extends Command {
  static override usage = Command.Usage({
    description: 'the LLM routing gateway',
    details: `
      Signals: SIGTERM/SIGINT drain and exit 0 (a second one exits 1 at once); SIGHUP reloads the
      configuration (an invalid one is refused and the running one kept).

      Exit codes: 0 ok, 1 runtime failure, 2 invalid configuration or usage.
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
    if (this.config === undefined) return this.usageError('-c <config.yaml> or -t <config.yaml> is required');
    const shutdownDelayMs = Number(this.shutdownDelayMs ?? '0');
    if (!Number.isSafeInteger(shutdownDelayMs) || shutdownDelayMs < 0)
      return this.usageError('--shutdown-delay-ms wants a whole number of milliseconds');
    // Loaded here, not at the top, so --help and --version do not compile the gateway.
    const { ConfigError, startGateway } = await import('./gateway.ts');
    try {
      const running = await startGateway(this.config, {
        sidecar: this.noSidecar ? false : undefined,
        shutdownDelayMs,
      });
      running.log.info({ url: running.url }, 'router listening');
      let stopping = false;
      const stop = async (signal: string) => {
        if (stopping) process.exit(1);
        stopping = true;
        running.log.info({ signal }, 'draining');
        await running.close();
        running.log.info({ signal }, 'stopped');
        process.exit(0);
      };
      process.on('SIGTERM', () => void stop('SIGTERM'));
      process.on('SIGINT', () => void stop('SIGINT'));
      process.on('SIGHUP', () => void running.reload());
      return -1;
    } catch (err) {
      if (err instanceof ConfigError) {
        for (const d of err.diagnostics) this.err(d);
        return EXIT_USAGE;
      }
      this.err(`router: ${(err as Error).message}`);
      return 1;
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
      this.err(`router: cannot check ${file}: ${err instanceof Error ? err.message : String(err)}`);
      return 1;
    }
    for (const w of warnings) this.err(`warning: ${w}`);
    if (problems.length > 0) {
      for (const p of problems) this.err(p);
      this.err(
        `router: configuration invalid (${problems.length} problem${problems.length === 1 ? '' : 's'})`,
      );
      return EXIT_USAGE;
    }
    this.context.stdout.write(`router: configuration ${file} is valid\n`);
    return 0;
  }

  private usageError(message: string): number {
    this.err(`router: ${message} (router --help shows the usage)`);
    return EXIT_USAGE;
  }

  private err(line: string): void {
    this.context.stderr.write(`${line}\n`);
  }
}

/** The exit code, or -1 while the gateway runs (it exits on its own after a signal). */
export function main(argv: readonly string[]): Promise<number> {
  return runSingleCommand('router', RouterCommand, argv);
}

if (import.meta.main) {
  const code = await main(process.argv.slice(2));
  if (code >= 0) process.exitCode = code;
}
