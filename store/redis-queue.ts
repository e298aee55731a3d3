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

export function createRedisEventQueue(client: Redis, keys: Pick<KeyLayout, 'stream'>): EventQueue {
  // Events of one event-loop turn go out as one pipeline (one socket write); the gateway sends a reply's
  // last byte after recorded(), by when exec() has handed the XADDs to the connection (or, while it is
  // down, to ioredis's offline queue).
  const turn = createTurnBatch<PendingEvent>((events) => {
    const pipeline = client.pipeline();
    for (const e of events) pipeline.xadd(keys.stream, '*', 'payload', e.payload);
    pipeline.exec().then(
      (results) => {
        events.forEach((e, i) => {
          const err = results?.[i]?.[0];
          if (err === null || err === undefined) e.resolve();
          else e.reject(asQueueError(err));
        });
      },
      (err: unknown) => {
        for (const e of events) e.reject(asQueueError(err));
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
  const client = createRedisClient(store, { logger, connectionName: 'router-gateway-queue' });
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
