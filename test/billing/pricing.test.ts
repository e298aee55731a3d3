import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { amountOf, parseMoney } from '../../billing/money.ts';
import { COST_KEYS, type PricingDiagnostic, TOKEN_COMPONENTS } from '../../billing/price-types.ts';
import schema from '../../billing/pricing.schema.json' with { type: 'json' };
import { compilePricing, loadPricing } from '../../billing/pricing.ts';

const EXAMPLE = `currency: USD
pricing_unit: 1000000
prices:
  - provider: openai
    model: gpt-5.4-mini
    cost: { input: 0.15, output: 0.6, cache_read: 0.075 }
  - provider: anthropic
    model: claude-*          # trailing * pattern allowed
    cost: { input: 3, output: 15, cache_read: 0.3, cache_creation: 3.75 }
  - provider: anthropic
    model: claude-haiku-*
    cost: { input: 1, output: 5 }
  - provider: openai
    model: gpt-5.4-mini
    channel: key1            # override for one upstream key
    cost: { input: 0.12, output: 0.5 }
  - provider: openai
    model: gpt-5.5
    cost: { input: 1.25, output: 10 }
  - provider: openrouter
    model: "*"
    cost: { input: 0.1, output: 0.2 }
multipliers:
  providers: { openrouter: 1.05 }
  models: { "openai/gpt-5.5": 0.9 }
  channels: { "openai/key1": 0.8 }
`;

function compile(text: string, file = 'pricing.yaml') {
  return compilePricing([{ file, text }]);
}

test('the example file compiles without diagnostics', () => {
  const { pricing, diagnostics } = compile(EXAMPLE);
  assert.deepEqual(diagnostics, []);
  assert.equal(pricing.size, 6);
});

test('exact model lookup gives hints per metric', () => {
  const { pricing } = compile(EXAMPLE);
  const price = pricing.lookup('openai', 'gpt-5.4-mini');
  assert.ok(price);
  assert.deepEqual(pricing.hints(price), {
    prompt_tokens: { unit_price: 0.15, pricing_unit: 1000000, currency: 'USD' },
    completion_tokens: { unit_price: 0.6, pricing_unit: 1000000, currency: 'USD' },
    cache_read_tokens: { unit_price: 0.075, pricing_unit: 1000000, currency: 'USD' },
  });
});

test('channel entry beats the model entry, keeps unnamed components, and the channel multiplier applies', () => {
  const { pricing } = compile(EXAMPLE);
  const price = pricing.lookup('openai', 'gpt-5.4-mini', 'key1');
  assert.ok(price);
  assert.equal(price.channel, 'key1');
  const hints = pricing.hints(price);
  // 0.12 x 0.8 and 0.5 x 0.8, exactly; cache_read comes from the model entry, times 0.8.
  assert.equal(hints['prompt_tokens']?.unit_price, 0.096);
  assert.equal(hints['completion_tokens']?.unit_price, 0.4);
  assert.equal(hints['cache_read_tokens']?.unit_price, 0.06);
  // Another key of the same provider gets the ordinary price.
  assert.equal(
    pricing.hints(pricing.lookup('openai', 'gpt-5.4-mini', 'key2')!)['prompt_tokens']?.unit_price,
    0.15,
  );
});

test('exact model beats patterns, longest pattern beats shorter', () => {
  const { pricing } = compile(EXAMPLE);
  assert.equal(pricing.lookup('anthropic', 'claude-haiku-5-5')?.model, 'claude-haiku-*');
  assert.equal(pricing.lookup('anthropic', 'claude-sonnet-5')?.model, 'claude-*');
  assert.equal(pricing.lookup('openai', 'gpt-5.4-mini')?.model, 'gpt-5.4-mini');
  assert.equal(pricing.lookup('openai', 'gpt-5.4-mini-2026-03-17'), undefined);
  assert.equal(pricing.lookup('openrouter', 'meta/llama-5')?.model, '*');
});

