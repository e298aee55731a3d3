// Test support: served = billed, as a number, from a gateway's /metrics text (one process, or the sum of
// its workers: the counters of one scrape). The same arithmetic as the RouterServedNotBilled alert
// (deploy/prometheus/router-alerts.yaml) and docs/billing.md "Served = billed":
//
//   served   router_requests_total{provider!="none"}, token counts left out (not model calls)
//   queued   router_billing_events_total{result="queued"}
//   not reportable   router_billing_events_total, every other result (skip_status, skip_no_subject,
//                    skip_disabled, void_interrupted, ...) + router_unreported_requests_total (every reason)
//   in flight        router_billing_events_in_flight (handed to the queue, outcome not known yet)
//   gap = served - queued - not reportable - in flight
//
// An event the queue lost (result queue_failed) stays in the gap: it was served and is not billed.
// Token counts are left out of both sides (result not_billable).

/** The token-count apis: forwarded or answered, never a model call and never billed. */
export const TOKEN_COUNT_APIS: readonly string[] = [
  'messages.count_tokens',
  'native.countTokens',
  'responses.input_tokens',
];

/**
 * router_billing_events_total results that are not "no event by rule": on record, lost, or a token
 * count. Every other result (skip_status, skip_no_subject, skip_disabled, void_interrupted, and any added
 * later) says why a served request has no event.
 */
export const NOT_A_SKIP: readonly string[] = ['queued', 'queue_failed', 'not_billable'];

export interface ServedBilled {
  /** Model requests that reached a provider. */
  readonly served: number;
  /** Their usage events on record (the outbox, the billing stream or the spool). */
  readonly queued: number;
  /** Served requests that have no usage event by rule (a failed reply, no subject, billing off, no usage, ...). */
  readonly notReportable: number;
  /** Events whose write has not settled yet (0 once the gateway is idle). */
  readonly inFlight: number;
  /** Events the queue could not take (in the gap: served, not billed). */
  readonly queueFailed: number;
  /** served - queued - notReportable - inFlight: 0 when every served request is accounted for. */
  readonly gap: number;
  /** router_billing_events_total by result, and router_unreported_requests_total by reason. */
  readonly results: Readonly<Record<string, number>>;
  readonly unreported: Readonly<Record<string, number>>;
  /** Served requests by api (token counts left out). */
  readonly servedByApi: Readonly<Record<string, number>>;
}

interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

/** The samples of a Prometheus text exposition (comments skipped, label values unescaped). */
export function parseSamples(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (m === null) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g))
      labels[l[1]!] = l[2]!.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
    samples.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return samples;
}

/** Served against billed in one scrape of a gateway's /metrics (see the top of this file). */
export function servedBilled(metricsText: string): ServedBilled {
  let served = 0;
  let inFlight = 0;
  const results: Record<string, number> = {};
  const unreported: Record<string, number> = {};
  const servedByApi: Record<string, number> = {};
  for (const s of parseSamples(metricsText)) {
    if (s.name === 'router_requests_total') {
      const api = s.labels.api ?? '';
      if (s.labels.provider === 'none' || TOKEN_COUNT_APIS.includes(api)) continue;
      served += s.value;
      servedByApi[api] = (servedByApi[api] ?? 0) + s.value;
    } else if (s.name === 'router_billing_events_total') {
      const r = s.labels.result ?? '';
      results[r] = (results[r] ?? 0) + s.value;
    } else if (s.name === 'router_unreported_requests_total') {
      const r = s.labels.reason ?? '';
      unreported[r] = (unreported[r] ?? 0) + s.value;
    } else if (s.name === 'router_billing_events_in_flight') {
      inFlight += s.value;
    }
  }
  const queued = results.queued ?? 0;
  let notReportable = 0;
  for (const [r, v] of Object.entries(results)) if (!NOT_A_SKIP.includes(r)) notReportable += v;
  for (const v of Object.values(unreported)) notReportable += v;
  return {
    served,
    queued,
    notReportable,
    inFlight,
    queueFailed: results.queue_failed ?? 0,
    gap: served - queued - notReportable - inFlight,
    results,
    unreported,
    servedByApi,
  };
}

/** Scrapes a gateway's /metrics (its base URL) and computes served against billed. */
export async function scrapeServedBilled(gatewayUrl: string): Promise<ServedBilled> {
  const res = await fetch(`${gatewayUrl}/metrics`);
  if (res.status !== 200) throw new Error(`GET /metrics answered ${res.status}`);
  return servedBilled(await res.text());
}
