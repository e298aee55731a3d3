// What every `router-admin` command shares: `--config`, loading it, opening the command's backend and
// turning failures into a one-line message and an exit code (common/exit-codes.ts; a UsageError goes on to
// common/cli-usage.ts). Secrets never reach stderr.

import { Option, UsageError } from 'clipanion';
import { CliCommand } from '../common/cli-usage.ts';
import type { RouterConfig } from '../common/config-types.ts';
import { errorText } from '../common/errors.ts';
import { EXIT } from '../common/exit-codes.ts';
import { StoreUnavailableError } from '../common/store-types.ts';
import { AdminError } from './admin-error.ts';
import { loadAdminConfig, missingKeysFileHint } from './keys-file.ts';

export abstract class ConfigCommand<Backend extends { close(): Promise<void> }> extends CliCommand {
  config = Option.String('--config,-c', { required: true, description: 'Main configuration file' });

  /** Opens what the command works on; closed after `run`. */
  abstract open(config: RouterConfig): Promise<Backend>;

  /** The command body. */
  abstract run(backend: Backend, config: RouterConfig): Promise<number>;

  /** Options checked before anything is opened (usage errors). */
  validate(): void {}

  /** Whether a missing or empty keys file is started before the command runs (`access-key create`). */
  startsKeysFile(): boolean {
    return false;
  }

  async execute(): Promise<number> {
    try {
      this.validate();
      const loaded = await loadAdminConfig(this.config, {
        startKeysFile: this.startsKeysFile(),
        note: (line) => this.context.stderr.write(`${line}\n`),
      });
      if (loaded.config === undefined) {
        for (const d of loaded.diagnostics)
          this.context.stderr.write(`${d.file}:${d.line}:${d.col}: ${d.message}\n`);
        const hint = missingKeysFileHint(this.config, loaded.diagnostics);
        if (hint !== '') this.context.stderr.write(`router-admin: ${hint}\n`);
        return EXIT.usage;
      }
      const backend = await this.open(loaded.config);
      try {
        return await this.run(backend, loaded.config);
      } finally {
        await backend.close();
      }
    } catch (err) {
      if (err instanceof UsageError) throw err;
      const message = errorText(err);
      this.context.stderr.write(`router-admin: ${message}\n`);
      if (err instanceof AdminError) return err.exitCode;
      return err instanceof StoreUnavailableError ? EXIT.unavailable : EXIT.failed;
    }
  }

  out(text: string): void {
    this.context.stdout.write(`${text}\n`);
  }
}

/** Columns padded to their widest cell, two spaces apart, no trailing blanks. */
export function formatTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const all = [header, ...rows];
  const widths = header.map((_, i) => Math.max(...all.map((r) => r[i]?.length ?? 0)));
  return all
    .map((r) =>
      r
        .map((c, i) => c.padEnd(widths[i] ?? 0))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}