test('multipliers are exact decimals: provider x model x channel', () => {
  const { pricing } = compilePricing([
    {
      file: 'a.yaml',
      text: `prices:
  - { provider: p, model: m, channel: k, cost: { input: 0.1, output: 0.7 } }
multipliers:
  providers: { p: 3 }
  models: { "p/m": 1.1 }
  channels: { "p/k": 0.2 }
`,
    },
  ]);
  const price = pricing.lookup('p', 'm', 'k');
  assert.ok(price);
  // Float arithmetic would give 0.06600000000000002 and 0.46199999999999997.
  assert.notEqual(0.1 * 3 * 1.1 * 0.2, 0.066);
  assert.equal(price.unitPrices.input?.toString(), '0.066');
  assert.equal(pricing.hints(price)['prompt_tokens']?.unit_price, 0.066);
  assert.equal(pricing.hints(price)['completion_tokens']?.unit_price, 0.462);
  assert.equal(price.multiplier.toString(), '0.66');
});

test('0.1 + 0.2 style exactness in money helpers, and amounts', () => {
  assert.equal(parseMoney(0.1)!.plus(parseMoney(0.2)!).toString(), '0.3');
  assert.equal(parseMoney('0.000000015')!.toString(), '1.5e-8');
  assert.equal(amountOf(1_234_567, parseMoney(0.15)!, 1_000_000).toString(), '0.18518505');
  assert.equal(parseMoney(-1), undefined);
  assert.equal(parseMoney('1,5'), undefined);
  assert.equal(parseMoney(Number.POSITIVE_INFINITY), undefined);
});

test('quoted decimal prices are read exactly', () => {
  const { pricing, diagnostics } = compile(
    'prices:\n  - { provider: p, model: m, cost: { input: "0.0000001", output: "2.5" } }\n',
  );
  assert.deepEqual(diagnostics, []);
  assert.equal(pricing.lookup('p', 'm')?.unitPrices.input?.toFixed(), '0.0000001');
});

test('missing prices are reported once per provider/model', () => {
  const missing: string[] = [];
  const { pricing } = compilePricing([{ file: 'p.yaml', text: EXAMPLE }], {
    onMissingPrice: (provider, model) => missing.push(`${provider}/${model}`),
  });
  assert.equal(pricing.lookup('openai', 'gpt-9'), undefined);
  assert.equal(pricing.lookup('openai', 'gpt-9'), undefined);
  assert.equal(pricing.lookup('openai', 'gpt-9', 'key1'), undefined);
  assert.equal(pricing.lookup('gemini', 'gemini-3.8-flash'), undefined);
  assert.deepEqual(missing, ['openai/gpt-9', 'gemini/gemini-3.8-flash']);
});

test('later files override earlier ones; duplicates within a file are flagged', () => {
  const { pricing, diagnostics } = compilePricing([
    { file: 'base.yaml', text: 'prices:\n  - { provider: p, model: m, cost: { input: 1, output: 2 } }\n' },
    {
      file: 'local.yaml',
      text: 'prices:\n  - { provider: p, model: m, cost: { input: 3, output: 4 } }\n  - { provider: p, model: m, cost: { input: 5, output: 6 } }\n',
    },
  ]);
  assert.equal(pricing.lookup('p', 'm')?.unitPrices.input?.toNumber(), 5);
  const [duplicate] = diagnostics;
  assert.equal(diagnostics.length, 1);
  assert.ok(duplicate);
  assert.equal(duplicate.file, 'local.yaml');
  assert.equal(duplicate.line, 3);
  assert.match(duplicate.message, /duplicate price for p\/m; this entry replaces the one on line 2/);
});

function only(diagnostics: PricingDiagnostic[]): PricingDiagnostic {
  const [diagnostic] = diagnostics;
  assert.equal(diagnostics.length, 1, JSON.stringify(diagnostics));
  assert.ok(diagnostic);
  return diagnostic;
}

