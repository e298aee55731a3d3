// `router-admin billing reconcile --since <time> [--until <time>] [--ledger DIR]... [--json] [--resend]`:
// compares what the gateway served (its ledgers: billing/outbox/ledger.ts, stream-ledger-read.ts) with
// what the billing service holds (GET /usage/events/details), and names the events the service is
// missing, holds twice, or holds without the gateway having served them (docs/operations.md
// "Reconciling with the billing service"). --resend sends the missing ones again (same idempotency key).

import { Command, Option, UsageError } from 'clipanion';
import {
  createBillingClient,
  DETAILS_MAX_LIMIT,
  fetchUsageEventDetails,
} from '../../../billing/billing-client.ts';
import type { UsageEvent } from '../../../billing/event/usage-event.ts';
import {
  type LedgerEvent,
  type LedgerSnapshot,
  snapshotOutboxLedger,
} from '../../../billing/outbox/ledger.ts';
import type { RouterConfig } from '../../../common/config-types.ts';
import { errorText } from '../../../common/errors.ts';
import { EXIT } from '../../../common/exit-codes.ts';
import { closeRedisClient, redactAddr } from '../../../store/redis-client.ts';
import { AdminError } from '../../admin-error.ts';
import { ConfigCommand, formatTable } from '../../command-base.ts';
import { configuredStoreSide, connectStore } from '../../store-connect.ts';
import {
  type Comparison,
  compareWindow,
  type Difference,
  differenceCount,
  OffsetIgnoredError,
  readBillingWindow,
} from './compare.ts';
import { snapshotStreamLedger } from './stream-ledger-read.ts';

/** RFC 3339 with a zone (`2026-11-29T03:00:00Z`, `2026-11-29T04:00:00+01:00`), to Unix seconds. */
export function parseRfc3339(text: string, option: string): number {
  const m = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})$/.exec(text);
  const ms = m === null ? Number.NaN : Date.parse(text);
  if (!Number.isFinite(ms))
    throw new UsageError(
      `${option} must be an RFC 3339 time such as 2026-11-29T03:00:00Z, not ${JSON.stringify(text)}`,
    );
  return Math.floor(ms / 1000);
}

function iso(seconds: number | undefined): string {
  return seconds === undefined || !Number.isFinite(seconds)
    ? '-'
    : new Date(seconds * 1000).toISOString().replace('.000Z', 'Z');
}

interface Ledgers {
  /** What each ledger is, for the report. */
  readonly names: string[];
  /** Their delivery state now; the lines are read later (billing/outbox/ledger.ts LedgerSnapshot). */
  snapshot(): Promise<LedgerSnapshot[]>;
  close(): Promise<void>;
}

interface ResendResult {
  readonly request_id: string;
  readonly ok: boolean;
  readonly error?: string;
}

export class ReconcileBillingCommand extends ConfigCommand<Ledgers> {
  static override paths = [['billing', 'reconcile']];
  static override usage = Command.Usage({
    category: 'Billing',
    description: "Compare the gateway's served requests with the billing service's usage events",
    details: `
      Reads the gateway's ledger (delivered outbox segments, or in shared-store mode the retained billing
      stream entries, kept for billing.ledger_retention_h) and the billing service's
      /usage/events/details, newest first, with billing.read_api_key. Prints the events the billing
      service is missing, holds twice (duplicate), or holds though no ledger has them (phantom); events
      of another source or from before the ledgers begin are unknown_source, events not yet delivered
      pending. The exit status is 1 when there is a missing, duplicate or phantom event (after --resend:
      one it could not send), 0 otherwise.
    `,
    examples: [
      ['The last hour', '$0 billing reconcile --config router.yaml --since 2026-11-29T03:00:00Z'],
      [
        'Two hosts of file mode, as JSON',
        '$0 billing reconcile -c router.yaml --since 2026-11-29T03:00:00Z --until 2026-11-29T04:00:00Z --ledger /mnt/a/outbox --ledger /mnt/b/outbox --json',
      ],
      [
        'Send the missing ones again',
        '$0 billing reconcile -c router.yaml --since 2026-11-29T03:00:00Z --resend',
      ],
    ],
  });

