// deploy/prometheus/router-alerts.yaml: `promtool check rules` accepts it (no skip: without promtool the
// test fails and names `.ci/run`, which installs it); every metric an alert reads is served by a real
// gateway or its billing sidecar (billing on, after plain and streamed requests); every alert has a
// severity and a summary and description; the alerts are the ones docs/operations.md "Alerts worth
// setting" lists; `promtool test rules` shows the gateway's own refusals (provider="none") kept out of
// the provider alerts.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, test } from 'node:test';
import { load } from 'js-yaml';
import { type LiveMetrics, scrapeLiveMetrics } from '../support/live-metrics.ts';
import { metricFamilies, metricNamesOf, missingMetrics } from '../support/prom-names.ts';
import { promtool, testAlertsWithPromtool } from '../support/promtool.ts';
import { ROOT } from '../support/stack.ts';

const FILE = join(ROOT, 'deploy/prometheus/router-alerts.yaml');

interface Rule {
  alert?: string;
  record?: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

const rules = (
  load(readFileSync(FILE, 'utf8')) as { groups: { name: string; rules: Rule[] }[] }
).groups.flatMap((g) => g.rules);
/** Series Prometheus makes itself for every target; no process serves them. */
const SCRAPE_SERIES = new Set(['up']);

let live: LiveMetrics;

before(async () => {
  live = await scrapeLiveMetrics();
});

test('promtool check rules accepts the file', () => {
  const run = promtool(['check', 'rules', FILE]);
  assert.equal(run.status, 0, run.output);
  assert.match(run.output, new RegExp(`SUCCESS: ${rules.length} rules found`));
});

test('every metric an alert reads is served by the gateway or the sidecar', () => {
  const pages = [metricFamilies(live.gateway), metricFamilies(live.sidecar)];
  const problems: string[] = [];
  for (const rule of rules) {
    const names = metricNamesOf(rule.expr).filter((n) => !SCRAPE_SERIES.has(n));
    if (names.length === 0 && !/\bup\b/.test(rule.expr)) problems.push(`${rule.alert}: no metric`);
    for (const name of missingMetrics(names, pages)) problems.push(`${rule.alert}: ${name} is not served`);
  }
  assert.deepEqual(problems, []);
});

test('every alert has a severity, a summary and a description that says what to do', () => {
  for (const rule of rules) {
    assert.ok(rule.alert, `a rule without an alert name: ${rule.expr}`);
    assert.match(rule.labels?.severity ?? '', /^(critical|warning|info)$/, `${rule.alert}: severity`);
    assert.ok((rule.annotations?.summary ?? '').length > 10, `${rule.alert}: summary`);
    assert.ok((rule.annotations?.description ?? '').length > 40, `${rule.alert}: description`);
  }
});

test('the alerts are the ones docs/operations.md lists', () => {
  const doc = readFileSync(join(ROOT, 'docs/operations.md'), 'utf8');
  const section = /^## Alerts worth setting\n([\s\S]*?)^## /m.exec(doc)?.[1];
  assert.ok(section, 'docs/operations.md has no "Alerts worth setting" section');
  const documented = [...section.matchAll(/^\| `(Router\w+)` \|/gm)].map((m) => m[1]);
  assert.deepEqual(documented.sort(), rules.map((r) => r.alert).sort());
});

/** A counter growing by `perMinute` each minute for 40 minutes, in promtool's series notation. */
function series(labels: string, perMinute: number): { series: string; values: string } {
  return { series: `{job="router",instance="gw:8080",${labels}}`, values: `0+${perMinute}x40` };
}

function requests(provider: string, status: number, perMinute: number) {
  const s = series(
    `provider="${provider}",api="chat.completions",status="${status}",stream="false"`,
    perMinute,
  );
  return { ...s, series: `router_requests_total${s.series}` };
}

test('the gateway\'s rate-limit refusals (provider="none") fire RouterRateLimited, not RouterUpstreamThrottled or RouterHighErrorRate', () => {
  const limited = series('limit="requests"', 60);
  testAlertsWithPromtool(rules, [
    {
      interval: '1m',
      input_series: [
        requests('openai', 200, 240),
        // 429 rate_limit_requests, and 503 rate_limit_unavailable (failure_mode closed).
        requests('none', 429, 60),
        requests('none', 503, 30),
        { ...limited, series: `router_limited_requests_total${limited.series}` },
      ],
      alert_rule_test: [
        { eval_time: '30m', alertname: 'RouterUpstreamThrottled', exp_alerts: [] },
        { eval_time: '30m', alertname: 'RouterHighErrorRate', exp_alerts: [] },
        {
          eval_time: '30m',
          alertname: 'RouterRateLimited',
          exp_alerts: [{ exp_labels: { severity: 'warning' } }],
        },
      ],
    },
    {
      interval: '1m',
      input_series: [requests('openai', 200, 240), requests('openai', 429, 60), requests('openai', 502, 30)],
      alert_rule_test: [
        {
          eval_time: '30m',
          alertname: 'RouterUpstreamThrottled',
          exp_alerts: [{ exp_labels: { severity: 'warning', provider: 'openai' } }],
        },
        {
          eval_time: '30m',
          alertname: 'RouterHighErrorRate',
          exp_alerts: [{ exp_labels: { severity: 'critical', provider: 'openai' } }],
        },
        { eval_time: '30m', alertname: 'RouterRateLimited', exp_alerts: [] },
      ],
    },
  ]);
});

/** The series of one gateway that the served-billed gap adds up, each growing by `perMinute` (or given values). */
function gapSeries(
  name: string,
  labels: string,
  values: string | number,
): { series: string; values: string } {
  const s = series(labels, typeof values === 'number' ? values : 0);
  return { series: `${name}${s.series}`, values: typeof values === 'number' ? s.values : values };
}

/**
 * A gateway whose counts balance: 100 served a minute = 80 queued + 10 skip_status + 2 void_interrupted +
 * 5 client_aborted + 3 no_usage.
 */
function balanced(queued: string | number = 80): { series: string; values: string }[] {
  return [
    gapSeries(
      'router_requests_total',
      'provider="openai",api="chat.completions",status="200",stream="false"',
      100,
    ),
    // Never in the gap: the gateway's own refusals, and token counts.
    gapSeries(
      'router_requests_total',
      'provider="none",api="chat.completions",status="401",stream="false"',
      7,
    ),
    gapSeries(
      'router_requests_total',
      'provider="anthropic",api="messages.count_tokens",status="200",stream="false"',
      9,
    ),
    gapSeries('router_billing_events_total', 'result="queued"', queued),
    gapSeries('router_billing_events_total', 'result="skip_status"', 10),
    // Any other result that says why there is no event counts as not reportable.
    gapSeries('router_billing_events_total', 'result="void_interrupted"', 2),
    gapSeries('router_billing_events_total', 'result="not_billable"', 9),
    gapSeries('router_billing_events_total', 'result="queue_failed"', 0),
    gapSeries('router_unreported_requests_total', 'reason="client_aborted"', 5),
    gapSeries('router_unreported_requests_total', 'reason="no_usage"', 3),
    {
      series: '{__name__="router_billing_events_in_flight",job="router",instance="gw:8080"}',
      values: '0x40',
    },
  ];
}

test('RouterServedNotBilled fires when served - (queued + not reportable) stays non-zero for 15 minutes, not before', () => {
  const fired = [{ exp_labels: { severity: 'critical', job: 'router', instance: 'gw:8080' } }];
  testAlertsWithPromtool(rules, [
    {
      // Balanced (token counts and provider="none" left out of both sides): never.
      interval: '1m',
      input_series: balanced(),
      alert_rule_test: [{ eval_time: '30m', alertname: 'RouterServedNotBilled', exp_alerts: [] }],
    },
    {
      // One request a minute leaves no count: non-zero from minute 1, firing once 15 minutes have passed.
      interval: '1m',
      input_series: balanced(79),
      alert_rule_test: [
        { eval_time: '10m', alertname: 'RouterServedNotBilled', exp_alerts: [] },
        { eval_time: '30m', alertname: 'RouterServedNotBilled', exp_alerts: fired },
      ],
    },
    {
      // Counted twice (a negative gap) fires as well.
      interval: '1m',
      input_series: balanced(81),
      alert_rule_test: [{ eval_time: '30m', alertname: 'RouterServedNotBilled', exp_alerts: fired }],
    },
    {
      // Events stuck for 10 minutes, then written: a gap that closes again never fires.
      interval: '1m',
      input_series: balanced('0+80x10 800x9 1680+80x19'),
      alert_rule_test: [
        { eval_time: '20m', alertname: 'RouterServedNotBilled', exp_alerts: [] },
        { eval_time: '30m', alertname: 'RouterServedNotBilled', exp_alerts: [] },
      ],
    },
    {
      // Events handed to the queue and not yet written are in flight, not missing.
      interval: '1m',
      input_series: [
        ...balanced(78).filter((s) => !s.series.startsWith('{__name__="router_billing_events_in_flight"')),
        {
          series: '{__name__="router_billing_events_in_flight",job="router",instance="gw:8080"}',
          values: '0+2x40',
        },
      ],
      alert_rule_test: [{ eval_time: '30m', alertname: 'RouterServedNotBilled', exp_alerts: [] }],
    },
  ]);
});

test('RouterStoreErrors fires on failed store operations of any operation for 5 minutes', () => {
  const errors = (operation: string, values: string) => ({
    series: `router_store_errors_total{job="router",instance="gw:8080",operation="${operation}"}`,
    values,
  });
  testAlertsWithPromtool(rules, [
    {
      interval: '1m',
      // Key lookups failing from minute 10 on; nothing before.
      input_series: [errors('view', '0x10 1+6x30'), errors('rateLimits', '0x40')],
      alert_rule_test: [
        { eval_time: '8m', alertname: 'RouterStoreErrors', exp_alerts: [] },
        {
          eval_time: '25m',
          alertname: 'RouterStoreErrors',
          exp_alerts: [{ exp_labels: { severity: 'critical' } }],
        },
      ],
    },
  ]);
});
