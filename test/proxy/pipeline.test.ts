// The stage runners' rules for synchronous and asynchronous hooks: a synchronous hook's result is used in
// the same turn (no await of a plain value), so synchronous onComplete hooks have all run by the time
// runOnComplete returns its promise; asynchronous ones are awaited in order; a failing onComplete hook
// reaches neither the others nor the caller.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Hook, RequestContext } from '../../common/types.ts';
import { CONTINUE } from '../../common/types.ts';
import { runOnComplete, runOnRequest, runSelectTarget } from '../../proxy/pipeline.ts';

const errors: unknown[] = [];
const ctx = {
  log: { error: (fields: unknown) => errors.push(fields) },
} as unknown as RequestContext;

test('synchronous onComplete hooks have all run when runOnComplete returns', () => {
  const ran: string[] = [];
  const hooks: Hook[] = [
    { name: 'first', onComplete: () => void ran.push('first') },
    { name: 'second', onComplete: () => void ran.push('second') },
  ];
  const done = runOnComplete(hooks, ctx);
  assert.deepEqual(ran, ['first', 'second']);
  return done;
});

test('asynchronous hooks are awaited in order; a failure is logged and the others still run', async () => {
  const ran: string[] = [];
  errors.length = 0;
  const hooks: Hook[] = [
    {
      name: 'slow',
      onComplete: async () => {
        await new Promise((resolve) => setImmediate(resolve));
        ran.push('slow');
      },
    },
    {
      name: 'broken',
      onComplete: () => {
        throw new Error('boom');
      },
    },
    { name: 'last', onComplete: () => void ran.push('last') },
  ];
  await runOnComplete(hooks, ctx);
  assert.deepEqual(ran, ['slow', 'last']);
  assert.equal(errors.length, 1);
});

test('onRequest and selectTarget take plain and promised results alike', async () => {
  const respond = { kind: 'respond', status: 403, body: {} } as const;
  assert.equal(
    await runOnRequest(
      [
        { name: 'a', onRequest: () => CONTINUE },
        { name: 'b', onRequest: async () => respond },
      ],
      ctx,
    ),
    respond,
  );
  assert.equal(await runOnRequest([{ name: 'a', onRequest: () => CONTINUE }], ctx), CONTINUE);
  const choice = { provider: 'p' } as never;
  assert.equal(
    await runSelectTarget(
      [
        { name: 'a', selectTarget: () => undefined },
        { name: 'b', selectTarget: async () => choice },
      ],
      ctx,
    ),
    choice,
  );
});
