// Over 400 lines: one loop whose window, judgements, retries and stop share the entries it holds.
// The one delivery loop (docs/billing.md "Retry policy"), written once around a queue and a transport
// (billing/delivery/delivery-queue.ts), the way undici writes its retry handler once around whatever it
// dispatches. It keeps up to `window` sends in flight and judges every failure with
// billing/delivery/delivery-policy.ts: a counted failure (the entry is to blame) holds only its own
// entry and leads it to the dead letter at max_attempts; an uncounted one (the service looks away) stops
// new sends until the service answers, so an outage costs one probe per backoff, never a dead letter.
//
// Two orders:
// - in-order (the file outbox, the spool, replay): entries leave in read order, so a checkpoint can
//   follow them; only the head is judged and retried. While the head waits out a counted failure, the
//   entries behind it are sent, up to `readAhead` past it.
// - per-entry (the Redis stream): each entry is judged and retried on its own and leaves when done.
//
// Stop never waits out a delay: waits end at once, the sends in flight end (or are aborted), and the
// queue gets back what was neither delivered nor dead-lettered.

import { errorText } from '../../common/errors.ts';
import {
  abortableSleep,
  blamesService,
  classifyFailure,
  countsAsAttempt,
  type FailureClass,
  type IngestFailure,
  thrownFailure,
} from './delivery-policy.ts';
import type {
  DeliveryLoopOptions,
  DeliveryQueue,
  LoopCounters,
  RetryPolicy,
  SendResult,
  Settlement,
  Transport,
} from './delivery-queue.ts';

import { DrainWaiters, Wake } from './loop-signals.ts';
import { OutcomeLog } from './outcome-log.ts';

type SlotState = 'new' | 'sending' | 'failed' | 'waiting' | 'dead' | 'done';

interface Slot<E> {
  entry: E;
  state: SlotState;
  /** Counted attempts (kept by the queue). */
  attempts: number;
  /** Failures in a row of any kind (the backoff exponent). */
  failures: number;
  /** How the last failure was judged: counted (the entry), outage (the service); cleared by success. */
  verdict: 'counted' | 'outage' | undefined;
  result: IngestFailure | undefined;
  failure: FailureClass | undefined;
  /** The outcome log's sequence numbers when the last send began and when it failed. */
  since: number;
  failedAt: number;
  settled: Promise<void> | undefined;
  how: Settlement | undefined;
}

const READ_AHEAD = 4096;

export class DeliveryLoop<E> {
  readonly counters: LoopCounters = {
    delivered: 0,
    failedAttempts: 0,
    deadLettered: 0,
    lastError: undefined,
  };
  readonly #queue: DeliveryQueue<E>;
  readonly #transport: Transport<E>;
  readonly #inOrder: boolean;
  readonly #window: number;
  readonly #retry: RetryPolicy;
  readonly #sleep: (ms: number, signal: AbortSignal) => Promise<void>;
  readonly #refillBelow: number | undefined;
  readonly #readWaits: boolean;
  readonly #readAhead: number;
  /** Entries read and not yet settled, in read order. */
  readonly #held: Slot<E>[] = [];
  /** Per entry: judgements and dead letters under way beside the loop. */
  readonly #attending = new Set<Promise<void>>();
  readonly #outcomes = new OutcomeLog<Slot<E>>();
  #inFlight = 0;
  /** Slots never sent (or given up by stop). */
  #fresh = 0;
  /** Slots whose last failure was judged an outage. */
  #outages = 0;
  #stopping = false;
  readonly #stop = new AbortController();
  // One signal for every send in flight: a controller per send cost an abort listener per delivery.
  readonly #abort = new AbortController();
  readonly #wake = new Wake();
  readonly #drains = new DrainWaiters();
  readonly #running: Promise<void>;
  #stopped: Promise<void> | undefined;

  constructor(opts: DeliveryLoopOptions<E>) {
    this.#queue = opts.queue;
    this.#transport = opts.transport;
    this.#inOrder = opts.order === 'in-order';
    this.#window = Math.max(1, opts.window);
    this.#retry = opts.retry;
    this.#sleep = opts.sleep ?? abortableSleep;
    this.#refillBelow = opts.refillBelow;
    this.#readWaits = opts.readWaits ?? false;
    this.#readAhead = opts.readAhead ?? READ_AHEAD;
    this.#running = this.#run();
  }

