// `router-admin`: administration commands (clipanion), one command class per file under
// admin/commands/<noun>/<verb>.ts. runAdmin is the testable entry; bin/router-admin.js calls it.

import type { Writable } from 'node:stream';
import { Builtins, Cli } from 'clipanion';
import { reportUsageError } from '../common/cli-usage.ts';
import { CreateAccessKeyCommand } from './commands/access-key/create.ts';
import { InitKeysFileCommand } from './commands/access-key/init.ts';
import { ListAccessKeysCommand } from './commands/access-key/list.ts';
import { MigrateAccessKeysCommand } from './commands/access-key/migrate.ts';
import { RevokeAccessKeyCommand } from './commands/access-key/revoke.ts';
import { RotateAccessKeyCommand } from './commands/access-key/rotate.ts';
import { UpdateAccessKeyCommand } from './commands/access-key/update.ts';
import { ReconcileBillingCommand } from './commands/billing/reconcile.ts';
import { ListDeadLettersCommand } from './commands/dead-letter/list.ts';
import { ReplayDeadLettersCommand } from './commands/dead-letter/replay.ts';
import { ShowDeadLetterCommand } from './commands/dead-letter/show.ts';
import { MigrateStoreCommand } from './commands/store/migrate.ts';
import { SetSubjectLimitsCommand } from './commands/subject/set-limits.ts';
import { type Noun, nounHelpCommand, topHelpCommand } from './help.ts';

const BINARY = 'router-admin';
const VERSION = '0.1.0';

/** The nouns and their commands, in the order `--help` lists them. */
export const NOUNS: readonly Noun[] = [
  {
    name: 'access-key',
    summary: 'client access keys, in the keys file or the shared store',
    commands: [
      InitKeysFileCommand,
      CreateAccessKeyCommand,
      ListAccessKeysCommand,
      UpdateAccessKeyCommand,
      RotateAccessKeyCommand,
      RevokeAccessKeyCommand,
      MigrateAccessKeysCommand,
    ],
  },
  {
    name: 'billing',
    summary: "the billing service's usage events against what the gateway served",
    commands: [ReconcileBillingCommand],
  },
  {
    name: 'dead-letter',
    summary: 'billing events that exhausted their delivery attempts',
    commands: [ListDeadLettersCommand, ShowDeadLetterCommand, ReplayDeadLettersCommand],
  },
  {
    name: 'store',
    summary: 'the shared Redis store',
    commands: [MigrateStoreCommand],
  },
  {
    name: 'subject',
    summary: "billing subjects' own rate limits, kept in the shared store",
    commands: [SetSubjectLimitsCommand],
  },
];

export function createAdminCli(opts: { colors?: boolean } = {}): Cli {
  const cli = new Cli({
    binaryLabel: BINARY,
    binaryName: BINARY,
    binaryVersion: VERSION,
    enableColors: opts.colors ?? false,
  });
  // First: clipanion's general usage (after a syntax error) then lists the commands, not this one.
  cli.register(topHelpCommand(BINARY, VERSION, NOUNS));
  cli.register(Builtins.VersionCommand);
  for (const noun of NOUNS) {
    cli.register(nounHelpCommand(BINARY, noun));
    for (const command of noun.commands) cli.register(command);
  }
  return cli;
}

type Env = Readonly<Record<string, string | undefined>>;

/**
 * Colours only for a person at a terminal: both stdout and stderr are TTYs that support colours, and
 * NO_COLOR is not set to a non-empty value.
 */
export function wantsColors(io: { stdout: Writable; stderr: Writable }, env: Env): boolean {
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== '') return false;
  const depth = (stream: Writable): number => {
    const tty = stream as Writable & { isTTY?: boolean; getColorDepth?: (env?: Env) => number };
    if (tty.isTTY !== true) return 1;
    return tty.getColorDepth?.(env) ?? 1;
  };
  return depth(io.stdout) > 1 && depth(io.stderr) > 1;
}

export async function runAdmin(
  argv: readonly string[],
  io: { stdout?: Writable; stderr?: Writable; env?: Env } = {},
): Promise<number> {
  const stdout = io.stdout ?? process.stdout;
  const stderr = io.stderr ?? process.stderr;
  const env = io.env ?? process.env;
  const colors = wantsColors({ stdout, stderr }, env);
  const cli = createAdminCli({ colors });
  const context = { stdin: process.stdin, stdout, stderr, env, colorDepth: colors ? 8 : 1 };
  let command: ReturnType<Cli['process']>;
  try {
    command = cli.process([...argv], context);
  } catch (err) {
    // Malformed options (unknown commands land on the help commands): the one usage-error line.
    const noun = NOUNS.find((n) => n.name === argv[0]);
    return reportUsageError(
      stderr,
      BINARY,
      err,
      noun === undefined ? BINARY : `${BINARY} ${noun.name}`,
      argv,
    );
  }
  return cli.run(command, context);
}

if (import.meta.main) process.exitCode = await runAdmin(process.argv.slice(2));
