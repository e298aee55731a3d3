// The file-mode adapter of the store interface (one gateway and its sidecar on one host). The sidecar is
// the only writer: subject state lives in `<dir>/subjects.json`, replaced atomically (temp + fsync +
// rename + fsync dir) so a reader never sees a torn file; processed webhook ids are appended to
// `<dir>/webhook-ids.jsonl` (fsync'ed before the claim counts) so deduplication survives a restart. The
// gateway opens the same directory as a reader: it answers view() from memory (no I/O on the hot path)
// and reloads the subjects file when the sidecar tells it to (common/internal-notify.ts), with fs.watch
// as a fallback. The balance cache and the refresh lock are per process: in file mode there is one
// gateway, so per-process single flight is already global.

import { type FSWatcher, watch } from 'node:fs';
import { mkdir, open, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ifExists, writeFileAtomic } from '../common/durable-fs.ts';
import type {
  BalanceDecision,
  RequestView,
  RequestViewQuery,
  StateStore,
  SubjectRef,
  SubjectState,
} from '../common/store-types.ts';

export const SUBJECTS_FILE = 'subjects.json';
export const WEBHOOK_IDS_FILE = 'webhook-ids.jsonl';

/** Compact the webhook id log once it holds this many more lines than live ids. */
const COMPACT_SLACK = 10_000;

export interface FileStoreOptions {
  readonly dir: string;
  /**
   * 'writer' (the sidecar): persists subjects and webhook ids. 'reader' (the gateway): never writes;
   * setSubject only updates its memory, and it follows the writer's file.
   */
  readonly role: 'writer' | 'reader';
  /** Reader: reload on fs.watch events as a fallback to the explicit notice (default true). */
  readonly watch?: boolean;
  /** Clock in ms (tests). */
  readonly now?: () => number;
  /** Called when a background reload (fs.watch) fails; the last good state stays in memory. */
  readonly onError?: (err: unknown) => void;
  /** Called with the subjects whose state changed after each reload (tests, logs). */
  readonly onReload?: (changed: readonly SubjectRef[]) => void;
}

export interface FileStateStore extends StateStore {
  readonly kind: 'file';
  readonly dir: string;
  /**
   * Re-read subjects.json; subjects whose state changed also lose their cached balance. Concurrent
   * calls share one read, and a call made while a read is running gets a fresh one after it.
   */
  reload(): Promise<readonly SubjectRef[]>;
}

interface SubjectsFile {
  version: 1;
  subjects: { type: string; id: string; state: SubjectState }[];
}

interface CachedBalance {
  readonly decision: BalanceDecision;
  readonly expiresAt: number;
}

function subjectKey(s: SubjectRef): string {
  // JSON keeps type and id apart whatever characters they hold.
  return JSON.stringify([s.type, s.id]);
}

function balanceKey(s: SubjectRef, currency: string): string {
  return JSON.stringify([s.type, s.id, currency]);
}

function isSubjectState(v: unknown): v is SubjectState {
  const s = v as Partial<SubjectState> | null;
  return (
    typeof s === 'object' &&
    s !== null &&
    typeof s.blocked === 'boolean' &&
    typeof s.lastEvent === 'string' &&
    typeof s.lastEventId === 'string' &&
    typeof s.updatedAt === 'number'
  );
}

async function readSubjects(dir: string): Promise<Map<string, { ref: SubjectRef; state: SubjectState }>> {
  const text = await ifExists(readFile(join(dir, SUBJECTS_FILE), 'utf8'));
  if (text === undefined) return new Map();
  const parsed = JSON.parse(text) as Partial<SubjectsFile> | null;
  if (parsed === null || typeof parsed !== 'object' || !Array.isArray(parsed.subjects)) {
    throw new Error(`${join(dir, SUBJECTS_FILE)} is malformed`);
  }
  const out = new Map<string, { ref: SubjectRef; state: SubjectState }>();
  for (const entry of parsed.subjects) {
    if (typeof entry?.type !== 'string' || typeof entry.id !== 'string' || !isSubjectState(entry.state))
      continue;
    const ref = { type: entry.type, id: entry.id };
    out.set(subjectKey(ref), { ref, state: entry.state });
  }
  return out;
}

