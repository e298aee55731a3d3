// Items collected during one event-loop turn, flushed together in that turn's check phase
// (setImmediate). The usage-event queues use it to put all the events completed in one turn on record
// with one write, and the gateway sends a reply's last byte once `settled()` has resolved: many
// replies complete per turn under load, and one write per event cost the gateway noticeable CPU
// (docs/architecture.md). At concurrency 1 the wait is the rest of the current turn. Every batch and
// `endOfTurn` (the same wait without items: with billing off, replies end there) share one setImmediate.

export interface TurnBatch<T> {
  add(item: T): void;
  /** The promise that this turn's flush has run; undefined when nothing is waiting. */
  settled(): Promise<void> | undefined;
}

let turnEnd: Promise<void> | undefined;

/** The promise that this event-loop turn's check phase has come: one setImmediate per turn, shared. */
export function endOfTurn(): Promise<void> {
  if (turnEnd === undefined) {
    const { promise, resolve } = Promise.withResolvers<void>();
    turnEnd = promise;
    setImmediate(() => {
      turnEnd = undefined;
      resolve();
    });
  }
  return turnEnd;
}

/** `flush` must not throw: it reports failures through the items it was given. */
export function createTurnBatch<T>(flush: (items: T[]) => void): TurnBatch<T> {
  let items: T[] = [];
  let turn: Promise<void> | undefined;

  function run(): void {
    const batch = items;
    items = [];
    turn = undefined;
    flush(batch);
  }

  return {
    add(item: T): void {
      items.push(item);
      turn ??= endOfTurn().then(run);
    },
    settled: () => turn,
  };
}
