// The Node.js floor, as a bench peer: node:http in, undici out, nothing else. No authentication,
// routing, parsing, metering or metrics: the request body is forwarded as received, a JSON reply is
// buffered and sent with its length (as the gateway does), an event stream is written chunk by chunk as
// it arrives. Whatever the gateway costs beyond this peer is its own work; whatever this peer costs
// beyond nginx is what any Node.js proxy pays for the same path.
//
// `node bench/lib/bare-forwarder.ts <upstream origin> <port>`; answers GET /healthz when listening.

import { createServer } from 'node:http';
import { Agent } from 'undici';

const [upstream, portArg] = process.argv.slice(2);
if (upstream === undefined || portArg === undefined) {
  process.stderr.write('usage: bare-forwarder.ts <upstream origin> <port>\n');
  process.exit(2);
}

// The gateway's upstream leg settings (proxy/upstream.ts): no connection cap, no pipelining.
const agent = new Agent({ connections: null, pipelining: 1, keepAliveTimeout: 30_000 });
const FORWARDED = ['content-type', 'authorization', 'x-api-key', 'anthropic-version'];

const server = createServer({ noDelay: true, keepAliveTimeout: 65_000, requestTimeout: 0 }, (req, res) => {
  if (req.url === '/healthz') {
    res.end('ok');
    return;
  }
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', async () => {
    const headers: Record<string, string> = {};
    for (const name of FORWARDED) {
      const v = req.headers[name];
      if (typeof v === 'string') headers[name] = v;
    }
    try {
      const up = await agent.request({
        origin: upstream,
        path: req.url ?? '/',
        method: 'POST',
        headers,
        body: Buffer.concat(chunks),
      });
      const type = String(up.headers['content-type'] ?? 'application/json');
      if (!type.startsWith('text/event-stream')) {
        const body = Buffer.from(await up.body.arrayBuffer());
        res.writeHead(up.statusCode, { 'content-type': type, 'content-length': body.length });
        res.end(body);
        return;
      }
      res.writeHead(up.statusCode, { 'content-type': type, 'cache-control': 'no-cache' });
      res.flushHeaders();
      for await (const chunk of up.body) {
        if (!res.write(chunk)) await new Promise((resolve) => res.once('drain', resolve));
      }
      res.end();
    } catch {
      if (!res.headersSent) res.writeHead(502).end();
      else res.destroy();
    }
  });
});
server.listen(Number(portArg), '127.0.0.1');