function sameState(a: SubjectState | undefined, b: SubjectState | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  return (
    a.blocked === b.blocked &&
    a.lastEventId === b.lastEventId &&
    a.updatedAt === b.updatedAt &&
    a.lastEvent === b.lastEvent
  );
}

/** Webhook id log: `{"id","exp"}` claims and `{"id","released":true}` releases, one JSON per line. */
async function readWebhookIds(
  dir: string,
  now: number,
): Promise<{ live: Map<string, number>; lines: number }> {
  const live = new Map<string, number>();
  const text = await ifExists(readFile(join(dir, WEBHOOK_IDS_FILE), 'utf8'));
  if (text === undefined) return { live, lines: 0 };
  let lines = 0;
  for (const line of text.split('\n')) {
    if (line === '') continue;
    lines++;
    let rec: { id?: unknown; exp?: unknown; released?: unknown };
    try {
      rec = JSON.parse(line) as typeof rec;
    } catch {
      // A torn last line (crash mid-append) was never acknowledged: its claim did not count.
      continue;
    }
    if (typeof rec.id !== 'string') continue;
    if (rec.released === true) live.delete(rec.id);
    else if (typeof rec.exp === 'number' && rec.exp > now) live.set(rec.id, rec.exp);
  }
  return { live, lines };
}

