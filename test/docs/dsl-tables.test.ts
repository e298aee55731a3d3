// docs/dsl.md's translator and preset tables name every translator, transform and usage preset the
// gateway registers, and so every one the shipped provider files use, each spelled out in full (a reader
// searching for a name from a provider file finds it).

import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { REALTIME_TRANSLATORS, TRANSFORMS, TRANSLATORS, USAGE_PRESETS } from '../../hooks/families/index.ts';

const ROOT = new URL('../../', import.meta.url).pathname;
const DSL = readFileSync(join(ROOT, 'docs/dsl.md'), 'utf8');
const PROVIDERS = join(ROOT, 'deploy/config/providers');

const documented = (name: string) => DSL.includes(`\`${name}\``);

test('every name a shipped provider file gives req_map, resp_map, sse_parse or usage_extract is in docs/dsl.md', () => {
  const missing: string[] = [];
  for (const file of readdirSync(PROVIDERS).filter((f) => f.endsWith('.conf'))) {
    const text = readFileSync(join(PROVIDERS, file), 'utf8');
    for (const m of text.matchAll(/\b(req_map|resp_map|sse_parse|usage_extract)\s+([A-Za-z0-9_]+)\s*;/g))
      if (!documented(m[2]!)) missing.push(`${file}: ${m[1]} ${m[2]}`);
  }
  assert.deepEqual(missing, []);
});

test('every registered translator, transform and usage preset is in docs/dsl.md', () => {
  const names = [
    ...TRANSLATORS.keys(),
    ...TRANSFORMS.keys(),
    ...REALTIME_TRANSLATORS.keys(),
    ...USAGE_PRESETS.keys(),
  ];
  assert.ok(names.length > 40);
  assert.deepEqual(names.filter((n) => !documented(n)).sort(), []);
});
