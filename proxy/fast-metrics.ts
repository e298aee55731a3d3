// Request-path counters and histograms for prom-client's registry. prom-client's own metrics hash their
// label set on every observation, a measurable share of a request's CPU (docs/architecture.md). These keep one plain record per label set, resolved once per request
// through a cached series, and render through the same registry (`registerMetric` takes any object
// with prom-client's `get()` shape), so /metrics output and the default process metrics are unchanged.

import type client from 'prom-client';

type Labels = Readonly<Record<string, string>>;

interface MetricValue {
  value: number;
  labels: Labels;
  metricName?: string;
}

interface MetricSnapshot {
  name: string;
  help: string;
  type: 'counter' | 'histogram';
  aggregator: 'sum';
  values: MetricValue[];
}

/** What both kinds share: registration in the registry, one record per label set, reset. */
abstract class FastMetric<R> {
  readonly name: string;
  readonly help: string;
  readonly aggregator = 'sum';
  readonly #labelNames: readonly string[];
  protected readonly records = new Map<string, R>();

  constructor(registry: client.Registry, name: string, help: string, labelNames: readonly string[]) {
    this.name = name;
    this.help = help;
    this.#labelNames = labelNames;
    registry.registerMetric(this as unknown as client.Metric);
  }

  /** The record of these label values (in labelNames order), made on first use. */
  protected record(values: readonly string[], make: (labels: Labels) => R): R {
    const key = values.join('\u0000');
    let r = this.records.get(key);
    if (r === undefined) {
      const labels: Record<string, string> = {};
      this.#labelNames.forEach((n, i) => {
        labels[n] = values[i] ?? '';
      });
      r = make(labels);
      this.records.set(key, r);
    }
    return r;
  }

  reset(): void {
    this.records.clear();
  }
}

export class FastCounter extends FastMetric<{ labels: Labels; value: number }> {
  readonly type = 'counter';

  /** The series for these label values (in labelNames order); keep it and call inc() on it. */
  series(...values: string[]): { inc(by?: number): void } {
    const record = this.record(values, (labels) => ({ labels, value: 0 }));
    return {
      inc(by = 1) {
        record.value += by;
      },
    };
  }

  async get(): Promise<MetricSnapshot> {
    const values = [...this.records.values()].map((s) => ({ value: s.value, labels: s.labels }));
    return { name: this.name, help: this.help, type: 'counter', aggregator: 'sum', values };
  }
}

interface HistogramRecord {
  labels: Labels;
  /** Observations per bucket (not cumulative); the last slot is +Inf. */
  counts: Float64Array;
  sum: number;
  count: number;
}

export class FastHistogram extends FastMetric<HistogramRecord> {
  readonly type = 'histogram';
  readonly #buckets: readonly number[];

  constructor(
    registry: client.Registry,
    name: string,
    help: string,
    labelNames: readonly string[],
    buckets: readonly number[],
  ) {
    super(registry, name, help, labelNames);
    this.#buckets = [...buckets].sort((a, b) => a - b);
  }

  series(...values: string[]): { observe(v: number): void } {
    const size = this.#buckets.length + 1;
    const record = this.record(values, (labels) => ({
      labels,
      counts: new Float64Array(size),
      sum: 0,
      count: 0,
    }));
    const buckets = this.#buckets;
    return {
      observe(v: number) {
        let i = 0;
        while (i < buckets.length && v > buckets[i]!) i++;
        record.counts[i]!++;
        record.sum += v;
        record.count++;
      },
    };
  }

  async get(): Promise<MetricSnapshot> {
    const values: MetricValue[] = [];
    for (const s of this.records.values()) {
      let cumulative = 0;
      this.#buckets.forEach((le, i) => {
        cumulative += s.counts[i]!;
        values.push({
          value: cumulative,
          labels: { le: String(le), ...s.labels },
          metricName: `${this.name}_bucket`,
        });
      });
      values.push({ value: s.count, labels: { le: '+Inf', ...s.labels }, metricName: `${this.name}_bucket` });
      values.push({ value: s.sum, labels: s.labels, metricName: `${this.name}_sum` });
      values.push({ value: s.count, labels: s.labels, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: 'histogram', aggregator: 'sum', values };
  }
}
