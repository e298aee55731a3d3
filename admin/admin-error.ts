// The error that carries a router-admin exit code (common/exit-codes.ts); below every other admin module.
// A usage error is clipanion's UsageError instead (common/cli-usage.ts).

import type { ExitCode } from '../common/exit-codes.ts';

/** A failure with the exit code it should end the command with. */
export class AdminError extends Error {
  readonly exitCode: ExitCode;
  constructor(message: string, exitCode: ExitCode) {
    super(message);
    this.name = 'AdminError';
    this.exitCode = exitCode;
  }
}
