// A worker told to stop while its gateway is still starting (it reports listening before its stop
// listener exists) still stops: the stop is kept for the listener registered later.

import assert from 'node:assert/strict';
import cluster from 'node:cluster';
import { join } from 'node:path';
import { test } from 'node:test';
import { ROOT } from '../../support/stack.ts';

test('a stop sent before the worker registers its listener reaches the listener', async () => {
  cluster.setupPrimary({ exec: join(ROOT, 'test/support/early-stop-worker.ts'), silent: true });
  const worker = cluster.fork();
  const seen: string[] = [];
  const exited = new Promise((resolve) => worker.once('exit', resolve));
  try {
    await new Promise<void>((resolve, reject) => {
      worker.once('exit', (code) => reject(new Error(`the worker exited (${code}) early`)));
      worker.on('message', (m: { test?: string }) => {
        if (m.test === undefined) return;
        seen.push(m.test);
        if (m.test === 'connected') {
          worker.send({ router: 1, kind: 'stop' });
          worker.send({ test: 'register' });
        }
        if (m.test === 'registered') resolve();
      });
    });
    // The listener runs as it is registered, so its message comes first.
    assert.deepEqual(seen, ['connected', 'stopped', 'registered']);
  } finally {
    worker.kill('SIGKILL');
    await exited;
  }
});