test('bad entries are skipped with line and column', () => {
  const text = `currency: USD
prices:
  - provider: openai
    model: good
    cost: { input: 1, output: 2 }
  - provider: openai
    model: bad-price
    cost:
      input: -1
      output: 2
  - provider: openai
    model: gpt-*-mini
    cost: { input: 1, output: 2 }
  - provider: openai
    cost: { input: 1, output: 2 }
  - provider: openai
    model: no-output
    cost: { input: 1 }
  - provider: openai
    model: typo
    cost: { input: 1, output: 2, cached_read: 0.5 }
`;
  const { pricing, diagnostics } = compile(text);
  assert.deepEqual(
    diagnostics.map((d) => [d.line, d.col, d.message]),
    [
      [9, 7, 'cost input must be a non-negative number (entry ignored)'],
      [12, 5, 'model "gpt-*-mini": "*" is allowed only at the end (entry ignored)'],
      [14, 5, 'price entry without a model (entry ignored)'],
      [18, 5, 'cost needs both input and output (entry ignored)'],
      [
        21,
        34,
        'unknown cost "cached_read"; expected one of input, output, cache_read, cache_creation, input_audio, output_audio, input_characters, audio_minutes, images (ignored)',
      ],
    ],
  );
  assert.ok(pricing.lookup('openai', 'good'));
  assert.equal(pricing.lookup('openai', 'bad-price'), undefined);
  assert.ok(pricing.lookup('openai', 'typo'));
  assert.equal(pricing.lookup('openai', 'typo')?.unitPrices.cache_read, undefined);
});

test('syntax errors, wrong shapes and bad multipliers become diagnostics', () => {
  const syntax = only(compile('prices:\n  - { provider: p, model: m\n').diagnostics);
  assert.match(syntax.message, /^YAML syntax error/);
  assert.ok(syntax.line >= 2);

  assert.match(only(compile('- a\n- b\n').diagnostics).message, /must be a mapping/);
  assert.match(only(compile('prices: { a: 1 }\n').diagnostics).message, /prices must be a list/);
  const unit = only(compile('pricing_unit: 0\nprices: []\n').diagnostics);
  assert.deepEqual([unit.line, unit.col], [1, 1]);
  assert.match(only(compile('currency: dollars\n').diagnostics).message, /three-letter/);
  const multiplier = only(compile('multipliers:\n  models: { "gpt-5": 0.9 }\n').diagnostics);
  assert.deepEqual(
    [multiplier.line, multiplier.message],
    [2, 'multipliers.models keys are "provider/model" (ignored)'],
  );
  assert.match(
    only(compile('multipliers:\n  providers: { p: minus }\n').diagnostics).message,
    /non-negative number/,
  );
  assert.match(only(compile('extra: 1\n').diagnostics).message, /unknown top-level key "extra"/);
  assert.deepEqual(compile('').diagnostics, []);
});

test('an invalid file: each problem names the file, its line and column, and what to write instead', () => {
  const text = `currency: usd
pricing_unit: 1.5
prices:
  - provider: p
    model: kept
    note: typo
    cost: { input: 1, output: 2 }
  - provider: p
    model: empty-channel
    channel: ""
    cost: { input: 1 }
  - provider: p
    model: no-cost
  - provider: p
    model: nothing
    cost: { cached_read: 1 }
  - provider: p
    model: image
    cost: { images: { "1024x1024": 0.04, hd: cheap } }
  - just a string
multipliers:
  providers: { p: 2 }
  models: { gpt: 0.9 }
  regions: { eu: 1.1 }
reference_prices: yes
`;
  const { pricing, diagnostics } = compilePricing([{ file: 'prices.yaml', text }]);
  const costs = COST_KEYS.join(', ');
  assert.deepEqual(
    diagnostics.map((d) => `${d.file}:${d.line}:${d.col}: ${d.message}`),
    [
      'prices.yaml:1:1: currency must be a three-letter code such as USD (using USD)',
      'prices.yaml:2:1: pricing_unit must be a positive integer (using 1000000)',
      'prices.yaml:6:5: unknown key "note" in a price entry (ignored)',
      'prices.yaml:10:5: channel must be a non-empty string (entry ignored)',
      `prices.yaml:12:5: cost must be a mapping of ${costs} (entry ignored)`,
      'prices.yaml:16:5: cost names no price (entry ignored)',
      `prices.yaml:16:13: unknown cost "cached_read"; expected one of ${costs} (ignored)`,
      'prices.yaml:19:42: image price "hd" must be a non-negative number (entry ignored)',
      'prices.yaml:20:5: a price entry must be a mapping with provider, model and cost',
      'prices.yaml:23:13: multipliers.models keys are "provider/model" (ignored)',
      'prices.yaml:24:3: unknown multipliers group "regions"; expected providers, models, channels',
      'prices.yaml:25:1: reference_prices must be true or false',
    ],
  );
  // What is left out falls back to the defaults; the rest of the file still applies.
  const kept = pricing.lookup('p', 'kept');
  assert.deepEqual([pricing.size, kept?.currency, kept?.pricingUnit], [1, 'USD', 1_000_000]);
  assert.equal(kept?.multiplier.toString(), '2');
  assert.deepEqual(pricing.referenceFiles, []);
});

