// router-admin maps a store that cannot answer to exit 3 by the error's class, not its name: a subclass
// of StoreUnavailableError with a name of its own still exits 3, and an unrelated error that merely
// carries the name exits 1.

import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { Cli } from 'clipanion';
import { ConfigCommand } from '../../admin/command-base.ts';
import { StoreUnavailableError } from '../../common/store-types.ts';
import { sink } from './run-admin.ts';

class ClusterDownError extends StoreUnavailableError {
  constructor() {
    super('status');
    this.name = 'ClusterDownError';
  }
}

let dir: string;
let file: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'admin-exit-'));
  file = join(dir, 'router.yaml');
  await writeFile(file, 'listen: 127.0.0.1:0\n');
});
after(() => rm(dir, { recursive: true, force: true }));

/** The exit code of a command whose backend fails to open with `err`. */
async function exitCodeOf(err: Error): Promise<{ code: number; stderr: string }> {
  class FailingCommand extends ConfigCommand<{ close(): Promise<void> }> {
    static override paths = [['failing']];
    override open(): Promise<{ close(): Promise<void> }> {
      return Promise.reject(err);
    }
    override run(): Promise<number> {
      return Promise.resolve(0);
    }
  }
  const cli = new Cli({ binaryName: 'router-admin' });
  cli.register(FailingCommand);
  const out = sink();
  const errors = sink();
  const code = await cli.run(['failing', '--config', file], {
    stdin: process.stdin,
    stdout: out.stream,
    stderr: errors.stream,
  });
  return { code, stderr: errors.text() };
}

test('a StoreUnavailableError subclass with another name exits 3', async () => {
  const r = await exitCodeOf(new ClusterDownError());
  assert.equal(r.code, 3, r.stderr);
  assert.match(r.stderr, /store unavailable during status/);
  assert.equal((await exitCodeOf(new StoreUnavailableError('view'))).code, 3);
});

test('an error that only carries the name is a plain failure, exit 1', async () => {
  const impostor = Object.assign(new Error('not the store'), { name: 'StoreUnavailableError' });
  assert.equal((await exitCodeOf(impostor)).code, 1);
});
