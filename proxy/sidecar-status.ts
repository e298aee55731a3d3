// What the gateway knows of the billing sidecar it supervises: whether it is listening yet. /readyz
// reports it, and a webhook that arrives while the sidecar starts waits for it (proxy/webhook-forward.ts).

export type SidecarState = 'starting' | 'up' | 'down';

export interface SidecarStatus {
  /** False when `router` runs no sidecar (--no-sidecar, sidecar.enabled false, billing off). */
  readonly supervised: boolean;
  readonly state: SidecarState;
  /** True once the sidecar is up, false when `timeoutMs` passed first. */
  whenUp(timeoutMs: number): Promise<boolean>;
}

export class SidecarTracker implements SidecarStatus {
  supervised = false;
  state: SidecarState = 'down';
  readonly #waiters = new Set<() => void>();
  /** Told every state change (the primary of several workers passes it on to them). */
  onChange: ((state: SidecarState) => void) | undefined = undefined;

  set(state: SidecarState): void {
    this.state = state;
    this.onChange?.(state);
    if (state !== 'up') return;
    for (const wake of this.#waiters) wake();
    this.#waiters.clear();
  }

  whenUp(timeoutMs: number): Promise<boolean> {
    if (this.state === 'up') return Promise.resolve(true);
    return new Promise((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        resolve(true);
      };
      const timer = setTimeout(() => {
        this.#waiters.delete(wake);
        resolve(false);
      }, timeoutMs);
      this.#waiters.add(wake);
    });
  }
}
