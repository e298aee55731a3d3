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

/** The usage text of a `access-key` command, under the noun's category in `router-admin --help`. */
export function accessKeyUsage(usage: Omit<Usage, 'category'>): Usage {
  return Command.Usage({ category: 'Access keys', ...usage });
}
