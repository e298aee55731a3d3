import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { cp, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { promisify } from 'node:util';
import { spawnLogged } from '../support/billing-stack.ts';
import { MODELS_FILE, PRICING_FILE, PROVIDERS_DIR, ROOT } from '../support/stack.ts';

const run = promisify(execFile);
const CLI = join(ROOT, 'proxy/cli.ts');

/** `router -t FILE` as an operator runs it: a child process, only PATH in the environment. */
async function validate(file: string): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [CLI, '-t', file], {
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
  lines[at] = lines[at]!.replace('set_path', 'set_pth');
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

/** A listening socket that only counts the connections made to it (a Redis or billing stand-in). */
async function recorder(): Promise<{ port: number; connections(): number; server: Server }> {
  let count = 0;
  const server = createServer((socket) => {
    count++;
    socket.destroy();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  assert.ok(address !== null && typeof address === 'object');
  return { port: address.port, connections: () => count, server };
}

/** Every path under `root`, or undefined when it does not exist. */
async function listing(root: string): Promise<string[] | undefined> {
  if (!existsSync(root)) return undefined;
  return (await readdir(root, { recursive: true })).sort();
}

function gatewayYaml(dataDir: string, billingPort: number, extra: string[] = []): string {
  return [
    'listen: 127.0.0.1:0',
    `providers_dir: ${PROVIDERS_DIR}`,
    `models: ${MODELS_FILE}`,
    `pricing: ${PRICING_FILE}`,
    'billing:',
    '  enabled: true',
    `  base_url: http://127.0.0.1:${billingPort}`,
    '  project_id: p',
    '  api_key: bk',
    '  extractor_rule_set_id: rs',
    `  outbox_dir: ${join(dataDir, 'outbox')}`,
    `  state_dir: ${join(dataDir, 'state')}`,
    '  balance_enforcement:',
    '    enabled: true',
    '    webhook_secret: whsec_cli_test',
    ...extra,
    '',
  ].join('\n');
}

test('router -t beside a running file-mode gateway of the same file: exit 0, nothing written, no connection', async (t) => {
  const billing = await recorder();
  t.after(() => billing.server.close());
  const dataDir = join(dir, 'running-data');
  const file = join(dir, 'running.yaml');
  await writeFile(file, gatewayYaml(dataDir, billing.port));
  const gw = await spawnLogged('proxy/cli.ts', ['-c', file, '--no-sidecar'], {}, 'router listening');
  t.after(async () => {
    gw.child.kill('SIGTERM');
    await gw.exited;
  });
  const before = await listing(dataDir);
  assert.ok(before?.includes(join('outbox', 'events.jsonl')), String(before));
  const connectionsBefore = billing.connections();

  const r = await validate(file);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /is valid/);
  // Only warnings (the shipped pricing file's reference-price notice), no problem.
  assert.deepEqual(
    r.stderr.split('\n').filter((line) => line !== '' && !line.startsWith('warning: ')),
    [],
  );
  assert.deepEqual(await listing(dataDir), before);
  assert.equal(billing.connections(), connectionsBefore);
});

test('router -t on a configuration never run: its data directory stays absent, Redis and billing untouched', async (t) => {
  const billing = await recorder();
  const redis = await recorder();
  t.after(() => {
    billing.server.close();
    redis.server.close();
  });
  const dataDir = join(dir, 'fresh-data');
  const file = join(dir, 'fresh.yaml');
  await writeFile(
    file,
    gatewayYaml(dataDir, billing.port, [
      'store:',
      '  enabled: true',
      `  addr: redis://127.0.0.1:${redis.port}`,
      '  access_key_hash_secret: hs',
      '  access_key_mode: redis_preferred',
    ]),
  );
  const r = await validate(file);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(await listing(dataDir), undefined);
  assert.equal(redis.connections(), 0);
  assert.equal(billing.connections(), 0);

  // The same in file mode (outbox and subject state on disk).
  const fileMode = join(dir, 'fresh-file.yaml');
  await writeFile(fileMode, gatewayYaml(dataDir, billing.port));
  const f = await validate(fileMode);
  assert.equal(f.code, 0, f.stderr);
  assert.equal(await listing(dataDir), undefined);
  assert.equal(billing.connections(), 0);
});

test('router -t on a broken keys file: exit 2, file:line:col, no stack trace', async () => {
  const keys = join(dir, 'broken-keys.yaml');
  await writeFile(keys, 'access_keys:\n  - name: a\n    value: ak_one\n    status: sleeping\n');
  const file = join(dir, 'broken-keys-main.yaml');
  await writeFile(file, `providers_dir: ${PROVIDERS_DIR}\nkeys: ./broken-keys.yaml\n`);
  const r = await validate(file);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /broken-keys\.yaml:4:\d+: .*status/);
  assert.doesNotMatch(r.stderr, /\n\s+at /);
  assert.equal(r.stdout, '');
});

/** A program of the repository run as a child with the given arguments, whatever its exit code. */
async function runProgram(
  file: string,
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

test('router --help (bin/router.js) shows every flag and the examples, exit 0', async () => {
  const r = await runProgram('bin/router.js', ['--help']);
  assert.equal(r.code, 0, r.stderr);
  for (const flag of ['-c,--config', '-t,--test', '--no-sidecar', '--shutdown-delay-ms'])
    assert.ok(r.stdout.includes(flag), `${flag} missing from:\n${r.stdout}`);
  assert.match(r.stdout, /Examples/);
  assert.match(r.stdout, /\$ router -t router\.yaml\n/);
  assert.match(r.stdout, /\$ router -c router\.yaml --no-sidecar --shutdown-delay-ms 5000\n/);
  assert.ok(!r.stdout.includes('\u001b['), 'no colour codes when stdout is not a terminal');
  assert.equal((await runProgram('proxy/cli.ts', ['-h'])).stdout, r.stdout);
});

test('router --version prints the package version', async () => {
  const pkg = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as { version: string };
  const r = await runProgram('proxy/cli.ts', ['--version']);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout.trim(), pkg.version);
});

test('router usage errors: one line on stderr naming the problem, exit 2, no stack', async () => {
  const cases: [string[], RegExp][] = [
    [['-c', 'x.yaml', '--no-such-flag'], /--no-such-flag/],
    [['-t'], /cannot parse the arguments: -t/],
    [['-c', 'x.yaml', 'extra'], /extra/],
    [[], /-c <config\.yaml> or -t <config\.yaml> is required/],
    [
      ['-c', 'x.yaml', '--shutdown-delay-ms', 'soon'],
      /--shutdown-delay-ms wants a whole number of milliseconds/,
    ],
  ];
  for (const [args, problem] of cases) {
    const r = await runProgram('proxy/cli.ts', args);
    assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.equal(r.stdout, '');
    const lines = r.stderr.split('\n').filter((l) => l !== '');
    assert.equal(lines.length, 1, `${args.join(' ')}:\n${r.stderr}`);
    assert.match(lines[0]!, /^router: /);
    assert.match(lines[0]!, problem);
    assert.match(lines[0]!, /router --help/);
  }
});
