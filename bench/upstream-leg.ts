// `node bench/upstream-leg.ts`: the measurement behind the hot path's upstream client (docs/architecture.md).
// Two minimal forwarders, each in its own process, in front of the upstream simulator: one on undici's
// pooled Agent (what proxy/upstream.ts uses), one on http-proxy-3's native path (http.Agent with
// keep-alive). Both forward a small chat request and buffer the JSON reply, as the gateway does when it
// meters usage. autocannon drives each for the same time; the ratio is the point.

import { type ChildProcess, spawn } from 'node:child_process';
import { createServer, Agent as HttpAgent } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { createProxyServer } from 'http-proxy-3';
import { Agent } from 'undici';

const BODY = JSON.stringify({ model: 'gpt-5.4-mini', messages: [{ role: 'user', content: 'hello there' }] });

/** Child mode: run one forwarder and print its port. */
async function serve(kind: string, target: string): Promise<void> {
  let server: ReturnType<typeof createServer>;
  if (kind === 'undici') {
    const agent = new Agent({ connections: null, pipelining: 1, keepAliveTimeout: 30_000 });
    const origin = new URL(target).origin;
    server = createServer(async (req, res) => {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const up = await agent.request({
        origin,
        path: req.url ?? '/',
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: 'Bearer x' },
        body: Buffer.concat(chunks),
      });
      const body = Buffer.from(await up.body.bytes());
      JSON.parse(body.toString('utf8'));
      res.writeHead(up.statusCode, { 'content-type': 'application/json', 'content-length': body.length });
      res.end(body);
    });
  } else {
    const proxy = createProxyServer({ target, agent: new HttpAgent({ keepAlive: true, maxSockets: 256 }) });
    proxy.on('proxyRes', (proxyRes) => {
      // Buffer a copy for metering, as the gateway would.
      const chunks: Buffer[] = [];
      proxyRes.on('data', (c: Buffer) => chunks.push(c));
      proxyRes.on('end', () => JSON.parse(Buffer.concat(chunks).toString('utf8')));
    });
    server = createServer((req, res) => {
      req.headers.authorization = 'Bearer x';
      proxy.web(req, res);
    });
  }
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  process.stdout.write(`${(server.address() as AddressInfo).port}\n`);
}

function start(args: string[]): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(process.execPath, [fileURLToPath(import.meta.url), ...args], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((resolve) => {
    child.stdout?.once('data', (d: Buffer) => resolve({ child, port: Number(d.toString().trim()) }));
  });
}

async function load(url: string, seconds: number): Promise<number> {
  const r = await autocannon({
    url,
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer x' },
    body: BODY,
    connections: 32,
    duration: seconds,
  });
  return r.requests.average;
}

async function main(): Promise<void> {
  const sim = spawn(
    process.execPath,
    [fileURLToPath(new URL('../sim/upstream/main.ts', import.meta.url)), '--port', '0', '--no-record'],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const simUrl = await new Promise<string>((resolve) => {
    sim.stdout?.on('data', (d: Buffer) => {
      const m = /(http:\/\/\S+)/.exec(d.toString());
      if (m) resolve(m[1]!);
    });
  });
  const results: Record<'undici' | 'http-proxy-3', number[]> = { undici: [], 'http-proxy-3': [] };
  for (const kind of ['undici', 'http-proxy-3'] as const) {
    const f = await start(['--serve', kind, simUrl]);
    const url = `http://127.0.0.1:${f.port}/v1/chat/completions`;
    await load(url, 3); // warm-up
    for (let i = 0; i < 3; i++) results[kind].push(await load(url, 5));
    f.child.kill();
  }
  sim.kill();
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[1] ?? Number.NaN;
  const u = median(results.undici);
  const h = median(results['http-proxy-3']);
  console.log(JSON.stringify({ undici: results.undici, httpProxy3: results['http-proxy-3'] }));
  console.log(
    `undici Agent: ${Math.round(u)} req/s · http-proxy-3: ${Math.round(h)} req/s · ratio ${(u / h).toFixed(2)}x`,
  );
}

const i = process.argv.indexOf('--serve');
if (i >= 0) {
  const [kind, target] = process.argv.slice(i + 1);
  if (kind === undefined || target === undefined) throw new Error('usage: --serve <kind> <upstream url>');
  await serve(kind, target);
} else await main();
