// Several gateway processes on one host share one billing.outbox_dir (docs/billing.md "Queue layout for
// several writers"): the first to start writes the directory itself, each other one the first slot
// `<outbox_dir>/slots/<k>` whose writer lock it can take. Every directory keeps the one-writer layout;
// the sidecar delivers them all (sidecar/slotted-delivery.ts).

import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { ifExists } from '../../common/durable-fs.ts';
import { OutboxLockedError } from './lock.ts';
import { type OutboxWriter, type OutboxWriterOptions, openOutboxWriter } from './writer.ts';

export const SLOTS_DIR = 'slots';
const MAX_SLOTS = 256;

/** A writer on the outbox directory, or on the first free slot when another process writes it. */
export async function openSlottedWriter(root: string, opts: OutboxWriterOptions = {}): Promise<OutboxWriter> {
  const candidates = [
    root,
    ...Array.from({ length: MAX_SLOTS }, (_, k) => join(root, SLOTS_DIR, String(k + 1))),
  ];
  for (const dir of candidates) {
    try {
      return await openOutboxWriter(dir, opts);
    } catch (err) {
      if (!(err instanceof OutboxLockedError)) throw err;
    }
  }
  throw new Error(`all ${MAX_SLOTS} outbox slots under ${root} are taken by live processes`);
}

/**
 * Dead-letter ids are positions within one directory (`<segment>:<offset>`); across slots they carry the
 * slot: `<k>/<segment>:<offset>`, the outbox directory's own keeping the plain form.
 */
export function slotDeadLetterId(root: string, dir: string, id: string): string {
  return dir === root ? id : `${dir.slice(join(root, SLOTS_DIR).length + 1)}/${id}`;
}

/** The directory and its own id for a slot-qualified dead-letter id. */
export function slotOfDeadLetterId(root: string, id: string): { dir: string; id: string } {
  const m = /^([1-9][0-9]*)\/(.+)$/.exec(id);
  return m === null ? { dir: root, id } : { dir: join(root, SLOTS_DIR, m[1]!), id: m[2]! };
}

/** The outbox directory and every slot directory under it, in slot order. */
export async function outboxDirs(root: string): Promise<string[]> {
  const names = (await ifExists(readdir(join(root, SLOTS_DIR)))) ?? [];
  const slots = names
    .filter((name) => /^[1-9][0-9]*$/.test(name))
    .map(Number)
    .sort((a, b) => a - b)
    .map((k) => join(root, SLOTS_DIR, String(k)));
  return [root, ...slots];
}
