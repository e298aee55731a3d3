// `router-admin access-key list`: name, subject, status, expiry, created, own limits and models; never a
// secret or hash.

import { Option } from 'clipanion';
import { EXIT } from '../../../common/exit-codes.ts';
import { envAccessKeyNames } from '../../../config/keys.ts';
import { formatTable } from '../../command-base.ts';
import type { AdminKey, HashSecretState, KeyBackend } from '../../key-backend.ts';
import { formatLimits, formatModels } from '../../limit-flags.ts';
import { AccessKeyCommand, accessKeyUsage } from './base.ts';

function day(ms: number | undefined): string {
  return ms === undefined || Number.isNaN(ms) ? '-' : new Date(ms).toISOString().replace('.000Z', 'Z');
}

export function formatKeyTable(keys: readonly AdminKey[], now = Date.now()): string {
  const rows = keys.map((k) => {
    const expired = k.status === 'active' && k.expiresAt !== undefined && k.expiresAt <= now;
    return [
      k.name,
      `${k.subjectType}:${k.subjectId}`,
      expired ? 'expired' : k.status,
      day(k.expiresAt),
      day(k.createdAt),
      formatLimits(k.limits),
      formatModels(k.models),
    ];
  });
  return formatTable(['NAME', 'SUBJECT', 'STATUS', 'EXPIRES', 'CREATED', 'LIMITS', 'MODELS'], rows);
}

/**
 * How many stored hashes are under each hash secret (store mode), so an operator can follow a hash-secret
 * rotation (docs/operations.md); undefined when the keys carry no such information (file mode, no keys).
 */
export function formatHashSecretCounts(keys: readonly AdminKey[]): string | undefined {
  const counts: Record<HashSecretState, number> = { current: 0, previous: 0, unknown: 0, other: 0 };
  let any = false;
  for (const k of keys) {
    if (k.hashSecret === undefined) continue;
    counts[k.hashSecret]++;
    any = true;
  }
  if (!any) return undefined;
  const other = counts.other > 0 ? `, ${counts.other} on another secret` : '';
  return `hash secret: ${counts.current} current, ${counts.previous} previous, ${counts.unknown} unknown${other}`;
}

/** Keys given as variables are neither in the file nor in the store: say where they are and what they need. */
export function envKeysNote(names: readonly string[]): string {
  return (
    `not listed: ${names.join(', ')}, from ROUTER_ACCESS_KEY_* variables of this environment ` +
    "(a gateway's own variables may differ). Such keys are read once when the gateway starts: " +
    'changing or removing one needs a restart, and router-admin cannot revoke or rotate it.'
  );
}

export class ListAccessKeysCommand extends AccessKeyCommand {
  static override paths = [['access-key', 'list']];
  static override usage = accessKeyUsage({
    description: 'List keys: name, subject, status, expiry, creation time, limits, models',
    details: `
      LIMITS shows the key's own rate limits (\`rpm\` requests and \`tpm\` tokens per minute,
      \`concurrent\` in flight) and MODELS its model list; \`-\` where it has none, so that
      \`rate_limits.per_key\` applies. With --json: \`limits\` (requestsPerMinute, tokensPerMinute,
      maxConcurrent) and \`models\`, absent when unset.

      In shared-store mode a last line counts the stored hashes by hash secret: \`current\`
      (store.access_key_hash_secret), \`previous\` (store.previous_access_key_hash_secret, during a
      rotation), \`unknown\` (written before records named their secret). With --json each key has a
      \`hashSecret\` field instead.
    `,
    examples: [
      ['List keys', '$0 access-key list --config router.yaml'],
      ['As JSON', '$0 access-key list --config router.yaml --json'],
    ],
  });

  json = Option.Boolean('--json', false, { description: 'One JSON array instead of a table' });

  async run(backend: KeyBackend): Promise<number> {
    const keys = (await backend.list()).sort((a, b) => a.name.localeCompare(b.name));
    if (this.json) this.out(JSON.stringify(keys));
    else {
      this.out(formatKeyTable(keys));
      const counts = formatHashSecretCounts(keys);
      if (counts !== undefined) this.out(`\n${counts}`);
    }
    const fromEnv = envAccessKeyNames(process.env);
    if (fromEnv.length > 0) this.context.stderr.write(`${envKeysNote(fromEnv)}\n`);
    return EXIT.ok;
  }
}
