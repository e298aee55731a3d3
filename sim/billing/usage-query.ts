// Aggregate usage queries: `filter=metric=<m>; provider=<p>; model=<exact model>` grouped by metric.
// Like the real service, a metric measure needs an explicit metric.

import type { UsageEvent } from '../../billing/event/usage-event.ts';
import { formatMoney, Money } from './ledger.ts';
import { chargeItems } from './pricing.ts';
import type { RuleSetMode } from './types.ts';

export const METRIC_REQUIRED = 'invalid usage query: metric or metrics is required for metric measures';

export interface UsageFilter {
  metrics: Set<string>;
  provider?: string;
  model?: string;
  api?: string;
  subjectType?: string;
  subjectId?: string;
}

export type ParsedQuery = { ok: true; filter: UsageFilter } | { ok: false; message: string };

export interface SummaryRow {
  metric: string;
  quantity: number;
  amount: string;
  currency: string | null;
  events: number;
}

function splitList(value: string): string[] {
  return value
    .split(',')
    .map((part) => part.trim())
    .filter((part) => part.length > 0);
}

export function parseUsageQuery(filterText: string | null, groupBy: string | null): ParsedQuery {
  if (groupBy !== null && groupBy !== 'metric') {
    return { ok: false, message: `invalid usage query: unsupported group_by ${JSON.stringify(groupBy)}` };
  }
  const filter: UsageFilter = { metrics: new Set() };
  for (const clause of (filterText ?? '').split(';')) {
    const trimmed = clause.trim();
    if (trimmed === '') continue;
    const eq = trimmed.indexOf('=');
    if (eq <= 0)
      return {
        ok: false,
        message: `invalid usage query: malformed filter clause ${JSON.stringify(trimmed)}`,
      };
    const key = trimmed.slice(0, eq).trim();
    const value = trimmed.slice(eq + 1).trim();
    switch (key) {
      case 'metric':
      case 'metrics':
        for (const metric of splitList(value)) filter.metrics.add(metric);
        break;
      case 'provider':
        filter.provider = value;
        break;
      case 'model':
        filter.model = value;
        break;
      case 'api':
        filter.api = value;
        break;
      case 'subject_type':
        filter.subjectType = value;
        break;
      case 'subject_id':
        filter.subjectId = value;
        break;
      default:
        return { ok: false, message: `invalid usage query: unknown filter field ${JSON.stringify(key)}` };
    }
  }
  if (filter.metrics.size === 0) return { ok: false, message: METRIC_REQUIRED };
  return { ok: true, filter };
}

function eventMatches(event: UsageEvent, filter: UsageFilter): boolean {
  const raw = event.raw_json;
  if (filter.provider !== undefined && raw.provider !== filter.provider) return false;
  // Exact model name: no prefix or alias matching, as the real service does.
  if (filter.model !== undefined && raw.model !== filter.model) return false;
  if (filter.api !== undefined && raw.api !== filter.api) return false;
  if (filter.subjectType !== undefined && event.subject_type !== filter.subjectType) return false;
  if (filter.subjectId !== undefined && event.subject_id !== filter.subjectId) return false;
  return true;
}

/** One row per requested metric, in the order the metrics were named. */
export function summarize(
  events: Iterable<UsageEvent>,
  filter: UsageFilter,
  mode: RuleSetMode = 'items',
): SummaryRow[] {
  const rows = new Map<
    string,
    { quantity: number; amount: Money; currency: string | null; events: number }
  >();
  for (const metric of filter.metrics)
    rows.set(metric, { quantity: 0, amount: new Money(0), currency: null, events: 0 });
  for (const event of events) {
    if (!eventMatches(event, filter)) continue;
    const counted = new Set<string>();
    // Recomputed here rather than stored per event: queries are rare, the benchmark's memory is not.
    for (const item of chargeItems(event, mode)) {
      const row = rows.get(item.metric);
      if (!row) continue;
      row.quantity += item.quantity;
      if (item.amount !== undefined) row.amount = row.amount.plus(item.amount);
      row.currency ??= item.currency ?? null;
      if (!counted.has(item.metric)) {
        counted.add(item.metric);
        row.events += 1;
      }
    }
  }
  return [...rows].map(([metric, row]) => ({
    metric,
    quantity: row.quantity,
    amount: formatMoney(row.amount),
    currency: row.currency,
    events: row.events,
  }));
}
