// What every `router-admin dead-letter` command shares: `--config`, the backend (store stream or
// outbox file) and failures as a one-line message and an exit code (0 ok, 1 failed or not found,
// 2 usage or configuration error, 3 store or sidecar unreachable).

import { Command, Option } from 'clipanion';
import type { RouterConfig } from '../../../common/config-types.ts';
import { loadConfig } from '../../../proxy/config/load.ts';
import { AdminError, EXIT } from '../../key-backend.ts';
import { type DeadLetterBackend, openDeadLetterBackend } from './backend.ts';

export abstract class DeadLetterCommand extends Command {
  config = Option.String('--config,-c', { required: true, description: 'Main configuration file' });
  sidecarUrl = Option.String('--sidecar-url', {
    description: 'File mode: address of the running router-billing (default from billing.listen)',
  });

  abstract run(backend: DeadLetterBackend, config: RouterConfig): Promise<number>;

  validate(): void {}

  async execute(): Promise<number> {
    try {
      this.validate();
      const loaded = await loadConfig(this.config);
      if (loaded.config === undefined) {
        for (const d of loaded.diagnostics)
          this.context.stderr.write(`${d.file}:${d.line}:${d.col}: ${d.message}\n`);
        return EXIT.usage;
      }
      const backend = await openDeadLetterBackend(loaded.config, {
        ...(this.sidecarUrl === undefined ? {} : { sidecarUrl: this.sidecarUrl }),
      });
      try {
        return await this.run(backend, loaded.config);
      } finally {
        await backend.close();
      }
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      this.context.stderr.write(`router-admin: ${message}\n`);
      return err instanceof AdminError ? err.exitCode : EXIT.failed;
    }
  }

  out(text: string): void {
    this.context.stdout.write(`${text}\n`);
  }
}
