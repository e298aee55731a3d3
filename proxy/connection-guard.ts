// Per-process accounting of client connections (docs/operations.md "Limits"). A connection with no
// request in flight is idle; at the cap the one idle for longest is closed to admit the new one, and the
// new one is refused only when none is idle. A flood of idle or slow connections then costs its own
// connections, never a stream or a request in flight, and never locks real clients out.

import { readFileSync } from 'node:fs';
import type { Socket } from 'node:net';

export type ShedReason = 'idle' | 'refused';

export class ConnectionGuard {
  #max: number;
  readonly #onShed: (reason: ShedReason) => void;
  /** Open connections with no request in flight, in the order they became idle (oldest first). */
  readonly #idle = new Set<Socket>();
  /** Open connections with requests in flight, and how many (pipelining). */
  readonly #busy = new Map<Socket, number>();

  constructor(max: number, onShed: (reason: ShedReason) => void = () => undefined) {
    this.#max = max;
    this.#onShed = onShed;
  }

  get max(): number {
    return this.#max;
  }

  set max(value: number) {
    this.#max = value;
  }

  get open(): number {
    return this.#idle.size + this.#busy.size;
  }

  /** A new connection: admitted (maybe by closing the oldest idle one) or destroyed. */
  admit(socket: Socket): boolean {
    if (this.open >= this.#max) {
      const oldest = this.#idle.values().next().value;
      if (oldest === undefined) {
        this.#onShed('refused');
        socket.destroy();
        return false;
      }
      this.#idle.delete(oldest);
      oldest.destroy();
      this.#onShed('idle');
    }
    this.#idle.add(socket);
    socket.once('close', () => {
      this.#idle.delete(socket);
      this.#busy.delete(socket);
    });
    return true;
  }

  requestStarted(socket: Socket): void {
    const n = this.#busy.get(socket);
    if (n !== undefined) this.#busy.set(socket, n + 1);
    else if (this.#idle.delete(socket)) this.#busy.set(socket, 1);
  }

  requestEnded(socket: Socket): void {
    const n = this.#busy.get(socket);
    if (n === undefined) return;
    if (n > 1) {
      this.#busy.set(socket, n - 1);
      return;
    }
    this.#busy.delete(socket);
    if (!socket.destroyed) this.#idle.add(socket);
  }
}

/** Descriptors kept for everything but client and upstream sockets: listeners, files, Redis, pipes. */
export const RESERVED_DESCRIPTORS = 256;

/**
 * The connection cap that fits the file-descriptor limit: a proxied request holds a client and an
 * upstream descriptor. `nofile` undefined (no limit, or unknown) keeps `max`.
 */
export function fitToDescriptors(max: number, nofile: number | undefined): number {
  if (nofile === undefined) return max;
  return Math.max(1, Math.min(max, Math.floor((nofile - RESERVED_DESCRIPTORS) / 2)));
}

/** The soft RLIMIT_NOFILE from a /proc/<pid>/limits text; undefined when unlimited or absent. */
export function parseNofile(limitsText: string): number | undefined {
  const m = /^Max open files\s+(\S+)/m.exec(limitsText);
  if (m === null || m[1] === 'unlimited') return undefined;
  const n = Number(m[1]);
  return Number.isSafeInteger(n) && n > 0 ? n : undefined;
}

/** This process's soft RLIMIT_NOFILE (Node raises it to the hard limit at start); undefined off Linux. */
export function readNofile(): number | undefined {
  try {
    return parseNofile(readFileSync('/proc/self/limits', 'utf8'));
  } catch {
    return undefined;
  }
}