export async function openFileStore(opts: FileStoreOptions): Promise<FileStateStore> {
  const { dir, role } = opts;
  const now = opts.now ?? Date.now;
  await mkdir(dir, { recursive: true });

  let subjects = await readSubjects(dir);
  const balances = new Map<string, CachedBalance>();
  const refreshLocks = new Map<string, number>();
  let webhookIds = new Map<string, number>();
  let idLines = 0;
  let idLog: Awaited<ReturnType<typeof open>> | undefined;
  // Writes (subjects file, id log) run one at a time, in call order.
  let writeChain: Promise<unknown> = Promise.resolve();
  let closed = false;

  function serialize<T>(fn: () => Promise<T>): Promise<T> {
    const next = writeChain.then(fn, fn);
    writeChain = next.catch(() => undefined);
    return next;
  }

  if (role === 'writer') {
    const loaded = await readWebhookIds(dir, now());
    webhookIds = loaded.live;
    idLines = loaded.lines;
    if (idLines > webhookIds.size) await compactIds();
    idLog = await open(join(dir, WEBHOOK_IDS_FILE), 'a');
  }

  async function compactIds(): Promise<void> {
    const t = now();
    for (const [id, exp] of webhookIds) if (exp <= t) webhookIds.delete(id);
    let text = '';
    for (const [id, exp] of webhookIds) text += `${JSON.stringify({ id, exp })}\n`;
    await writeFileAtomic(dir, WEBHOOK_IDS_FILE, text);
    idLines = webhookIds.size;
  }

  async function appendId(record: object): Promise<void> {
    if (idLog === undefined) throw new Error('the file store was opened as a reader');
    await idLog.write(`${JSON.stringify(record)}\n`);
    await idLog.datasync();
    idLines++;
    if (idLines > webhookIds.size + COMPACT_SLACK) {
      await idLog.close();
      idLog = undefined;
      await compactIds();
      idLog = await open(join(dir, WEBHOOK_IDS_FILE), 'a');
    }
  }

  async function persistSubjects(): Promise<void> {
    const body: SubjectsFile = {
      version: 1,
      subjects: [...subjects.values()].map(({ ref, state }) => ({ type: ref.type, id: ref.id, state })),
    };
    await writeFileAtomic(dir, SUBJECTS_FILE, `${JSON.stringify(body)}\n`);
  }

  function dropBalances(ref: SubjectRef): void {
    const prefix = JSON.stringify([ref.type, ref.id]).slice(0, -1);
    for (const key of balances.keys()) if (key.startsWith(`${prefix},`)) balances.delete(key);
    for (const key of refreshLocks.keys()) if (key.startsWith(`${prefix},`)) refreshLocks.delete(key);
  }

  let reloading: Promise<readonly SubjectRef[]> | undefined;
  let reloadAgain = false;
  async function doReload(): Promise<readonly SubjectRef[]> {
    const next = await readSubjects(dir);
    const changed: SubjectRef[] = [];
    for (const [key, entry] of next) {
      if (!sameState(subjects.get(key)?.state, entry.state)) changed.push(entry.ref);
    }
    for (const [key, entry] of subjects) if (!next.has(key)) changed.push(entry.ref);
    subjects = next;
    for (const ref of changed) dropBalances(ref);
    if (changed.length > 0) opts.onReload?.(changed);
    return changed;
  }
  function reload(): Promise<readonly SubjectRef[]> {
    if (reloading !== undefined) {
      // The file may have changed after the running read opened it: read once more after it.
      reloadAgain = true;
      return reloading.then(() => reload());
    }
    reloadAgain = false;
    reloading = doReload().finally(() => {
      reloading = undefined;
    });
    return reloading;
  }

  let watcher: FSWatcher | undefined;
  if (role === 'reader' && (opts.watch ?? true)) {
    watcher = watch(dir, { persistent: false }, (_event, filename) => {
      if (filename !== SUBJECTS_FILE || closed) return;
      if (reloading !== undefined && reloadAgain) return;
      reload().catch((err: unknown) => opts.onError?.(err));
    });
    watcher.on('error', (err) => opts.onError?.(err));
  }

  const store: FileStateStore = {
    kind: 'file',
    dir,
    reload,
    async view(query: RequestViewQuery): Promise<RequestView> {
      if (query.subject === undefined) return {};
      const entry = subjects.get(subjectKey(query.subject));
      if (query.currency === undefined) return { subject: entry?.state ?? null };
      const cached = balances.get(balanceKey(query.subject, query.currency));
      const fresh = cached !== undefined && cached.expiresAt > now() ? cached.decision : null;
      return { subject: entry?.state ?? null, balance: fresh };
    },
    async getSubject(subject) {
      return subjects.get(subjectKey(subject))?.state;
    },
    setSubject(subject, state) {
      const ref = { type: subject.type, id: subject.id };
      if (role === 'reader') {
        subjects.set(subjectKey(ref), { ref, state });
        dropBalances(ref);
        return Promise.resolve();
      }
      return serialize(async () => {
        const previous = subjects;
        const next = new Map(subjects);
        next.set(subjectKey(ref), { ref, state });
        subjects = next;
        try {
          await persistSubjects();
        } catch (err) {
          // Not on disk means not applied: memory must not claim more than the file holds.
          subjects = previous;
          throw err;
        }
        dropBalances(ref);
      });
    },
    async claimWebhook(id, ttlMs) {
      const t = now();
      const exp = webhookIds.get(id);
      if (exp !== undefined && exp > t) return false;
      // Claimed in memory before the write, so a concurrent duplicate in this process loses at once.
      webhookIds.set(id, t + ttlMs);
      try {
        await serialize(() => appendId({ id, exp: t + ttlMs }));
      } catch (err) {
        webhookIds.delete(id);
        throw err;
      }
      return true;
    },
    async releaseWebhook(id) {
      if (!webhookIds.delete(id)) return;
      await serialize(() => appendId({ id, released: true }));
    },
    async putBalance(subject, decision, ttlMs) {
      const key = balanceKey(subject, decision.currency);
      balances.set(key, { decision, expiresAt: now() + ttlMs });
      // The refresh is done: the next caller after expiry may refresh at once.
      refreshLocks.delete(key);
    },
    async invalidateBalance(subject) {
      dropBalances(subject);
    },
    async tryRefreshLock(subject, currency, ttlMs) {
      const key = balanceKey(subject, currency);
      const t = now();
      const held = refreshLocks.get(key);
      if (held !== undefined && held > t) return false;
      refreshLocks.set(key, t + ttlMs);
      return true;
    },
    async health() {
      return { connected: !closed };
    },
    async close() {
      if (closed) return;
      closed = true;
      watcher?.close();
      await writeChain;
      await reloading?.catch(() => undefined);
      await idLog?.close();
      idLog = undefined;
    },
  };
  return store;
}
