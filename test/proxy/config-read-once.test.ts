// `router -c` with `workers: 2` reads the main file once: the primary validates that text and hands it
// to its workers, so a file changed on disk right after that read (made invalid, here, by a preloaded
// hook at a chosen read) neither stops the start nor crashes it; the router runs what it read.

import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { spawnLogged, waitUntil } from '../support/billing-stack.ts';
import { MODELS_FILE, PRICING_FILE, PROVIDERS_DIR, ROOT } from '../support/stack.ts';

const HOOK = join(ROOT, 'test/support/config-change-hook.ts');

let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'router-read-once-'));
});
after(() => rm(dir, { recursive: true, force: true }));

const VALID = [
  'listen: 127.0.0.1:0',
  'workers: 2',
  `providers_dir: ${PROVIDERS_DIR}`,
  `models: ${MODELS_FILE}`,
  `pricing: ${PRICING_FILE}`,
  'billing: { enabled: false }',
  '',
].join('\n');
const INVALID = `${VALID}limitz: { max_body_bytes: 10 }\n`;

for (const read of [1, 2]) {
  test(`the main file made invalid after the primary's read ${read}: two workers serve what was read`, async (t) => {
    const file = join(dir, `after-${read}.yaml`);
    await writeFile(file, VALID);
    const gw = await spawnLogged(
      'proxy/cli.ts',
      ['-c', file],
      {
        NODE_OPTIONS: `--import ${HOOK}`,
        CONFIG_CHANGE_FILE: file,
        CONFIG_CHANGE_AFTER: String(read),
        CONFIG_CHANGE_TO: INVALID,
      },
      'router listening',
      { group: true },
    );
    t.after(async () => {
      gw.killAll();
      await gw.exited;
    });
    await waitUntil(async () => {
      const res = await fetch(`${gw.url}/readyz`);
      const body = (await res.json()) as { workers?: { listening: number } };
      return res.status === 200 && body.workers?.listening === 2;
    }, 'both workers listening');
    if (read === 1) assert.equal(await readFile(file, 'utf8'), INVALID, 'the file did change');
    assert.deepEqual(
      gw.lines.filter((l) => typeof l.level === 'number' && l.level >= 50),
      [],
      'no error logged',
    );
  });
}

test('SIGHUP to the primary: it reads and checks the file once; both workers reload that text', async (t) => {
  const file = join(dir, 'reload.yaml');
  await writeFile(file, VALID);
  const gw = await spawnLogged('proxy/cli.ts', ['-c', file], {}, 'router listening', { group: true });
  t.after(async () => {
    gw.killAll();
    await gw.exited;
  });
  const count = (msg: string) => gw.lines.filter((l) => l.msg === msg).length;
  await waitUntil(() => count('worker serving') === 2, 'both workers serving');

  await writeFile(file, INVALID);
  gw.child.kill('SIGHUP');
  await waitUntil(() => count('reload refused: configuration invalid') > 0, 'the refusal');
  const refused = gw.lines.filter((l) => l.msg === 'reload refused: configuration invalid');
  assert.equal(refused.length, 1, 'reported once, by the primary');
  assert.match(String(refused[0]?.diagnostic), /limitz/);

  await writeFile(
    file,
    VALID.replace('billing: { enabled: false }', 'billing: { enabled: false }\nlog: { level: info }'),
  );
  gw.child.kill('SIGHUP');
  await waitUntil(() => count('configuration reloaded') === 2, 'both workers reloaded');
  assert.equal(count('reload refused: configuration invalid'), 1);
});
