// `router-admin access-key update`: change a live key's own rate limits and model list. Limits given are
// set one by one (the others stay); --clear-limits drops the key's own first, --clear-models its list.

import { Option, UsageError } from 'clipanion';
import { EXIT } from '../../../common/exit-codes.ts';
import type { KeyBackend } from '../../key-backend.ts';
import {
  formatLimits,
  formatModels,
  type KeyUpdate,
  limitOption,
  limitsFromFlags,
  modelsFromFlag,
} from '../../limit-flags.ts';
import { AccessKeyCommand, accessKeyUsage } from './base.ts';

export class UpdateAccessKeyCommand extends AccessKeyCommand {
  static override paths = [['access-key', 'update']];
  static override usage = accessKeyUsage({
    description: "Change a key's rate limits and allowed models",
    details: `
      Sets the limits given and keeps the key's others. --clear-limits drops the key's own limits first
      (alone: \`rate_limits.per_key\` applies again); --models replaces its model list and --clear-models
      removes it (then \`rate_limits.per_key.models\` applies, else every model). In shared-store mode every
      instance applies the change at its next request; in file mode a running gateway re-reads the keys
      file within about 0.1 s.
    `,
    examples: [
      [
        'Lower a key to 30 requests a minute',
        '$0 access-key update --config router.yaml --name client-a --requests-per-minute 30',
      ],
      [
        'Allow only two model families',
        '$0 access-key update --config router.yaml --name client-a --models "gpt-*,claude-*"',
      ],
      [
        "Back to the defaults: drop the key's own limits and model list",
        '$0 access-key update --config router.yaml --name client-a --clear-limits --clear-models',
      ],
    ],
  });

  name = Option.String('--name', { required: true, description: 'Key name' });
  requestsPerMinute = limitOption('requestsPerMinute', 'key');
  tokensPerMinute = limitOption('tokensPerMinute', 'key');
  maxConcurrent = limitOption('maxConcurrent', 'key');
  models = Option.String('--models', {
    description: 'New model list, comma-separated ids or patterns with `*` and `?` (replaces the old one)',
  });
  clearLimits = Option.Boolean('--clear-limits', false, {
    description: "Drop the key's own limits (before setting those given, if any)",
  });
  clearModels = Option.Boolean('--clear-models', false, {
    description: "Drop the key's model list",
  });

  private update(): KeyUpdate {
    const limits = limitsFromFlags({
      requestsPerMinute: this.requestsPerMinute,
      tokensPerMinute: this.tokensPerMinute,
      maxConcurrent: this.maxConcurrent,
    });
    const models = modelsFromFlag(this.models);
    if (models !== undefined && this.clearModels)
      throw new UsageError('give --models or --clear-models, not both');
    if (Object.keys(limits).length === 0 && models === undefined && !this.clearLimits && !this.clearModels)
      throw new UsageError(
        'nothing to change: give --requests-per-minute, --tokens-per-minute, --max-concurrent, --models, ' +
          '--clear-limits or --clear-models',
      );
    return { limits, clearLimits: this.clearLimits, models, clearModels: this.clearModels };
  }

  override validate(): void {
    this.update();
  }

  async run(backend: KeyBackend): Promise<number> {
    const key = await backend.update(this.name, this.update());
    if (key === undefined) {
      this.context.stderr.write(`router-admin: no key named ${this.name} in the ${backend.where}\n`);
      return EXIT.failed;
    }
    const limits =
      key.limits === undefined ? 'none of its own (rate_limits.per_key)' : formatLimits(key.limits);
    const models =
      key.models === undefined
        ? 'none of its own (rate_limits.per_key.models, else all)'
        : formatModels(key.models);
    this.out(`updated key ${this.name}: limits ${limits}; models ${models}`);
    this.context.stderr.write(`${backend.pickup}\n`);
    return EXIT.ok;
  }
}
