// Delivered stream entries are acknowledged in batches: one MULTI (XACK, XDEL, HDEL with every id) at
// most ACK_DELAY_MS after the first of them, or at ACK_BATCH ids. With a ledger retention
// (billing.ledger_retention_h) the XDEL is left out: the acknowledged entries stay on the stream as the
// ledger of what was served until the consumer trims them by age (store/stream-ledger.ts). One MULTI per event cost the sidecar a
// socket write and redis-server a transaction per event, about a quarter of the sidecar's CPU in the
// bench. The entry's slot is free as soon as the ingest succeeded; flush() sends the last batch at stop.
// An entry whose acknowledgement is lost (crash, store down at stop) is sent again later and counted
// once by billing (Idempotency-Key), as any delivered-but-unacknowledged entry always was.

import { abortableSleep } from '../billing/delivery/delivery-policy.ts';
import { jitteredDelay } from '../common/backoff.ts';
import { errorText } from '../common/errors.ts';
import type { Redis, StreamShardKeys } from '../store/redis-client.ts';

const ACK_DELAY_MS = 5;
const ACK_BATCH = 256;

export class StreamAcks {
  readonly #cmd: Redis;
  readonly #keys: StreamShardKeys;
  readonly #group: string;
  readonly #random: () => number;
  /** Aborts at stop: a failing acknowledgement is then given up (the entries are sent again later). */
  readonly #stop: AbortSignal;
  readonly #recordError: (code: string, message: string) => void;
  /** Keep acknowledged entries on the stream (the ledger). */
  readonly #retain: boolean;
  #ids: string[] = [];
  #timer: NodeJS.Timeout | undefined;
  readonly #acking = new Set<Promise<void>>();

  constructor(
    cmd: Redis,
    keys: StreamShardKeys,
    group: string,
    random: () => number,
    stop: AbortSignal,
    recordError: (code: string, message: string) => void,
    retain = false,
  ) {
    this.#cmd = cmd;
    this.#keys = keys;
    this.#group = group;
    this.#random = random;
    this.#stop = stop;
    this.#recordError = recordError;
    this.#retain = retain;
  }

  add(id: string): void {
    this.#ids.push(id);
    if (this.#ids.length >= ACK_BATCH) this.#send();
    else this.#timer ??= setTimeout(() => this.#send(), ACK_DELAY_MS);
  }

  /** Sends what is batched and waits for every acknowledgement under way. */
  async flush(): Promise<void> {
    this.#send();
    await Promise.all([...this.#acking]);
  }

  #send(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#ids.length === 0) return;
    const ids = this.#ids;
    this.#ids = [];
    const done: Promise<void> = this.#acknowledge(ids).finally(() => this.#acking.delete(done));
    this.#acking.add(done);
  }

  async #acknowledge(ids: readonly string[]): Promise<void> {
    let failures = 0;
    while (true) {
      try {
        const tx = this.#cmd.multi().xack(this.#keys.stream, this.#group, ...ids);
        if (!this.#retain) tx.xdel(this.#keys.stream, ...ids);
        await tx.hdel(this.#keys.attempts, ...ids).exec();
        return;
      } catch (err) {
        // Delivered but not acknowledged: if we give up, the entries are sent again and deduplicated.
        failures++;
        this.#recordError('store_error', errorText(err));
        if (this.#stop.aborted) return;
        await abortableSleep(jitteredDelay(failures, 100, 2000, this.#random), this.#stop);
      }
    }
  }
}
