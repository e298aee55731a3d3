// Dead letters marked for replay (sidecar/dead-letter-file.ts) as a queue of the delivery loop
// (billing/delivery/delivery-queue.ts): delivered one at a time beside the outbox, with the same policy;
// delivered, their record goes; max_attempts more counted failures leave them in the dead letter again
// (the dead-letter file counts them in the record, so a restart keeps the count).

import type { Logger } from 'pino';
import type { IngestFailure } from '../billing/delivery/delivery-policy.ts';
import type { DeliveryQueue, FailureReport, Settlement } from '../billing/delivery/delivery-queue.ts';
import { errorText } from '../common/errors.ts';
import type { DeadLetterError, DeadLetterFile, DeadLetterRecord } from './dead-letter-file.ts';
import { deadLetterId } from './dead-letter-file.ts';

export class ReplayQueue implements DeliveryQueue<DeadLetterRecord> {
  readonly #file: DeadLetterFile;
  readonly #maxAttempts: number;
  readonly #logger: Logger | undefined;
  readonly #retryInMs: number;
  /** Ids read and not yet settled: the file still lists them as queued. */
  readonly #handedOut = new Set<string>();

  constructor(file: DeadLetterFile, opts: { maxAttempts: number; retryInMs: number; logger?: Logger }) {
    this.#file = file;
    this.#maxAttempts = opts.maxAttempts;
    this.#retryInMs = opts.retryInMs;
    this.#logger = opts.logger;
  }

  async read(max: number): Promise<readonly DeadLetterRecord[]> {
    const out: DeadLetterRecord[] = [];
    for (const record of await this.#file.queued()) {
      if (out.length >= max) break;
      const id = deadLetterId(record);
      if (this.#handedOut.has(id)) continue;
      this.#handedOut.add(id);
      out.push(record);
    }
    return out;
  }

  attempts(record: DeadLetterRecord): number {
    return record.replay?.attempts ?? 0;
  }

  async recordAttempt(record: DeadLetterRecord, attempts: number, result: IngestFailure): Promise<number> {
    try {
      await this.#file.failed(deadLetterId(record), true, this.#maxAttempts, errorOf(result));
      return attempts;
    } catch (err) {
      this.#logger?.error(
        { err: errorText(err), id: deadLetterId(record) },
        'could not record a replay outcome',
      );
      return attempts - 1;
    }
  }

  failed(record: DeadLetterRecord, report: FailureReport): void {
    if (report.retryInMs === undefined) return;
    this.#logger?.warn(
      {
        request_id: record.event.external_event_id,
        id: deadLetterId(record),
        code: report.result.code,
        counted: report.counted,
      },
      'replay of a billing event failed',
    );
  }

  /** The last counted failure leaves the record in the dead letter, no longer queued, with the new count. */
  async deadLetter(record: DeadLetterRecord, _attempts: number, result: IngestFailure): Promise<boolean> {
    await this.#file.failed(deadLetterId(record), true, this.#maxAttempts, errorOf(result));
    this.#logger?.error(
      { request_id: record.event.external_event_id, id: deadLetterId(record), code: result.code },
      'replayed billing event dead-lettered again',
    );
    return true;
  }

  settle(record: DeadLetterRecord, how: Settlement): void {
    const id = deadLetterId(record);
    this.#handedOut.delete(id);
    if (how !== 'delivered') return;
    // Queued on the file's chain now, before the next read() looks at the queued records.
    this.#file.delivered(id).then(
      () =>
        this.#logger?.info(
          { request_id: record.event.external_event_id, id },
          'dead-lettered billing event replayed',
        ),
      (err: unknown) => this.#logger?.error({ err: errorText(err), id }, 'could not record a replay outcome'),
    );
  }

  loopError(err: unknown): { code: string; retryInMs: number } {
    this.#logger?.error({ err: errorText(err) }, 'could not read the dead letter for replay');
    return { code: 'outbox_error', retryInMs: this.#retryInMs };
  }

  async close(): Promise<void> {}
}

function errorOf(r: IngestFailure): DeadLetterError {
  return { kind: r.kind, status: r.status, code: r.code, message: r.message };
}
