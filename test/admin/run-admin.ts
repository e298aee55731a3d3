// Test helpers of the router-admin tests: runAdmin in-process with captured stdout and stderr, and the
// real bin/router-admin.js as a child process whose stdout and stderr are pipes (not TTYs).

import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { runAdmin } from '../../admin/cli.ts';
import { ROOT } from '../support/stack.ts';

export interface AdminResult {
  readonly code: number;
  readonly out: string;
  readonly err: string;
}

/** A Writable that keeps what is written; `tty` makes it claim to be a colour terminal. */
export function sink(tty = false): { stream: Writable; text(): string } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      chunks.push(chunk.toString());
      done();
    },
  });
  if (tty) Object.assign(stream, { isTTY: true, getColorDepth: () => 8, hasColors: () => true });
  return { stream, text: () => chunks.join('') };
}

export async function admin(
  argv: readonly string[],
  opts: { env?: Record<string, string | undefined>; tty?: boolean } = {},
): Promise<AdminResult> {
  const out = sink(opts.tty);
  const err = sink(opts.tty);
  const code = await runAdmin(argv, {
    stdout: out.stream,
    stderr: err.stream,
    ...(opts.env === undefined ? {} : { env: opts.env }),
  });
  return { code, out: out.text(), err: err.text() };
}

/** bin/router-admin.js under this Node, stdout and stderr piped; variables set to undefined are left out. */
export function adminProcess(
  argv: readonly string[],
  env: Record<string, string | undefined> = process.env,
): Promise<AdminResult> {
  return new Promise((resolve, reject) => {
    const defined = Object.fromEntries(
      Object.entries(env).filter((e): e is [string, string] => e[1] !== undefined),
    );
    const child = spawn(process.execPath, [join(ROOT, 'bin/router-admin.js'), ...argv], {
      env: defined,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString();
    });
    child.stderr.on('data', (c: Buffer) => {
      err += c.toString();
    });
    child.once('error', reject);
    child.once('close', (code) => resolve({ code: code ?? -1, out, err }));
  });
}
