import assert from 'node:assert/strict';
import { mkdtemp, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { compilePricing, loadPricing } from '../../billing/pricing.ts';

const versionOf = (...texts: string[]) =>
  compilePricing(texts.map((text, i) => ({ file: `p${i}.yaml`, text }))).pricing.version;

const BASE = `prices:
  - { provider: openai, model: gpt-5.4-mini, cost: { input: 0.15, output: 0.6, cache_read: 0.075 } }
  - { provider: anthropic, model: "claude-*", cost: { input: 3, output: 15 } }
multipliers: { providers: { openrouter: 1.05 } }
`;

test('the version is sha256 of the compiled prices: layout, order, number spelling and file names do not change it', () => {
  const version = versionOf(BASE);
  assert.match(version, /^sha256:[0-9a-f]{16}$/);
  const reordered = `# a comment
multipliers:
  providers: { openrouter: "1.050" }
prices:
  - provider: anthropic
    model: "claude-*"
    cost: { output: 15.0, input: 3 }
  - { provider: openai, model: gpt-5.4-mini, cost: { cache_read: 7.5e-2, output: 0.60, input: .15 } }
`;
  assert.equal(versionOf(reordered), version);
  // An entry replaced by a later file is not part of the table.
  assert.equal(
    versionOf(
      BASE.replace('input: 3,', 'input: 9,'),
      `prices:\n  - { provider: anthropic, model: "claude-*", cost: { input: 3, output: 15 } }\n`,
    ),
    version,
  );
});

test('any price, multiplier, currency or pricing unit change gives another version', () => {
  const version = versionOf(BASE);
  const variants = [
    BASE.replace('output: 0.6', 'output: 0.61'),
    BASE.replace('openrouter: 1.05', 'openrouter: 1.06'),
    `currency: EUR\n${BASE}`,
    `pricing_unit: 1000\n${BASE}`,
    BASE.replace('"claude-*"', '"claude-3*"'),
    `${BASE.split('multipliers')[0]}`,
  ];
  const seen = new Set([version]);
  for (const text of variants) {
    const v = versionOf(text);
    assert.ok(!seen.has(v), text);
    seen.add(v);
  }
});

test('a top-level version: names the table after its hash; several are joined in file order', () => {
  const hash = versionOf(BASE);
  assert.equal(versionOf(`version: 2026-11.1\n${BASE}`), `${hash}@2026-11.1`);
  assert.equal(
    versionOf(`version: shipped-3\n${BASE}`, 'version: local-1\nprices: []\n'),
    `${hash}@shipped-3+local-1`,
  );
  const bad = compilePricing([{ file: 'p.yaml', text: `version: "a b/c"\n${BASE}` }]);
  assert.equal(bad.pricing.version, hash, 'a malformed version is left out');
  assert.match(bad.diagnostics[0]?.message ?? '', /^version must be/);
});

test('loading the same files again gives the same version whatever their times (never an mtime)', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'price-version-'));
  try {
    const file = join(dir, 'pricing.yaml');
    await writeFile(file, BASE);
    const first = (await loadPricing([file])).pricing.version;
    await utimes(file, new Date(2001, 0, 1), new Date(2001, 0, 1));
    const again = (await loadPricing([file])).pricing.version;
    assert.equal(again, first);
    assert.equal(first, versionOf(BASE));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('no pricing files: a version all the same (the empty table)', () => {
  assert.match(compilePricing([]).pricing.version, /^sha256:[0-9a-f]{16}$/);
  assert.equal(compilePricing([]).pricing.version, versionOf('prices: []\n'));
});
