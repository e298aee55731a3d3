// Exit codes of `router-admin` and the error that carries one; below every other admin module.

/** Exit codes of router-admin. */
export const EXIT = { ok: 0, failed: 1, usage: 2, unavailable: 3 } as const;

/** A failure with the exit code it should end the command with. */
export class AdminError extends Error {
  readonly exitCode: number;
  constructor(message: string, exitCode: number) {
    super(message);
    this.name = 'AdminError';
    this.exitCode = exitCode;
  }
}
