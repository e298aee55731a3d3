// The one way the three CLIs report a usage error: a command throws clipanion's UsageError (arguments that
// do not parse are one too), and the user reads one line on stderr naming the problem and the --help to
// read, and the program exits 2 (EXIT.usage). Never clipanion's multi-line report or a stack.

import type { Writable } from 'node:stream';
import { Command, UsageError } from 'clipanion';
import { errorText } from './errors.ts';
import { EXIT } from './exit-codes.ts';

/**
 * Writes the one line of a usage error (`err`: clipanion's, from parsing `argv` or from a command) and
 * returns EXIT.usage; `help` is the command line whose --help explains (`router-admin access-key`).
 */
export function reportUsageError(
  stderr: Writable,
  binary: string,
  err: unknown,
  help: string,
  argv: readonly string[] = [],
): number {
  const first = errorText(err);
  // The parser's guess when no command matches lists every form; an option missing its value lands here.
  const problem = first.startsWith('Command not found')
    ? errorText(`cannot parse the arguments: ${argv.join(' ')}`)
    : first.replace(/\.$/, '');
  stderr.write(`${binary}: ${problem} (${help} --help shows the usage)\n`);
  return EXIT.usage;
}

/** A command of the three CLIs: a UsageError thrown anywhere in it ends as reportUsageError's line. */
export abstract class CliCommand extends Command {
  override async validateAndExecute(): Promise<number> {
    try {
      return await super.validateAndExecute();
    } catch (err) {
      if (!(err instanceof UsageError)) throw err;
      const binary = this.cli.binaryName;
      return reportUsageError(this.context.stderr, binary, err, [binary, ...this.path].join(' '));
    }
  }
}
