// The missing-price report: which served models (registry routes) have no price, and which pricing
// files still hold unreviewed reference prices. The shipped registry and pricing file cover each other.

import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { test } from 'node:test';
import { pricingWarnings, unpricedModels } from '../../billing/price-coverage.ts';
import { compilePricing, loadPricing } from '../../billing/pricing.ts';
import type { ModelEntry } from '../../common/config-types.ts';
import { loadModelsFile } from '../../config/models.ts';
import { MODELS_FILE, PRICING_FILE } from '../support/stack.ts';

function entry(id: string, ...routes: [string, string?][]): ModelEntry {
  return {
    id,
    routes: routes.map(([provider, model]) => ({ provider, model })),
    strategy: 'priority',
    ownedBy: undefined,
    listed: !id.endsWith('*'),
  };
}

const PRICES = `
prices:
  - { provider: openai, model: gpt-5.5, cost: { input: 1, output: 2 } }
  - { provider: openai, model: "dall-e-3*", cost: { images: 0.04 } }
  - { provider: anthropic, model: "claude-sonnet-*", cost: { input: 3, output: 15 } }
`;

test('served models without a price are listed by provider and the name that is priced', () => {
  const { pricing, diagnostics } = compilePricing([{ file: 'p.yaml', text: PRICES }]);
  assert.deepEqual(diagnostics, []);
  const missing = unpricedModels(
    [
      entry('gpt-5.5', ['openai']),
      entry('team-default', ['openai', 'gpt-5.5'], ['azure-openai', 'gpt-5.5']),
      entry('o1', ['openai']),
      entry('dall-e-*', ['openai']),
      entry('claude-*', ['anthropic']),
      entry('gemini-*', ['gemini']),
      entry('o1', ['openai']),
    ],
    pricing,
  );
  assert.deepEqual(missing, [
    { provider: 'azure-openai', model: 'gpt-5.5' },
    { provider: 'openai', model: 'o1' },
    { provider: 'gemini', model: 'gemini-*' },
  ]);
  assert.deepEqual(pricingWarnings(missing, pricing), [
    '3 served models have no price; their usage events carry no pricing_hints: azure-openai/gpt-5.5, openai/o1, gemini/gemini-*',
  ]);
  assert.deepEqual(pricingWarnings([], pricing), []);
});

test('reference_prices: true is a notice naming the file; false or absent is none; other values a diagnostic', () => {
  const { pricing } = compilePricing([
    { file: 'shipped.yaml', text: `reference_prices: true\n${PRICES}` },
    { file: 'local.yaml', text: 'reference_prices: false\nprices: []\n' },
  ]);
  assert.deepEqual(pricing.referenceFiles, ['shipped.yaml']);
  assert.match(pricingWarnings([], pricing)[0]!, /^shipped\.yaml: holds reference prices/);
  const bad = compilePricing([{ file: 'b.yaml', text: 'reference_prices: yes please\nprices: []\n' }]);
  assert.deepEqual(
    bad.diagnostics.map((d) => d.message),
    ['reference_prices must be true or false'],
  );
});

test('the shipped registry is fully priced by the shipped pricing file, which is marked reference', async () => {
  const { models, diagnostics: modelDiagnostics } = await loadModelsFile(MODELS_FILE, {});
  assert.deepEqual(modelDiagnostics, []);
  assert.ok(models.entries.length > 10);
  const { pricing, diagnostics } = await loadPricing([PRICING_FILE]);
  assert.deepEqual(diagnostics, []);
  assert.deepEqual(unpricedModels(models.entries, pricing), []);
  assert.deepEqual(pricing.referenceFiles, [PRICING_FILE]);
  // Every section of the shipped file says where its prices come from and when they were entered.
  const text = await readFile(PRICING_FILE, 'utf8');
  const sections = text.split('\n').filter((l) => /^ {2}# --- /.test(l)).length;
  const sources = text
    .split('\n')
    .filter((l) => /# Source: https:\/\/\S+.*entered \d{4}-\d\d-\d\d/.test(l)).length;
  assert.ok(sections >= 4 && sources >= sections, `${sources} sources for ${sections} sections`);
});
