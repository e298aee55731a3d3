// Test support for the shipped dashboard and alert rules: the metric names a PromQL expression reads,
// the metric families a live /metrics page declares, and which names that page does not serve.

/** PromQL words that are not metric names when they are not called like functions. */
const KEYWORDS = new Set([
  'and',
  'or',
  'unless',
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'bool',
  'offset',
  'start',
  'end',
  'inf',
  'nan',
]);

/**
 * Metric names an expression selects: identifiers outside strings, label matchers, ranges and grouping
 * lists that are not called as functions or aggregations. Grafana variables (`$job`, `$__rate_interval`)
 * may appear in matchers and ranges.
 */
export function metricNamesOf(expr: string): string[] {
  const bare = expr
    .replace(/#[^\n]*/g, ' ')
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const names = new Set<string>();
  for (const m of bare.matchAll(/(?<![\w.$])[a-zA-Z_:][\w:]*/g)) {
    const rest = bare.slice(m.index + m[0].length).trimStart();
    if (rest.startsWith('(') || KEYWORDS.has(m[0].toLowerCase())) continue;
    names.add(m[0]);
  }
  return [...names];
}

/** The metric names a Grafana variable query reads: `label_values(metric{...}, label)`, `query_result(expr)`. */
export function variableMetricNames(query: string): string[] {
  const m = /^\s*label_values\(\s*([^,)]+?)\s*,/.exec(query);
  if (m !== null) return metricNamesOf(m[1]!);
  const q = /^\s*query_result\((.*)\)\s*$/s.exec(query);
  return q === null ? [] : metricNamesOf(q[1]!);
}

/** Metric families of a Prometheus text exposition (`# TYPE name type` lines): name -> type. */
export function metricFamilies(text: string): Map<string, string> {
  const families = new Map<string, string>();
  for (const m of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) families.set(m[1]!, m[2]!);
  return families;
}

/** Whether a page with these families serves `name` (a family, or a histogram/summary's series). */
export function serves(families: ReadonlyMap<string, string>, name: string): boolean {
  if (families.has(name)) return true;
  const m = /^(.*)_(bucket|sum|count)$/.exec(name);
  if (m === null) return false;
  const type = families.get(m[1]!);
  return type === 'histogram' || (type === 'summary' && m[2] !== 'bucket');
}

/** The names no page serves. */
export function missingMetrics(
  names: Iterable<string>,
  pages: readonly ReadonlyMap<string, string>[],
): string[] {
  return [...new Set(names)].filter((name) => !pages.some((families) => serves(families, name))).sort();
}
