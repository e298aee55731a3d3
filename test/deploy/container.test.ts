// deploy/container: Docker cannot run on this machine, so the Dockerfile and the compose file are checked
// structurally: multi-stage on node:24-slim, a non-root user, a health check, sources that exist; compose
// has nginx, gateway, sidecar and redis with health checks, and its nginx command rewrites exactly the
// marked lines of deploy/nginx/router.conf (run here with sh and sed).

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { load, YAML11_SCHEMA } from 'js-yaml';
import { ROOT } from '../support/stack.ts';

const DIR = join(ROOT, 'deploy/container');

interface Instruction {
  op: string;
  args: string;
}

/** Dockerfile instructions with continuation lines joined and comments dropped. */
function parseDockerfile(text: string): Instruction[] {
  const out: Instruction[] = [];
  let current = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (current === '' && (line === '' || line.startsWith('#'))) continue;
    if (line.endsWith('\\')) {
      current += `${line.slice(0, -1)} `;
      continue;
    }
    current += line;
    const m = /^(\S+)\s*(.*)$/s.exec(current);
    if (m) out.push({ op: m[1]!.toUpperCase(), args: m[2]! });
    current = '';
  }
  return out;
}

test('Dockerfile: multi-stage on node:24-slim, non-root, health check, sources present', async () => {
  const steps = parseDockerfile(await readFile(join(DIR, 'Dockerfile'), 'utf8'));
  const froms = steps.filter((s) => s.op === 'FROM');
  assert.ok(froms.length >= 2, 'multi-stage');
  for (const f of froms) assert.match(f.args, /^node:24-slim( AS \w+)?$/i);
  const lastFrom = steps.lastIndexOf(froms.at(-1) as Instruction);
  const final = steps.slice(lastFrom);
  assert.ok(
    final.some((s) => s.op === 'COPY' && s.args.startsWith('--from=')),
    'the final stage copies a build',
  );
  const users = final.filter((s) => s.op === 'USER');
  const [user] = users;
  assert.equal(users.length, 1);
  assert.ok(user);
  assert.ok(!['root', '0', '0:0'].includes(user.args), 'non-root user');
  // The process starts after the switch to the unprivileged user.
  assert.ok(final.indexOf(user) < final.findIndex((s) => s.op === 'CMD'));
  const health = final.find((s) => s.op === 'HEALTHCHECK');
  assert.ok(health, 'HEALTHCHECK in the final stage');
  assert.match(health.args, /\/healthz/);
  assert.match(health.args, /--interval=\d+s/);
  assert.ok(final.some((s) => s.op === 'EXPOSE' && /\b8080\b/.test(s.args) && /\b8081\b/.test(s.args)));
  assert.ok(final.some((s) => s.op === 'STOPSIGNAL' && s.args === 'SIGTERM'));
  const cmd = final.find((s) => s.op === 'CMD');
  assert.ok(cmd);
  const cmdArgs = JSON.parse(cmd.args) as string[];
  assert.equal(cmdArgs[0], 'proxy/cli.ts');
  assert.ok(existsSync(join(ROOT, cmdArgs[0]!)) && existsSync(join(ROOT, cmdArgs[2]!)));
  // Every COPY source from the build context exists.
  for (const s of steps.filter((x) => x.op === 'COPY' && !x.args.startsWith('--from='))) {
    const parts = s.args.split(/\s+/);
    for (const src of parts.slice(0, -1))
      assert.ok(existsSync(join(ROOT, src)), `COPY ${src}: not in the repo`);
  }
  // Production install only, from the lock file.
  assert.ok(steps.some((s) => s.op === 'RUN' && /npm ci\b.*--omit=dev/.test(s.args)));
  const ignore = await readFile(join(DIR, 'Dockerfile.dockerignore'), 'utf8');
  for (const entry of ['**/node_modules', '.git', 'test'])
    assert.ok(ignore.split('\n').includes(entry), entry);
});

type Obj = Record<string, unknown>;

