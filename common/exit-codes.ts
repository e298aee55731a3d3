// The one exit-code table of the three programs, `router`, `router-billing` and `router-admin`
// (tabled in docs/operations.md): unit files, scripts and operators read the same number the same way.

export const EXIT = {
  /** Done; a server that drained and stopped after a signal. */
  ok: 0,
  /** Failed: a start, a command or a stop that did not succeed, a second stop signal, no such key or id. */
  failed: 1,
  /** A usage error (one line on stderr) or an invalid configuration (every problem as file:line:col). */
  usage: 2,
  /** A store or the sidecar could not be reached; nothing was changed (router-admin). */
  unavailable: 3,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** The table as each program's --help states it. */
export const EXIT_CODES_HELP =
  'Exit codes (router, router-billing and router-admin alike): 0 ok, 1 failed, 2 usage or configuration ' +
  'error, 3 store or sidecar unreachable.';
