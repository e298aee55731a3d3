// `--help` (and `-h`) at every level of `router-admin`: the top level lists the nouns, a noun
// (`router-admin access-key --help`) lists its commands, one line each, with the description of each
// command's usage. A command's own `--help` (options, details, examples) is clipanion's.

import type { Writable } from 'node:stream';
import { Command, type CommandClass, Option } from 'clipanion';
import { reportUsageError } from '../common/cli-usage.ts';
import { EXIT, EXIT_CODES_HELP } from '../common/exit-codes.ts';

/** One noun of `router-admin <noun> <verb>`, and its commands in the order they are listed. */
export interface Noun {
  readonly name: string;
  readonly summary: string;
  readonly commands: readonly CommandClass[];
}

function verbOf(command: CommandClass, noun: string): string {
  const path = command.paths?.find((p) => p[0] === noun) ?? command.paths?.[0] ?? [];
  return path.slice(1).join(' ');
}

function columns(rows: readonly (readonly [string, string])[]): string {
  const width = Math.max(...rows.map(([left]) => left.length));
  return rows.map(([left, right]) => `  ${left.padEnd(width)}  ${right}`).join('\n');
}

/** The one-line-per-command listing of a noun. */
export function nounHelpText(binary: string, noun: Noun): string {
  const rows = noun.commands.map((c) => [verbOf(c, noun.name), c.usage?.description ?? ''] as const);
  return [
    `${binary} ${noun.name}: ${noun.summary}`,
    '',
    `Usage: ${binary} ${noun.name} <command> [options]`,
    '',
    'Commands:',
    columns(rows),
    '',
    `Run \`${binary} ${noun.name} <command> --help\` for a command's options and examples.`,
    '',
  ].join('\n');
}

/** The top-level listing: one line per noun. */
export function topHelpText(binary: string, version: string, nouns: readonly Noun[]): string {
  const rows = nouns.map(
    (n) => [n.name, `${n.summary} (${n.commands.map((c) => verbOf(c, n.name)).join(', ')})`] as const,
  );
  return [
    `${binary} ${version}: administration of the LLM router gateway`,
    '',
    `Usage: ${binary} <noun> <command> --config router.yaml [options]`,
    '',
    'Commands:',
    columns(rows),
    '',
    `Run \`${binary} <noun> --help\` for its commands, \`${binary} <noun> <command> --help\` for one command's`,
    `options and examples, \`${binary} --version\` for the version.`,
    EXIT_CODES_HELP,
    '',
  ].join('\n');
}

/** A missing or unknown command: the usage-error line, then the listing to choose from, on stderr. */
function usageWithListing(
  stderr: Writable,
  binary: string,
  what: string,
  help: string,
  listing: string,
): number {
  const code = reportUsageError(stderr, binary, what, help);
  stderr.write(`\n${listing}`);
  return code;
}

/**
 * `router-admin`, `router-admin --help`, `router-admin -h`. Register it before the other commands: clipanion's
 * general usage (shown after some syntax errors) then lists the commands instead of this one.
 */
export function topHelpCommand(binary: string, version: string, nouns: readonly Noun[]): CommandClass {
  return class TopHelpCommand extends Command {
    static override paths = [[], ['-h'], ['--help']];
    /** An unknown noun lands here too. */
    rest = Option.Rest();
    async execute(): Promise<number> {
      const text = topHelpText(binary, version, nouns);
      // Without a command, or with an unknown one, it is a usage error: the listing goes to stderr.
      if (this.path.length === 0) {
        const what =
          this.rest.length === 0 ? 'give a command' : `unknown command ${JSON.stringify(this.rest[0])}`;
        return usageWithListing(this.context.stderr, binary, what, binary, text);
      }
      this.context.stdout.write(text);
      return EXIT.ok;
    }
  };
}

/** `router-admin <noun>`, `router-admin <noun> --help`, `router-admin <noun> -h` (and an unknown verb). */
export function nounHelpCommand(binary: string, noun: Noun): CommandClass {
  return class NounHelpCommand extends Command {
    static override paths = [[noun.name], [noun.name, '-h'], [noun.name, '--help']];
    /** An unknown command of the noun lands here too. */
    rest = Option.Rest();
    async execute(): Promise<number> {
      const text = nounHelpText(binary, noun);
      if (this.path.length === 1) {
        const what =
          this.rest.length === 0
            ? `${noun.name} needs a command`
            : `unknown command ${JSON.stringify(`${noun.name} ${this.rest[0]}`)}`;
        return usageWithListing(this.context.stderr, binary, what, `${binary} ${noun.name}`, text);
      }
      this.context.stdout.write(text);
      return EXIT.ok;
    }
  };
}
