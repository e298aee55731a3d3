// `router-admin dead-letter replay <id>... | --all [--dry-run]`: puts dead-lettered events back on the
// delivery queue, each exactly once (backend.ts says how), after the cause was fixed. Their idempotency
// keys are unchanged, so an event the billing service did accept is not charged twice.

import { Option, UsageError } from 'clipanion';
import { EXIT } from '../../../common/exit-codes.ts';
import type { DeadLetterBackend } from './backend.ts';
import { DeadLetterCommand, deadLetterUsage } from './base.ts';

export class ReplayDeadLettersCommand extends DeadLetterCommand {
  static override paths = [['dead-letter', 'replay']];
  static override usage = deadLetterUsage({
    description: 'Queue dead-lettered events for delivery again, each exactly once',
    details: `
      Shared-store mode moves each entry from the dead-letter stream to the billing stream in one atomic
      script. File mode marks the record in dead-letter.jsonl through the running router-billing (its
      listener, loopback only), or directly when no sidecar runs; the sidecar delivers it and removes the
      record. Replaying an id again, or concurrently, never queues it twice.
    `,
    examples: [
      ['See what would happen', '$0 dead-letter replay --config router.yaml --all --dry-run'],
      ['Replay two', '$0 dead-letter replay --config router.yaml 1763900000000-0 1763900000001-0'],
    ],
  });

  all = Option.Boolean('--all', false, { description: 'Every dead letter' });
  dryRun = Option.Boolean('--dry-run', false, { description: 'Report what would be queued; change nothing' });
  ids = Option.Rest({ name: 'id' });

  override validate(): void {
    if (this.all === this.ids.length > 0) throw new UsageError('give the ids to replay, or --all (not both)');
  }

  async run(backend: DeadLetterBackend): Promise<number> {
    const results = await backend.replay(this.all ? undefined : this.ids, this.dryRun);
    let missing = 0;
    for (const r of results) {
      const about = r.requestId === undefined ? '' : ` (request ${r.requestId})`;
      if (r.outcome === 'not_found') {
        missing++;
        this.out(`not found ${r.id}`);
      } else if (r.outcome === 'already_queued') this.out(`already queued ${r.id}${about}`);
      else if (this.dryRun) this.out(`would queue ${r.id}${about}`);
      else this.out(`queued ${r.id}${about}${r.newId === undefined ? '' : ` -> ${r.newId}`}`);
    }
    const queued = results.filter((r) => r.outcome === 'queued').length;
    if (!this.dryRun && queued > 0) this.context.stderr.write(`${queued} queued; ${backend.pickup}\n`);
    return missing > 0 ? EXIT.failed : EXIT.ok;
  }
}
