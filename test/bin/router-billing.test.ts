// `router-billing` as a program: its usage, its usage errors and a configuration it cannot load. Starting
// and stopping the sidecar itself is test/sidecar/sidecar.test.ts.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { promisify } from 'node:util';
import { ROOT } from '../support/stack.ts';

const run = promisify(execFile);

async function routerBilling(
  file: 'bin/router-billing.js' | 'bin/sidecar-main.ts',
  args: string[],
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [join(ROOT, file), ...args], {
      env: { PATH: process.env.PATH ?? '' },
      timeout: 30_000,
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'router-billing-cli-'));
});
after(() => rm(dir, { recursive: true, force: true }));

test('router-billing --help (bin/router-billing.js) shows -c and the examples, exit 0', async () => {
  const r = await routerBilling('bin/router-billing.js', ['--help']);
  assert.equal(r.code, 0, r.stderr);
  assert.ok(r.stdout.includes('-c,--config'), r.stdout);
  assert.match(r.stdout, /Examples/);
  assert.match(r.stdout, /\$ router-billing -c router\.yaml\n/);
  assert.ok(!r.stdout.includes('\u001b['), 'no colour codes when stdout is not a terminal');
  assert.equal((await routerBilling('bin/sidecar-main.ts', ['-h'])).stdout, r.stdout);
});

test('router-billing --version prints the package version', async () => {
  const pkg = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as { version: string };
  const r = await routerBilling('bin/sidecar-main.ts', ['--version']);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout.trim(), pkg.version);
});

test('router-billing usage errors: one line on stderr naming the problem, exit 2, no stack', async () => {
  const cases: [string[], RegExp][] = [
    [['-c', 'x.yaml', '--no-sidecar'], /--no-sidecar/],
    [['-c'], /cannot parse the arguments: -c/],
    [[], /-c <config> is required/],
  ];
  for (const [args, problem] of cases) {
    const r = await routerBilling('bin/router-billing.js', args);
    assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.equal(r.stdout, '');
    const lines = r.stderr.split('\n').filter((l) => l !== '');
    assert.equal(lines.length, 1, `${args.join(' ')}:\n${r.stderr}`);
    assert.match(lines[0]!, /^router-billing: /);
    assert.match(lines[0]!, problem);
  }
});

test('router-billing -c on an invalid configuration: file:line:col on stderr, exit 2, nothing started', async () => {
  const file = join(dir, 'broken.yaml');
  await writeFile(file, 'listen: 127.0.0.1:0\nbilling:\n  enabeld: true\n');
  const r = await routerBilling('bin/sidecar-main.ts', ['-c', file]);
  assert.equal(r.code, 2, r.stderr);
  assert.match(r.stderr, /broken\.yaml:3:\d+: .*enabeld/);
  assert.doesNotMatch(r.stderr, /\n\s+at /);
  assert.equal(r.stdout, '');
});
