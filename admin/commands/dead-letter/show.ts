// `router-admin dead-letter show <id>`: the whole record of one dead letter as JSON (the usage event,
// attempts, last error). Events hold counts, names and ids only, never prompts or keys.

import { Option } from 'clipanion';
import { EXIT } from '../../../common/exit-codes.ts';
import type { DeadLetterBackend } from './backend.ts';
import { DeadLetterCommand, deadLetterUsage } from './base.ts';

export class ShowDeadLetterCommand extends DeadLetterCommand {
  static override paths = [['dead-letter', 'show']];
  static override usage = deadLetterUsage({
    description: 'Print one dead-lettered event and why it failed',
    examples: [['Show one', '$0 dead-letter show --config router.yaml 3:4096']],
  });

  id = Option.String({ name: 'id' });

  async run(backend: DeadLetterBackend): Promise<number> {
    const entry = (await backend.list()).find((e) => e.id === this.id);
    if (entry === undefined) {
      this.context.stderr.write(`router-admin: no dead letter ${this.id} in the ${backend.where}\n`);
      return EXIT.failed;
    }
    this.out(JSON.stringify({ id: entry.id, state: entry.state, ...entry.record }, null, 2));
    return EXIT.ok;
  }
}
