import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { promisify } from 'node:util';
import { ROOT } from '../support/stack.ts';

const run = promisify(execFile);
const CLI = join(ROOT, 'proxy/cli.ts');

/** `router -t FILE` as an operator runs it: a child process, only PATH in the environment. */
async function validate(file: string): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [CLI, '-t', file], {
      env: { PATH: process.env.PATH ?? '' },
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'router-cli-'));
  await cp(join(ROOT, 'deploy/config'), join(dir, 'config'), { recursive: true });
});
after(() => rm(dir, { recursive: true, force: true }));

test('router -t accepts the reference configuration with nothing but PATH in the environment', async () => {
  const r = await validate(join(ROOT, 'deploy/config/router.yaml'));
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /is valid/);
});

test('router -t reports a broken provider file with its file, line and column, and exits 2', async () => {
  const file = join(dir, 'config/providers/groq.conf');
  const source = await readFile(file, 'utf8');
  const lines = source.split('\n');
  const at = lines.findIndex((l) => l.includes('set_path'));
  lines[at] = lines[at].replace('set_path', 'set_pth');
  await writeFile(file, lines.join('\n'));
  try {
    const r = await validate(join(dir, 'config/router.yaml'));
    assert.equal(r.code, 2);
    assert.match(r.stderr, new RegExp(`groq\\.conf:${at + 1}:\\d+: .*set_pth`));
  } finally {
    await writeFile(file, source);
  }
});

test('router -t reports an unknown key of the main file with its line', async () => {
  const file = join(dir, 'config/router.yaml');
  const source = await readFile(file, 'utf8');
  await writeFile(file, `${source}\nlimitz:\n  max_body_bytes: 10\n`);
  try {
    const r = await validate(file);
    assert.equal(r.code, 2);
    const line = source.split('\n').length + 1;
    assert.match(r.stderr, new RegExp(`router\\.yaml:${line}:\\d+: .*limitz`));
  } finally {
    await writeFile(file, source);
  }
});
