import assert from 'node:assert/strict';
import { appendFile, mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type { BalanceDecision, SubjectRef, SubjectState } from '../../common/store-types.ts';
import { openFileStore, SUBJECTS_FILE, WEBHOOK_IDS_FILE } from '../../store/file-store.ts';

const A: SubjectRef = { type: 'api_key', id: 'client-a' };
const B: SubjectRef = { type: 'api_key', id: 'client:b' };

function blocked(id: string, at = 1000): SubjectState {
  return { blocked: true, lastEvent: 'wallet.insufficient_balance', lastEventId: id, updatedAt: at };
}

function decision(allowed: boolean, at = 0): BalanceDecision {
  return { allowed, balance: allowed ? '1' : '0', currency: 'USD', fetchedAt: at };
}

async function tempDir(t: { after: (fn: () => Promise<void>) => void }): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'router-file-store-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

test('subject state persists across a reopen; the file is replaced whole, no temp file left', async (t) => {
  const dir = await tempDir(t);
  const w = await openFileStore({ dir, role: 'writer' });
  assert.equal(await w.getSubject(A), undefined);
  await w.setSubject(A, blocked('evt_1'));
  await w.setSubject(B, { ...blocked('evt_2'), blocked: false, lastEvent: 'wallet.balance_changed' });
  await w.close();
  assert.deepEqual((await readdir(dir)).sort(), [SUBJECTS_FILE, WEBHOOK_IDS_FILE].sort());
  const onDisk = JSON.parse(await readFile(join(dir, SUBJECTS_FILE), 'utf8'));
  assert.equal(onDisk.version, 1);
  assert.equal(onDisk.subjects.length, 2);

  const again = await openFileStore({ dir, role: 'writer' });
  t.after(() => again.close());
  assert.deepEqual(await again.getSubject(A), blocked('evt_1'));
  assert.equal((await again.getSubject(B))?.blocked, false);
  const view = await again.view({ subject: A, currency: 'USD' });
  assert.deepEqual(view, { subject: blocked('evt_1'), balance: null });
});

test('webhook ids: a claim survives a restart, a release is persisted, expired ids are pruned', async (t) => {
  const dir = await tempDir(t);
  let now = 1_000_000;
  const clock = () => now;
  const w = await openFileStore({ dir, role: 'writer', now: clock });
  assert.equal(await w.claimWebhook('evt_1', 60_000), true);
  assert.equal(await w.claimWebhook('evt_1', 60_000), false, 'duplicate in the same process');
  assert.equal(await w.claimWebhook('evt_2', 60_000), true);
  await w.releaseWebhook('evt_2');
  assert.equal(await w.claimWebhook('evt_3', 1_000), true);
  // Concurrent duplicates: exactly one wins.
  const racers = await Promise.all([w.claimWebhook('evt_4', 60_000), w.claimWebhook('evt_4', 60_000)]);
  assert.deepEqual(racers.sort(), [false, true]);
  await w.close();

  now += 5_000; // evt_3 has expired
  const w2 = await openFileStore({ dir, role: 'writer', now: clock });
  assert.equal(await w2.claimWebhook('evt_1', 60_000), false, 'dedupe survives the restart');
  assert.equal(await w2.claimWebhook('evt_4', 60_000), false);
  assert.equal(await w2.claimWebhook('evt_2', 60_000), true, 'released id can be processed again');
  assert.equal(await w2.claimWebhook('evt_3', 60_000), true, 'expired id is forgotten');
  await w2.close();
  // Opening compacted the log: released and expired records are gone.
  const lines = (await readFile(join(dir, WEBHOOK_IDS_FILE), 'utf8')).trim().split('\n');
  const ids = lines.map((l) => JSON.parse(l).id);
  assert.ok(!ids.includes(undefined));
  assert.deepEqual(ids.slice(0, 2).sort(), ['evt_1', 'evt_4']);
});

test('a torn last line of the id log (crash mid-append) is ignored', async (t) => {
  const dir = await tempDir(t);
  const w = await openFileStore({ dir, role: 'writer' });
  assert.equal(await w.claimWebhook('evt_ok', 60_000), true);
  await w.close();
  await appendFile(join(dir, WEBHOOK_IDS_FILE), '{"id":"evt_torn","ex');
  const w2 = await openFileStore({ dir, role: 'writer' });
  t.after(() => w2.close());
  assert.equal(await w2.claimWebhook('evt_ok', 60_000), false);
  assert.equal(await w2.claimWebhook('evt_torn', 60_000), true);
});

test('a reader follows the writer on reload() and drops cached balances of changed subjects only', async (t) => {
  const dir = await tempDir(t);
  const w = await openFileStore({ dir, role: 'writer' });
  const r = await openFileStore({ dir, role: 'reader', watch: false });
  t.after(async () => {
    await r.close();
    await w.close();
  });
  await r.putBalance(A, decision(true), 60_000);
  await r.putBalance(B, decision(true), 60_000);
  await w.setSubject(A, blocked('evt_1'));
  assert.equal((await r.view({ subject: A })).subject, null, 'no I/O until told');
  const changed = await r.reload();
  assert.deepEqual(changed, [A]);
  const va = await r.view({ subject: A, currency: 'USD' });
  assert.deepEqual(va.subject, blocked('evt_1'));
  assert.equal(va.balance, null, 'changed subject lost its cached balance');
  assert.deepEqual((await r.view({ subject: B, currency: 'USD' })).balance, decision(true));
  assert.deepEqual(await r.reload(), [], 'nothing changed');
  // A reader never writes: its setSubject is memory only.
  const before = await stat(join(dir, SUBJECTS_FILE));
  await r.setSubject(B, blocked('evt_x'));
  assert.equal((await r.getSubject(B))?.blocked, true);
  assert.equal((await stat(join(dir, SUBJECTS_FILE))).mtimeMs, before.mtimeMs);
  await assert.rejects(r.claimWebhook('evt_r', 1000), /reader/);
});

test('a reader with fs.watch picks up a change without being told', async (t) => {
  const dir = await tempDir(t);
  const w = await openFileStore({ dir, role: 'writer' });
  let signal: (changed: readonly SubjectRef[]) => void = () => undefined;
  const seen = new Promise<readonly SubjectRef[]>((resolve) => {
    signal = resolve;
  });
  const r = await openFileStore({ dir, role: 'reader', onReload: (c) => signal(c) });
  t.after(async () => {
    await r.close();
    await w.close();
  });
  await w.setSubject(A, blocked('evt_w'));
  assert.deepEqual(await seen, [A]);
  assert.equal((await r.getSubject(A))?.lastEventId, 'evt_w');
});

test('balance cache: TTL by the injected clock, invalidation, refresh lock', async (t) => {
  const dir = await tempDir(t);
  let now = 0;
  const s = await openFileStore({ dir, role: 'reader', watch: false, now: () => now });
  t.after(() => s.close());
  await s.putBalance(A, decision(false), 100);
  assert.deepEqual((await s.view({ subject: A, currency: 'USD' })).balance, decision(false));
  assert.equal((await s.view({ subject: A, currency: 'EUR' })).balance, null, 'per currency');
  assert.equal((await s.view({ subject: A })).balance, undefined, 'not asked');
  now = 100;
  assert.equal((await s.view({ subject: A, currency: 'USD' })).balance, null, 'expired');
  await s.putBalance(A, decision(true), 100);
  await s.invalidateBalance(A);
  assert.equal((await s.view({ subject: A, currency: 'USD' })).balance, null);

  assert.equal(await s.tryRefreshLock(A, 'USD', 50), true);
  assert.equal(await s.tryRefreshLock(A, 'USD', 50), false);
  assert.equal(await s.tryRefreshLock(B, 'USD', 50), true, 'per subject');
  now = 150;
  assert.equal(await s.tryRefreshLock(A, 'USD', 50), true, 'lock expired');
  await s.putBalance(A, decision(true), 100);
  assert.equal(await s.tryRefreshLock(A, 'USD', 50), true, 'a stored answer ends the refresh');
  assert.deepEqual(await s.health(), { connected: true });
});
