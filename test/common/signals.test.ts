// The one signal rule (common/signals.ts), on a fake process: which signal stops, reloads or is left to
// a supervisor, and when a second one exits at once.

import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { test } from 'node:test';
import { handleSignals, type SignalOptions } from '../../common/signals.ts';

function harness(opts: Partial<SignalOptions> = {}) {
  const target = new EventEmitter();
  const seen = { stops: [] as string[], exits: [] as number[], notes: [] as string[] };
  let clock = 0;
  let finish: (ok: boolean) => void = () => {};
  const stop = handleSignals({
    stop: (why) => {
      seen.stops.push(why);
      return new Promise<void>((resolve, reject) => {
        finish = (ok) => (ok ? resolve() : reject(new Error('close failed')));
      });
    },
    note: (what, signal) => seen.notes.push(`${what} ${signal}`),
    ...opts,
    target: target as unknown as NodeJS.Process,
    now: () => clock,
    exit: (code) => seen.exits.push(code),
  });
  return {
    seen,
    stop,
    send: (signal: string) => target.emit(signal),
    advance: (ms: number) => {
      clock += ms;
    },
    finish: async (ok: boolean) => {
      finish(ok);
      await new Promise((r) => setImmediate(r));
    },
  };
}

test('SIGTERM and SIGINT drain and exit 0; a close that fails exits 1', async () => {
  for (const signal of ['SIGTERM', 'SIGINT']) {
    const h = harness();
    h.send(signal);
    assert.deepEqual(h.seen.stops, [signal]);
    assert.deepEqual(h.seen.exits, [], 'nothing exits before the drain ends');
    await h.finish(true);
    assert.deepEqual(h.seen.exits, [0]);
  }
  const failing = harness();
  failing.send('SIGTERM');
  await failing.finish(false);
  assert.deepEqual(failing.seen.exits, [1]);
});

test('a second signal within a second is the same Ctrl-C; later it exits 1 at once', () => {
  const h = harness();
  h.send('SIGINT');
  h.advance(300);
  h.send('SIGINT');
  assert.deepEqual(h.seen.exits, []);
  assert.deepEqual(h.seen.notes, ['repeated SIGINT']);
  h.advance(1000);
  h.send('SIGTERM');
  assert.deepEqual(h.seen.exits, [1]);
  assert.deepEqual(h.seen.stops, ['SIGINT'], 'one drain');
});

test('SIGHUP reloads a program that can, and stops one that cannot; never reloads while stopping', () => {
  let reloads = 0;
  const reloading = harness({ reload: () => reloads++ });
  reloading.send('SIGHUP');
  reloading.send('SIGHUP');
  assert.equal(reloads, 2);
  assert.deepEqual(reloading.seen.stops, []);
  reloading.send('SIGTERM');
  reloading.advance(5000);
  reloading.send('SIGHUP');
  assert.equal(reloads, 2);
  assert.deepEqual(reloading.seen.exits, [], 'a reload signal during the drain forces nothing');

  const plain = harness();
  plain.send('SIGHUP');
  assert.deepEqual(plain.seen.stops, ['SIGHUP']);
});

test('a supervised child leaves SIGINT and SIGHUP to its supervisor and stops on SIGTERM', async () => {
  let reloads = 0;
  const h = harness({ supervised: true, reload: () => reloads++ });
  h.send('SIGINT');
  h.send('SIGHUP');
  assert.deepEqual(h.seen.stops, []);
  assert.equal(reloads, 0);
  assert.deepEqual(h.seen.notes, ['ignored SIGINT', 'ignored SIGHUP']);
  h.send('SIGTERM');
  await h.finish(true);
  assert.deepEqual(h.seen.exits, [0]);
});

test('the returned stop (a primary, a gone launcher) drains once, however often it is asked', async () => {
  const h = harness();
  const first = h.stop('primary');
  const again = h.stop('primary');
  assert.equal(first, again);
  h.advance(200);
  h.send('SIGTERM');
  assert.deepEqual(h.seen.stops, ['primary']);
  await h.finish(true);
  assert.deepEqual(h.seen.exits, [0]);
});
