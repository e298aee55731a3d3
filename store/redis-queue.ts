// The usage-event queue of shared-store mode: one XADD per event onto the billing stream (field
// `payload`, conventions.md). It runs after the response (the enqueue hook's onComplete), so a failed
// write is the caller's to log and count; the response is never touched (spec 3, 7).

import type { Logger } from 'pino';
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
  return {
    async enqueue(event: UsageEvent): Promise<void> {
      try {
        await client.xadd(keys.stream, '*', 'payload', JSON.stringify(event));
      } catch (err) {
        if (isConnectionError(err)) throw new StoreUnavailableError('enqueue', err);
        throw err;
      }
    },
  } satisfies EventQueue;
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
