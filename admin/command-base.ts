// What every `router-admin access-key` command shares: `--config`, loading it, opening the key backend
// (store or keys file) and turning failures into a one-line message and an exit code
// (0 ok, 1 failed, 2 usage or configuration error, 3 store unreachable). Secrets never reach stderr.

import { Command, Option } from 'clipanion';
import type { RouterConfig } from '../common/config-types.ts';
import { loadConfig } from '../proxy/config/load.ts';
import { AdminError, EXIT, type KeyBackend, openKeyBackend } from './key-backend.ts';

export abstract class AccessKeyCommand extends Command {
  config = Option.String('--config,-c', { required: true, description: 'Main configuration file' });

  /** The command body; the backend is closed afterwards. */
  abstract run(backend: KeyBackend, config: RouterConfig): Promise<number>;

  /** Options checked before anything is opened (usage errors). */
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
      const backend = await openKeyBackend(loaded.config);
      try {
        return await this.run(backend, loaded.config);
      } finally {
        await backend.close();
      }
    } catch (err) {
      if (err instanceof AdminError) {
        this.context.stderr.write(`router-admin: ${err.message}\n`);
        return err.exitCode;
      }
      const name = err instanceof Error ? err.name : '';
      const message = err instanceof Error ? err.message : String(err);
      this.context.stderr.write(`router-admin: ${message}\n`);
      return name === 'StoreUnavailableError' ? EXIT.unavailable : EXIT.failed;
    }
  }

  out(text: string): void {
    this.context.stdout.write(`${text}\n`);
  }
}
