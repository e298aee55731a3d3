// `npm start` as a new user meets it: every example it prints is found in its output exactly as
// scripts/quickstart-examples.ts builds it, runs as printed (bash, from the project folder) and shows
// its answer; then SIGTERM to npm leaves no process and no port behind.

import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { quickstartExamples } from '../../scripts/quickstart-examples.ts';
import { freePort } from '../support/redis.ts';
import { ROOT } from '../support/stack.ts';

const run = promisify(execFile);

function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ port, host: '127.0.0.1' });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

test('npm start: every printed example runs as printed; SIGTERM to npm leaves nothing behind', async () => {
  const stateDir = await mkdtemp(join(tmpdir(), 'router-quickstart-'));
  const ports = {
    gateway: await freePort(),
    sidecar: await freePort(),
    upstream: await freePort(),
    billing: await freePort(),
    portal: await freePort(),
  };
  const npm = spawn('npm', ['start'], {
    cwd: ROOT,
    env: {
      ...process.env,
      ROUTER_LISTEN: `127.0.0.1:${ports.gateway}`,
      ROUTER_BILLING_LISTEN: `127.0.0.1:${ports.sidecar}`,
      LOCAL_UPSTREAM_PORT: String(ports.upstream),
      LOCAL_BILLING_PORT: String(ports.billing),
      LOCAL_BILLING_PORTAL_PORT: String(ports.portal),
      LOCAL_STACK_DIR: stateDir,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const ready = new Promise<void>((resolve, reject) => {
    npm.stdout.on('data', (c: Buffer) => {
      out += c.toString();
      if (out.includes('Ctrl-C stops everything')) resolve();
    });
    npm.stderr.on('data', (c: Buffer) => {
      out += c.toString();
    });
    npm.once('exit', (code) => reject(new Error(`npm start exited (${code}) before it was ready:\n${out}`)));
  });
  const exited = new Promise<number | null>((resolve) => npm.once('exit', (code) => resolve(code)));
  try {
    await ready;
    const accessKey = (await readFile(join(stateDir, 'access-key'), 'utf8')).trim();
    const examples = quickstartExamples({
      base: `http://127.0.0.1:${ports.gateway}`,
      accessKey,
      billingUrl: `http://127.0.0.1:${ports.billing}`,
      billingApiKey: 'local-billing-key',
      project: 'proj_local',
    });
    assert.ok(examples.length >= 8);
    for (const example of examples) {
      assert.ok(out.includes(example.command), `printed as built: ${example.title}`);
      // Delivery is asynchronous: an example that shows delivered events runs again until they are there.
      const deadline = Date.now() + 15_000;
      let stdout = '';
      for (;;) {
        stdout = (await run('bash', ['-c', example.command], { cwd: ROOT, timeout: 30_000 })).stdout;
        if (!example.eventually || example.expect.test(stdout) || Date.now() > deadline) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      assert.match(stdout, example.expect, `${example.title}:\n${stdout.slice(0, 600)}`);
    }
  } finally {
    npm.kill('SIGTERM');
    assert.equal(await exited, 0, out.slice(-2000));
    for (const [name, port] of Object.entries(ports))
      assert.equal(await portOpen(port), false, `port of ${name} released`);
    await rm(stateDir, { recursive: true, force: true });
  }
});
