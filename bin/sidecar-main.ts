// `router-billing -c <config>`: the billing sidecar process. Loads the main configuration, delivers the
// outbox and serves /healthz and /readyz on billing.listen. Signals (common/signals.ts): SIGTERM/SIGINT
// stop accepting, let the in-flight delivery end, write the checkpoint, exit 0.
// Exit codes: common/exit-codes.ts.

import '../common/early-async-context.ts';
import { Command, Option, UsageError } from 'clipanion';
import { CliCommand } from '../common/cli-usage.ts';
import { errorText } from '../common/errors.ts';
import { EXIT, EXIT_CODES_HELP } from '../common/exit-codes.ts';
import { handleSignals } from '../common/signals.ts';
import { runSingleCommand } from '../common/single-command-cli.ts';

export class RouterBillingCommand extends CliCommand {
  static override usage = Command.Usage({
    description: 'the billing sidecar: delivers the outbox to the billing service, takes its webhooks',
    details: `
      \`router\` runs it as a supervised child unless started with --no-sidecar; run it yourself beside
      such a gateway, with the same configuration file.

      Signals: SIGTERM/SIGINT (and SIGHUP: it has nothing to reload) finish the in-flight delivery, write
      the checkpoint and exit 0 (a second one, a second or more later, exits 1 at once). Under \`router\`,
      SIGINT and SIGHUP are left to the gateway, which stops it.

      ${EXIT_CODES_HELP}
    `,
    examples: [
      ['Run the sidecar of a gateway started with --no-sidecar', '$0 -c router.yaml'],
      [
        'The same on another address than billing.listen (health and webhooks)',
        'ROUTER_BILLING_LISTEN=0.0.0.0:8081 $0 -c router.yaml',
      ],
    ],
  });

  config = Option.String('-c,--config', {
    description: 'The main configuration file (the same as the gateway’s)',
  });

  async execute(): Promise<number> {
    if (!this.config) throw new UsageError('-c <config> is required');
    // Loaded here, not at the top, so --help and --version do not compile the sidecar.
    const [{ createLogger }, { loadConfig }, { GATEWAY_URL_ENV, SUPERVISED_ENV }, { startSidecar }] =
      await Promise.all([
        import('../proxy/logger.ts'),
        import('../config/load.ts'),
        import('../common/internal-notify.ts'),
        import('../sidecar/sidecar.ts'),
      ]);
    const { config, diagnostics } = await loadConfig(this.config);
    for (const d of diagnostics) this.context.stderr.write(`${d.file}:${d.line}:${d.col}: ${d.message}\n`);
    if (!config) return EXIT.usage;

    // The gateway's redaction: a credential passed to a log call never reaches a line.
    const logger = createLogger('router-billing', config.log.level);
    let sidecar: Awaited<ReturnType<typeof startSidecar>>;
    try {
      // A supervising gateway names its real address (it may listen on port 0).
      const gatewayUrl = process.env[GATEWAY_URL_ENV] || undefined;
      sidecar = await startSidecar(config, { logger, ...(gatewayUrl ? { webhook: { gatewayUrl } } : {}) });
    } catch (err) {
      logger.fatal({ err: errorText(err) }, 'router-billing failed to start');
      return EXIT.failed;
    }

    // Supervised by `router`, the gateway stops this process itself (SIGTERM) once its own requests are
    // done; stdin is a pipe from it that closes when it dies, however it dies.
    const supervised = process.env[SUPERVISED_ENV] === '1';
    const stop = handleSignals({
      supervised,
      stop: async (why) => {
        logger.info({ signal: why }, 'stopping: finishing in-flight delivery');
        try {
          await sidecar.close();
        } catch (err) {
          logger.error({ err: errorText(err) }, 'error while stopping');
          throw err;
        }
      },
      note: (what, signal) => {
        if (what === 'forced') logger.warn({ signal }, 'second signal: exiting without waiting');
        else if (what === 'ignored') logger.info({ signal }, 'the supervising gateway stops this process');
      },
    });
    if (supervised) {
      process.stdin.on('error', () => {});
      process.stdin.once('close', () => {
        logger.warn('the supervising gateway is gone: stopping');
        void stop('gateway gone');
      });
      process.stdin.resume();
    }
    return -1;
  }
}

/** The exit code, or -1 while the sidecar runs (it exits on its own after a signal). */
export function runSidecarMain(argv: readonly string[]): Promise<number> {
  return runSingleCommand('router-billing', RouterBillingCommand, argv);
}

if (import.meta.main) {
  const code = await runSidecarMain(process.argv.slice(2));
  if (code >= 0) process.exitCode = code;
}
