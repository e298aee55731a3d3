// The Node.js version: the code runs only under the project's Node 24 (the pinned `node` package), while
// npm and a bare `node` may be the machine's older one. Each program of package.json "bin" run by an
// older node says so in one line and exits 1 (bin/require-node.js); the README's commands print no
// engine warnings about the machine's node (.npmrc), and what those warnings stood for is checked here
// instead: every installed package accepts the Node the code runs under.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, readFileSync, realpathSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { ROOT } from '../support/stack.ts';

const run = promisify(execFile);

/** The machine's own node, the one a user gets outside npm scripts (Debian's nodejs here). */
const SYSTEM_NODE = '/usr/bin/node';

const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  version: string;
  bin: Record<string, string>;
};

async function exec(
  file: string,
  args: string[],
  env: NodeJS.ProcessEnv = process.env,
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(file, args, { cwd: ROOT, env, timeout: 60_000 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

async function systemNodeVersion(): Promise<string | undefined> {
  if (!existsSync(SYSTEM_NODE)) return undefined;
  return (await exec(SYSTEM_NODE, ['--version'])).stdout.trim().replace(/^v/, '');
}

/** npm's own script (npm-cli.js), to run with a node of the test's choosing. */
function npmCli(): string | undefined {
  const candidates = [process.env.npm_execpath];
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    const npm = join(dir, 'npm');
    if (existsSync(npm)) candidates.push(realpathSync(npm));
  }
  return candidates.find((f) => f !== undefined && /npm-cli\.js$/.test(f) && existsSync(f));
}

const olderNode = await systemNodeVersion();
const olderMajor = olderNode === undefined ? undefined : Number(olderNode.split('.')[0]);
const skipOlder =
  olderNode === undefined
    ? `no ${SYSTEM_NODE} on this machine: no older node to run the programs with`
    : olderMajor! >= 24
      ? `${SYSTEM_NODE} is Node ${olderNode}, not older than 24: nothing to refuse`
      : false;

test('each program run by an older node: one line naming the fix, exit 1, nothing loaded', {
  skip: skipOlder,
}, async () => {
  assert.deepEqual(Object.keys(pkg.bin).sort(), ['router', 'router-admin', 'router-billing']);
  for (const [name, file] of Object.entries(pkg.bin)) {
    const r = await exec(SYSTEM_NODE, [join(ROOT, file), '--help']);
    assert.equal(r.code, 1, `${name}: ${r.stderr}`);
    assert.equal(r.stdout, '', name);
    const lines = r.stderr.split('\n').filter((l) => l !== '');
    assert.equal(lines.length, 1, `${name}: one line:\n${r.stderr}`);
    assert.equal(
      lines[0]!.replace(' or `npm start`', ''),
      `${name} needs Node.js 24 or newer (this is ${olderNode}): run it as \`npx ${name}\`, with the ` +
        "project's Node 24 (installed by `npm install`)",
    );
    assert.doesNotMatch(r.stderr, /ERR_UNKNOWN_FILE_EXTENSION|\n\s+at /);
  }
  // The gateway also names `npm start`, the way a new user starts it.
  const router = await exec(SYSTEM_NODE, [join(ROOT, pkg.bin.router!)]);
  assert.match(router.stderr, /run it as `npx router` or `npm start`/);
});

test('each program under the project’s Node runs past the check (--version)', async () => {
  assert.ok(Number(process.versions.node.split('.')[0]) >= 24, `the tests run under ${process.version}`);
  for (const [name, file] of Object.entries(pkg.bin)) {
    const r = await exec(process.execPath, [join(ROOT, file), '--version']);
    assert.equal(r.code, 0, `${name}: ${r.stderr}`);
    assert.equal(r.stdout.trim(), pkg.version, name);
  }
});

const cli = npmCli();

test('every installed package’s engines accept the Node the code runs under (npm’s own check)', {
  skip: cli === undefined ? 'npm-cli.js not found (npm_execpath, PATH)' : false,
}, async () => {
  // npm checks engines against the node that runs it: run it with the project's Node, warnings on.
  const r = await exec(process.execPath, [
    cli!,
    'install',
    '--dry-run',
    '--offline',
    '--ignore-scripts',
    '--no-audit',
    '--no-fund',
    '--loglevel=warn',
  ]);
  assert.equal(r.code, 0, r.stderr);
  assert.doesNotMatch(
    r.stderr,
    /EBADENGINE/,
    `a package refuses Node ${process.versions.node}:\n${r.stderr}`,
  );
});

test('the README’s commands under the machine’s older node print no engine warnings', {
  skip: cli === undefined ? 'npm-cli.js not found (npm_execpath, PATH)' : skipOlder,
}, async () => {
  // A user's shell: the machine's node runs npm and npx, node_modules/.bin is not on PATH.
  const path = (process.env.PATH ?? '')
    .split(delimiter)
    .filter((d) => !d.startsWith(join(ROOT, 'node_modules')))
    .join(delimiter);
  const env: NodeJS.ProcessEnv = { ...process.env, PATH: path };
  for (const k of Object.keys(env)) if (k.startsWith('npm_')) delete env[k];
  const install = await exec(
    SYSTEM_NODE,
    [cli!, 'install', '--dry-run', '--offline', '--ignore-scripts'],
    env,
  );
  assert.equal(install.code, 0, install.stderr);
  assert.equal(install.stderr, '', 'npm install: nothing on stderr');
  const npx = await exec(SYSTEM_NODE, [cli!, 'exec', '--', 'router', '--version'], env);
  assert.equal(npx.code, 0, npx.stderr);
  assert.equal(npx.stdout.trim(), pkg.version);
  assert.equal(npx.stderr, '', 'npx router: nothing on stderr');
});
