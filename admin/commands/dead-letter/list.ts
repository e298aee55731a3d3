// `router-admin dead-letter list`: one line per dead-lettered event (id, request id, subject, attempts,
// last error, when, state); the event itself is `show`.

import { Option } from 'clipanion';
import { EXIT } from '../../../common/exit-codes.ts';
import { formatTable } from '../../command-base.ts';
import type { DeadLetterBackend, DeadLetterEntry } from './backend.ts';
import { DeadLetterCommand, deadLetterUsage } from './base.ts';

export function formatDeadLetterTable(entries: readonly DeadLetterEntry[]): string {
  return formatTable(
    ['ID', 'REQUEST_ID', 'SUBJECT', 'ATTEMPTS', 'ERROR', 'DEAD_LETTERED_AT', 'STATE'],
    entries.map((e) => [
      e.id,
      e.requestId,
      e.subject,
      String(e.attempts),
      e.errorCode,
      e.deadLetteredAt,
      e.state,
    ]),
  );
}

export class ListDeadLettersCommand extends DeadLetterCommand {
  static override paths = [['dead-letter', 'list']];
  static override usage = deadLetterUsage({
    description: 'List billing events that exhausted their delivery attempts',
    examples: [
      ['List them', '$0 dead-letter list --config router.yaml'],
      ['As JSON', '$0 dead-letter list --config router.yaml --json'],
    ],
  });

  json = Option.Boolean('--json', false, { description: 'One JSON array of the whole records' });

  async run(backend: DeadLetterBackend): Promise<number> {
    const entries = await backend.list();
    if (this.json) this.out(JSON.stringify(entries.map((e) => ({ id: e.id, state: e.state, ...e.record }))));
    else if (entries.length === 0) this.out(`no dead letters in the ${backend.where}`);
    else this.out(formatDeadLetterTable(entries));
    return EXIT.ok;
  }
}
