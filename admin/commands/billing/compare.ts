// What `router-admin billing reconcile` computes, apart from where it reads: the billing service's
// events of a window, paged newest first, and their comparison with the gateway's ledgers
// (docs/operations.md "Reconciling with the billing service").

import type { LedgerEvent } from '../../../billing/outbox/ledger.ts';

/** Late deliveries arrive out of order: paging stops only past a whole page this much before --since. */
export const LATE_DELIVERY_S = 600;

/** A billing service that answers every offset with the first page cannot be paged. */
export class OffsetIgnoredError extends Error {
  constructor(offset: number, limit: number) {
    super(
      `the billing service answered /usage/events/details?offset=${offset} with events of an earlier page: ` +
        `it ignores "offset", so only its newest ${limit} events can be read, and the window holds more ` +
        'than that. Nothing was compared; reconcile needs a billing service that pages with "offset"',
    );
    this.name = 'OffsetIgnoredError';
  }
}

export type BillingRecord = Readonly<Record<string, unknown>>;

/** Unix seconds of a record's occurred_at (a number of seconds, or an RFC 3339 text); NaN otherwise. */
export function occurredAtOf(record: BillingRecord): number {
  const v = record.occurred_at;
  if (typeof v === 'number') return v;
  if (typeof v === 'string') {
    const n = Number(v);
    if (v.trim() !== '' && Number.isFinite(n)) return n;
    const ms = Date.parse(v);
    return Number.isFinite(ms) ? Math.floor(ms / 1000) : Number.NaN;
  }
  return Number.NaN;
}

/** The request id a record stands for: external_event_id, else the idempotency key without `router:`. */
export function requestIdOf(record: BillingRecord): string | undefined {
  if (typeof record.external_event_id === 'string' && record.external_event_id !== '')
    return record.external_event_id;
  const key = record.idempotency_key;
  if (typeof key === 'string' && key !== '') return key.startsWith('router:') ? key.slice(7) : key;
  return undefined;
}

function recordKey(record: BillingRecord): string {
  return `${requestIdOf(record) ?? ''}\u0000${String(record.received_at ?? '')}`;
}

export interface BillingWindowRead {
  readonly records: BillingRecord[];
  readonly pages: number;
}

/**
 * Pages `fetchPage(limit, offset)` (newest first) until the last page (empty, or short with no
 * `has_more: true`: a service may cap the limit below the one asked), or a whole page whose events all
 * occurred more than LATE_DELIVERY_S before `since`. Events ingested while it pages push older ones
 * down, so a page may begin with the last records of the one before: that overlap is read once. A page
 * mostly made of records already read means the service ignores `offset`: OffsetIgnoredError.
 */
export async function readBillingWindow(
  fetchPage: (
    limit: number,
    offset: number,
  ) => Promise<{ records: BillingRecord[]; hasMore?: boolean | undefined }>,
  since: number,
  limit: number,
): Promise<BillingWindowRead> {
  const records: BillingRecord[] = [];
  const seen = new Set<string>();
  let offset = 0;
  let pages = 0;
  for (;;) {
    const { records: page, hasMore } = await fetchPage(limit, offset);
    pages++;
    if (page.length === 0) break;
    const keys = page.map(recordKey);
    if (offset > 0 && keys.filter((k) => seen.has(k)).length * 2 > page.length)
      throw new OffsetIgnoredError(offset, limit);
    // The overlap: the longest prefix of this page that ends the records read so far.
    let skip = 0;
    for (let n = Math.min(page.length, records.length); n > 0; n--) {
      let same = true;
      for (let i = 0; i < n && same; i++) same = recordKey(records[records.length - n + i]!) === keys[i];
      if (same) {
        skip = n;
        break;
      }
    }
    for (let i = skip; i < page.length; i++) {
      records.push(page[i]!);
      seen.add(keys[i]!);
    }
    if (page.length < limit && hasMore !== true) break;
    if (page.every((r) => occurredAtOf(r) < since - LATE_DELIVERY_S)) break;
    offset += page.length;
  }
  return { records, pages };
}

export interface Difference {
  readonly request_id: string;
  readonly occurred_at: number;
  readonly subject: string;
  readonly provider: string;
  readonly model: string;
  /** How many times the billing service holds it (duplicate). */
  readonly count?: number;
  readonly source?: string;
}