  since = Option.String('--since', { required: true, description: 'Start of the window (RFC 3339)' });
  until = Option.String('--until', { description: 'End of the window, exclusive (RFC 3339; default now)' });
  ledger = Option.Array('--ledger', {
    description: "An outbox directory to read as a ledger, repeatable (default this configuration's)",
  });
  json = Option.Boolean('--json', false, { description: 'One JSON object' });
  resend = Option.Boolean('--resend', false, { description: 'Send the missing events again' });
  pageSize = Option.String('--page-size', {
    description: `Events per /usage/events/details request (1-${DETAILS_MAX_LIMIT}, default ${DETAILS_MAX_LIMIT})`,
  });

  #window: { since: number; until: number } | undefined;
  #limit = DETAILS_MAX_LIMIT;

  override validate(): void {
    const since = parseRfc3339(this.since, '--since');
    const until =
      this.until === undefined ? Math.floor(Date.now() / 1000) + 1 : parseRfc3339(this.until, '--until');
    if (until <= since) throw new UsageError('--until must be later than --since');
    this.#window = { since, until };
    if (this.pageSize !== undefined) {
      const n = Number(this.pageSize);
      if (!Number.isInteger(n) || n < 1 || n > DETAILS_MAX_LIMIT)
        throw new UsageError(`--page-size must be an integer from 1 to ${DETAILS_MAX_LIMIT}`);
      this.#limit = n;
    }
  }

  async open(config: RouterConfig): Promise<Ledgers> {
    const billing = config.billing;
    const missing = (['baseUrl', 'projectId', 'readApiKey'] as const).filter((k) => billing[k] === '');
    if (missing.length > 0) {
      const names = { baseUrl: 'base_url', projectId: 'project_id', readApiKey: 'read_api_key (or api_key)' };
      throw new AdminError(
        `billing.${missing.map((k) => names[k]).join(', billing.')} not set: reconcile reads the billing service`,
        EXIT.usage,
      );
    }
    const dirs = this.ledger ?? [];
    if (dirs.length > 0 || !config.store.enabled) {
      const roots = dirs.length > 0 ? dirs : [billing.outboxDir];
      return {
        names: roots.map((d) => `outbox ${d}`),
        snapshot: () => Promise.all(roots.map((d) => snapshotOutboxLedger(d))),
        close: async () => {},
      };
    }
    const store = config.store;
    const where = `store ${redactAddr(store.addr, store)}`;
    const { client, keys } = await connectStore(store, configuredStoreSide(store, where), {
      connectionName: 'router-admin',
      readyTimeoutMs: Math.max(2000, store.operationTimeoutMs * 4),
    });
    return {
      names: [`billing stream of ${where}`],
      snapshot: async () => {
        const snapshot = await snapshotStreamLedger(client, keys, store.billingConsumerGroup);
        // Without a retention delivered entries are deleted: the stream is no record of what was served,
        // so nothing unmatched at the billing service can be called a phantom.
        if (billing.ledgerRetentionH > 0) return [snapshot];
        return [{ read: async (window) => ({ ...(await snapshot.read(window)), beginsAt: undefined }) }];
      },
      close: () => closeRedisClient(client),
    };
  }

  async run(ledgers: Ledgers, config: RouterConfig): Promise<number> {
    const window = this.#window!;
    const billing = config.billing;
    const warnings: string[] = [];
    if (billing.ledgerRetentionH === 0 && (this.ledger ?? []).length === 0)
      warnings.push(
        'billing.ledger_retention_h is 0: delivered events are not kept, so the ledger holds only events not yet delivered',
      );
    // Delivery state first, then the billing service, then the ledgers' lines: an event the service
    // holds is in the lines, and one written meanwhile counts as pending, not missing.
    const snapshots = await ledgers.snapshot();
    let read: Awaited<ReturnType<typeof readBillingWindow>>;
    try {
      read = await readBillingWindow(
        (limit, offset) => fetchUsageEventDetails(billing, { limit, offset }),
        window.since,
        this.#limit,
      );
    } catch (err) {
      if (err instanceof OffsetIgnoredError) throw new AdminError(err.message, EXIT.failed);
      throw new AdminError(
        `could not read the billing service's usage events: ${errorText(err)}`,
        EXIT.unavailable,
      );
    }
    const reads = await Promise.all(snapshots.map((s) => s.read(window)));
    const ledgerEvents: LedgerEvent[] = reads.flatMap((r) => r.events);
    const begins = reads.map((r) => r.beginsAt);
    const beginsAt = begins.some((b) => b === undefined) ? undefined : Math.max(...(begins as number[]));
    if (beginsAt !== undefined && beginsAt > window.since)
      warnings.push(
        `the ledgers begin at ${iso(beginsAt)}, after --since: billing events before it are unknown_source`,
      );
    const sources = new Set([billing.source, ...ledgerEvents.map((e) => e.event.source)]);
    const comparison = compareWindow({
      ledger: ledgerEvents,
      billing: read.records,
      since: window.since,
      until: window.until,
      beginsAt,
      sources,
    });

    let resent: ResendResult[] | undefined;
    if (this.resend && comparison.missing.length > 0) {
      const byId = new Map<string, UsageEvent>();
      for (const e of ledgerEvents) byId.set(e.event.external_event_id, e.event);
      resent = await this.#resend(
        config,
        comparison.missing.map((d) => byId.get(d.request_id)).filter((e) => e !== undefined),
      );
    }
    const unsent = resent === undefined ? comparison.missing.length : resent.filter((r) => !r.ok).length;
    const differences = differenceCount(comparison) - comparison.missing.length + unsent;

