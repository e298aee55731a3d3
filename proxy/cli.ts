// `router -c FILE` runs the gateway; `router -t FILE` validates the whole configuration (main file,
// provider files, registry, keys, pricing) without opening anything, and prints every problem as
// `file:line:col: message`.
// Exit codes: 0 ok, 1 runtime failure, 2 invalid configuration or usage.

import { parseArgs } from 'node:util';
import { ConfigError, checkConfig, startGateway } from './gateway.ts';

const USAGE = `usage: router -c <config.yaml> [--no-sidecar] [--shutdown-delay-ms N]
       router -t <config.yaml>

  -c, --config FILE          run the gateway with this configuration
  -t, --test FILE            validate the configuration and exit
      --no-sidecar           do not start the billing sidecar (run router-billing separately)
      --shutdown-delay-ms N  on SIGTERM, fail /readyz but keep serving N ms before closing the listener

  Signals: SIGTERM/SIGINT drain and exit 0 (a second one exits 1 at once); SIGHUP reloads the
  configuration (an invalid one is refused and the running one kept).`;

export async function main(argv: readonly string[]): Promise<number> {
  let values: {
    config?: string;
    test?: string;
    'no-sidecar'?: boolean;
    'shutdown-delay-ms'?: string;
    help?: boolean;
  };
  try {
    ({ values } = parseArgs({
      args: [...argv],
      options: {
        config: { type: 'string', short: 'c' },
        test: { type: 'string', short: 't' },
        'no-sidecar': { type: 'boolean' },
        'shutdown-delay-ms': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
    }));
  } catch (err) {
    console.error(`router: ${(err as Error).message}\n${USAGE}`);
    return 2;
  }
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  if (values.test !== undefined) return validate(values.test);
  if (values.config === undefined) {
    console.error(USAGE);
    return 2;
  }
  const shutdownDelayMs = Number(values['shutdown-delay-ms'] ?? '0');
  if (!Number.isSafeInteger(shutdownDelayMs) || shutdownDelayMs < 0) {
    console.error(`router: --shutdown-delay-ms wants a whole number of milliseconds\n${USAGE}`);
    return 2;
  }
  try {
    const running = await startGateway(values.config, {
      sidecar: values['no-sidecar'] ? false : undefined,
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
      for (const d of err.diagnostics) console.error(d);
      return 2;
    }
    console.error(`router: ${(err as Error).message}`);
    return 1;
  }
}

/** A dry run: nothing is opened, written or connected (the gateway of this file may be running). */
async function validate(file: string): Promise<number> {
  let problems: string[];
  const warnings: string[] = [];
  try {
    problems = await checkConfig(file, { warnings });
  } catch (err) {
    console.error(`router: cannot check ${file}: ${err instanceof Error ? err.message : String(err)}`);
    return 1;
  }
  for (const w of warnings) console.error(`warning: ${w}`);
  if (problems.length > 0) {
    for (const p of problems) console.error(p);
    console.error(
      `router: configuration invalid (${problems.length} problem${problems.length === 1 ? '' : 's'})`,
    );
    return 2;
  }
  console.log(`router: configuration ${file} is valid`);
  return 0;
}

if (import.meta.main) {
  const code = await main(process.argv.slice(2));
  if (code >= 0) process.exitCode = code;
}
