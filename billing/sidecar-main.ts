// `router-billing -c <config>`: the billing sidecar process. Loads the main configuration, delivers the
// outbox and serves /healthz and /readyz on billing.listen. SIGTERM/SIGINT: stop accepting, let the
// in-flight delivery end, write the checkpoint, exit 0 (a second signal exits 1 at once).
// Exit codes: 0 stopped by signal, 1 failed to start, 2 usage or configuration error.

import { parseArgs } from 'node:util';
import { pino } from 'pino';
import { loadConfig } from '../proxy/config/load.ts';
import { GATEWAY_URL_ENV, SUPERVISED_ENV } from '../proxy/internal-notify.ts';
import { startSidecar } from './sidecar.ts';

const USAGE = 'usage: router-billing -c <config.yaml>';

export async function runSidecarMain(argv: readonly string[]): Promise<void> {
  let configFile: string | undefined;
  try {
    const { values } = parseArgs({
      args: [...argv],
      options: { config: { type: 'string', short: 'c' }, help: { type: 'boolean', short: 'h' } },
      strict: true,
    });
    if (values.help) {
      console.log(USAGE);
      return;
    }
    configFile = values.config;
  } catch (err) {
    console.error(`router-billing: ${err instanceof Error ? err.message : String(err)}\n${USAGE}`);
    process.exitCode = 2;
    return;
  }
  if (!configFile) {
    console.error(`router-billing: -c <config> is required\n${USAGE}`);
    process.exitCode = 2;
    return;
  }

  const { config, diagnostics } = await loadConfig(configFile);
  for (const d of diagnostics) console.error(`${d.file}:${d.line}:${d.col}: ${d.message}`);
  if (!config) {
    process.exitCode = 2;
    return;
  }

  const logger = pino({ name: 'router-billing', level: config.log.level });
  let sidecar: Awaited<ReturnType<typeof startSidecar>>;
  try {
    // A supervising gateway names its real address (it may listen on port 0).
    const gatewayUrl = process.env[GATEWAY_URL_ENV] || undefined;
    sidecar = await startSidecar(config, { logger, ...(gatewayUrl ? { webhook: { gatewayUrl } } : {}) });
  } catch (err) {
    logger.fatal({ err: err instanceof Error ? err.message : String(err) }, 'router-billing failed to start');
    process.exitCode = 1;
    return;
  }

  let stopping = false;
  function onSignal(signal: NodeJS.Signals): void {
    if (stopping) {
      logger.warn({ signal }, 'second signal: exiting without waiting');
      process.exit(1);
    }
    stopping = true;
    logger.info({ signal }, 'stopping: finishing in-flight delivery');
    sidecar.close().then(
      () => process.exit(0),
      (err: unknown) => {
        logger.error({ err: err instanceof Error ? err.message : String(err) }, 'error while stopping');
        process.exit(1);
      },
    );
  }
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  // Supervised by `router`: stdin is a pipe from it that closes when it dies, however it dies.
  if (process.env[SUPERVISED_ENV] === '1') {
    process.stdin.on('error', () => {});
    process.stdin.once('close', () => {
      logger.warn('the supervising gateway is gone: stopping');
      onSignal('SIGTERM');
    });
    process.stdin.resume();
  }
}

if (import.meta.main) await runSidecarMain(process.argv.slice(2));
