// deploy/grafana/router-dashboard.json: a Grafana dashboard operators import as it is. Every metric a
// panel or variable queries is served by a real gateway or its billing sidecar (billing on, after plain
// and streamed requests); every panel query is valid PromQL (promtool, Grafana's variables filled in);
// panels have unique ids, fit the 24-column grid and read the dashboard's data source variable.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, test } from 'node:test';
import { type LiveMetrics, scrapeLiveMetrics } from '../support/live-metrics.ts';
import { metricFamilies, metricNamesOf, missingMetrics, variableMetricNames } from '../support/prom-names.ts';
import { checkRulesWithPromtool } from '../support/promtool.ts';
import { ROOT } from '../support/stack.ts';

interface Target {
  expr?: string;
  refId?: string;
}
interface Panel {
  id: number;
  type: string;
  title: string;
  gridPos: { x: number; y: number; w: number; h: number };
  datasource?: { type: string; uid: string };
  targets?: Target[];
  panels?: Panel[];
}
interface Variable {
  name: string;
  type: string;
  query?: string | { query: string };
}
interface Dashboard {
  uid: string;
  title: string;
  panels: Panel[];
  templating: { list: Variable[] };
}

const FILE = join(ROOT, 'deploy/grafana/router-dashboard.json');
const dashboard = JSON.parse(readFileSync(FILE, 'utf8')) as Dashboard;

function allPanels(panels: readonly Panel[]): Panel[] {
  return panels.flatMap((p) => [p, ...allPanels(p.panels ?? [])]);
}

const panels = allPanels(dashboard.panels);
const queries = panels.flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title, expr: t.expr ?? '' })));
const variableQueries = dashboard.templating.list
  .filter((v) => v.type === 'query')
  .map((v) => ({ name: v.name, query: typeof v.query === 'string' ? v.query : (v.query?.query ?? '') }));

let live: LiveMetrics;

before(async () => {
  live = await scrapeLiveMetrics();
});

test('every metric the dashboard queries is served by the gateway or the sidecar', () => {
  const pages = [metricFamilies(live.gateway), metricFamilies(live.sidecar)];
  assert.ok(queries.length >= 30, `only ${queries.length} queries`);
  const problems: string[] = [];
  for (const { panel, expr } of queries) {
    const names = metricNamesOf(expr);
    if (names.length === 0) problems.push(`panel "${panel}": no metric in ${expr}`);
    for (const name of missingMetrics(names, pages)) problems.push(`panel "${panel}": ${name} is not served`);
  }
  for (const { name, query } of variableQueries) {
    const names = variableMetricNames(query);
    if (names.length === 0) problems.push(`variable ${name}: no metric in ${query}`);
    for (const missing of missingMetrics(names, pages))
      problems.push(`variable ${name}: ${missing} is not served`);
  }
  assert.deepEqual(problems, []);
});

test('the dashboard covers the gateway, its rate limits, the GenAI histograms, billing and the processes', () => {
  const used = new Set(queries.flatMap((q) => metricNamesOf(q.expr)));
  for (const name of [
    'router_requests_total',
    'router_request_duration_seconds_bucket',
    'router_upstream_ttfb_seconds_bucket',
    'router_tokens_total',
    'router_active_streams',
    'router_limited_requests_total',
    'router_rate_limit_remaining_ratio',
    'gen_ai_server_time_to_first_token_seconds_bucket',
    'gen_ai_server_time_per_output_token_seconds_bucket',
    'gen_ai_server_request_duration_seconds_bucket',
    'gen_ai_client_token_usage_bucket',
    'router_billing_events_total',
    'router_billing_queue_depth',
    'router_billing_deliveries_total',
    'router_billing_dead_letter_events',
    'router_balance_checks_total',
    'router_store_errors_total',
    'router_client_connections',
    'process_cpu_seconds_total',
    'process_resident_memory_bytes',
    'nodejs_eventloop_lag_p99_seconds',
  ])
    assert.ok(used.has(name), `no panel shows ${name}`);
});

test('every panel query is valid PromQL', () => {
  // Grafana fills these in before Prometheus sees a query.
  const filled = queries.map((q) =>
    q.expr.replaceAll('$__rate_interval', '5m').replace(/\$\{?\w+\}?/g, '.*'),
  );
  checkRulesWithPromtool(
    filled.map((expr, i) => ({ record: `dashboard:query_${i}`, expr })),
    'the dashboard queries',
  );
});

test('panels: unique ids, on the 24-column grid, the data source variable, unique refIds', () => {
  assert.equal(dashboard.uid, 'llm-router');
  const ids = panels.map((p) => p.id);
  assert.equal(new Set(ids).size, ids.length, 'duplicate panel ids');
  assert.ok(dashboard.templating.list.some((v) => v.name === 'datasource' && v.type === 'datasource'));
  for (const p of panels) {
    assert.ok(
      p.gridPos.x >= 0 && p.gridPos.w > 0 && p.gridPos.x + p.gridPos.w <= 24,
      `${p.title} off the grid`,
    );
    if (p.type === 'row') continue;
    // biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana's variable syntax
    assert.equal(p.datasource?.uid, '${datasource}', `${p.title} does not use the data source variable`);
    const refIds = (p.targets ?? []).map((t) => t.refId);
    assert.ok(refIds.length > 0, `${p.title} has no query`);
    assert.equal(new Set(refIds).size, refIds.length, `${p.title} repeats a refId`);
  }
});
