// File mode's dead letter, <outbox_dir>/dead-letter.jsonl: one record per event that exhausted its
// delivery attempts, and the replay queue (docs/operations.md "Dead letters").
//
// Replay marks a record `replay` instead of copying the event anywhere: the record is the only copy of
// the event, so queueing it twice is impossible, and every change (mark, delivered -> removed, failed
// again -> unmarked) is one atomic replacement of the file (temp + fsync + rename). Only the holder of
// the outbox's reader.lock changes the file: the running sidecar (its delivery worker appends dead
// letters, marks replays asked for over its listener, delivers them), or router-admin while no sidecar
// runs. Readers (list, show, /readyz) may read it at any time: appends are whole fsync'ed lines and
// replacements are renames; a torn last line is skipped.

import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { UsageEvent } from '../billing/event/usage-event.ts';
import { DEAD_LETTER_FILE, isUsageEvent } from '../billing/outbox/layout.ts';
import { appendDurable, ifExists, writeFileAtomic } from '../common/durable-fs.ts';

export interface DeadLetterError {
  kind: string;
  status?: number;
  code: string;
  message: string;
}

export interface DeadLetterRecord {
  dead_lettered_at: string;
  /** Where the event was in the outbox; `<segment>:<offset>` is the record's id. */
  segment: number;
  offset: number;
  attempts: number;
  last_error: DeadLetterError | undefined;
  event: UsageEvent;
  /** Queued for replay: delivered again by the sidecar, then removed (or unmarked after max_attempts). */
  replay?: { requested_at: string; attempts: number };
}

export function deadLetterId(r: Pick<DeadLetterRecord, 'segment' | 'offset'>): string {
  return `${r.segment}:${r.offset}`;
}

/**
 * The records, oldest first, one per id: a crash between a dead-letter append and the checkpoint can
 * append a record twice; the later one wins.
 */
export async function readDeadLetters(dir: string): Promise<DeadLetterRecord[]> {
  const text = await ifExists(readFile(join(dir, DEAD_LETTER_FILE), 'utf8'));
  if (text === undefined) return [];
  const byId = new Map<string, DeadLetterRecord>();
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      continue; // a torn last line of an append in progress
    }
    const r = value as DeadLetterRecord;
    if (typeof r !== 'object' || r === null || !isUsageEvent(r.event)) continue;
    const id = deadLetterId(r);
    byId.delete(id);
    byId.set(id, r);
  }
  return [...byId.values()];
}

export type ReplayOutcome = 'queued' | 'already_queued' | 'not_found';

export interface ReplayReport {
  /** Per requested id (or every record with `all`), in request order. */
  results: { id: string; outcome: ReplayOutcome; request_id?: string }[];
  dry_run: boolean;
}

/** The dead-letter file of an outbox directory, for the process that holds its reader.lock. */
export class DeadLetterFile {
  readonly #dir: string;
  readonly #onFsync: (() => void) | undefined;
  // Every change runs alone: a replacement must not race an append it would erase.
  #chain: Promise<unknown> = Promise.resolve();

  constructor(dir: string, onFsync?: () => void) {
    this.#dir = dir;
    this.#onFsync = onFsync;
  }

  #serial<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.#chain.then(fn);
    this.#chain = next.catch(() => undefined);
    return next;
  }

  append(record: DeadLetterRecord): Promise<void> {
    return this.#serial(() =>
      appendDurable(this.#dir, DEAD_LETTER_FILE, `${JSON.stringify(record)}\n`, this.#onFsync),
    );
  }

  /** Marks records for replay; `ids` undefined means every record. A dry run changes nothing. */
  markForReplay(ids: readonly string[] | undefined, dryRun: boolean): Promise<ReplayReport> {
    return this.#serial(async () => {
      const records = await readDeadLetters(this.#dir);
      const byId = new Map(records.map((r) => [deadLetterId(r), r]));
      const wanted = ids ?? [...byId.keys()];
      const now = new Date().toISOString();
      const results: ReplayReport['results'] = [];
      let changed = false;
      for (const id of new Set(wanted)) {
        const r = byId.get(id);
        if (r === undefined) {
          results.push({ id, outcome: 'not_found' });
          continue;
        }
        const request_id = r.event.external_event_id;
        if (r.replay !== undefined) {
          results.push({ id, outcome: 'already_queued', request_id });
          continue;
        }
        if (!dryRun) {
          r.replay = { requested_at: now, attempts: 0 };
          changed = true;
        }
        results.push({ id, outcome: 'queued', request_id });
      }
      if (changed) await this.#rewrite(records);
      return { results, dry_run: dryRun };
    });
  }

  /** Records queued for replay, oldest first. */
  async queued(): Promise<DeadLetterRecord[]> {
    await this.#chain;
    return (await readDeadLetters(this.#dir)).filter((r) => r.replay !== undefined);
  }

  /** A replayed event was delivered: its record goes. */
  delivered(id: string): Promise<void> {
    return this.#serial(async () => {
      const records = await readDeadLetters(this.#dir);
      const rest = records.filter((r) => deadLetterId(r) !== id);
      if (rest.length !== records.length) await this.#rewrite(rest);
    });
  }

  /**
   * A replayed event failed: its counted attempts are recorded; at `maxAttempts` it stays in the dead
   * letter, no longer queued, with the new count and error.
   */
  failed(id: string, counted: boolean, maxAttempts: number, error: DeadLetterError): Promise<boolean> {
    return this.#serial(async () => {
      const records = await readDeadLetters(this.#dir);
      const r = records.find((x) => deadLetterId(x) === id);
      if (r?.replay === undefined) return false;
      if (!counted) return false;
      r.replay.attempts++;
      r.last_error = error;
      const exhausted = r.replay.attempts >= maxAttempts;
      if (exhausted) {
        r.attempts += r.replay.attempts;
        r.dead_lettered_at = new Date().toISOString();
        delete r.replay;
      }
      await this.#rewrite(records);
      return exhausted;
    });
  }

  async #rewrite(records: readonly DeadLetterRecord[]): Promise<void> {
    const text = records.map((r) => `${JSON.stringify(r)}\n`).join('');
    await writeFileAtomic(this.#dir, DEAD_LETTER_FILE, text, this.#onFsync);
  }
}