export interface Comparison {
  /** In a ledger and delivered, not at the billing service. */
  readonly missing: Difference[];
  /** At the billing service more than once. */
  readonly duplicate: Difference[];
  /** At the billing service, in no ledger, though the ledgers cover its source and time. */
  readonly phantom: Difference[];
  /** At the billing service, in no ledger, from another source or from before the ledgers begin. */
  readonly unknown_source: Difference[];
  /** In a ledger, not delivered yet (not a difference: the sidecar still has it). */
  readonly pending: Difference[];
  /** Distinct request ids of the window in the ledgers and at the billing service. */
  readonly ledgerEvents: number;
  readonly billingEvents: number;
}

export interface CompareInput {
  readonly ledger: readonly LedgerEvent[];
  readonly billing: readonly BillingRecord[];
  readonly since: number;
  readonly until: number;
  /** Unix seconds from which the ledgers hold everything; undefined: they hold nothing to go by. */
  readonly beginsAt: number | undefined;
  /** The event sources the ledgers' gateways write (billing.source, and any the ledgers hold). */
  readonly sources: ReadonlySet<string>;
}

function str(v: unknown): string {
  return typeof v === 'string' ? v : '';
}

function ofRecord(id: string, r: BillingRecord, count?: number): Difference {
  const raw = (typeof r.raw_json === 'object' && r.raw_json !== null ? r.raw_json : {}) as Record<
    string,
    unknown
  >;
  return {
    request_id: id,
    occurred_at: occurredAtOf(r),
    subject: `${str(r.subject_type)}:${str(r.subject_id)}`,
    provider: str(raw.provider),
    model: str(raw.model),
    ...(count === undefined ? {} : { count }),
    ...(typeof r.source === 'string' ? { source: r.source } : {}),
  };
}

/** Compares the window's ledger events with the billing service's records of the same window. */
export function compareWindow(input: CompareInput): Comparison {
  const inWindow = (t: number) => t >= input.since && t < input.until;
  const ledger = new Map<string, LedgerEvent>();
  for (const e of input.ledger) {
    if (!inWindow(e.event.occurred_at)) continue;
    const id = e.event.external_event_id;
    const had = ledger.get(id);
    // The same event twice (a spooled event moved again, a handed-back entry): delivered if either is.
    if (had === undefined || (had.pending && !e.pending)) ledger.set(id, e);
  }
  const billed = new Map<string, { record: BillingRecord; count: number }>();
  for (const r of input.billing) {
    const id = requestIdOf(r);
    if (id === undefined || !inWindow(occurredAtOf(r))) continue;
    const had = billed.get(id);
    if (had === undefined) billed.set(id, { record: r, count: 1 });
    else had.count++;
  }
  const out: Comparison = {
    missing: [],
    duplicate: [],
    phantom: [],
    unknown_source: [],
    pending: [],
    ledgerEvents: ledger.size,
    billingEvents: billed.size,
  };
  for (const [id, e] of ledger) {
    if (billed.has(id)) continue;
    (e.pending ? out.pending : out.missing).push(ofRecord(id, e.event as unknown as BillingRecord));
  }
  for (const [id, { record, count }] of billed) {
    if (count > 1) out.duplicate.push(ofRecord(id, record, count));
    if (ledger.has(id)) continue;
    const covered =
      input.beginsAt !== undefined &&
      occurredAtOf(record) >= input.beginsAt &&
      typeof record.source === 'string' &&
      input.sources.has(record.source);
    (covered ? out.phantom : out.unknown_source).push(ofRecord(id, record));
  }
  const byTime = (a: Difference, b: Difference) =>
    a.occurred_at - b.occurred_at || (a.request_id < b.request_id ? -1 : 1);
  for (const list of [out.missing, out.duplicate, out.phantom, out.unknown_source, out.pending])
    list.sort(byTime);
  return out;
}

/**
 * Differences that make the exit status non-zero: missing, duplicate and phantom. Pending events are
 * still on their way; unknown_source events belong to no ledger given, so nothing can be said of them.
 */
export function differenceCount(c: Pick<Comparison, 'missing' | 'duplicate' | 'phantom'>): number {
  return c.missing.length + c.duplicate.length + c.phantom.length;
}