    if (this.json) {
      this.out(
        JSON.stringify({
          since: iso(window.since),
          until: iso(window.until),
          ledgers: ledgers.names,
          ledger_begins_at: iso(beginsAt),
          ledger_events: comparison.ledgerEvents,
          billing_events: comparison.billingEvents,
          billing_pages: read.pages,
          missing: comparison.missing,
          duplicate: comparison.duplicate,
          phantom: comparison.phantom,
          unknown_source: comparison.unknown_source,
          pending: comparison.pending,
          ...(resent === undefined ? {} : { resent }),
          differences,
          warnings,
        }),
      );
    } else {
      this.#printText(ledgers.names, window, beginsAt, read.pages, comparison, resent, warnings);
      this.out(
        differences === 0 ? 'no differences' : `${differences} difference${differences === 1 ? '' : 's'}`,
      );
    }
    return differences === 0 ? EXIT.ok : EXIT.failed;
  }

  async #resend(config: RouterConfig, events: UsageEvent[]): Promise<ResendResult[]> {
    const client = createBillingClient(config.billing, { connections: 4 });
    try {
      const results: ResendResult[] = [];
      for (const event of events) {
        const r = await client.ingest(event);
        results.push(
          r.kind === 'ok'
            ? { request_id: event.external_event_id, ok: true }
            : { request_id: event.external_event_id, ok: false, error: `${r.code}: ${r.message}` },
        );
      }
      return results;
    } finally {
      await client.close();
    }
  }

  #printText(
    names: readonly string[],
    window: { since: number; until: number },
    beginsAt: number | undefined,
    pages: number,
    c: Comparison,
    resent: ResendResult[] | undefined,
    warnings: readonly string[],
  ): void {
    for (const w of warnings) this.context.stderr.write(`router-admin: ${w}\n`);
    this.out(`window   ${iso(window.since)} to ${iso(window.until)}`);
    this.out(`ledgers  ${names.join(', ')} (from ${iso(beginsAt)}): ${c.ledgerEvents} events`);
    this.out(
      `billing  ${c.billingEvents} events (${pages} page${pages === 1 ? '' : 's'} of usage event details)`,
    );
    const section = (name: string, list: readonly Difference[], note: string) => {
      this.out(`${name} ${list.length}${list.length > 0 && note !== '' ? ` (${note})` : ''}`);
      if (list.length === 0) return;
      const table = formatTable(
        [
          'REQUEST_ID',
          'OCCURRED_AT',
          'SUBJECT',
          'PROVIDER',
          'MODEL',
          ...(name === 'duplicate' ? ['COUNT'] : []),
        ],
        list.map((d) => [
          d.request_id,
          iso(d.occurred_at),
          d.subject,
          d.provider,
          d.model,
          ...(name === 'duplicate' ? [String(d.count ?? 2)] : []),
        ]),
      );
      for (const line of table.split('\n')) this.out(`  ${line}`);
    };
    section('missing', c.missing, 'served, delivered, not at the billing service');
    section('duplicate', c.duplicate, 'held more than once');
    section('phantom', c.phantom, 'at the billing service, never served');
    section('unknown_source', c.unknown_source, 'another source, or before the ledgers begin');
    section('pending', c.pending, 'not delivered yet');
    if (resent !== undefined) {
      const ok = resent.filter((r) => r.ok).length;
      this.out(`resent ${ok} of ${resent.length}`);
      for (const r of resent) if (!r.ok) this.out(`  failed ${r.request_id}: ${r.error ?? ''}`);
    }
  }
}
