// The recent outcomes of a delivery loop's sends: the evidence that tells an entry refused alone from a
// service failing everything (billing/delivery/delivery-policy.ts countsAsAttempt). A ring of the last
// KEPT outcomes in parallel arrays, so a send costs no allocation here.

/** ok: accepted; blame: a failure that blames the service; neutral: says nothing about it. */
export type OutcomeKind = 'ok' | 'blame' | 'neutral';

const KEPT = 256;

interface Waiter<K> {
  readonly key: K;
  readonly resolve: (accepted: boolean | undefined) => void;
}

export class OutcomeLog<K> {
  /** The sequence number of the latest outcome (0: none yet). */
  seq = 0;
  readonly #keys: (K | undefined)[] = new Array(KEPT);
  readonly #kinds: OutcomeKind[] = new Array(KEPT);
  #waiters: Waiter<K>[] = [];

  add(key: K, kind: OutcomeKind): void {
    const i = ++this.seq % KEPT;
    this.#keys[i] = key;
    this.#kinds[i] = kind;
    if (this.#waiters.length === 0) return;
    const still: Waiter<K>[] = [];
    for (const w of this.#waiters) {
      if (w.key === key) still.push(w);
      else w.resolve(verdictOf(kind));
    }
    this.#waiters = still;
  }

  /**
   * From the outcomes of other keys in (from, to]: accepted if any was, refused if any blamed the
   * service.
   */
  between(from: number, to: number, key: K): boolean | undefined {
    let blamed = false;
    for (let seq = Math.max(from + 1, this.seq - KEPT + 1); seq <= to; seq++) {
      const i = seq % KEPT;
      if (this.#keys[i] === key) continue;
      if (this.#kinds[i] === 'ok') return true;
      if (this.#kinds[i] === 'blame') blamed = true;
    }
    return blamed ? false : undefined;
  }

  /** The next outcome of another key, as between() judges it. */
  next(key: K): Promise<boolean | undefined> {
    return new Promise((resolve) => this.#waiters.push({ key, resolve }));
  }

  /** The latest outcome of another key that says something, however old. */
  latest(key: K): boolean | undefined {
    for (let seq = this.seq; seq > Math.max(0, this.seq - KEPT); seq--) {
      const i = seq % KEPT;
      if (this.#keys[i] !== key && this.#kinds[i] !== 'neutral') return this.#kinds[i] === 'ok';
    }
    return undefined;
  }

  /** Ends every wait with no answer (stop). */
  cancel(): void {
    for (const w of this.#waiters) w.resolve(undefined);
    this.#waiters = [];
  }
}

function verdictOf(kind: OutcomeKind): boolean | undefined {
  return kind === 'neutral' ? undefined : kind === 'ok';
}
