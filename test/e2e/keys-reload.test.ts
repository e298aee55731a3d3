// File mode: access-key changes made with the real `router-admin` take effect in a running `router`
// process without a reload (it watches the keys file). Each change is awaited by polling the gateway's
// own answer, bounded by a deadline. A broken keys file keeps the keys in use and is logged with its
// position; keys given as ROUTER_ACCESS_KEY_* stay as they were.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { promisify } from 'node:util';
import { startUpstreamSim, type UpstreamSim } from '../../sim/upstream/server.ts';
import {
  ACCESS_KEY,
  type GatewayFiles,
  type GatewayProcess,
  spawnGateway,
  writeGatewayFiles,
} from '../deploy/support.ts';
import { waitUntil } from '../support/billing-stack.ts';
import { ROOT } from '../support/stack.ts';

const run = promisify(execFile);

let sim: UpstreamSim;
let files: GatewayFiles;
let gw: GatewayProcess;
let keysFile: string;

before(async () => {
  sim = await startUpstreamSim();
  files = await writeGatewayFiles({ simUrl: sim.url, extraYaml: 'keys: ./keys.yaml', logLevel: 'info' });
  keysFile = join(files.dir, 'keys.yaml');
  await writeFile(keysFile, 'access_keys: []\n');
  gw = await spawnGateway(files);
});
after(async () => {
  gw?.kill();
  await gw?.exited;
  await sim?.close();
  await files?.remove();
});

/** The real `router-admin` as an operator runs it. */
async function admin(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(
      process.execPath,
      [join(ROOT, 'bin/router-admin.js'), 'access-key', ...args, '--config', files.configFile],
      { env: { PATH: process.env.PATH ?? '', ROUTER_ACCESS_KEY_CLIENT_A: ACCESS_KEY } },
    );
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

/** The gateway's answer to an authenticated request: 200 accepted, 401 refused. */
async function status(secret: string): Promise<number> {
  const res = await fetch(`${gw.url}/v1/models`, { headers: { authorization: `Bearer ${secret}` } });
  await res.arrayBuffer();
  return res.status;
}

function answers(secret: string, expected: number, what: string): Promise<void> {
  return waitUntil(async () => (await status(secret)) === expected, what, 10_000);
}

test('create, rotate and revoke with router-admin take effect in the running gateway, no reload', async () => {
  const created = await admin('create', '--name', 'alpha');
  assert.equal(created.code, 0, created.stderr);
  const first = created.stdout.trim();
  assert.match(first, /^ak_/);
  assert.match(created.stderr, /running gateway applies it from the keys file/);
  await answers(first, 200, 'the created key to be accepted');

  const rotated = await admin('rotate', '--name', 'alpha');
  assert.equal(rotated.code, 0, rotated.stderr);
  const second = rotated.stdout.trim();
  await answers(first, 401, 'the old secret to be refused');
  assert.equal(await status(second), 200);

  const revoked = await admin('revoke', '--name', 'alpha');
  assert.equal(revoked.code, 0, revoked.stderr);
  assert.match(revoked.stderr, /router_access_keys_reloads_total/);
  await answers(second, 401, 'the revoked key to be refused');

  // The environment's key was never in the file and is untouched by all this.
  assert.equal(await status(ACCESS_KEY), 200);
  assert.ok(gw.lines.some((l) => l.msg === 'access keys reloaded from the keys file'));
  assert.equal(
    gw.lines.some((l) => l.msg === 'configuration reloaded'),
    false,
    'only the keys were re-read',
  );
  const metrics = await (await fetch(`${gw.url}/metrics`)).text();
  const applied = /router_access_keys_reloads_total\{result="applied"\} (\d+)/.exec(metrics);
  assert.ok(applied !== null && Number(applied[1]) >= 3, metrics.slice(0, 500));

  // `list` names the environment's keys and says what changing them takes.
  const listed = await admin('list');
  assert.equal(listed.code, 0, listed.stderr);
  assert.match(listed.stdout, /alpha\s+api_key:alpha\s+revoked/);
  assert.match(listed.stderr, /not listed: client_a, from ROUTER_ACCESS_KEY_\*.*needs a restart/);
});

test('a broken keys file is refused with its position and the keys in use keep working', async () => {
  const created = await admin('create', '--name', 'beta');
  assert.equal(created.code, 0, created.stderr);
  const beta = created.stdout.trim();
  await answers(beta, 200, 'beta to be accepted');

  await writeFile(keysFile, `access_keys:\n  - name: beta\n    value: ${beta}\n    status: asleep\n`);
  const refused = await gw.waitForLine((l) => l.msg === 'keys file refused: the access keys in use are kept');
  assert.match(String(refused.diagnostic), new RegExp(`${keysFile.replaceAll('.', '\\.')}:4:\\d+: `));
  assert.equal(String(refused.diagnostic).includes(beta), false, 'no secret in the log');
  assert.equal(await status(beta), 200);

  // Fixed again: applied.
  await writeFile(keysFile, `access_keys:\n  - name: beta\n    value: ${beta}\n    status: revoked\n`);
  await answers(beta, 401, 'beta to be refused once the file is valid');
});