test('compose: nginx, gateway, sidecar and redis, each with a health check', async () => {
  const compose = loadCompose(await readFile(join(DIR, 'compose.yaml'), 'utf8')) as {
    services: Record<string, Obj>;
  };
  const services = compose.services;
  assert.deepEqual(Object.keys(services).sort(), ['gateway', 'nginx', 'redis', 'sidecar']);
  for (const [name, svc] of Object.entries(services)) {
    const hc = svc.healthcheck as { test?: string[] } | undefined;
    assert.ok(Array.isArray(hc?.test) && hc.test[0] === 'CMD', `${name} has a health check`);
  }
  const { gateway, sidecar, nginx, redis } = services;
  assert.ok(gateway && sidecar && nginx && redis);
  assert.deepEqual((gateway.command as string[]).slice(0, 1), ['proxy/cli.ts']);
  assert.ok((gateway.command as string[]).includes('--no-sidecar'));
  assert.deepEqual((sidecar.command as string[]).slice(0, 1), ['bin/sidecar-main.ts']);
  assert.match(String((gateway.healthcheck as { test: string[] }).test.join(' ')), /8080\/readyz/);
  assert.match(String((sidecar.healthcheck as { test: string[] }).test.join(' ')), /8081\/healthz/);
  for (const svc of [gateway, sidecar]) {
    assert.equal(get(svc, 'build.dockerfile'), 'deploy/container/Dockerfile');
    assert.equal(get(svc, 'environment.ROUTER_STORE_ENABLED'), 'true');
    assert.equal(get(svc, 'environment.ROUTER_STORE_ADDR'), 'redis://redis:6379');
    assert.equal(get(svc, 'depends_on.redis.condition'), 'service_healthy');
    assert.equal(svc.read_only, true);
  }
  assert.ok(Number.parseInt(String(gateway.stop_grace_period), 10) > 30, 'grace period > drain timeout');
  assert.deepEqual(nginx.volumes, ['../nginx/router.conf:/etc/router/router.conf:ro']);
  assert.ok(existsSync(join(DIR, '../nginx/router.conf')));
  assert.match(String((redis.command as string[]).join(' ')), /--appendonly yes/);
});

test("compose's nginx command rewrites the marked lines of router.conf", async () => {
  const compose = loadCompose(await readFile(join(DIR, 'compose.yaml'), 'utf8')) as {
    services: Record<string, Obj>;
  };
  const nginx = compose.services.nginx;
  assert.ok(nginx);
  const command = nginx.command as string[];
  assert.deepEqual(command.slice(0, 2), ['/bin/sh', '-c']);
  const dir = await mkdtemp(join(tmpdir(), 'router-compose-'));
  try {
    const script = command[2]!
      .replace('/etc/router/router.conf', join(ROOT, 'deploy/nginx/router.conf'))
      .replace('/etc/nginx/conf.d/default.conf', join(dir, 'default.conf'))
      .replace(/&& exec nginx.*$/, '');
    await writeFile(join(dir, 'run.sh'), script);
    await promisify(execFile)('/bin/sh', [join(dir, 'run.sh')]);
    const out = await readFile(join(dir, 'default.conf'), 'utf8');
    assert.match(out, /^\s*server gateway:8080 .*# router:gateway$/m);
    assert.match(out, /^\s*server sidecar:8081 .*# router:sidecar$/m);
    assert.match(out, /^\s*listen 8080; # router:listen$/m);
    assert.match(out, /^\s*access_log \/dev\/stdout router_json; # router:access_log$/m);
    assert.doesNotMatch(out, /^\s*(server|listen)\s+127\.0\.0\.1/m);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

function get(o: unknown, path: string): unknown {
  return path
    .split('.')
    .reduce<unknown>((v, k) => (v !== null && typeof v === 'object' ? (v as Obj)[k] : undefined), o);
}

/** Compose files use YAML merge keys (`<<: *anchor`), a YAML 1.1 feature. */
function loadCompose(text: string): unknown {
  return load(text, { schema: YAML11_SCHEMA });
}
