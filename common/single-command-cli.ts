// `router` and `router-billing` are each one clipanion command (`router-admin`, with many, is admin/cli.ts).
// A usage error is common/cli-usage.ts's one line and exit 2, which unit files and scripts rely on.

import type { Writable } from 'node:stream';
import { Builtins, Cli, type Command, type CommandClass } from 'clipanion';
import pkg from '../package.json' with { type: 'json' };
import { reportUsageError } from './cli-usage.ts';

export interface CliIo {
  stdout?: Writable;
  stderr?: Writable;
}

/** The command's exit code; a negative one means it is still running (a server) and will exit itself. */
export async function runSingleCommand(
  name: string,
  commandClass: CommandClass,
  argv: readonly string[],
  io: CliIo = {},
): Promise<number> {
  const stdout = io.stdout ?? process.stdout;
  const stderr = io.stderr ?? process.stderr;
  const cli = new Cli({
    binaryLabel: name,
    binaryName: name,
    binaryVersion: pkg.version,
    // clipanion's own colour detection asks the terminal type, not whether stdout is one.
    enableColors: (stdout as { isTTY?: boolean }).isTTY === true,
  });
  cli.register(commandClass);
  cli.register(Builtins.HelpCommand);
  cli.register(Builtins.VersionCommand);
  const context = { stdin: process.stdin, stdout, stderr };
  let command: Command;
  try {
    command = cli.process([...argv], context);
  } catch (err) {
    return reportUsageError(stderr, name, err, name, argv);
  }
  return cli.run(command, context);
}
