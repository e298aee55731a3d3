// Stored responses of a client family that keeps state (Responses `previous_response_id` and
// `item_reference`, docs/translation.md "Stored responses"): one record per response, readable only by
// the subject that made it. File mode keeps them in memory (the primary holds them for every worker:
// store/memory-response-store.ts), shared-store mode in Redis under the subject's hash tag
// (store/redis-response-store.ts). The record is opaque text to the store; the family reads and writes it.

import type { SubjectRef } from './rate-limit-types.ts';

export interface StoredResponse {
  /** The response id clients name it by. */
  readonly id: string;
  /** Ids of the items in it that `item_reference` may name (resolved to this record). */
  readonly itemIds: readonly string[];
  /** The record (JSON text), at most `responses.store_max_bytes` bytes. */
  readonly record: string;
}

export interface ResponseStore {
  /** Keeps the record for `ttlMs`; a record of the same id is replaced. */
  put(subject: SubjectRef, response: StoredResponse, ttlMs: number): Promise<void>;
  /** The subject's record of that response id; undefined when unknown, expired or another subject's. */
  get(subject: SubjectRef, id: string): Promise<string | undefined>;
  /** The subject's record that holds the item. */
  getByItem(subject: SubjectRef, itemId: string): Promise<string | undefined>;
  /** True when the subject had that response. */
  delete(subject: SubjectRef, id: string): Promise<boolean>;
}
