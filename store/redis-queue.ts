// The usage-event queue of shared-store mode: one XADD per event onto the billing stream (field
// `payload`, conventions.md). It runs after the response (the enqueue hook's onComplete), so a failed
// write is the caller's to log and count; the response is never touched (spec 3, 7).

import type { Logger } from 'pino';
import { createTurnBatch } from '../billing/turn-batch.ts';
import type { UsageEvent } from '../billing/types.ts';
import type { StoreConfig } from '../proxy/config/types.ts';
import {
  closeRedisClient,
  createKeyLayout,
  createRedisClient,
  isConnectionError,
  type KeyLayout,
  type Redis,
  waitReady,
} from './redis-client.ts';
import { type EventQueue, StoreUnavailableError } from './types.ts';

// Several events in one command: one reply to decode and one command for redis-server to parse, instead
// of one per event. Sent with EVAL, not EVALSHA: Redis caches the compiled script either way, and EVAL
// never needs the second round trip of a NOSCRIPT miss (after a Redis restart), which would leave the
// batch off the wire when the replies waiting for it end. A script is not a transaction: after an error
// mid-way the events before it stay on the stream (and are delivered) although the whole batch is
// reported as not queued.
const XADD_BATCH = `
for i = 1, #ARGV do
  redis.call('XADD', KEYS[1], '*', 'payload', ARGV[i])
end
return #ARGV
`;

export function createRedisEventQueue(client: Redis, keys: Pick<KeyLayout, 'stream'>): EventQueue {
  // The events completed in one event-loop turn go out together: a lone event as a plain XADD, several
  // as one script call. The gateway sends a reply's last byte after recorded(); by then the command has
  // been written to the socket (the queue's connection does not auto-pipeline, which would defer the
  // write to the next turn), or, while the connection is down, has failed at once (ioredis keeps no
  // offline queue here): the failure is logged and counted (spec 7: the reply stands).
  const turn = createTurnBatch<PendingEvent>((events) => {
    const sent =
      events.length === 1
        ? client.xadd(keys.stream, '*', 'payload', events[0].payload)
        : client.eval(XADD_BATCH, 1, keys.stream, ...events.map((e) => e.payload));
    sent.then(
      () => {
        for (const e of events) e.resolve();
      },
      (err: unknown) => {
        const failure = asQueueError(err);
        for (const e of events) e.reject(failure);
      },
    );
  });
  return {
    enqueue(event: UsageEvent): Promise<void> {
      const payload = JSON.stringify(event);
      return new Promise<void>((resolve, reject) => turn.add({ payload, resolve, reject }));
    },
    recorded: () => turn.settled(),
  } satisfies EventQueue;
}

interface PendingEvent {
  payload: string;
  resolve: () => void;
  reject: (err: unknown) => void;
}

function asQueueError(err: unknown): unknown {
  return isConnectionError(err) ? new StoreUnavailableError('enqueue', err) : err;
}

export interface BillingSink {
  readonly queue: EventQueue;
  /** XLEN of the stream and of its dead-letter stream. */
  readiness(): Promise<{ pending: number; dead_letter: number }>;
  close(): Promise<void>;
}

/** The gateway's side of the stream: its own connection, the queue and the counts /readyz shows. */
export async function openRedisBillingSink(store: StoreConfig, logger?: Logger): Promise<BillingSink> {
  // Its own connection, written at once: the queue batches per turn itself (createRedisEventQueue).
  const client = createRedisClient(store, {
    logger,
    connectionName: 'router-gateway-queue',
    writeAtOnce: true,
  });
  await waitReady(client, Math.max(1000, store.operationTimeoutMs * 4));
  const keys = createKeyLayout(store);
  return {
    queue: createRedisEventQueue(client, keys),
    async readiness() {
      const reply = await client.pipeline().xlen(keys.stream).xlen(keys.deadLetter).exec();
      if (reply === null) throw new StoreUnavailableError('readiness');
      for (const [err] of reply) if (err) throw new StoreUnavailableError('readiness', err);
      return { pending: Number(reply[0][1]), dead_letter: Number(reply[1][1]) };
    },
    close: () => closeRedisClient(client),
  };
}