test('one problem per left-out entry: the first a reader would find', () => {
  const { diagnostics } = compile(
    'prices:\n  - { model: "a*b", channel: "", cost: [] }\n  - { provider: p, model: "a*b", cost: { input: x } }\n',
  );
  assert.deepEqual(
    diagnostics.map((d) => [d.line, d.message]),
    [
      [2, 'price entry without a provider (entry ignored)'],
      [3, 'model "a*b": "*" is allowed only at the end (entry ignored)'],
    ],
  );
  const images = only(compile('prices:\n  - { provider: p, model: m, cost: { images: {} } }\n').diagnostics);
  assert.match(images.message, /^cost images must be a price per image or a mapping of "<size>"/);
  assert.deepEqual(compile('prices: ~\nmultipliers: { providers: ~ }\n').diagnostics, []);
});

test('the schema names the cost components the compiler prices', () => {
  const { cost, entry } = schema.definitions;
  assert.deepEqual(Object.keys(cost.properties), COST_KEYS);
  assert.deepEqual(
    cost.anyOf.flatMap((branch) => branch.required),
    COST_KEYS,
  );
  assert.deepEqual(Object.keys(entry.then.properties.cost.dependencies), [...TOKEN_COMPONENTS]);
});

test('the currency and pricing unit of a file go into its hints', () => {
  const { pricing } = compile(
    'currency: EUR\npricing_unit: 1000\nprices:\n  - { provider: p, model: m, cost: { input: 0.001, output: 0.002 } }\n',
  );
  assert.deepEqual(pricing.hints(pricing.lookup('p', 'm')!)['prompt_tokens'], {
    unit_price: 0.001,
    pricing_unit: 1000,
    currency: 'EUR',
  });
});

test('loadPricing reads files and reports unreadable ones', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'pricing-'));
  try {
    const file = join(dir, 'pricing.yaml');
    await writeFile(file, EXAMPLE);
    const missing = join(dir, 'missing.yaml');
    const { pricing, diagnostics } = await loadPricing([file, missing]);
    assert.ok(pricing.lookup('openai', 'gpt-5.4-mini'));
    assert.deepEqual(diagnostics, [
      { file: missing, line: 0, col: 0, message: 'cannot read pricing file: file not found' },
    ]);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('the shipped deploy/config/pricing.yaml prices every model of the reference registry', async () => {
  const { pricing, diagnostics } = await loadPricing([
    new URL('../../deploy/config/pricing.yaml', import.meta.url).pathname,
  ]);
  assert.deepEqual(diagnostics, []);
  const registry: [string, string][] = [
    ['openai', 'gpt-5.5'],
    ['openai', 'gpt-5.4-mini'],
    ['openai', 'text-embedding-3-small'],
    ['anthropic', 'claude-opus-5'],
    ['anthropic', 'claude-sonnet-5'],
    ['anthropic', 'claude-haiku-5-5'],
    ['gemini', 'gemini-3.8-flash'],
    ['gemini', 'gemini-embedding-001'],
    ['openai', 'gpt-5.4-mini-2026-03-17'],
    ['anthropic', 'claude-sonnet-5-20260101'],
  ];
  for (const [provider, model] of registry) {
    const price = pricing.lookup(provider, model);
    assert.ok(price, `${provider}/${model}`);
    assert.ok(price.unitPrices.input && price.unitPrices.output, `${provider}/${model}`);
  }
});
