// The stored-responses hooks (hooks/builtin/response-state.ts) over an in-process store: what is stored
// and when the reply may end, what is not stored (store: false, no subject, too large, storing off), and
// a store that cannot answer.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pino } from 'pino';
import { GatewayError } from '../../../common/errors.ts';
import type { ResponseStore } from '../../../common/response-store-types.ts';
import { StoreUnavailableError } from '../../../common/store-types.ts';
import type { JsonObject, Principal, RequestContext, ResponsePart } from '../../../common/types.ts';
import { createStoredResponsesHooks } from '../../../hooks/builtin/response-state.ts';
import { MemoryResponses } from '../../../store/memory-response-store.ts';

const SUBJECT = { type: 'api_key', id: 'client-a' };
const CONFIG = { storeTtlS: 60, storeMaxBytes: 4096 };

function principal(subjectId: string): Principal {
  return { keyName: subjectId || undefined, isMaster: subjectId === '', subjectType: 'api_key', subjectId };
}

function ctx(body: JsonObject, subjectId = SUBJECT.id): RequestContext {
  return {
    id: 'req-1',
    api: 'responses',
    clientFormat: 'responses',
    log: pino({ level: 'silent' }),
    principal: principal(subjectId),
    body,
  } as RequestContext;
}

const reply = (id: string, text = 'hi'): ResponsePart => ({
  type: 'json',
  value: {
    id,
    object: 'response',
    output: [
      { type: 'message', id: `msg_${id}`, role: 'assistant', content: [{ type: 'output_text', text }] },
    ],
  },
});

async function serve(
  hooks: ReturnType<typeof createStoredResponsesHooks>,
  c: RequestContext,
  part: ResponsePart,
): Promise<void> {
  await hooks.request.onRequest?.(c);
  const out = hooks.recorder.onResponseChunk?.(c, [part]);
  assert.deepEqual(out, [part], 'the recorder only observes');
  await c.replyHold;
}

test('a served reply is stored before the reply may end, and the next turn resolves from it', async () => {
  const store = new MemoryResponses();
  const hooks = createStoredResponsesHooks({ store, config: CONFIG });
  const first = ctx({ model: 'm', input: 'hello' });
  await serve(hooks, first, reply('resp_a'));
  assert.ok(first.replyHold !== undefined);
  assert.ok(store.getNow(SUBJECT, 'resp_a') !== undefined);
  assert.ok(store.getByItemNow(SUBJECT, 'msg_resp_a') !== undefined);

  const next = ctx({ model: 'm', previous_response_id: 'resp_a', input: 'again' });
  await hooks.request.onRequest?.(next);
  assert.equal(next.body?.previous_response_id, undefined);
  assert.equal((next.body?.input as unknown[] | undefined)?.length, 3);
});

test('not stored: store: false, a subjectless request, a record over store_max_bytes, ttl 0', async () => {
  const store = new MemoryResponses();
  const hooks = createStoredResponsesHooks({ store, config: CONFIG });
  await serve(hooks, ctx({ model: 'm', input: 'x', store: false }), reply('resp_f'));
  await serve(hooks, ctx({ model: 'm', input: 'x' }, ''), reply('resp_s'));
  await serve(hooks, ctx({ model: 'm', input: 'x' }), reply('resp_big', 'y'.repeat(5000)));
  const off = createStoredResponsesHooks({ store, config: { ...CONFIG, storeTtlS: 0 } });
  await serve(off, ctx({ model: 'm', input: 'x' }), reply('resp_off'));
  assert.deepEqual(store.size, { responses: 0, bytes: 0 });
  // With storing off, a reference is not found even when the record exists.
  store.putNow(SUBJECT, { id: 'resp_old', itemIds: [], record: '{"response":{},"input":[]}' }, 60_000);
  await assert.rejects(
    async () => off.request.onRequest?.(ctx({ model: 'm', previous_response_id: 'resp_old', input: 'x' })),
    (err) => err instanceof GatewayError && err.code === 'previous_response_not_found',
  );
});

test('a store that cannot answer: 503 stored_response_unavailable on a reference; a failed write only logs', async () => {
  const down: ResponseStore = {
    put: async () => Promise.reject(new StoreUnavailableError('responses')),
    get: async () => Promise.reject(new StoreUnavailableError('responses')),
    getByItem: async () => Promise.reject(new StoreUnavailableError('responses')),
    delete: async () => Promise.reject(new StoreUnavailableError('responses')),
  };
  const hooks = createStoredResponsesHooks({ store: down, config: CONFIG });
  await assert.rejects(
    async () => hooks.request.onRequest?.(ctx({ model: 'm', previous_response_id: 'resp_a', input: 'x' })),
    (err) => err instanceof GatewayError && err.status === 503 && err.code === 'stored_response_unavailable',
  );
  // A turn naming nothing is served; its write fails without failing the reply.
  await serve(hooks, ctx({ model: 'm', input: 'x' }), reply('resp_b'));
});
