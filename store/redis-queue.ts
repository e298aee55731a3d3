// The usage-event queue of shared-store mode: one XADD per event onto the billing stream (field
// `payload`, conventions.md). It runs after the response (the enqueue hook's onComplete), so a failed
// write is the caller's to log and count; the response is never touched (spec 3, 7).

import type { UsageEvent } from '../billing/types.ts';
import type { KeyLayout, Redis } from './redis-client.ts';
import { isConnectionError } from './redis-client.ts';
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
