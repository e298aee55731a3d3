// `router-admin access-key list`: name, subject, status, expiry, created; never a secret or hash.

import { Command, Option } from 'clipanion';
import { AccessKeyCommand } from '../../command-base.ts';
import { type AdminKey, EXIT, type KeyBackend } from '../../key-backend.ts';

function day(ms: number | undefined): string {
  return ms === undefined || Number.isNaN(ms) ? '-' : new Date(ms).toISOString().replace('.000Z', 'Z');
}

export function formatKeyTable(keys: readonly AdminKey[], now = Date.now()): string {
  const rows = [['NAME', 'SUBJECT', 'STATUS', 'EXPIRES', 'CREATED']];
  for (const k of keys) {
    const expired = k.status === 'active' && k.expiresAt !== undefined && k.expiresAt <= now;
    rows.push([
      k.name,
      `${k.subjectType}:${k.subjectId}`,
      expired ? 'expired' : k.status,
      day(k.expiresAt),
      day(k.createdAt),
    ]);
  }
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  return rows
    .map((r) =>
      r
        .map((c, i) => c.padEnd(widths[i]))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

export class ListAccessKeysCommand extends AccessKeyCommand {
  static override paths = [['access-key', 'list']];
  static override usage = Command.Usage({
    category: 'Access keys',
    description: 'List keys: name, subject, status, expiry, creation time',
    examples: [
      ['List keys', '$0 access-key list --config router.yaml'],
      ['As JSON', '$0 access-key list --config router.yaml --json'],
    ],
  });

  json = Option.Boolean('--json', false, { description: 'One JSON array instead of a table' });

  async run(backend: KeyBackend): Promise<number> {
    const keys = (await backend.list()).sort((a, b) => a.name.localeCompare(b.name));
    if (this.json) this.out(JSON.stringify(keys));
    else this.out(formatKeyTable(keys));
    return EXIT.ok;
  }
}
