// GET /metrics of the billing sidecar after known deliveries: ok and failed attempts, dead letters, queue
// depth, and webhooks by kind and result (with kinds bounded against made-up event types).

import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type { IngestResult } from '../../billing/billing-client.ts';
import type { UsageEvent } from '../../billing/event/usage-event.ts';
import { openOutboxWriter } from '../../billing/outbox/writer.ts';
import { loadConfig } from '../../config/load.ts';
import { type Sidecar, startSidecar } from '../../sidecar/sidecar.ts';
import { countWebhook, createSidecarMetrics, streamConsumerSources } from '../../sidecar/sidecar-metrics.ts';
import { makeEvent } from '../support/usage-events.ts';

/** Value of one sample line (`name{labels} value`), or undefined. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

test('sidecar /metrics: deliveries ok / failed, dead letters, queue depth, webhooks', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'sidecar-metrics-'));
  let sidecar: Sidecar | undefined;
  // One hook, in this order: t.after runs hooks in the order they were added, and a worker still
  // running would write its checkpoint into a removed directory.
  t.after(async () => {
    await sidecar?.close();
    await rm(dir, { recursive: true, force: true });
  });
  const file = join(dir, 'router.yaml');
  await writeFile(
    file,
    `listen: 127.0.0.1:0
billing:
  enabled: true
  base_url: http://127.0.0.1:9
  project_id: p
  api_key: billing-secret
  extractor_rule_set_id: r
  outbox_dir: ./outbox
  retry_interval_ms: 5
  max_retry_interval_ms: 10
  max_attempts: 1
  listen: 127.0.0.1:0
`,
  );
  const { config, diagnostics } = await loadConfig(file, { env: {} });
  assert.ok(config, diagnostics.map((d) => d.message).join('\n'));

  const writer = await openOutboxWriter(config.billing.outboxDir);
  for (let i = 1; i <= 5; i++) await writer.append(makeEvent(i));
  await writer.close();

  let req2Failures = 0;
  const client = {
    async ingest(e: UsageEvent): Promise<IngestResult> {
      if (e.external_event_id === 'req-2' && req2Failures++ === 0)
        return { kind: 'retryable', status: 503, code: 'http_503', message: 'busy', unavailable: true };
      if (e.external_event_id === 'req-5')
        return { kind: 'permanent', status: 422, code: 'http_422', message: 'rejected' };
      return { kind: 'ok', status: 202 };
    },
    probe: () => Promise.resolve(true),
    getBalance: () => Promise.reject(new Error('unused')),
    close: () => Promise.resolve(),
  };
  sidecar = await startSidecar(config, { client, worker: { watch: false, pollIntervalMs: 20 } });
  await sidecar.worker?.waitForDrain();

  countWebhook('wallet.balance_changed', 'applied');
  countWebhook('wallet.balance_changed', 'applied');
  countWebhook('wallet.insufficient_balance', 'duplicate');
  countWebhook('made.up.kind', 'applied');
  countWebhook(undefined, 'unauthorized');

  const res = await fetch(`${sidecar.url}/metrics`);
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
  const text = await res.text();
  assert.equal(sample(text, 'router_billing_deliveries_total{result="ok"}'), 4);
  assert.equal(sample(text, 'router_billing_deliveries_total{result="failed"}'), 2);
  assert.equal(sample(text, 'router_billing_dead_letters_total'), 1);
  assert.equal(sample(text, 'router_billing_dead_letter_events'), 1);
  assert.equal(sample(text, 'router_billing_queue_depth'), 0);
  assert.equal(sample(text, 'router_billing_deliveries_in_flight'), 0);
  assert.equal(
    sample(text, 'router_billing_webhooks_total{kind="wallet.balance_changed",result="applied"}'),
    2,
  );
  assert.equal(
    sample(text, 'router_billing_webhooks_total{kind="wallet.insufficient_balance",result="duplicate"}'),
    1,
  );
  assert.equal(sample(text, 'router_billing_webhooks_total{kind="other",result="applied"}'), 1);
  assert.equal(sample(text, 'router_billing_webhooks_total{kind="unknown",result="unauthorized"}'), 1);
  assert.ok(!text.includes('made.up.kind'));
  assert.ok(text.includes('\nprocess_resident_memory_bytes '));
  assert.ok(text.includes('\nnodejs_eventloop_lag_seconds '));
  assert.ok(!text.includes('router_billing_process_') && !text.includes('router_billing_nodejs_'));
  assert.ok(!text.includes('billing-secret'));
});

test('sidecar /metrics with billing off: zeros, still Prometheus text', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'sidecar-metrics-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const file = join(dir, 'router.yaml');
  await writeFile(file, 'listen: 127.0.0.1:0\nbilling: { enabled: false, listen: "127.0.0.1:0" }\n');
  const { config } = await loadConfig(file, { env: {} });
  assert.ok(config);
  const sidecar = await startSidecar(config);
  t.after(() => sidecar.close());
  const text = await (await fetch(`${sidecar.url}/metrics`)).text();
  assert.equal(sample(text, 'router_billing_queue_depth'), 0);
  assert.equal(sample(text, 'router_billing_deliveries_total{result="ok"}'), 0);
});

test('shared-store mode: the stream consumer feeds the same metrics; a store outage keeps the last value', async () => {
  let down = false;
  const consumer = {
    counters: () => ({ delivered: 7, failedAttempts: 3, deadLettered: 1, inFlight: 2 }),
    async status() {
      if (down) throw new Error('store unavailable');
      return { pending: 42, deadLetter: 5 };
    },
  };
  const { delivery, deadLetters } = streamConsumerSources(consumer);
  const metrics = createSidecarMetrics(delivery, deadLetters);
  const first = await metrics.text();
  assert.equal(sample(first, 'router_billing_queue_depth'), 42);
  assert.equal(sample(first, 'router_billing_dead_letter_events'), 5);
  assert.equal(sample(first, 'router_billing_deliveries_total{result="ok"}'), 7);
  assert.equal(sample(first, 'router_billing_deliveries_total{result="failed"}'), 3);
  assert.equal(sample(first, 'router_billing_dead_letters_total'), 1);
  assert.equal(sample(first, 'router_billing_deliveries_in_flight'), 2);
  down = true;
  const second = await metrics.text();
  assert.equal(sample(second, 'router_billing_queue_depth'), 42);
  assert.equal(sample(second, 'router_billing_dead_letter_events'), 5);
});

test('the span exporter counters: read from the tracer at every scrape, zeros without one', async () => {
  const spans = { exported: 0, dropped: 0, failedExports: 0 };
  const traced = createSidecarMetrics(undefined, undefined, spans);
  spans.exported = 7;
  spans.dropped = 3;
  spans.failedExports = 1;
  const text = await traced.text();
  assert.equal(sample(text, 'router_trace_spans_total{result="exported"}'), 7);
  assert.equal(sample(text, 'router_trace_spans_total{result="dropped"}'), 3);
  assert.equal(sample(text, 'router_trace_exports_failed_total'), 1);
  const untraced = await createSidecarMetrics(undefined, undefined).text();
  assert.equal(sample(untraced, 'router_trace_spans_total{result="dropped"}'), 0);
});
