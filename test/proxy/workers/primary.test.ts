// The primary (proxy/workers/primary.ts) under crashing workers, with scripted workers
// (scripted-worker.ts) in place of gateways: a worker that dies is restarted at once, a worker that fails
// during the first start does not stop the start, and the primary gives up only after 20 crashes with
// no worker serving. Every wait is on the primary's own log lines.

import assert from 'node:assert/strict';
import cluster from 'node:cluster';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { pino } from 'pino';
import type { RouterConfig } from '../../../common/config-types.ts';
import { RESTART_POLICY } from '../../../common/restart-policy.ts';
import { type RunningPrimary, startPrimary } from '../../../proxy/workers/primary.ts';
import { ROOT } from '../../support/stack.ts';

type Line = Record<string, unknown>;

const dirs: string[] = [];
before(() => {
  cluster.setupPrimary({ exec: join(ROOT, 'test/proxy/workers/scripted-worker.ts'), silent: true });
});
after(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

/** A logger whose lines the test can wait on. */
function watchedLog() {
  const lines: Line[] = [];
  const waiters = new Set<{ done: () => boolean; resolve: () => void }>();
  const log = pino(
    { level: 'info' },
    {
      write(text: string) {
        lines.push(JSON.parse(text) as Line);
        for (const w of waiters) {
          if (w.done()) {
            waiters.delete(w);
            w.resolve();
          }
        }
      },
    },
  );
  const until = (done: () => boolean): Promise<void> =>
    done() ? Promise.resolve() : new Promise((resolve) => waiters.add({ done, resolve }));
  const count = (msg: string) => lines.filter((l) => l.msg === msg).length;
  return { log, lines, until, count };
}

async function start(
  workers: number,
  script: Record<string, string>,
  extra: { exit?: (code: number) => void } = {},
) {
  const dir = await mkdtemp(join(tmpdir(), 'router-primary-'));
  dirs.push(dir);
  const watched = watchedLog();
  const config = { workers, listen: { host: '127.0.0.1', port: 0 } } as unknown as RouterConfig;
  const primary = startPrimary({
    configFile: '/dev/null',
    config,
    log: watched.log,
    sidecar: false,
    env: { SCRIPTED_DIR: dir, ...script },
    ...extra,
  });
  return { ...watched, primary };
}

const restarts = (lines: readonly Line[]) => lines.filter((l) => l.msg === 'worker exited; restarting');

/** The delays the policy gives one worker's successive crashes within a minute. */
const POLICY_DELAYS = [0, 0, 0, 0, 500, 1000, 2000, 4000, 5000];

function assertPolicyDelays(lines: readonly Line[], workers: number): void {
  for (let id = 1; id <= workers; id++) {
    const delays = restarts(lines)
      .filter((l) => l.worker === id)
      .map((l) => l.restartInMs);
    assert.deepEqual(delays, POLICY_DELAYS.slice(0, delays.length), `worker ${id}`);
  }
}

const running = () => Object.values(cluster.workers ?? {}).filter((w) => w !== undefined && !w.isDead());

test('kill -9 of every worker, twice in a row: each is restarted at once', async (t) => {
  const { primary, until, count, lines } = await start(2, {});
  const router: RunningPrimary = await primary;
  t.after(() => router.stop());
  await until(() => count('worker listening') === 2);
  for (const round of [1, 2]) {
    const pids = router.workerPids();
    assert.equal(pids.length, 2);
    for (const pid of pids) process.kill(pid, 'SIGKILL');
    await until(() => count('worker listening') === 2 + 2 * round);
  }
  const exits = restarts(lines);
  assert.equal(exits.length, 4);
  for (const exit of exits) {
    assert.equal(exit.signal, 'SIGKILL');
    assert.equal(exit.restartInMs, 0, 'restarted at once, the second crash of a worker too');
  }
});

test('a worker that fails during the first start does not stop the start; it is restarted', async (t) => {
  const { primary, until, count, lines } = await start(3, { SCRIPTED_FAIL_FIRST: '2' });
  const router = await primary;
  t.after(() => router.stop());
  assert.match(router.url, /^http:\/\/scripted-worker-[123]$/);
  await until(() => count('worker listening') === 3);
  const exits = restarts(lines);
  assert.equal(exits.length, 1);
  assert.equal(exits[0]?.worker, 2);
  assert.equal(exits[0]?.code, 1);
  assert.equal(exits[0]?.restartInMs, 0);
  assert.deepEqual(
    lines
      .filter((l) => l.msg === 'worker listening')
      .map((l) => l.worker)
      .sort(),
    [1, 2, 3],
  );
});

test('workers that never start: the start fails after 20 crashes, the quick restarts first', async () => {
  const { primary, lines } = await start(4, { SCRIPTED_FAIL_FIRST: '*', SCRIPTED_FAIL_LATER: '1' });
  await assert.rejects(primary, /workers crashed 20 times within 10 minutes with none listening/);
  const exits = restarts(lines);
  assert.equal(exits.length, RESTART_POLICY.giveUpCrashes - 1);
  assertPolicyDelays(lines, 4);
  assert.ok(lines.some((l) => l.msg === 'workers keep crashing with none serving; giving up'));
  assert.deepEqual(running(), [], 'no worker left running');
});

test('after the start: the primary exits 1 once 20 crashes came with no worker serving', async () => {
  let exited: (code: number) => void = () => {};
  const exitCode = new Promise<number>((resolve) => {
    exited = resolve;
  });
  const { primary, until, count, lines } = await start(4, { SCRIPTED_FAIL_LATER: '1' }, { exit: exited });
  const router = await primary;
  await until(() => count('worker listening') === 4);
  // Every worker killed, every restart failing: none serves.
  for (const pid of router.workerPids()) process.kill(pid, 'SIGKILL');
  assert.equal(await exitCode, 1);
  assert.equal(restarts(lines).length, RESTART_POLICY.giveUpCrashes - 1);
  assertPolicyDelays(lines, 4);
  assert.deepEqual(running(), [], 'no worker left running');
});
