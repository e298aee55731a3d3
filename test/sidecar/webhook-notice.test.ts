// The sidecar -> gateway subject state notice (common/internal-notify.ts): signed, loopback only, applied
// before the answer; and the gateway's route for it, which reloads the state file.

import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { pino } from 'pino';
import {
  createNoticeHandler,
  createStateNotifier,
  isLoopback,
  loopbackUrl,
  NOTICE_SIGNATURE_HEADER,
  NOTICE_TIMESTAMP_HEADER,
  SUBJECT_STATE_PATH,
  signNotice,
} from '../../common/internal-notify.ts';
import type { SubjectRef } from '../../common/store-types.ts';
import { openFileStore } from '../../store/file-store.ts';

const SECRET = 'whsec_notice';
const NOTICE = { subject_type: 'api_key', subject_id: 'client-a', event_id: 'evt_1', event_type: 'x' };

async function serve(t: { after: (fn: () => Promise<void>) => void }, applied: SubjectRef[], fail = false) {
  const handler = createNoticeHandler({
    secret: SECRET,
    log: pino({ level: 'silent' }),
    async apply(subject) {
      if (fail) throw new Error('reload failed');
      applied.push(subject);
    },
  });
  const server = createServer((req, res) => void handler(req, res));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

test('the notifier is accepted and the state applied before it resolves', async (t) => {
  const applied: SubjectRef[] = [];
  const url = await serve(t, applied);
  const notify = createStateNotifier({ gatewayUrl: url, secret: SECRET });
  assert.equal(await notify(NOTICE), true);
  assert.deepEqual(applied, [{ type: 'api_key', id: 'client-a' }]);
  // A gateway URL known only later (port 0), and none at all.
  assert.equal(await createStateNotifier({ gatewayUrl: () => url, secret: SECRET })(NOTICE), true);
  assert.equal(await createStateNotifier({ gatewayUrl: undefined, secret: SECRET })(NOTICE), false);
});

test('unsigned, wrongly signed, stale or malformed notices are refused and apply nothing', async (t) => {
  const applied: SubjectRef[] = [];
  const url = `${await serve(t, applied)}${SUBJECT_STATE_PATH}`;
  const now = String(Math.floor(Date.now() / 1000));
  const body = JSON.stringify(NOTICE);
  const post = (headers: Record<string, string>, text = body) =>
    fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: text,
    }).then((r) => r.status);
  assert.equal(await post({}), 401);
  assert.equal(
    await post({ [NOTICE_TIMESTAMP_HEADER]: now, [NOTICE_SIGNATURE_HEADER]: signNotice('other', now, body) }),
    401,
  );
  const old = String(Number(now) - 600);
  assert.equal(
    await post({ [NOTICE_TIMESTAMP_HEADER]: old, [NOTICE_SIGNATURE_HEADER]: signNotice(SECRET, old, body) }),
    401,
  );
  const bad = '{"subject_type":1}';
  assert.equal(
    await post(
      { [NOTICE_TIMESTAMP_HEADER]: now, [NOTICE_SIGNATURE_HEADER]: signNotice(SECRET, now, bad) },
      bad,
    ),
    400,
  );
  assert.equal(await post({}, 'x'.repeat(20_000)), 413);
  assert.equal(
    await createStateNotifier({ gatewayUrl: url.replace(SUBJECT_STATE_PATH, ''), secret: 'wrong' })(NOTICE),
    false,
  );
  assert.deepEqual(applied, []);
});

test('a failed apply answers 500 and the notifier reports it', async (t) => {
  const url = await serve(t, [], true);
  assert.equal(await createStateNotifier({ gatewayUrl: url, secret: SECRET })(NOTICE), false);
});

test('an unreachable gateway is reported, not thrown', async () => {
  const notify = createStateNotifier({ gatewayUrl: 'http://127.0.0.1:9', secret: SECRET, timeoutMs: 500 });
  assert.equal(await notify(NOTICE), false);
});

test('loopback helpers', () => {
  assert.equal(isLoopback('127.0.0.1'), true);
  assert.equal(isLoopback('::1'), true);
  assert.equal(isLoopback('::ffff:127.0.0.1'), true);
  assert.equal(isLoopback('10.0.0.5'), false);
  assert.equal(isLoopback(undefined), false);
  assert.equal(loopbackUrl('0.0.0.0', 8080), 'http://127.0.0.1:8080');
  assert.equal(loopbackUrl('::', 8080), 'http://[::1]:8080');
  assert.equal(loopbackUrl('127.0.0.1', 80), 'http://127.0.0.1:80');
});

test('the gateway side reloads the file store: a reader sees the writer after the notice', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'router-notice-'));
  const writer = await openFileStore({ dir, role: 'writer' });
  const reader = await openFileStore({ dir, role: 'reader', watch: false });
  t.after(async () => {
    await reader.close();
    await writer.close();
    await rm(dir, { recursive: true, force: true });
  });
  const handler = createNoticeHandler({
    secret: SECRET,
    async apply(subject) {
      await reader.reload();
      await reader.invalidateBalance(subject);
    },
  });
  const server = createServer((req, res) => void handler(req, res));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  const ref = { type: 'api_key', id: 'client-a' };
  await reader.putBalance(ref, { allowed: true, balance: '1', currency: 'USD', fetchedAt: 0 }, 60_000);
  await writer.setSubject(ref, { blocked: true, lastEvent: 'e', lastEventId: 'evt_1', updatedAt: 1 });
  const notify = createStateNotifier({
    gatewayUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    secret: SECRET,
  });
  assert.equal(await notify(NOTICE), true);
  const view = await reader.view({ subject: ref, currency: 'USD' });
  assert.equal(view.subject?.blocked, true);
  assert.equal(view.balance, null);
});
