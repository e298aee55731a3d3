// Starting a keys file: `router-admin access-key init` (at the configured path or --keys-file, mode 0600,
// never over a file with content), and `create` on a keys file that is missing or empty. What is written
// must pass the gateway's own loader (keys.schema.json) with and without keys.

import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { parseKeysSource } from '../../config/keys.ts';
import { loadConfig } from '../../config/load.ts';
import { admin } from './run-admin.ts';

let dir: string;
let n = 0;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'router-admin-keys-'));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** A folder with router.yaml naming keys.yaml (not created), file mode. */
async function fileModeSetup(): Promise<{ config: string; keys: string }> {
  const folder = join(dir, `case-${++n}`);
  await mkdir(folder);
  const config = join(folder, 'router.yaml');
  await writeFile(config, ['keys: keys.yaml', 'store:', '  enabled: false', ''].join('\n'));
  return { config, keys: join(folder, 'keys.yaml') };
}

async function mode(file: string): Promise<number> {
  return (await stat(file)).mode & 0o777;
}

function assertValidKeysFile(text: string, file: string): void {
  assert.deepEqual(parseKeysSource(text, file, {}).diagnostics, [], 'valid against keys.schema.json');
}

test('init --config starts the keys file the configuration names, mode 0600; the config then loads', async () => {
  const { config, keys } = await fileModeSetup();
  const before = await loadConfig(config, { env: {} });
  assert.equal(before.config, undefined, 'a missing keys file fails the configuration');

  const result = await admin(['access-key', 'init', '--config', config]);
  assert.equal(result.code, 0, result.err);
  assert.match(result.out, new RegExp(`started the keys file ${keys} \\(it did not exist\\)`));
  assert.match(result.out, /router-admin access-key create --config .*router\.yaml --name <name>/);
  assert.equal(await mode(keys), 0o600);
  assertValidKeysFile(await readFile(keys, 'utf8'), keys);
  const after = await loadConfig(config, { env: {} });
  assert.deepEqual(after.diagnostics, []);
  assert.deepEqual(after.config?.keys.accessKeys, []);
});

test('init --keys-file starts a file anywhere and says how to point the configuration at it', async () => {
  const file = join(dir, 'elsewhere.yaml');
  const result = await admin(['access-key', 'init', '--keys-file', file]);
  assert.equal(result.code, 0, result.err);
  assert.match(result.out, new RegExp(`started the keys file ${file}`));
  assert.match(result.out, new RegExp(`\`keys: ${file}\``));
  assert.equal(await mode(file), 0o600);
  assertValidKeysFile(await readFile(file, 'utf8'), file);
});

test('init refuses to replace a keys file with content, fills an empty one', async () => {
  const { config, keys } = await fileModeSetup();
  const content = 'access_keys:\n  - name: kept\n    value: ak_kept_secret\n';
  await writeFile(keys, content, { mode: 0o644 });
  const refused = await admin(['access-key', 'init', '--config', config]);
  assert.equal(refused.code, 1);
  assert.match(refused.err, /exists and is not empty; nothing was changed/);
  assert.match(refused.err, /router-admin access-key create/);
  assert.equal(await readFile(keys, 'utf8'), content, 'untouched');

  await writeFile(keys, '\n  \n', { mode: 0o644 });
  const filled = await admin(['access-key', 'init', '--config', config]);
  assert.equal(filled.code, 0, filled.err);
  assert.match(filled.out, /\(it was empty\)/);
  assert.equal(await mode(keys), 0o600);
  assertValidKeysFile(await readFile(keys, 'utf8'), keys);
});

test('init: usage errors name the fix', async () => {
  const none = await admin(['access-key', 'init']);
  assert.equal(none.code, 2);
  assert.match(none.err, /give --config router\.yaml .* or --keys-file <path>/);

  const config = join(dir, 'no-keys.yaml');
  await writeFile(config, 'store:\n  enabled: false\n');
  const unnamed = await admin(['access-key', 'init', '--config', config]);
  assert.equal(unnamed.code, 2);
  assert.match(unnamed.err, /names no keys file: add `keys: keys\.yaml` to it .*or pass --keys-file/);

  const nodir = await admin(['access-key', 'init', '--keys-file', join(dir, 'no', 'such', 'k.yaml')]);
  assert.equal(nodir.code, 2);
  assert.match(nodir.err, /directory .*no\/such does not exist; create it/);
});

test('create on a missing keys file starts it (said on stderr), and the gateway loads the result', async () => {
  const { config, keys } = await fileModeSetup();
  const result = await admin(['access-key', 'create', '--name', 'x', '--config', config]);
  assert.equal(result.code, 0, result.err);
  assert.match(result.err, new RegExp(`started the keys file ${keys} \\(it did not exist\\)`));
  assert.match(result.out.trim(), /^ak_[A-Za-z0-9_-]{43}$/);
  assert.equal(await mode(keys), 0o600);
  const loaded = await loadConfig(config, { env: {} });
  assert.deepEqual(loaded.diagnostics, []);
  assert.deepEqual(
    loaded.config?.keys.accessKeys.map((k) => [k.name, k.value]),
    [['x', result.out.trim()]],
  );
});

test('create on an empty keys file starts it (said on stderr); list reads an empty file as no keys', async () => {
  const { config, keys } = await fileModeSetup();
  await writeFile(keys, '');
  const listed = await admin(['access-key', 'list', '--config', config]);
  assert.equal(listed.code, 0, listed.err);
  assert.equal(listed.out.trim(), 'NAME  SUBJECT  STATUS  EXPIRES  CREATED  LIMITS  MODELS');

  const result = await admin(['access-key', 'create', '--name', 'x', '--config', config]);
  assert.equal(result.code, 0, result.err);
  assert.match(result.err, new RegExp(`started the keys file ${keys} \\(it was empty\\)`));
  const loaded = await loadConfig(config, { env: {} });
  assert.deepEqual(loaded.diagnostics, []);
  assert.equal(loaded.config?.keys.accessKeys[0]?.name, 'x');
});

test('other commands on a missing keys file: exit 2, and the message names access-key init', async () => {
  const { config, keys } = await fileModeSetup();
  const result = await admin(['access-key', 'list', '--config', config]);
  assert.equal(result.code, 2);
  assert.match(result.err, /cannot read keys file: file not found/);
  assert.match(
    result.err,
    new RegExp(
      `the keys file ${keys} named by \`keys:\` .* start it with \`router-admin access-key init --config `,
    ),
  );
  await assert.rejects(stat(keys), 'list does not create it');
});
