// The two signals of the delivery loop (billing/delivery/delivery-loop.ts): the wake-up that ends its
// wait for news, and the waiters for the queue to drain.

/** A wake-up that is never lost: one that comes while the loop is busy ends its next wait at once. */
export class Wake {
  #woken = false;
  #resolve: (() => void) | undefined;

  wake(): void {
    this.#woken = true;
    const r = this.#resolve;
    this.#resolve = undefined;
    r?.();
  }

  /** Until woken, or `timeoutMs` (undefined: no bound). */
  wait(timeoutMs: number | undefined): Promise<void> {
    if (this.#woken) {
      this.#woken = false;
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => {
      const timer = timeoutMs === undefined ? undefined : setTimeout(() => this.wake(), timeoutMs);
      this.#resolve = () => {
        if (timer !== undefined) clearTimeout(timer);
        this.#woken = false;
        resolve();
      };
    });
  }
}

interface Waiter {
  readonly gen: number;
  readonly resolve: () => void;
  readonly reject: (err: Error) => void;
}

/** Waiters for a drain: each is resolved by the first idle moment of a pass that began after it came. */
export class DrainWaiters {
  #generation = 0;
  #waiters: Waiter[] = [];

  /** The generation a pass beginning now covers. */
  get generation(): number {
    return this.#generation;
  }

  add(): Promise<void> {
    const gen = ++this.#generation;
    return new Promise<void>((resolve, reject) => this.#waiters.push({ gen, resolve, reject }));
  }

  /** A pass that began at generation `gen` found the queue idle. */
  idle(gen: number): void {
    if (this.#waiters.length === 0) return;
    const still: Waiter[] = [];
    for (const w of this.#waiters) {
      if (w.gen <= gen) w.resolve();
      else still.push(w);
    }
    this.#waiters = still;
  }

  rejectAll(err: Error): void {
    for (const w of this.#waiters) w.reject(err);
    this.#waiters = [];
  }
}
