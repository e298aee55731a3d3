// One rule for where a hook module is, at both places that name one (common/hook-module-path.ts): the
// main file's `hooks[].module` and a provider file's `hook` directive. A path is relative to the file that
// names it; a bare package name is looked up from that file's folder upwards, so a provider file beside a
// node_modules of its own gets its own copy and the main file the configuration folder's.

import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { hookModulePath, hookModuleUrl } from '../../common/hook-module-path.ts';
import { checkConfig } from '../../proxy/gateway.ts';
import { simProvider } from '../support/sim-providers.ts';
import { PRICING_FILE, simProviderEnv } from '../support/stack.ts';

const RECORDING_HOOK = `
export function createHook(options) {
  (globalThis.hookPathLoads ??= []).push(import.meta.url);
  return { name: 'path-test-' + (options.from ?? 'none') };
}
`;

const loads = (): string[] => (globalThis as { hookPathLoads?: string[] }).hookPathLoads ?? [];

let dir: string;

async function writePackage(folder: string): Promise<void> {
  const pkg = join(folder, 'node_modules', 'paths-test-hooks');
  await mkdir(pkg, { recursive: true });
  await writeFile(
    join(pkg, 'package.json'),
    JSON.stringify({ name: 'paths-test-hooks', type: 'module', main: 'index.js' }),
  );
  await writeFile(join(pkg, 'index.js'), RECORDING_HOOK);
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'router-hook-paths-'));
  await mkdir(join(dir, 'hooks'));
  await mkdir(join(dir, 'providers'));
  await writeFile(join(dir, 'hooks', 'main-local.js'), RECORDING_HOOK);
  await writeFile(join(dir, 'providers', 'rule-local.js'), RECORDING_HOOK);
  await writePackage(dir);
  await writePackage(join(dir, 'providers'));
  await writeFile(
    join(dir, 'providers', 'tagged.conf'),
    simProvider('tagged').replace(
      '  defaults {',
      '  defaults {\n    hook "./rule-local.js" { from = "rule"; }\n    hook "paths-test-hooks" { from = "rule"; }',
    ),
  );
  await writeFile(join(dir, 'models.yaml'), 'models:\n  tagged-model: { providers: [tagged] }\n');
  await writeFile(
    join(dir, 'router.yaml'),
    [
      'listen: 127.0.0.1:0',
      'providers_dir: ./providers',
      'models: ./models.yaml',
      `pricing: ${PRICING_FILE}`,
      'log: { level: silent }',
      'hooks:',
      '  - module: ./hooks/main-local.js',
      '    options: { from: main }',
      '  - module: paths-test-hooks',
      '    options: { from: main }',
    ].join('\n'),
  );
});
after(() => rm(dir, { recursive: true, force: true }));

test('hookModulePath: paths from the naming file, bare names kept', () => {
  const from = '/etc/router/providers/acme.conf';
  assert.equal(hookModulePath('./h.ts', from), '/etc/router/providers/h.ts');
  assert.equal(hookModulePath('../h.ts', from), '/etc/router/h.ts');
  assert.equal(hookModulePath('.hooks/h.ts', from), '/etc/router/providers/.hooks/h.ts');
  assert.equal(hookModulePath('/opt/h.ts', from), '/opt/h.ts');
  assert.equal(hookModulePath('file:///opt/h.ts', from), '/opt/h.ts');
  assert.equal(hookModulePath('@org/hooks', from), '@org/hooks');
  assert.equal(hookModulePath('my-hooks', from), 'my-hooks');
});

test('hookModuleUrl: a bare name from the naming file folder upwards; a missing one says where it looked', () => {
  const fromProvider = join(dir, 'providers', 'tagged.conf');
  assert.equal(
    hookModuleUrl('paths-test-hooks', fromProvider),
    pathToFileURL(join(dir, 'providers', 'node_modules', 'paths-test-hooks', 'index.js')).href,
  );
  assert.equal(
    hookModuleUrl('paths-test-hooks', join(dir, 'router.yaml')),
    pathToFileURL(join(dir, 'node_modules', 'paths-test-hooks', 'index.js')).href,
  );
  assert.throws(
    () => hookModuleUrl('no-such-hooks', fromProvider),
    (err: Error) =>
      err.message.includes(`(looked up from ${resolve(dir, 'providers')})`) && !err.message.includes('\n'),
  );
});

test('the main file and a provider file each load their modules by the one rule', async () => {
  const problems = await checkConfig(join(dir, 'router.yaml'), {
    env: simProviderEnv('http://127.0.0.1:1', ['tagged']),
  });
  assert.deepEqual(problems, []);
  const url = (...parts: string[]) => pathToFileURL(join(dir, ...parts)).href;
  assert.deepEqual(
    new Set(loads()),
    new Set([
      url('hooks', 'main-local.js'),
      url('node_modules', 'paths-test-hooks', 'index.js'),
      url('providers', 'rule-local.js'),
      url('providers', 'node_modules', 'paths-test-hooks', 'index.js'),
    ]),
  );
});
