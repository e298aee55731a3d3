// `router-admin access-key init`: start an empty keys file (valid against config/keys.schema.json,
// mode 0600) where the configuration's `keys:` points, or at --keys-file. An existing file with content is
// never replaced.

import { resolve } from 'node:path';
import { Option, UsageError } from 'clipanion';
import { CliCommand } from '../../../common/cli-usage.ts';
import { errorText } from '../../../common/errors.ts';
import { EXIT } from '../../../common/exit-codes.ts';
import { loadConfig } from '../../../config/load.ts';
import { AdminError } from '../../admin-error.ts';
import { missingKeysFile, startedNote, startKeysFile } from '../../keys-file.ts';
import { accessKeyUsage } from './base.ts';

export class InitKeysFileCommand extends CliCommand {
  static override paths = [['access-key', 'init']];
  static override usage = accessKeyUsage({
    description: 'Start an empty keys file (mode 0600) for file mode',
    details: `
      Writes a keys file with no keys (\`access_keys: []\`) at the path that \`keys:\` of the main
      configuration names (relative to the configuration's folder), or at --keys-file. Readable by its
      owner only: without \`store.access_key_hash_secret\` it will hold secrets in plain text. An existing
      empty file is filled; one with content is left alone (exit code 1). \`access-key create\` also starts
      a missing or empty keys file by itself.
    `,
    examples: [
      ['Start the keys file the configuration names', '$0 access-key init --config router.yaml'],
      ['Start one elsewhere', '$0 access-key init --keys-file /etc/router/keys.yaml'],
    ],
  });

  config = Option.String('--config,-c', {
    description: 'Main configuration file: the keys file is the one its `keys:` names',
  });
  keysFile = Option.String('--keys-file', {
    description: 'Path of the keys file to start (instead of the configured one)',
  });

  async execute(): Promise<number> {
    try {
      return await this.init();
    } catch (err) {
      if (err instanceof UsageError) throw err;
      this.context.stderr.write(`router-admin: ${errorText(err)}\n`);
      return err instanceof AdminError ? err.exitCode : EXIT.failed;
    }
  }

  private async init(): Promise<number> {
    if (this.config === undefined && this.keysFile === undefined)
      throw new UsageError(
        'give --config router.yaml (to start the keys file its `keys:` names) or --keys-file <path>',
      );
    let configured: string | undefined;
    let storeEnabled = false;
    if (this.config !== undefined) {
      const loaded = await loadConfig(this.config);
      const missing = missingKeysFile(loaded.diagnostics);
      if (loaded.config !== undefined) {
        configured = loaded.config.keys.file;
        storeEnabled = loaded.config.store.enabled;
      } else if (missing !== undefined && loaded.diagnostics.length === 1) configured = missing;
      else if (this.keysFile === undefined) {
        for (const d of loaded.diagnostics)
          this.context.stderr.write(`${d.file}:${d.line}:${d.col}: ${d.message}\n`);
        throw new AdminError(`${this.config} has errors; fix them, or pass --keys-file <path>`, EXIT.usage);
      }
    }
    const file = this.keysFile !== undefined ? resolve(this.keysFile) : configured;
    if (file === undefined)
      throw new AdminError(
        `${this.config} names no keys file: add \`keys: keys.yaml\` to it (a path relative to its folder), ` +
          'or pass --keys-file <path>',
        EXIT.usage,
      );
    this.out(startedNote(file, await startKeysFile(file)));
    const config = this.config ?? 'router.yaml';
    if (configured !== file)
      this.out(
        configured === undefined
          ? `a gateway uses it once its configuration names it: \`keys: ${file}\` in ${config}`
          : `${config} names another keys file (${configured}); set \`keys: ${file}\` there for the gateway to use this one`,
      );
    if (storeEnabled)
      this.out(
        'store.enabled is true: access-key create writes to the store; this file holds provider keys, and ' +
          'the access keys store.access_key_mode falls back to',
      );
    else this.out(`add a key: router-admin access-key create --config ${config} --name <name>`);
    return EXIT.ok;
  }

  private out(text: string): void {
    this.context.stdout.write(`${text}\n`);
  }
}
