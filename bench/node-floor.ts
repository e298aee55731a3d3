// `node bench/node-floor.ts`: what any Node.js proxy on this path pays, measured beside the gateway.
// A bare forwarder (node:http in, undici Pool out, the JSON reply buffered and sent back: no parsing,
// validation, routing, metering or metrics) runs in its own process in front of the upstream simulator,
// next to the gateway (file mode, billing off). In 5 interleaved rounds: latency at concurrency 1 (1,000
// sequential requests per round, samples pooled) and throughput at concurrency 64 (3 s per round). The
// gap between the forwarder and the simulator is the floor under the gateway's added latency.

import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { latencySamples, throughput } from './lib/load.ts';
import {
  GATEWAY_V8_FLAGS,
  startGatewayProcess,
  startUpstreamSimProcess,
  type Workspace,
} from './lib/peers.ts';
import { chatTarget } from './lib/requests.ts';
import { summarize } from './lib/stats.ts';

const REPO = fileURLToPath(new URL('..', import.meta.url));

/** Child mode: the bare forwarder; prints its port. */
function serve(upstream: string): void {
  const pool = new Pool(upstream, { connections: 128 });
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const up = await pool.request({
        path: req.url ?? '/',
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: req.headers.authorization ?? '' },
        body: Buffer.concat(chunks),
      });
      const body = Buffer.from(await up.body.arrayBuffer());
      res.writeHead(up.statusCode, { 'content-type': 'application/json', 'content-length': body.length });
      res.end(body);
    });
  });
  server.listen(0, '127.0.0.1', () => console.log((server.address() as AddressInfo).port));
}

async function main(): Promise<void> {
  const tmp = await mkdtemp(join(tmpdir(), 'llm-router-floor-'));
  const ws: Workspace = {
    repo: REPO,
    tmp,
    gatewayNodeFlags: () => [...GATEWAY_V8_FLAGS],
    sidecarNodeFlags: () => [],
  };
  const up = await startUpstreamSimProcess(ws);
  const gw = await startGatewayProcess(ws, up.url, { id: 'gateway' });
  const floor = spawn(
    process.execPath,
    [...GATEWAY_V8_FLAGS, fileURLToPath(import.meta.url), 'serve', up.url],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const port = await new Promise<number>((resolve) =>
    floor.stdout?.once('data', (d: Buffer) => resolve(Number(d.toString().trim()))),
  );
  try {
    const direct = chatTarget({ id: 'direct', kind: 'direct', origin: up.url, service: up.service }, up.url);
    const targets = [
      ['upstream simulator (direct)', direct],
      ['bare Node forwarder', { ...direct, origin: `http://127.0.0.1:${port}` }],
      ['gateway, billing off', chatTarget(gw, up.url)],
    ] as const;
    const samples = new Map<string, Float64Array[]>();
    const rates = new Map<string, number[]>();
    for (let round = 0; round < 5; round++) {
      for (const [name, target] of targets) {
        const { samples: s } = await latencySamples(target, 1000, 100);
        samples.set(name, [...(samples.get(name) ?? []), s]);
        const r = await throughput(target, 64, 3);
        rates.set(name, [...(rates.get(name) ?? []), r.requestsPerSec]);
      }
    }
    const base = summarize(Float64Array.from(samples.get(targets[0][0])?.flatMap((a) => [...a]) ?? [])).p50;
    for (const [name] of targets) {
      const s = summarize(Float64Array.from(samples.get(name)?.flatMap((a) => [...a]) ?? []));
      const r = [...(rates.get(name) ?? [])].sort((a, b) => a - b);
      console.log(
        `${name.padEnd(30)} c=1 p50 ${s.p50.toFixed(3)} ms (added ${(s.p50 - base).toFixed(3)}), p99 ${s.p99.toFixed(3)} ms; c=64 median ${Math.round(r[2])} req/s`,
      );
    }
  } finally {
    floor.kill();
    await gw.service.stop();
    await up.service.stop();
    await rm(tmp, { recursive: true, force: true });
  }
}

if (process.argv[2] === 'serve') serve(process.argv[3]);
else await main();
