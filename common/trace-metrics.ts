// The span exporter's counters as Prometheus series, the same in the gateway and the sidecar
// (docs/operations.md "Metrics"): read from the process's tracer at every scrape (its counters are live).

import client from 'prom-client';
import type { SpanExportCounters } from './span-export.ts';

export function registerTraceMetrics(
  registry: client.Registry,
  spans: () => Readonly<SpanExportCounters>,
): void {
  new client.Counter({
    name: 'router_trace_spans_total',
    help: 'Spans of this process by result: exported, or dropped (export failed, or the queue was full)',
    labelNames: ['result'] as const,
    registers: [registry],
    collect() {
      const counters = spans();
      this.reset();
      this.inc({ result: 'exported' }, counters.exported);
      this.inc({ result: 'dropped' }, counters.dropped);
    },
  });
  new client.Counter({
    name: 'router_trace_exports_failed_total',
    help: 'Span exports the collector did not take after their retries',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(spans().failedExports);
    },
  });
}
