// The `router-admin access-key` commands work on the key backend: the shared store, or the keys file.

import { Command, type Usage } from 'clipanion';
import type { RouterConfig } from '../../../common/config-types.ts';
import { ConfigCommand } from '../../command-base.ts';
import { type KeyBackend, openKeyBackend } from '../../key-backend.ts';

export abstract class AccessKeyCommand extends ConfigCommand<KeyBackend> {
  open(config: RouterConfig): Promise<KeyBackend> {
    return openKeyBackend(config);
  }
}

/**
 * The stderr line before a new secret (on stdout), true to where the secret is kept: only its HMAC (the
 * store, or the keys file with store.access_key_hash_secret), so this is the one time it is shown; or in
 * plain text in the keys file, which then says where and how to keep only a hash instead.
 */
export function secretHeading(backend: KeyBackend, name: string, label: 'secret' | 'new secret'): string {
  if (backend.secretStorage === 'hash')
    return (
      `${label} (shown once: the ${backend.where} keeps only its HMAC; save it now, or rotate the key ` +
      'if it is lost):'
    );
  return (
    `${label} (stored in plain text in the ${backend.where}, as the \`value\` of key ${name}; whoever can ` +
    'read that file can use it. To keep only its HMAC there, set store.access_key_hash_secret ' +
    '(ROUTER_ACCESS_KEY_HASH_SECRET) and rotate the key):'
  );
}

/** The usage text of a `access-key` command, under the noun's category in `router-admin --help`. */
export function accessKeyUsage(usage: Omit<Usage, 'category'>): Usage {
  return Command.Usage({ category: 'Access keys', ...usage });
}
