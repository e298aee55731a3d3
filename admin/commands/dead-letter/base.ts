// The `router-admin dead-letter` commands work on the dead letters: the store's stream, or the outbox
// file through the running sidecar.

import { Command, Option, type Usage } from 'clipanion';
import type { RouterConfig } from '../../../common/config-types.ts';
import { ConfigCommand } from '../../command-base.ts';
import { type DeadLetterBackend, openDeadLetterBackend } from './backend.ts';

export abstract class DeadLetterCommand extends ConfigCommand<DeadLetterBackend> {
  sidecarUrl = Option.String('--sidecar-url', {
    description: 'File mode: address of the running router-billing (default from billing.listen)',
  });

  open(config: RouterConfig): Promise<DeadLetterBackend> {
    return openDeadLetterBackend(
      config,
      this.sidecarUrl === undefined ? {} : { sidecarUrl: this.sidecarUrl },
    );
  }
}

/** The usage text of a `dead-letter` command, under the noun's category in `router-admin --help`. */
export function deadLetterUsage(usage: Omit<Usage, 'category'>): Usage {
  return Command.Usage({ category: 'Dead letters', ...usage });
}
