// The entry modules switch Node's async-context frames on before anything else runs
// (common/early-async-context.ts says why). Node's internal class is read with --expose-internals in a
// child process.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

const REPO = new URL('../../', import.meta.url);

/** The name of the class Node's async-context frame inherits from after `code` ran. */
function frameClassAfter(code: string): string {
  const script = `
    const frame = require('internal/async_context_frame');
    ${code}.then(() => console.log(Object.getPrototypeOf(frame).name));`;
  return execFileSync(process.execPath, ['--expose-internals', '-e', script], {
    cwd: REPO,
    encoding: 'utf8',
  }).trim();
}

test('importing the module switches the frames on; nothing else has by then', () => {
  assert.equal(frameClassAfter('Promise.resolve()'), 'InactiveAsyncContextFrame');
  assert.equal(frameClassAfter("import('./common/early-async-context.ts')"), 'ActiveAsyncContextFrame');
});

test("the gateway's and the sidecar's entry modules import it before any other module", () => {
  for (const entry of ['proxy/cli.ts', 'bin/sidecar-main.ts']) {
    const source = readFileSync(new URL(entry, REPO), 'utf8');
    const first = /^import\s[^;]*;/m.exec(source)?.[0];
    assert.equal(first, "import '../common/early-async-context.ts';", entry);
  }
});
