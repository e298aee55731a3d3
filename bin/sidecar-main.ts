// `router-billing -c <config>`: the billing sidecar process. Loads the main configuration, delivers the
// outbox and serves /healthz and /readyz on billing.listen. SIGTERM/SIGINT: stop accepting, let the
// in-flight delivery end, write the checkpoint, exit 0 (a second signal exits 1 at once).
// Exit codes: common/exit-codes.ts.

import '../common/early-async-context.ts';
import { Command, Option, UsageError } from 'clipanion';
import { CliCommand } from '../common/cli-usage.ts';
import { errorText } from '../common/errors.ts';
import { EXIT, EXIT_CODES_HELP } from '../common/exit-codes.ts';
import { runSingleCommand } from '../common/single-command-cli.ts';

export class RouterBillingCommand extends CliCommand {
  static override usage = Command.Usage({
    description: 'the billing sidecar: delivers the outbox to the billing service, takes its webhooks',
    details: `
      \`router\` runs it as a supervised child unless started with --no-sidecar; run it yourself beside
      such a gateway, with the same configuration file.

      Signals: SIGTERM/SIGINT finish the in-flight delivery, write the checkpoint and exit 0 (a second
      one exits 1 at once).

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
          logger.error({ err: errorText(err) }, 'error while stopping');
          process.exit(1);
        },
      );
    }
    process.on('SIGTERM', onSignal);
    // Supervised by `router`: a Ctrl-C reaches the whole process group, and the gateway stops this
    // process itself (SIGTERM) once its own requests are done; stdin is a pipe from it that closes
    // when it dies, however it dies.
    if (process.env[SUPERVISED_ENV] !== '1') process.on('SIGINT', onSignal);
    else process.on('SIGINT', () => logger.info('SIGINT: the supervising gateway stops this process'));
    if (process.env[SUPERVISED_ENV] === '1') {
      process.stdin.on('error', () => {});
      process.stdin.once('close', () => {
        logger.warn('the supervising gateway is gone: stopping');
        onSignal('SIGTERM');
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
