// Test support for the operations tests (reload, shutdown, logs, metrics): a gateway configuration in a
// temporary folder pointed at the upstream simulator, usable in-process (startGateway) or by a child
// process (`node proxy/cli.ts -c <file>`), plus a child-process runner that reads its JSON log lines.

import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import {
  ACCESS_KEY,
  MODELS_FILE,
  PRICING_FILE,
  PROVIDERS_DIR,
  ROOT,
  simProviderEnv,
  TRUST_LOOPBACK_IDS,
} from '../support/stack.ts';

export { ACCESS_KEY };

export interface GatewayFiles {
  readonly dir: string;
  readonly configFile: string;
  readonly providersDir: string;
  /** ROUTER_* variables: access key, master key, provider base URLs and keys. */
  readonly env: Record<string, string>;
  remove(): Promise<void>;
}

export async function writeGatewayFiles(opts: {
  simUrl: string;
  /** Extra provider files (name -> DSL source) beside copies of the shipped ones. */
  providers?: Readonly<Record<string, string>>;
  extraYaml?: string;
  logLevel?: string;
}): Promise<GatewayFiles> {
  const dir = await mkdtemp(join(tmpdir(), 'router-ops-'));
  const providersDir = join(dir, 'providers');
  await mkdir(providersDir);
  for (const f of await readdir(PROVIDERS_DIR)) await copyFile(join(PROVIDERS_DIR, f), join(providersDir, f));
  for (const [name, src] of Object.entries(opts.providers ?? {}))
    await writeFile(join(providersDir, `${name}.conf`), src);
  const configFile = join(dir, 'router.yaml');
  await writeFile(
    configFile,
    [
      'listen: 127.0.0.1:0',
      `providers_dir: ${providersDir}`,
      `models: ${MODELS_FILE}`,
      `pricing: ${PRICING_FILE}`,
      `log: { level: ${opts.logLevel ?? 'silent'} }`,
      TRUST_LOOPBACK_IDS,
      opts.extraYaml ?? '',
    ].join('\n'),
  );
  const env = simProviderEnv(opts.simUrl, Object.keys(opts.providers ?? {}));
  return {
    dir,
    configFile,
    providersDir,
    env,
    remove: () => rm(dir, { recursive: true, force: true }),
  };
}

export type LogLine = Record<string, unknown> & { msg?: string; level?: number };

export interface GatewayProcess {
  readonly child: ChildProcessWithoutNullStreams;
  readonly url: string;
  /** Every JSON line written to stdout so far. */
  readonly lines: LogLine[];
  /** Raw stdout text so far (to prove something never appears). */
  stdout(): string;
  /** Resolves with the first line (past or future) that satisfies `match`. */
  waitForLine(match: (line: LogLine) => boolean, timeoutMs?: number): Promise<LogLine>;
  /** Resolves with the exit code (or signal name). */
  readonly exited: Promise<number | string>;
  kill(): void;
}

/**
 * `node proxy/cli.ts -c <file> --no-sidecar [...args]`, resolved once it logs "router listening" or,
 * when `url` is given (a fixed port, for log levels above info), once its /healthz answers.
 */
export async function spawnGateway(
  files: GatewayFiles,
  args: readonly string[] = [],
  url?: string,
): Promise<GatewayProcess> {
  const child = spawn(
    process.execPath,
    [join(ROOT, 'proxy/cli.ts'), '-c', files.configFile, '--no-sidecar', ...args],
    { env: { ...process.env, ...files.env }, stdio: ['pipe', 'pipe', 'pipe'] },
  );
  const lines: LogLine[] = [];
  let raw = '';
  let stderr = '';
  const waiters: { match: (l: LogLine) => boolean; resolve: (l: LogLine) => void }[] = [];
  child.stderr.setEncoding('utf8').on('data', (d: string) => {
    stderr += d;
  });
  createInterface({ input: child.stdout }).on('line', (text) => {
    raw += `${text}\n`;
    let line: LogLine;
    try {
      line = JSON.parse(text) as LogLine;
    } catch {
      return;
    }
    lines.push(line);
    for (const w of [...waiters]) {
      if (w.match(line)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(line);
      }
    }
  });
  const exited = new Promise<number | string>((resolve) =>
    child.once('exit', (code, signal) => resolve(code ?? signal ?? -1)),
  );
  function waitForLine(match: (line: LogLine) => boolean, timeoutMs = 10_000): Promise<LogLine> {
    const seen = lines.find(match);
    if (seen !== undefined) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(new Error(`no matching log line within ${timeoutMs} ms; stderr: ${stderr.slice(0, 2000)}`));
      }, timeoutMs);
      waiters.push({
        match,
        resolve: (l) => {
          clearTimeout(timer);
          resolve(l);
        },
      });
      exited.then(() => {
        clearTimeout(timer);
        reject(new Error(`gateway exited; stderr: ${stderr.slice(0, 2000)}`));
      });
    });
  }
  let base = url;
  if (base === undefined) {
    base = String((await waitForLine((l) => l.msg === 'router listening', 30_000)).url);
  } else {
    // Startup of a process: poll, bounded (about 30 s).
    for (let i = 0; ; i++) {
      const up = await fetch(`${base}/healthz`).then(
        (r) => r.arrayBuffer().then(() => true),
        () => false,
      );
      if (up) break;
      if (i >= 600 || child.exitCode !== null) {
        child.kill('SIGKILL');
        throw new Error(`gateway did not come up at ${base}; stderr: ${stderr.slice(0, 2000)}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
  return {
    child,
    url: base,
    lines,
    stdout: () => raw,
    waitForLine,
    exited,
    kill: () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    },
  };
}
