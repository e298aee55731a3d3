// Items collected during one event-loop turn, flushed together in that turn's check phase
// (setImmediate). The usage-event queues use it to put all the events completed in one turn on record
// with one write, and the gateway sends a reply's last byte once `settled()` has resolved: many
// replies complete per turn under load, and one write per event cost the gateway noticeable CPU
// (docs/architecture.md). At concurrency 1 the wait is the rest of the current turn. `endOfTurn` is
// the same wait without items: with billing off, replies end there too.

export interface TurnBatch<T> {
  add(item: T): void;
  /** The promise that this turn's flush has run; undefined when nothing is waiting. */
  settled(): Promise<void> | undefined;
}

/** `flush` must not throw: it reports failures through the items it was given. */
export function createTurnBatch<T>(flush: (items: T[]) => void): TurnBatch<T> {
  let items: T[] = [];
  let turn: PromiseWithResolvers<void> | undefined;

  function run(): void {
    const batch = items;
    const done = turn;
    items = [];
    turn = undefined;
    try {
      flush(batch);
    } finally {
      done?.resolve();
    }
  }

  return {
    add(item: T): void {
      items.push(item);
      if (turn === undefined) {
        turn = Promise.withResolvers<void>();
        setImmediate(run);
      }
    },
    settled: () => turn?.promise,
  };
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