  /** Sends in flight. */
  get inFlight(): number {
    return this.#inFlight;
  }

  /** Look at the queue now. */
  wake(): void {
    this.#wake.wake();
  }

  /**
   * Resolves once everything the queue had when called is settled and the queue was idle (its
   * checkpoint written). Never resolves during an outage; rejects on stop.
   */
  waitForDrain(): Promise<void> {
    if (this.#stopping) return Promise.reject(new Error('delivery stopped'));
    const drained = this.#drains.add();
    this.wake();
    return drained;
  }

  recordError(code: string, status: number | undefined, message: string): void {
    this.counters.lastError = { code, status, message, at: new Date().toISOString() };
  }

  /** Lets the sends in flight end (or aborts them with abort: true), then closes the queue. */
  stop(opts: { abort?: boolean } = {}): Promise<void> {
    this.#stopped ??= this.#stopNow(opts.abort === true);
    return this.#stopped;
  }

  async #stopNow(abort: boolean): Promise<void> {
    this.#stopping = true;
    this.#stop.abort();
    if (abort) this.#abort.abort();
    this.#outcomes.cancel();
    this.wake();
    try {
      await this.#running;
      await Promise.all([...this.#attending]);
      await Promise.all(this.#held.map((s) => s.settled));
      this.#release();
      await this.#queue.close(this.#held.filter((s) => s.state !== 'done').map((s) => s.entry));
    } finally {
      this.#drains.rejectAll(new Error('delivery stopped'));
    }
  }

  async #run(): Promise<void> {
    let errors = 0;
    while (!this.#stopping) {
      try {
        await this.#turn();
        errors = 0;
      } catch (err) {
        if (this.#stopping) break;
        await this.#afterError(err, ++errors);
      }
    }
  }

  async #afterError(err: unknown, errors: number): Promise<void> {
    const { code, retryInMs } = this.#queue.loopError(err, errors);
    this.recordError(code, undefined, errorText(err));
    await this.#sleep(retryInMs, this.#stop.signal);
  }

  async #turn(): Promise<void> {
    this.#release();
    const head = this.#held[0];
    if (this.#inOrder && (head?.state === 'failed' || head?.state === 'dead')) {
      await this.#attend(head);
      return;
    }
    const gen = this.#drains.generation;
    const { read, exhausted } = await this.#fill();
    if (read > 0 && !exhausted && this.#inFlight < this.#window) return;
    const idle = exhausted && this.#held.length === 0;
    const kept = this.#queue.housekeep?.(idle);
    const bound = kept instanceof Promise ? await kept : kept;
    if (idle) this.#drains.idle(gen);
    if ((exhausted && this.#readWaits) || this.#stopping) return;
    await this.#wake.wait(bound);
  }

  /**
   * Judges a failed slot, or writes the dead letter of an exhausted one, until done. In order only the
   * head, in the loop; per entry each on its own beside the loop, so a blocking read delays none.
   */
  async #attend(slot: Slot<E>): Promise<void> {
    let errors = 0;
    while (!this.#stopping && (slot.state === 'failed' || slot.state === 'dead')) {
      try {
        if (slot.state === 'failed') await this.#judge(slot);
        else await this.#deadLetter(slot);
      } catch (err) {
        if (this.#stopping) break;
        await this.#afterError(err, ++errors);
      }
    }
  }

  #attendBeside(slot: Slot<E>): void {
    const task: Promise<void> = this.#attend(slot).finally(() => this.#attending.delete(task));
    this.#attending.add(task);
  }

  /** Sends what waits and reads more while the window and the read-ahead allow; nothing in an outage. */
  async #fill(): Promise<{ read: number; exhausted: boolean }> {
    if (this.#outages > 0) return { read: 0, exhausted: false };
    if (this.#fresh > 0) {
      for (const s of this.#held) {
        if (this.#inFlight >= this.#window) break;
        if (s.state === 'new') this.#dispatch(s);
      }
    }
    const limit = this.#heldLimit();
    const refill = Math.min(limit, this.#refillBelow ?? limit);
    if (this.#inFlight >= this.#window || this.#held.length >= refill) return { read: 0, exhausted: false };
    const want = Math.min(this.#window - this.#inFlight, limit - this.#held.length);
    const entries = await this.#queue.read(want, this.#stop.signal);
    for (const entry of entries) this.#admit(entry, true);
    return { read: entries.length, exhausted: entries.length < want };
  }

  #heldLimit(): number {
    if (!this.#inOrder) return this.#window;
    return this.#held[0]?.verdict === 'counted' ? this.#readAhead : this.#window * 4;
  }

  #admit(entry: E, send: boolean): Slot<E> {
    const slot: Slot<E> = {
      entry,
      state: 'new',
      attempts: this.#queue.attempts(entry),
      failures: 0,
      verdict: undefined,
      result: undefined,
      failure: undefined,
      since: 0,
      failedAt: 0,
      settled: undefined,
      how: undefined,
    };
    this.#held.push(slot);
    const unsendable = this.#queue.unsendable?.(entry);
    if (unsendable === 'pass') {
      this.#finish(slot, 'passed');
    } else if (unsendable !== undefined) {
      slot.result = unsendable;
      slot.state = 'dead';
      if (!this.#inOrder) this.#attendBeside(slot);
    } else {
      this.#fresh++;
      const free = !this.#stopping && this.#outages === 0 && this.#inFlight < this.#window;
      if (send && free) this.#dispatch(slot);
    }
    return slot;
  }

  #dispatch(slot: Slot<E>): void {
    if (slot.state === 'new') this.#fresh--;
    slot.state = 'sending';
    slot.since = this.#outcomes.seq;
    this.#inFlight++;
    // Through a promise chain so that even a synchronous throw of the transport ends as a failure.
    slot.settled = Promise.resolve()
      .then(() => this.#transport.send(slot.entry, this.#abort.signal))
      .catch((err: unknown): SendResult => thrownFailure(errorText(err)))
      .then((result) => this.#onResult(slot, result));
  }

  #onResult(slot: Slot<E>, result: SendResult): void {
    this.#inFlight--;
    if (result.kind === 'ok') {
      this.counters.delivered++;
      this.#outcomes.add(slot, 'ok');
      this.#setVerdict(slot, undefined);
      this.#finish(slot, 'delivered');
    } else if (result.code === 'aborted' && this.#stopping) {
      // Not an attempt: given up by stop, sent again later (after a restart, or by another consumer).
      this.#outcomes.add(slot, 'neutral');
      slot.state = 'new';
      this.#fresh++;
    } else {
      this.counters.failedAttempts++;
      this.recordError(result.code, result.status, result.message);
      const failure = classifyFailure(result);
      this.#outcomes.add(slot, blamesService(failure) ? 'blame' : 'neutral');
      slot.failedAt = this.#outcomes.seq;
      slot.failures++;
      slot.result = result;
      slot.failure = failure;
      slot.state = 'failed';
      if (!this.#inOrder) this.#attendBeside(slot);
    }
    this.wake();
  }

  async #judge(slot: Slot<E>): Promise<void> {
    const result = slot.result as IngestFailure;
    const counted = await countsAsAttempt(slot.failure ?? 'outage', {
      otherEventAccepted: () => this.#otherAccepted(slot),
      serviceAnswers: () => this.#serviceAnswers(),
    });
    if (this.#stopping) return;
    if (counted) {
      // The attempt that exhausts the entry is kept by its dead letter, not on its own.
      const next = slot.attempts + 1;
      const last = next >= this.#retry.maxAttempts;
      slot.attempts = last ? next : await this.#queue.recordAttempt(slot.entry, next, result);
    }
    this.#setVerdict(slot, counted ? 'counted' : 'outage');
    const report = {
      result,
      failure: slot.failure ?? 'outage',
      attempts: slot.attempts,
      failures: slot.failures,
      counted,
    };
    if (counted && slot.attempts >= this.#retry.maxAttempts) {
      this.#queue.failed?.(slot.entry, { ...report, retryInMs: undefined });
      slot.state = 'dead';
      await this.#deadLetter(slot);
      return;
    }
    const delay = this.#retry.delay(slot.failures);
    this.#queue.failed?.(slot.entry, { ...report, retryInMs: delay });
    // Waited out beside the loop, so the entries behind a counted failure keep moving meanwhile.
    slot.state = 'waiting';
    void this.#sleep(delay, this.#stop.signal).then(() => this.#retryNow(slot));
  }

  async #retryNow(slot: Slot<E>): Promise<void> {
    if (this.#stopping || slot.state !== 'waiting') return;
    const held = this.#queue.stillHeld === undefined || (await this.#queue.stillHeld(slot.entry));
    if (this.#stopping || slot.state !== 'waiting') return;
    if (held) this.#dispatch(slot);
    else {
      this.#setVerdict(slot, undefined);
      this.#finish(slot, 'dropped');
      this.wake();
    }
  }

  async #deadLetter(slot: Slot<E>): Promise<void> {
    const moved = await this.#queue.deadLetter(slot.entry, slot.attempts, slot.result as IngestFailure);
    if (moved) this.counters.deadLettered++;
    this.#setVerdict(slot, undefined);
    this.#finish(slot, moved ? 'dead-lettered' : 'dropped');
  }

  /**
   * Whether the service accepted entries other than `slot`'s when it failed: the other sends that ended
   * while it was under way (so a failure judged late, behind the head, is judged by its own time), else
   * the next one to end, else one more entry sent as a probe; per entry, at last the latest other
   * outcome. Undefined when none says anything either way.
   */
  async #otherAccepted(slot: Slot<E>): Promise<boolean | undefined> {
    const meanwhile = this.#outcomes.between(slot.since, slot.failedAt, slot);
    if (meanwhile !== undefined) return meanwhile;
    if (this.#inFlight > 0) {
      const next = await this.#outcomes.next(slot);
      if (next !== undefined) return next;
    }
    const probe = await this.#probeSlot(slot);
    if (probe !== undefined) {
      if (probe.state !== 'sending') this.#dispatch(probe);
      await probe.settled;
      if (probe.state === 'done') return true;
      if (probe.state === 'failed' && blamesService(probe.failure ?? 'outage')) return false;
    }
    return this.#inOrder ? undefined : this.#outcomes.latest(slot);
  }

  /**
   * Another entry to send as a probe: one not sent yet; in order also one failed behind the head (not
   * judged until it is the head) or the next one read.
   */
  async #probeSlot(slot: Slot<E>): Promise<Slot<E> | undefined> {
    if (this.#stopping) return undefined;
    for (const s of this.#held) {
      if (s !== slot && (s.state === 'new' || (this.#inOrder && s.state === 'failed'))) return s;
    }
    if (!this.#inOrder) return undefined;
    while (this.#held.length < this.#window * 4) {
      const [entry] = await this.#queue.read(1, this.#stop.signal);
      if (entry === undefined || this.#stopping) return undefined;
      const s = this.#admit(entry, false);
      if (s.state === 'new') return s;
    }
    return undefined;
  }

  #serviceAnswers(): Promise<boolean> {
    const probe = this.#transport.probe;
    if (this.#stopping) return Promise.resolve(false);
    if (probe === undefined) return Promise.resolve(true);
    return Promise.resolve()
      .then(() => probe.call(this.#transport))
      .catch(() => false);
  }

  #setVerdict(slot: Slot<E>, verdict: Slot<E>['verdict']): void {
    if (slot.verdict === 'outage') this.#outages--;
    if (verdict === 'outage') this.#outages++;
    slot.verdict = verdict;
  }

  #finish(slot: Slot<E>, how: Settlement): void {
    slot.state = 'done';
    slot.how = how;
    if (!this.#inOrder) {
      const i = this.#held.indexOf(slot);
      if (i >= 0) this.#held.splice(i, 1);
      this.#queue.settle(slot.entry, how);
    } else if (slot === this.#held[0]) {
      this.#release();
    } else if (this.#queue.compact !== undefined) {
      slot.entry = this.#queue.compact(slot.entry);
    }
  }

  /** In order: settles the done entries at the head. */
  #release(): void {
    while (this.#held[0]?.state === 'done') {
      const s = this.#held.shift() as Slot<E>;
      this.#queue.settle(s.entry, s.how ?? 'delivered');
    }
  }
}
