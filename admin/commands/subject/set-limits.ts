// `router-admin subject set-limits`: one billing subject's own rate limits (all its keys together), kept
// in the shared store beside its counters; in file mode they are in router.yaml, which the message says.

import { Command, Option, UsageError } from 'clipanion';
import type { RouterConfig } from '../../../common/config-types.ts';
import { EXIT } from '../../../common/exit-codes.ts';
import { RATE_LIMIT_FIELDS, type RateLimits } from '../../../common/rate-limit-types.ts';
import { redactAddr } from '../../../store/redis-client.ts';
import type { RedisStores } from '../../../store/redis-store.ts';
import { AdminError } from '../../admin-error.ts';
import { ConfigCommand } from '../../command-base.ts';
import { formatLimits, limitOption, limitsFromFlags, mergeLimits } from '../../limit-flags.ts';
import { openAdminStores } from '../../store-connect.ts';

/** What file mode writes instead, in router.yaml: `"<type>:<id>": {requests_per_minute: 60, ...}`. */
export function fileModeHint(configFile: string, type: string, id: string, limits: RateLimits): string {
  const fields = Object.entries(RATE_LIMIT_FIELDS)
    .map(([field, wire]) => [wire, limits[field as keyof RateLimits]] as const)
    .filter(([, value]) => value !== undefined)
    .map(([wire, value]) => `${wire}: ${value}`);
  const example = fields.length === 0 ? 'requests_per_minute: 600' : fields.join(', ');
  return (
    `store.enabled is false, so a subject's own limits live in ${configFile}, not in a store: add it ` +
    `under rate_limits.subjects as \`"${type}:${id}": {${example}}\` (remove the entry to clear them), ` +
    'then reload the gateway (SIGHUP); nothing was changed'
  );
}

export class SetSubjectLimitsCommand extends ConfigCommand<RedisStores> {
  static override paths = [['subject', 'set-limits']];
  static override usage = Command.Usage({
    category: 'Subjects',
    description: "Set or clear a billing subject's own rate limits",
    details: `
      Limits on all the keys of one billing subject together: each one set replaces that limit of
      \`rate_limits.per_subject\` for this subject. Sets the limits given and keeps the subject's
      others; --clear drops them first
      (alone: \`rate_limits.per_subject\` applies again). Shared-store mode only: the store keeps them
      beside the subject's counters and every instance applies them at its next request. In file mode
      they are written in the main configuration under \`rate_limits.subjects\`.
    `,
    examples: [
      [
        'At most 8 requests of a team in flight at once, 1200 a minute',
        '$0 subject set-limits --config router.yaml --subject-type team --subject-id team-x --max-concurrent 8 --requests-per-minute 1200',
      ],
      [
        'Back to rate_limits.per_subject',
        '$0 subject set-limits --config router.yaml --subject-type team --subject-id team-x --clear',
      ],
    ],
  });

  subjectType = Option.String('--subject-type', { required: true, description: 'Billing subject type' });
  subjectId = Option.String('--subject-id', { required: true, description: 'Billing subject id' });
  requestsPerMinute = limitOption('requestsPerMinute', 'subject');
  tokensPerMinute = limitOption('tokensPerMinute', 'subject');
  maxConcurrent = limitOption('maxConcurrent', 'subject');
  clear = Option.Boolean('--clear', false, {
    description: "Drop the subject's own limits (before setting those given, if any)",
  });

  private limits(): RateLimits {
    return limitsFromFlags({
      requestsPerMinute: this.requestsPerMinute,
      tokensPerMinute: this.tokensPerMinute,
      maxConcurrent: this.maxConcurrent,
    });
  }

  override validate(): void {
    if (this.subjectType.trim() === '' || this.subjectId.trim() === '')
      throw new UsageError('--subject-type and --subject-id must not be empty');
    if (Object.keys(this.limits()).length === 0 && !this.clear)
      throw new UsageError(
        'nothing to change: give --requests-per-minute, --tokens-per-minute, --max-concurrent or --clear',
      );
  }

  async open(config: RouterConfig): Promise<RedisStores> {
    if (!config.store.enabled)
      throw new AdminError(
        fileModeHint(this.config, this.subjectType, this.subjectId, this.limits()),
        EXIT.usage,
      );
    const store = config.store;
    return openAdminStores(store, `store ${redactAddr(store.addr, store)} (prefix ${store.keyPrefix})`);
  }

  async run(stores: RedisStores): Promise<number> {
    const subject = { type: this.subjectType, id: this.subjectId };
    const limits = this.limits();
    const current = this.clear ? undefined : await stores.subjectLimits.getSubjectLimits(subject);
    const next = mergeLimits(current, limits, this.clear) ?? undefined;
    await stores.subjectLimits.setSubjectLimits(subject, next);
    const name = `${subject.type}:${subject.id}`;
    this.out(
      next === undefined
        ? `subject ${name}: no limits of its own (rate_limits.per_subject applies)`
        : `subject ${name}: limits ${formatLimits(next)}`,
    );
    this.context.stderr.write('every gateway instance applies it at its next request\n');
    return EXIT.ok;
  }
}
