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
