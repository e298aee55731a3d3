// router-admin loads only what it uses: hashing a key must not load the wire families (hooks/families),
// which the gateway needs and the admin commands do not. The child process records every module it
// loads through a module.registerHooks hook preloaded with --import.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { ROOT } from '../support/stack.ts';

const RECORDER = `
import { registerHooks } from 'node:module';
import { writeFileSync } from 'node:fs';
const seen = [];
registerHooks({ load(url, context, next) { seen.push(url); return next(url, context); } });
process.on('exit', () => writeFileSync(process.env.LOADED_MODULES_FILE, seen.join('\\n')));
`;

let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'router-admin-loads-'));
});
after(() => rm(dir, { recursive: true, force: true }));

/** bin/router-admin.js with `argv`; the URLs of the modules it loaded. */
async function loadedBy(argv: readonly string[]): Promise<{ code: number; err: string; urls: string[] }> {
  const file = join(dir, `loaded-${argv.join('-').replace(/[^a-z-]/gi, '')}.txt`);
  const child = spawn(
    process.execPath,
    [
      '--import',
      `data:text/javascript,${encodeURIComponent(RECORDER)}`,
      join(ROOT, 'bin/router-admin.js'),
      ...argv,
    ],
    { env: { ...process.env, LOADED_MODULES_FILE: file }, stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let err = '';
  child.stderr.on('data', (c: Buffer) => {
    err += c.toString();
  });
  const code = await new Promise<number>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (c) => resolve(c ?? -1));
  });
  return { code, err, urls: (await readFile(file, 'utf8')).split('\n') };
}

function families(urls: readonly string[]): string[] {
  return urls.filter((u) => u.includes('/hooks/families/'));
}

test('router-admin --help loads no wire family', async () => {
  const r = await loadedBy(['--help']);
  assert.equal(r.code, 0, r.err);
  assert.ok(
    r.urls.some((u) => u.endsWith('/admin/cli.ts')),
    'the recorder sees the project modules',
  );
  assert.deepEqual(families(r.urls), []);
});

test('router-admin access-key create hashes and writes a key without loading a wire family', async () => {
  const config = join(dir, 'router.yaml');
  await writeFile(
    config,
    ['keys: keys.yaml', 'store:', '  enabled: false', '  access_key_hash_secret: loads-test-secret', ''].join(
      '\n',
    ),
  );
  const r = await loadedBy(['access-key', 'create', '--config', config, '--name', 'probe']);
  assert.equal(r.code, 0, r.err);
  assert.ok(r.urls.some((u) => u.endsWith('/hooks/builtin/access-key-hash.ts')));
  assert.match(await readFile(join(dir, 'keys.yaml'), 'utf8'), /name: probe/);
  assert.deepEqual(families(r.urls), []);
});
