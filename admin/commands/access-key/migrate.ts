// `router-admin access-key migrate`: import the access keys of a keys file into the store (or the
// configured keys file), idempotently: a key already there with the same secret is left alone, one with a
// different secret is reported as a conflict and left alone too. `--dry-run` reports and writes nothing.

import { Option } from 'clipanion';
import { EXIT } from '../../../common/exit-codes.ts';
import { loadKeysFile } from '../../../config/keys.ts';
import { AdminError } from '../../admin-error.ts';
import type { ImportOutcome, KeyBackend } from '../../key-backend.ts';
import { AccessKeyCommand, accessKeyUsage } from './base.ts';

export class MigrateAccessKeysCommand extends AccessKeyCommand {
  static override paths = [['access-key', 'migrate']];
  static override usage = accessKeyUsage({
    description: 'Import the access keys of a keys file (idempotent; conflicts reported)',
    details: `
      Reads \`access_keys\` of the given keys file (values may use \${ENV}) and writes each key that is
      missing, hashed with \`store.access_key_hash_secret\`. Running it again changes nothing. A key name that
      exists with a different secret is a conflict: it is reported, left as it is, and the exit code is 1.
    `,
    examples: [
      ['See what would happen', '$0 access-key migrate --config router.yaml --from keys.yaml --dry-run'],
      ['Import', '$0 access-key migrate --config router.yaml --from keys.yaml'],
    ],
  });

  from = Option.String('--from', { required: true, description: 'Keys file to import' });
  dryRun = Option.Boolean('--dry-run', false, { description: 'Report only; write nothing' });

  async run(backend: KeyBackend): Promise<number> {
    // Only the file's keys: ROUTER_ACCESS_KEY_* of this shell are not part of the migration.
    const env = Object.fromEntries(
      Object.entries(process.env).filter(
        ([k]) => !k.startsWith('ROUTER_ACCESS_KEY_') || k === 'ROUTER_ACCESS_KEY_HASH_SECRET',
      ),
    );
    const loaded = await loadKeysFile(this.from, env);
    if (loaded.diagnostics.length > 0) {
      for (const d of loaded.diagnostics)
        this.context.stderr.write(`${d.file}:${d.line}:${d.col}: ${d.message}\n`);
      throw new AdminError(`${this.from} has errors; nothing was imported`, EXIT.usage);
    }
    const counts: Record<ImportOutcome, number> = { created: 0, unchanged: 0, conflict: 0 };
    const verb = this.dryRun ? 'would create' : 'created';
    for (const entry of loaded.keys.accessKeys) {
      const { outcome, reason } = await backend.importKey(entry, this.dryRun);
      counts[outcome]++;
      if (outcome === 'created') this.out(`${verb}  ${entry.name}`);
      else if (outcome === 'unchanged') this.out(`unchanged ${entry.name}`);
      else this.out(`CONFLICT  ${entry.name}: ${reason ?? 'conflict'}`);
    }
    this.out(
      `${this.dryRun ? 'dry run: ' : ''}${counts.created} ${verb}, ${counts.unchanged} unchanged, ${counts.conflict} conflicts (${backend.where})`,
    );
    return counts.conflict > 0 ? EXIT.failed : EXIT.ok;
  }
}
