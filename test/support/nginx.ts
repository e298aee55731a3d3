// Test support: a real nginx running deploy/nginx/router.conf in a temporary prefix. The shipped file is
// used as it stands except for the lines marked `router:` (upstream addresses, listen address, access
// log path), which are rewritten; the main file around it adds what a test needs (no daemon, pid, logs
// and temp paths in the prefix, one process so no user switching is needed when running as root).

import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT } from './stack.ts';

export const ROUTER_CONF = join(ROOT, 'deploy/nginx/router.conf');

export function findNginx(): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(':')) {
    if (dir !== '' && existsSync(join(dir, 'nginx'))) return join(dir, 'nginx');
  }
  for (const candidate of ['/usr/sbin/nginx', '/usr/local/sbin/nginx', '/usr/local/nginx/sbin/nginx']) {
    if (existsSync(candidate)) return candidate;
  }
  return undefined;
}

export interface RouterConfAddresses {
  /** host:port of the gateway. */
  readonly gateway: string;
  /** host:port of the billing sidecar. */
  readonly sidecar: string;
  /** host:port nginx listens on. */
  readonly listen: string;
  readonly accessLog: string;
}

/** The shipped file with its `router:` lines rewritten; throws when a marked line is missing. */
export function renderRouterConf(source: string, to: RouterConfAddresses): string {
  const swaps: [RegExp, string][] = [
    [/^(\s*server\s+)\S+(.*# router:gateway)$/m, `$1${to.gateway}$2`],
    [/^(\s*server\s+)\S+(.*# router:sidecar)$/m, `$1${to.sidecar}$2`],
    [/^(\s*listen\s+)[^;]+(;.*# router:listen)$/m, `$1${to.listen}$2`],
    [/^(\s*access_log\s+)\S+(.*# router:access_log)$/m, `$1${to.accessLog}$2`],
  ];
  let out = source;
  for (const [re, replacement] of swaps) {
    if (!re.test(out)) throw new Error(`deploy/nginx/router.conf: no line matches ${re}`);
    out = out.replace(re, replacement);
  }
  return out;
}

export interface RunningNginx {
  readonly url: string;
  readonly port: number;
  readonly dir: string;
  readonly accessLogFile: string;
  accessLog(): Promise<string>;
  errorLog(): Promise<string>;
  close(): Promise<void>;
}

/** A free TCP port on 127.0.0.1 (nginx cannot be told to pick one and report it). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr !== null ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

export async function startNginx(opts: { gateway: string; sidecar: string }): Promise<RunningNginx> {
  const bin = findNginx();
  if (bin === undefined) throw new Error('nginx is not installed (.ci/run installs it)');
  const dir = await mkdtemp(join(tmpdir(), 'router-nginx-'));
  for (const sub of ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi', 'logs']) await mkdir(join(dir, sub));
  const port = await freePort();
  const accessLogFile = join(dir, 'logs/access.log');
  const errorLogFile = join(dir, 'logs/error.log');
  const routerConf = renderRouterConf(await readFile(ROUTER_CONF, 'utf8'), {
    gateway: opts.gateway,
    sidecar: opts.sidecar,
    listen: `127.0.0.1:${port}`,
    accessLog: accessLogFile,
  });
  await writeFile(join(dir, 'router.conf'), routerConf);
  const main = `daemon off;
master_process off;
pid ${dir}/nginx.pid;
error_log ${errorLogFile} info;
events { worker_connections 256; }
http {
  client_body_temp_path ${dir}/client_body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  include ${dir}/router.conf;
}
`;
  const confFile = join(dir, 'nginx.conf');
  await writeFile(confFile, main);
  const child = spawn(bin, ['-p', `${dir}/`, '-c', confFile, '-e', errorLogFile], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => {
    stderr += d;
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const url = `http://127.0.0.1:${port}`;
  // nginx has no readiness signal: poll /healthz (proxied to the gateway), bounded.
  let up = false;
  for (let i = 0; i < 200 && child.exitCode === null; i++) {
    try {
      const res = await fetch(`${url}/healthz`);
      await res.arrayBuffer();
      up = true;
      break;
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }
  if (!up) {
    child.kill('SIGKILL');
    await exited;
    const log = await readFile(errorLogFile, 'utf8').catch(() => '');
    await rm(dir, { recursive: true, force: true });
    throw new Error(`nginx did not start: ${stderr}${log}`.slice(0, 2000));
  }
  return {
    url,
    port,
    dir,
    accessLogFile,
    accessLog: () => readFile(accessLogFile, 'utf8'),
    errorLog: () => readFile(errorLogFile, 'utf8'),
    async close() {
      if (child.exitCode === null) {
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
        await exited;
        clearTimeout(timer);
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}
