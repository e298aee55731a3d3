// Test support: Prometheus's promtool (Debian package `prometheus`, installed by `.ci/run`). Tests that
// need it fail when it is missing rather than skip, so a machine without it cannot pass them silently.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { dump } from 'js-yaml';

/** Runs `promtool <args>`; an assertion failure naming `.ci/run` when promtool is not installed. */
export function promtool(args: readonly string[]): { status: number | null; output: string } {
  const run = spawnSync('promtool', args, { encoding: 'utf8' });
  if ((run.error as NodeJS.ErrnoException | undefined)?.code === 'ENOENT') {
    assert.fail(
      'promtool is not installed: `.ci/run` installs it (apt-get install prometheus), or install it yourself',
    );
  }
  return { status: run.status, output: `${run.stdout}${run.stderr}` };
}

/** `promtool check rules` on these recording rules (one group); fails with promtool's own report. */
export function checkRulesWithPromtool(
  rules: readonly { record: string; expr: string }[],
  what: string,
): void {
  const dir = mkdtempSync(join(tmpdir(), 'promtool-'));
  try {
    const file = join(dir, 'rules.yaml');
    writeFileSync(file, dump({ groups: [{ name: 'check', rules }] }));
    const run = promtool(['check', 'rules', file]);
    assert.equal(run.status, 0, `promtool rejects ${what}:\n${run.output}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** One `promtool test rules` case: series sampled every `interval`, and the alerts expected at times. */
export interface AlertRuleTest {
  readonly interval: string;
  readonly input_series: readonly { readonly series: string; readonly values: string }[];
  readonly alert_rule_test: readonly {
    readonly eval_time: string;
    readonly alertname: string;
    readonly exp_alerts: readonly { readonly exp_labels: Readonly<Record<string, string>> }[];
  }[];
}

/**
 * `promtool test rules` on these alerting rules (one group), their annotations left out: the cases say
 * when an alert fires and with which labels, not its wording. Fails with promtool's own report.
 */
export function testAlertsWithPromtool(
  rules: readonly { alert?: string; expr: string; for?: string; labels?: Record<string, string> }[],
  tests: readonly AlertRuleTest[],
): void {
  const dir = mkdtempSync(join(tmpdir(), 'promtool-'));
  try {
    const bare = rules.map(({ alert, expr, for: hold, labels }) => ({
      alert,
      expr,
      ...(hold === undefined ? {} : { for: hold }),
      ...(labels === undefined ? {} : { labels }),
    }));
    writeFileSync(join(dir, 'rules.yaml'), dump({ groups: [{ name: 'test', rules: bare }] }));
    writeFileSync(
      join(dir, 'tests.yaml'),
      dump({ rule_files: ['rules.yaml'], evaluation_interval: '1m', tests }),
    );
    const run = promtool(['test', 'rules', join(dir, 'tests.yaml')]);
    assert.equal(run.status, 0, `promtool test rules:\n${run.output}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
