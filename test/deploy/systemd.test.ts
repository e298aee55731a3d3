// deploy/systemd: the units start what exists in this repository, restart on failure, reload with
// SIGHUP, give the drain time to finish, and carry the hardening options (but never
// MemoryDenyWriteExecute, which breaks Node's JIT). `systemd-analyze verify` runs when it is installed.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { ROOT } from '../support/stack.ts';

const DIR = join(ROOT, 'deploy/systemd');
const UNITS = ['router.service', 'router-billing.service'];

type Unit = Record<string, Record<string, string[]>>;

function parseUnit(text: string): Unit {
  const unit: Unit = {};
  let section = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    const header = /^\[(\w+)\]$/.exec(line);
    if (header) {
      section = header[1]!;
      unit[section] ??= {};
      continue;
    }
    const eq = line.indexOf('=');
    assert.ok(section !== '' && eq > 0, `unparsable line: ${line}`);
    const entries = unit[section] ?? {};
    unit[section] = entries;
    const key = line.slice(0, eq);
    entries[key] = [...(entries[key] ?? []), line.slice(eq + 1)];
  }
  return unit;
}

const HARDENING: Record<string, string> = {
  NoNewPrivileges: 'yes',
  ProtectSystem: 'strict',
  ProtectHome: 'yes',
  PrivateTmp: 'yes',
  PrivateDevices: 'yes',
  ProtectKernelTunables: 'yes',
  ProtectKernelModules: 'yes',
  ProtectControlGroups: 'yes',
  RestrictNamespaces: 'yes',
  RestrictSUIDSGID: 'yes',
  LockPersonality: 'yes',
  CapabilityBoundingSet: '',
};

for (const name of UNITS) {
  test(`${name}: runs this repository's entry point as an unprivileged user, hardened`, async () => {
    const unit = parseUnit(await readFile(join(DIR, name), 'utf8'));
    const svc = unit.Service;
    assert.ok(svc && unit.Unit && unit.Install);
    const exec = svc.ExecStart?.[0] ?? '';
    const entry = /\/opt\/router\/(\S+\.ts)/.exec(exec)?.[1];
    assert.ok(entry && existsSync(join(ROOT, entry)), `ExecStart runs a file of this repo: ${exec}`);
    assert.ok(exec.startsWith('/opt/router/node_modules/.bin/node '), 'the pinned Node 24');
    assert.equal(svc.User?.[0], 'router');
    assert.match(svc.Restart?.[0] ?? '', /^(on-failure|always)$/);
    assert.ok(Number.parseInt(svc.RestartSec?.[0] ?? '0', 10) > 0);
    assert.equal(svc.KillSignal?.[0], 'SIGTERM');
    for (const [key, value] of Object.entries(HARDENING)) assert.deepEqual(svc[key], [value], key);
    assert.equal(svc.MemoryDenyWriteExecute, undefined, "Node's JIT needs W+X memory");
    assert.deepEqual(svc.ReadWritePaths, ['/var/lib/router']);
    assert.deepEqual(
      svc.Environment?.filter((e) => e.startsWith('ROUTER_BILLING_OUTBOX_DIR=')),
      ['ROUTER_BILLING_OUTBOX_DIR=/var/lib/router/outbox'],
    );
    assert.equal(unit.Install.WantedBy?.[0], 'multi-user.target');
  });
}

test('router.service: sidecar as its own unit, SIGHUP reload, stop timeout covers the drain', async () => {
  const unit = parseUnit(await readFile(join(DIR, 'router.service'), 'utf8'));
  const svc = unit.Service;
  assert.ok(svc && unit.Unit);
  assert.match(svc.ExecStart?.[0] ?? '', /--no-sidecar/);
  assert.match(svc.ExecStartPre?.[0] ?? '', /proxy\/cli\.ts -t /);
  assert.deepEqual(svc.ExecReload, ['/bin/kill -HUP $MAINPID']);
  const drainS =
    Number(
      /drain_timeout_ms:\s*(\d+)/.exec(await readFile(join(ROOT, 'deploy/config/router.yaml'), 'utf8'))?.[1],
    ) / 1000;
  assert.ok(Number.parseInt(svc.TimeoutStopSec?.[0] ?? '', 10) > drainS, 'TimeoutStopSec > drain timeout');
  assert.match(unit.Unit.Wants?.[0] ?? '', /router-billing\.service/);
  const billing = parseUnit(await readFile(join(DIR, 'router-billing.service'), 'utf8'));
  assert.match(
    billing.Service?.ExecStart?.[0] ?? '',
    /bin\/sidecar-main\.ts -c \/etc\/router\/router\.yaml$/,
  );
  const env = await readFile(join(DIR, 'router.env.example'), 'utf8');
  assert.match(env, /^ROUTER_BILLING_LISTEN=127\.0\.0\.1:8081$/m);
});

const analyze = ['/usr/bin/systemd-analyze', '/bin/systemd-analyze'].find((p) => existsSync(p));

test('systemd-analyze verify finds nothing but the missing install path', {
  skip: !analyze && 'no systemd-analyze',
}, async () => {
  const { stdout, stderr } = await promisify(execFile)(
    analyze as string,
    ['verify', '--man=no', ...UNITS.map((u) => join(DIR, u))],
    { cwd: DIR },
  ).catch((err: { stdout: string; stderr: string }) => err);
  const problems = `${stdout}\n${stderr}`
    .split('\n')
    .filter((l) => l.trim() !== '' && !/is not executable: No such file or directory/.test(l));
  assert.deepEqual(problems, []);
});
