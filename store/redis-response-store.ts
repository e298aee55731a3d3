// Stored responses in the shared store (common/response-store-types.ts): every instance reads what any
// instance stored, so a conversation can continue wherever the next request lands. All of a subject's
// keys carry its own hash tag (`<key_prefix>{resp:<type>:<id>}`, docs/operations.md "Keys in Redis"):
// a record `:r:<response id>` (the JSON text) and an index entry `:i:<item id>` -> response id per item,
// each with the record's ttl, so nothing outlives it by more than the ttl. A subject never reads another
// subject's keys: an id is only ever looked up under the caller's own tag.

import type { ResponseStore } from '../common/response-store-types.ts';
import type { SubjectRef } from '../common/store-types.ts';
import type { KeyLayout, Redis } from './redis-client.ts';

export interface RedisResponsesOptions {
  /** Maps a failed command's error (a connection failure becomes StoreUnavailableError). */
  readonly failure?: (err: unknown) => unknown;
}

export function createRedisResponses(
  client: Redis,
  keys: KeyLayout,
  opts: RedisResponsesOptions = {},
): ResponseStore {
  const failure = opts.failure ?? ((err: unknown) => err);
  const guarded = async <T>(fn: () => Promise<T>): Promise<T> => {
    try {
      return await fn();
    } catch (err) {
      throw failure(err);
    }
  };
  const recordKey = (subject: SubjectRef, id: string) =>
    `${keys.responses(subject.type, subject.id)}:r:${id}`;
  const itemKey = (subject: SubjectRef, id: string) => `${keys.responses(subject.type, subject.id)}:i:${id}`;
  return {
    put: (subject, response, ttlMs) =>
      guarded(async () => {
        const px = Math.max(1, Math.round(ttlMs));
        const tx = client.multi().set(recordKey(subject, response.id), response.record, 'PX', px);
        for (const item of response.itemIds) tx.set(itemKey(subject, item), response.id, 'PX', px);
        const replies = await tx.exec();
        const failed = replies?.find(([err]) => err !== null)?.[0];
        if (failed) throw failed;
      }),
    get: (subject, id) => guarded(async () => (await client.get(recordKey(subject, id))) ?? undefined),
    getByItem: (subject, itemId) =>
      guarded(async () => {
        const id = await client.get(itemKey(subject, itemId));
        if (id === null) return undefined;
        return (await client.get(recordKey(subject, id))) ?? undefined;
      }),
    delete: (subject, id) => guarded(async () => (await client.del(recordKey(subject, id))) > 0),
  };
}
