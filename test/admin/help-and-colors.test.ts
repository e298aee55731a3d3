// `--help` and `-h` at every level of router-admin (one line per command of that level), usage errors on
// stderr with exit code 2, and no ANSI colour codes unless both stdout and stderr are colour terminals and
// NO_COLOR is unset: checked through real pipes (the bin script as a child process) and in-process.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { admin, adminProcess } from './run-admin.ts';

// biome-ignore lint/suspicious/noControlCharactersInRegex: looking for the escape character itself
const ANSI = /\u001b\[/;

/** The commands of each noun, in the order --help lists them. */
const COMMANDS: Record<string, string[]> = {
  'access-key': ['init', 'create', 'list', 'update', 'rotate', 'revoke', 'migrate'],
  billing: ['reconcile'],
  store: ['migrate'],
  'dead-letter': ['list', 'show', 'replay'],
  subject: ['set-limits'],
};

/** The environment of a colour terminal, but stdout and stderr will be pipes. */
function colourTerminalEnv(): Record<string, string | undefined> {
  const env: Record<string, string | undefined> = { ...process.env, TERM: 'xterm-256color' };
  delete env.NO_COLOR;
  delete env.NODE_DISABLE_COLORS;
  delete env.FORCE_COLOR;
  return env;
}

/** The lines of a listing that start with two spaces: one per command. */
function listed(text: string): string[] {
  return text.split('\n').filter((l) => /^ {2}\S/.test(l));
}

for (const flag of ['--help', '-h']) {
  test(`router-admin ${flag} lists the nouns, one line each`, async () => {
    const r = await admin([flag]);
    assert.equal(r.code, 0, r.err);
    assert.doesNotMatch(r.out, /Unknown Syntax Error/);
    const lines = listed(r.out);
    assert.deepEqual(
      lines.map((l) => l.trim().split(/\s+/)[0]),
      ['access-key', 'billing', 'dead-letter', 'store', 'subject'],
    );
    assert.match(
      lines[0]!,
      /access-key +client access keys.*\(init, create, list, update, rotate, revoke, migrate\)$/,
    );
    assert.match(r.out, /router-admin <noun> --help/);
  });

  for (const noun of ['access-key', 'billing', 'store', 'dead-letter', 'subject']) {
    test(`router-admin ${noun} ${flag} lists its commands, one line each`, async () => {
      const r = await admin([noun, flag]);
      assert.equal(r.code, 0, r.err);
      assert.equal(r.err, '');
      assert.doesNotMatch(r.out, /Unknown Syntax Error/);
      const expected = COMMANDS[noun];
      const lines = listed(r.out);
      assert.deepEqual(
        lines.map((l) => l.trim().split(/\s+/)[0]),
        expected,
      );
      for (const line of lines)
        assert.match(line, /^ {2}[a-z-]+ {2,}[A-Z]\S.*\S$/, 'verb, then its description');
      assert.match(r.out, new RegExp(`router-admin ${noun} <command> --help`));
    });
  }
}

test('access-key --help lists init; a command --help still shows its options and examples', async () => {
  const nounHelp = await admin(['access-key', '--help']);
  assert.match(nounHelp.out, /^ {2}init +Start an empty keys file/m);
  const initHelp = await admin(['access-key', 'init', '--help']);
  assert.equal(initHelp.code, 0);
  assert.match(initHelp.out, /--keys-file/);
  assert.match(initHelp.out, /access-key init --config router\.yaml/);
});

test('a noun without a command, or an unknown one: the listing on stderr, exit 2', async () => {
  const bare = await admin(['access-key']);
  assert.equal(bare.code, 2);
  assert.equal(bare.out, '');
  assert.match(bare.err, /access-key needs a command/);
  assert.match(bare.err, /^ {2}create +Create an access key/m);

  const typo = await admin(['access-key', 'crate']);
  assert.equal(typo.code, 2);
  assert.match(typo.err, /unknown command "access-key crate"/);
  assert.match(typo.err, /^ {2}create /m);

  const noun = await admin(['acces-key', 'list']);
  assert.equal(noun.code, 2);
  assert.match(noun.err, /unknown command "acces-key"/);

  const option = await admin(['access-key', 'list', '--config', 'x.yaml', '--bogus']);
  assert.equal(option.code, 2);
  assert.equal(option.out, '');
  assert.match(option.err, /Unsupported option name \("--bogus"\)/);
  assert.match(option.err, /^router-admin: .* \(router-admin access-key --help shows the usage\)\n$/);
});

test('through pipes with a colour TERM: no ANSI codes in help, errors or messages', async () => {
  const env = colourTerminalEnv();
  for (const argv of [
    ['--help'],
    ['access-key', '--help'],
    ['access-key', 'create', '--help'],
    ['access-key', 'crate'],
    ['access-key', 'list', '--config', '/nonexistent/router.yaml'],
  ]) {
    const r = await adminProcess(argv, env);
    assert.ok(r.out !== '' || r.err !== '', `${argv.join(' ')} printed something`);
    assert.doesNotMatch(r.out, ANSI, `stdout of ${argv.join(' ')}`);
    assert.doesNotMatch(r.err, ANSI, `stderr of ${argv.join(' ')}`);
  }
});

test('colours only at a colour terminal, and never with NO_COLOR', async () => {
  const atTerminal = await admin(['access-key', 'create', '--help'], { tty: true, env: { TERM: 'xterm' } });
  assert.match(atTerminal.out, ANSI, 'a terminal gets colours');
  const noColor = await admin(['access-key', 'create', '--help'], {
    tty: true,
    env: { TERM: 'xterm', NO_COLOR: '1' },
  });
  assert.equal(noColor.code, 0);
  assert.doesNotMatch(noColor.out, ANSI);
  const piped = await admin(['access-key', 'create', '--help'], { env: { TERM: 'xterm' } });
  assert.doesNotMatch(piped.out, ANSI);
  const syntax = await admin(['access-key', 'create', '--name'], { tty: true, env: { NO_COLOR: '1' } });
  assert.equal(syntax.code, 2);
  assert.doesNotMatch(syntax.err, ANSI);
});
