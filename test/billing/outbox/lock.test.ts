// The outbox pid lock against real processes: a holder killed with -9 and not yet reaped (a zombie), a
// lock naming a live pid that started at another time (a recycled pid), and a live holder.

import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { acquirePidLock, OutboxLockedError, procStat } from '../../../billing/outbox/lock.ts';
import { waitUntil } from '../../support/billing-stack.ts';
import { ROOT } from '../../support/stack.ts';

async function tempDir(t: { after: (fn: () => Promise<void>) => void }): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'outbox-lock-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

function exited(child: ChildProcess): Promise<void> {
  return child.exitCode !== null || child.signalCode !== null
    ? Promise.resolve()
    : new Promise((resolve) => child.once('exit', () => resolve()));
}

/** A live process that is not ours to lock with: `sleep`, killed at the end of the test. */
async function liveProcess(t: { after: (fn: () => Promise<void>) => void }): Promise<number> {
  const child = spawn('sleep', ['600'], { stdio: 'ignore' });
  t.after(async () => {
    child.kill('SIGKILL');
    await exited(child);
  });
  await waitUntil(async () => (await procStat(child.pid as number)) !== undefined, 'sleep to start');
  return child.pid as number;
}

test('a holder killed with -9 and not yet reaped (zombie) does not block the next owner', async (t) => {
  const dir = await tempDir(t);
  const lockModule = join(ROOT, 'billing/outbox/lock.ts');
  const script =
    `import { acquirePidLock } from ${JSON.stringify(lockModule)};` +
    `await acquirePidLock(${JSON.stringify(dir)}, 'reader.lock', 'test holder');` +
    `console.log('locked ' + process.pid); setInterval(() => {}, 1000);`;
  // The holder's parent becomes `sleep` (sh execs it), which never reaps: once killed, the holder stays
  // a zombie for as long as the test runs.
  const parent = spawn(
    'sh',
    ['-c', `"${process.execPath}" --input-type=module -e "$HOLDER" & exec sleep 600`],
    { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, HOLDER: script } },
  );
  t.after(async () => {
    parent.kill('SIGKILL');
    await exited(parent);
  });
  const holderPid = await new Promise<number>((resolve, reject) => {
    let out = '';
    parent.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const m = /locked (\d+)/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    parent.once('exit', () => reject(new Error(`holder never locked: ${out}`)));
  });
  assert.match(await readFile(join(dir, 'reader.lock'), 'utf8'), new RegExp(`^${holderPid} \\d+\\n$`));

  process.kill(holderPid, 'SIGKILL');
  await waitUntil(async () => (await procStat(holderPid))?.state === 'Z', 'the holder to be a zombie');
  const lock = await acquirePidLock(dir, 'reader.lock', 'next owner', { waitMs: 0 });
  assert.match(await readFile(join(dir, 'reader.lock'), 'utf8'), new RegExp(`^${process.pid} `));
  await lock.release();
});

test('a lock naming a live pid with another start time (a recycled pid) is taken over', async (t) => {
  const dir = await tempDir(t);
  const pid = await liveProcess(t);
  const start = (await procStat(pid))?.startTime as number;
  await writeFile(join(dir, 'writer.lock'), `${pid} ${start + 1}\n`);
  const lock = await acquirePidLock(dir, 'writer.lock', 'gateway', { waitMs: 0 });
  assert.match(await readFile(join(dir, 'writer.lock'), 'utf8'), new RegExp(`^${process.pid} `));
  await lock.release();
});

test('a live holder still blocks, after a bounded wait; so does a lock in the old pid-only format', async (t) => {
  const dir = await tempDir(t);
  const pid = await liveProcess(t);
  const start = (await procStat(pid))?.startTime as number;
  for (const content of [`${pid} ${start}\n`, `${pid}\n`]) {
    await writeFile(join(dir, 'reader.lock'), content);
    await assert.rejects(acquirePidLock(dir, 'reader.lock', 'billing sidecar', { waitMs: 50 }), (err) => {
      assert.ok(err instanceof OutboxLockedError);
      assert.equal(err.pid, pid);
      return true;
    });
    assert.equal(await readFile(join(dir, 'reader.lock'), 'utf8'), content, 'left in place');
  }
});

test('a lock held by this process blocks a second owner at once; release frees it', async (t) => {
  const dir = await tempDir(t);
  const first = await acquirePidLock(dir, 'reader.lock', 'billing sidecar');
  await assert.rejects(acquirePidLock(dir, 'reader.lock', 'billing sidecar'), OutboxLockedError);
  await first.release();
  const second = await acquirePidLock(dir, 'reader.lock', 'billing sidecar', { waitMs: 0 });
  await second.release();
});
