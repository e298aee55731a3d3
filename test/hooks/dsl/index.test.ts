import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import {
  baseUrlEnvName,
  DEFAULT_REGISTRY_NAMES,
  defaultRegistries,
  formatDiagnostic,
  loadProviderDir,
} from '../../../hooks/dsl/index.ts';

let dir = '';
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'dsl-'));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

const good = (name: string) =>
  `syntax "next-router/0.1";\nprovider "${name}" {\n  defaults { upstream_config { base_url = "http://h"; } }\n  match api = "embeddings" { }\n}\n`;

test('loadProviderDir compiles every <name>.conf, skips other files, reports bad ones with file:line:col', async () => {
  const d = join(dir, 'providers');
  await mkdir(d);
  await mkdir(join(d, 'sub.conf'));
  await writeFile(join(d, 'alpha.conf'), good('alpha'));
  await writeFile(join(d, 'beta.conf'), good('beta'));
  await writeFile(join(d, 'gamma.conf'), good('delta'));
  await writeFile(join(d, 'README.md'), 'not a provider');
  const r = await loadProviderDir(d, { registries: defaultRegistries(), env: {} });
  assert.deepEqual([...r.providers.keys()], ['alpha', 'beta']);
  assert.deepEqual(r.diagnostics.map(formatDiagnostic), [
    `${join(d, 'gamma.conf')}:2:10: provider name "delta" does not match the file name "gamma.conf"`,
  ]);
  assert.equal(r.providers.get('alpha')?.file, join(d, 'alpha.conf'));
});

test('loadProviderDir on a missing folder is a diagnostic, not an exception', async () => {
  const missing = join(dir, 'nope');
  const r = await loadProviderDir(missing, { registries: defaultRegistries(), env: {} });
  assert.equal(r.providers.size, 0);
  assert.deepEqual(r.diagnostics.map(formatDiagnostic), [
    `${missing}:1:1: cannot read the provider folder (ENOENT)`,
  ]);
});

test('formatDiagnostic prints file:line:col: message', () => {
  assert.equal(
    formatDiagnostic({ file: 'a/b.conf', line: 3, col: 7, message: 'boom' }),
    'a/b.conf:3:7: boom',
  );
});

test('default registry names: transforms include every translator plus openai_usage_strip', () => {
  const r = defaultRegistries();
  for (const t of DEFAULT_REGISTRY_NAMES.translators) assert.ok(r.transforms.has(t), t);
  assert.ok(r.transforms.has('openai_usage_strip'));
  assert.equal(r.translators.has('openai_usage_strip'), false);
  assert.equal(r.usagePresets.size, 13);
});

test('baseUrlEnvName upper-cases and turns "-" into "_"', () => {
  assert.equal(baseUrlEnvName('azure-openai'), 'ROUTER_PROVIDER_AZURE_OPENAI_BASE_URL');
  assert.equal(baseUrlEnvName('xai'), 'ROUTER_PROVIDER_XAI_BASE_URL');
});
