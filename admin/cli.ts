// `router-admin`: administration commands (clipanion), one command class per file under
// admin/commands/<noun>/<verb>.ts. runAdmin is the testable entry; bin/router-admin.js calls it.

import type { Writable } from 'node:stream';
import { Builtins, Cli } from 'clipanion';
import { CreateAccessKeyCommand } from './commands/access-key/create.ts';
import { ListAccessKeysCommand } from './commands/access-key/list.ts';
import { MigrateAccessKeysCommand } from './commands/access-key/migrate.ts';
import { RevokeAccessKeyCommand } from './commands/access-key/revoke.ts';
import { RotateAccessKeyCommand } from './commands/access-key/rotate.ts';
import { ListDeadLettersCommand } from './commands/dead-letter/list.ts';
import { ReplayDeadLettersCommand } from './commands/dead-letter/replay.ts';
import { ShowDeadLetterCommand } from './commands/dead-letter/show.ts';
import { MigrateStoreCommand } from './commands/store/migrate.ts';

export function createAdminCli(): Cli {
  const cli = new Cli({ binaryLabel: 'router-admin', binaryName: 'router-admin', binaryVersion: '0.1.0' });
  cli.register(Builtins.HelpCommand);
  cli.register(Builtins.VersionCommand);
  cli.register(CreateAccessKeyCommand);
  cli.register(ListAccessKeysCommand);
  cli.register(MigrateAccessKeysCommand);
  cli.register(RevokeAccessKeyCommand);
  cli.register(RotateAccessKeyCommand);
  cli.register(ListDeadLettersCommand);
  cli.register(ShowDeadLetterCommand);
  cli.register(ReplayDeadLettersCommand);
  cli.register(MigrateStoreCommand);
  return cli;
}

export async function runAdmin(
  argv: readonly string[],
  io: { stdout?: Writable; stderr?: Writable } = {},
): Promise<number> {
  const cli = createAdminCli();
  return cli.run([...argv], {
    stdin: process.stdin,
    stdout: io.stdout ?? process.stdout,
    stderr: io.stderr ?? process.stderr,
  });
}

if (import.meta.main) process.exitCode = await runAdmin(process.argv.slice(2));
