// The one signal rule of every program that runs until stopped (`router`, its workers, `router-billing`,
// `npm start`), documented in docs/operations.md "Reload and drain":
// - SIGTERM stops: the program drains and closes, then exits 0 (1 when closing failed).
// - SIGINT stops the same way, except in a child `router` supervises (a worker, the sidecar): Ctrl-C
//   reaches the whole process group, and the supervisor stops its children itself once its own
//   requests are done.
// - SIGHUP reloads a program that can (`router`); one that cannot stops as on SIGTERM (the terminal that
//   started it is gone). A supervised child leaves it to its supervisor, which passes a reload on.
// - A second stop signal exits 1 at once, unless it comes within a second of the first: that is the one
//   Ctrl-C delivered twice, by the terminal and by a launcher such as npm passing it on.

import { EXIT } from './exit-codes.ts';

const SAME_SIGNAL_MS = 1000;

type StopSignal = 'SIGTERM' | 'SIGINT' | 'SIGHUP';

export interface SignalOptions {
  /** Drains and closes; the process exits 0 once this resolves, 1 when it rejects. */
  readonly stop: (why: string) => Promise<void>;
  /** The program's reload; without one, SIGHUP stops it. */
  readonly reload?: () => void;
  /** A child `router` started and stops itself (a worker, the sidecar). */
  readonly supervised?: boolean;
  /** What a signal did besides stopping or reloading, for the program's log. */
  readonly note?: (what: 'ignored' | 'repeated' | 'forced', signal: StopSignal) => void;
  /** Tests: where signals arrive, the clock, and how the process ends. */
  readonly target?: Pick<NodeJS.Process, 'on'>;
  readonly now?: () => number;
  readonly exit?: (code: number) => void;
}

/**
 * Installs the rule. Returns the same stop for a reason other than a signal (a worker told by its
 * primary, a sidecar whose gateway is gone): it runs once, however many ask, and then exits.
 */
export function handleSignals(opts: SignalOptions): (why: string) => Promise<void> {
  const target = opts.target ?? process;
  const now = opts.now ?? Date.now;
  const exit = opts.exit ?? ((code: number) => process.exit(code));
  let stopping: Promise<void> | undefined;
  let startedAt = 0;
  const stop = (why: string): Promise<void> => {
    if (stopping === undefined) {
      startedAt = now();
      stopping = opts.stop(why).then(
        () => exit(EXIT.ok),
        () => exit(EXIT.failed),
      );
    }
    return stopping;
  };
  const stopSignal = (signal: StopSignal): void => {
    if (stopping === undefined) {
      void stop(signal);
    } else if (now() - startedAt < SAME_SIGNAL_MS) {
      opts.note?.('repeated', signal);
    } else {
      opts.note?.('forced', signal);
      exit(EXIT.failed);
    }
  };
  const supervisorsSignal = (signal: StopSignal): boolean => {
    if (opts.supervised === true) opts.note?.('ignored', signal);
    return opts.supervised === true;
  };
  target.on('SIGTERM', () => stopSignal('SIGTERM'));
  target.on('SIGINT', () => {
    if (!supervisorsSignal('SIGINT')) stopSignal('SIGINT');
  });
  target.on('SIGHUP', () => {
    if (supervisorsSignal('SIGHUP')) return;
    if (opts.reload === undefined) stopSignal('SIGHUP');
    else if (stopping === undefined) opts.reload();
  });
  return stop;
}
