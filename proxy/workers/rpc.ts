// Calls between the primary and its workers over the IPC channel node:cluster opens. Every message of
// the gateway carries `router: 1`, so node's own cluster messages and prom-client's pass by untouched.

import { errorText } from '../../common/errors.ts';

export interface Channel {
  send(message: Envelope): void;
  onMessage(listener: (message: unknown) => void): void;
}

export interface Envelope {
  readonly router: 1;
  readonly kind: string;
  /** Set on calls that want an answer. */
  readonly call?: number;
  /** Set on answers: the call answered. */
  readonly answer?: number;
  readonly error?: string;
  readonly body?: unknown;
}

type Handler = (body: unknown) => unknown;

export class Rpc {
  readonly #channel: Channel;
  readonly #handlers = new Map<string, Handler>();
  readonly #pending = new Map<
    number,
    { resolve: (v: unknown) => void; reject: (e: Error) => void; timer: NodeJS.Timeout }
  >();
  #next = 1;

  constructor(channel: Channel) {
    this.#channel = channel;
    channel.onMessage((m) => this.#receive(m));
  }

  /** Answers calls (and takes notices) of this kind. */
  handle(kind: string, handler: Handler): void {
    this.#handlers.set(kind, handler);
  }

  /** A one-way message. */
  notify(kind: string, body?: unknown): void {
    this.#send({ router: 1, kind, body });
  }

  /** The peer's answer, or a rejection after `timeoutMs` or when the peer's handler failed. */
  call(kind: string, body: unknown, timeoutMs: number): Promise<unknown> {
    const call = this.#next++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(call);
        reject(new Error(`no answer to ${kind} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.#pending.set(call, { resolve, reject, timer });
      if (!this.#send({ router: 1, kind, call, body })) {
        clearTimeout(timer);
        this.#pending.delete(call);
        reject(new Error(`${kind}: the peer is gone`));
      }
    });
  }

  /** Fails every call still waiting (the peer exited). */
  close(): void {
    for (const [call, p] of this.#pending) {
      clearTimeout(p.timer);
      p.reject(new Error('the peer is gone'));
      this.#pending.delete(call);
    }
  }

  #send(message: Envelope): boolean {
    try {
      this.#channel.send(message);
      return true;
    } catch {
      return false;
    }
  }

  #receive(raw: unknown): void {
    if (typeof raw !== 'object' || raw === null || (raw as Envelope).router !== 1) return;
    const m = raw as Envelope;
    if (m.answer !== undefined) {
      const p = this.#pending.get(m.answer);
      if (p === undefined) return;
      this.#pending.delete(m.answer);
      clearTimeout(p.timer);
      if (m.error !== undefined) p.reject(new Error(m.error));
      else p.resolve(m.body);
      return;
    }
    const handler = this.#handlers.get(m.kind);
    const call = m.call;
    if (call === undefined) {
      if (handler !== undefined) void Promise.resolve().then(() => handler(m.body));
      return;
    }
    Promise.resolve()
      .then(() => {
        if (handler === undefined) throw new Error(`no handler for ${m.kind}`);
        return handler(m.body);
      })
      .then(
        (body) => this.#send({ router: 1, kind: m.kind, answer: call, body }),
        (err: unknown) =>
          this.#send({
            router: 1,
            kind: m.kind,
            answer: call,
            error: errorText(err),
          }),
      );
  }
}
