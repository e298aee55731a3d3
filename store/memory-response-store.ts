// Stored responses in one process, for file mode: with `workers: n` the primary holds them and the
// workers ask it over IPC (proxy/workers), so a conversation can continue on any worker of the host.
// Not shared between hosts and not kept across a restart of the process that holds them: an operator
// who needs either runs the shared store (store/redis-response-store.ts).
//
// Bounded twice: each record expires after its ttl, and all records together hold at most `maxBytes`
// (the oldest go first), so a busy host cannot grow the primary without limit within one ttl.

import type { ResponseStore, StoredResponse } from '../common/response-store-types.ts';
import type { SubjectRef } from '../common/store-types.ts';

/** What all records of one process may hold together, unless the caller sets another bound. */
export const MEMORY_RESPONSES_MAX_BYTES = 256 * 1024 * 1024;

interface Entry {
  readonly record: string;
  readonly itemKeys: readonly string[];
  readonly expiresAt: number;
  readonly bytes: number;
}

function subjectKey(subject: SubjectRef): string {
  return `${subject.type}\u0000${subject.id}\u0000`;
}

export interface MemoryResponsesOptions {
  readonly maxBytes?: number;
  /** Clock in ms (tests). */
  readonly now?: () => number;
}

export class MemoryResponses implements ResponseStore {
  /** Insertion order is age order: a replaced record is deleted first, so it moves to the end. */
  readonly #responses = new Map<string, Entry>();
  readonly #items = new Map<string, string>();
  readonly #maxBytes: number;
  readonly #now: () => number;
  #bytes = 0;

  constructor(opts: MemoryResponsesOptions = {}) {
    this.#maxBytes = opts.maxBytes ?? MEMORY_RESPONSES_MAX_BYTES;
    this.#now = opts.now ?? Date.now;
  }

  /** Records held and their bytes (tests, metrics). */
  get size(): { readonly responses: number; readonly bytes: number } {
    return { responses: this.#responses.size, bytes: this.#bytes };
  }

  async put(subject: SubjectRef, response: StoredResponse, ttlMs: number): Promise<void> {
    this.putNow(subject, response, ttlMs);
  }

  putNow(subject: SubjectRef, response: StoredResponse, ttlMs: number): void {
    const s = subjectKey(subject);
    const key = s + response.id;
    this.#drop(key);
    const bytes = Buffer.byteLength(response.record);
    if (bytes > this.#maxBytes) return;
    const itemKeys = response.itemIds.map((item) => s + item);
    const now = this.#now();
    this.#evict(now, bytes);
    this.#responses.set(key, { record: response.record, itemKeys, expiresAt: now + ttlMs, bytes });
    this.#bytes += bytes;
    for (const item of itemKeys) this.#items.set(item, key);
  }

  async get(subject: SubjectRef, id: string): Promise<string | undefined> {
    return this.getNow(subject, id);
  }

  getNow(subject: SubjectRef, id: string): string | undefined {
    return this.#live(subjectKey(subject) + id)?.record;
  }

  async getByItem(subject: SubjectRef, itemId: string): Promise<string | undefined> {
    return this.getByItemNow(subject, itemId);
  }

  getByItemNow(subject: SubjectRef, itemId: string): string | undefined {
    const key = this.#items.get(subjectKey(subject) + itemId);
    return key === undefined ? undefined : this.#live(key)?.record;
  }

  async delete(subject: SubjectRef, id: string): Promise<boolean> {
    return this.deleteNow(subject, id);
  }

  deleteNow(subject: SubjectRef, id: string): boolean {
    const key = subjectKey(subject) + id;
    const live = this.#live(key) !== undefined;
    this.#drop(key);
    return live;
  }

  #live(key: string): Entry | undefined {
    const entry = this.#responses.get(key);
    if (entry === undefined) return undefined;
    if (entry.expiresAt > this.#now()) return entry;
    this.#drop(key);
    return undefined;
  }

  #drop(key: string): void {
    const entry = this.#responses.get(key);
    if (entry === undefined) return;
    this.#responses.delete(key);
    this.#bytes -= entry.bytes;
    for (const item of entry.itemKeys) if (this.#items.get(item) === key) this.#items.delete(item);
  }

  /** Expired records, then the oldest, until `incoming` more bytes fit. */
  #evict(now: number, incoming: number): void {
    for (const [key, entry] of this.#responses) {
      if (entry.expiresAt <= now || this.#bytes + incoming > this.#maxBytes) this.#drop(key);
      else if (this.#bytes + incoming <= this.#maxBytes) break;
    }
  }
}
