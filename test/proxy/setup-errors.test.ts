// Setup errors a new operator meets, each reported in the gateway's log with what to fix, and never to
// clients: a provider the registry routes to without its upstream key (warned at start-up, on reload
// and by `router -t`), and an upstream that cannot be reached (the log line names host:port, the
// transport's code and its message). Real processes throughout: a gateway, the upstream simulator, a
// closed port, an unresolvable host, a server that resets, one that never answers, and a TLS server
// with a self-signed certificate.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { generateKeyPairSync, sign, X509Certificate } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer as createNetServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { createServer as createTlsServer } from 'node:tls';
import { promisify } from 'node:util';
import { GatewayError } from '../../common/errors.ts';
import { checkConfig, startGateway } from '../../proxy/gateway.ts';
import { missingProviderKeyWarning } from '../../proxy/runtime-compile.ts';
import { classifyUpstreamError, upstreamFailure } from '../../proxy/upstream.ts';
import { capturingLogger, type LogLine } from '../support/billing-stack.ts';
import { postJson, ROOT, type Stack, startStack } from '../support/stack.ts';

const WARN = 40;
const DEBUG = 20;
const KEY_WARNING = /has no upstream API key/;

function chat(model: string): Record<string, unknown> {
  return { model, messages: [{ role: 'user', content: 'hi' }] };
}

function errorOf(json: unknown): { code: string; message: string } {
  return (json as { error: { code: string; message: string } }).error;
}

/** A provider file with the given auth block (none at all when undefined), pointed nowhere by default. */
function providerFile(name: string, auth: string | undefined): string {
  return `syntax "next-router/0.1";
provider "${name}" {
  defaults {
    upstream_config { base_url = "http://127.0.0.1:1"; }
    ${auth ?? ''}
    response { resp_passthrough; }
    metrics { usage_extract openai_chat_completions; }
  }
  match api = "chat.completions" { upstream { set_path "/v1/chat/completions"; } }
}
`;
}

describe('a routed provider without an upstream key', () => {
  let stack: Stack;
  let keysDir: string;
  let keysFile: string;
  const logs: LogLine[] = [];
  const keyWarnings = (from = 0) =>
    logs.slice(from).filter((l) => l.level === WARN && KEY_WARNING.test(String(l.msg)));

  before(async () => {
    keysDir = await mkdtemp(join(tmpdir(), 'router-setup-keys-'));
    keysFile = join(keysDir, 'keys.yaml');
    // anthropic's key comes from the keys file alone (its variable is emptied below).
    await writeFile(keysFile, 'providers:\n  anthropic:\n    api_key: from-the-keys-file\n');
    stack = await startStack({
      providers: {
        // No auth block: a local server that needs no key.
        plainlocal: providerFile('plainlocal', undefined),
      },
      modelsYaml: [
        'models:',
        '  gpt-a: { providers: [openai] }',
        '  gpt-b: { providers: [openai] }',
        '  gpt-c: { providers: [openai] }',
        '  gpt-d: { providers: [openai] }',
        '  gpt-e: { providers: [openai] }',
        '  "mistral-*": { providers: [mistral] }',
        '  shared: { providers: [anthropic, mistral] }',
        '  local-llama: { providers: [ollama] }',
        '  plain-model: { providers: [plainlocal] }',
        '',
      ].join('\n'),
      extraYaml: `keys: ${keysFile}`,
      // Empty variables count as unset: these providers get no key from the environment.
      env: {
        ROUTER_PROVIDER_OPENAI_API_KEY: '',
        ROUTER_PROVIDER_MISTRAL_API_KEY: '',
        ROUTER_PROVIDER_ANTHROPIC_API_KEY: '',
        ROUTER_PROVIDER_OLLAMA_API_KEY: '',
        ROUTER_PROVIDER_PLAINLOCAL_API_KEY: '',
        // groq has no key but nothing in the registry routes to it.
        ROUTER_PROVIDER_GROQ_API_KEY: '',
      },
      sim: { requireAuth: false },
      logger: capturingLogger(logs, 'info'),
    });
  });
  after(async () => {
    await stack?.close();
    await rm(keysDir, { recursive: true, force: true });
  });

  test('start-up warns once per such provider, with the variable, the keys file entry and the models', () => {
    const warned = keyWarnings();
    assert.deepEqual(warned.map((l) => l.provider).sort(), ['mistral', 'openai'], JSON.stringify(warned));

    const openai = warned.find((l) => l.provider === 'openai')!;
    assert.equal(openai.variable, 'ROUTER_PROVIDER_OPENAI_API_KEY');
    assert.equal(openai.keysFile, keysFile);
    assert.deepEqual(openai.models, ['gpt-a', 'gpt-b', 'gpt-c']);
    assert.equal(openai.moreModels, 2);
    assert.match(String(openai.msg), /^provider 'openai' has no upstream API key: /);
    assert.match(String(openai.msg), /requests for gpt-a, gpt-b, gpt-c and 2 more /);
    assert.match(String(openai.msg), /503 provider_key_missing/);
    assert.ok(
      String(openai.msg).endsWith(
        `set ROUTER_PROVIDER_OPENAI_API_KEY or add providers.openai.api_key to the keys file ${keysFile}`,
      ),
      String(openai.msg),
    );

    const mistral = warned.find((l) => l.provider === 'mistral')!;
    assert.equal(mistral.variable, 'ROUTER_PROVIDER_MISTRAL_API_KEY');
    assert.deepEqual(mistral.models, ['mistral-*', 'shared']);
    assert.equal(mistral.moreModels, 0);
    assert.match(String(mistral.msg), /requests for mistral-\*, shared will be refused/);
    assert.doesNotMatch(String(mistral.msg), /more/);
  });

  test('providers whose rules send no credential, or that have a key, or that nothing routes to are not warned about', async () => {
    const named = keyWarnings().map((l) => String(l.provider));
    for (const quiet of ['ollama', 'plainlocal', 'anthropic', 'groq']) {
      assert.ok(!named.includes(quiet), `${quiet} warned: ${named.join(', ')}`);
    }
    // The keyless local provider really is served without a key.
    const reply = await postJson(`${stack.url}/v1/chat/completions`, chat('plain-model'));
    assert.equal(reply.status, 200, reply.text);
  });

  test("the client's error is unchanged: 503 naming the provider, not the server's variable", async () => {
    const reply = await postJson(`${stack.url}/v1/chat/completions`, chat('gpt-a'));
    assert.equal(reply.status, 503);
    const error = errorOf(reply.json);
    assert.equal(error.code, 'provider_key_missing');
    assert.match(error.message, /'openai'/);
    assert.doesNotMatch(reply.text, /ROUTER_PROVIDER|keys\.yaml|api_key/);
  });

  test("named by x-router-provider, a provider without its key is the client's 400, not a 503", async () => {
    for (const provider of ['openai', 'groq']) {
      const reply = await postJson(`${stack.url}/v1/chat/completions`, chat('gpt-a'), {
        'x-router-provider': provider,
      });
      assert.equal(reply.status, 400, reply.text);
      const error = errorOf(reply.json);
      assert.equal(error.code, 'provider_not_offered');
      assert.match(
        error.message,
        new RegExp(`x-router-provider header names '${provider}'.*no upstream credentials`),
      );
      assert.doesNotMatch(reply.text, /ROUTER_PROVIDER|keys\.yaml|api_key/);
    }
    // A keyless local server the registry routes to is offered.
    const local = await postJson(`${stack.url}/v1/chat/completions`, chat('llama'), {
      'x-router-provider': 'ollama',
    });
    assert.equal(local.status, 200, local.text);
  });

  test('a reload warns again', async () => {
    const from = logs.length;
    assert.deepEqual(await stack.gateway.reload(), []);
    assert.deepEqual(
      keyWarnings(from)
        .map((l) => l.provider)
        .sort(),
      ['mistral', 'openai'],
    );
  });

  test('with workers: n the first worker warns; the others say it at debug level only', async () => {
    const workerLogs: LogLine[] = [];
    for (const id of ['1', '2']) {
      const from = workerLogs.length;
      const gw = await startGateway(join(stack.dir, 'router.yaml'), {
        env: { ...stack.env, ROUTER_WORKER_ID: id },
        logger: capturingLogger(workerLogs, 'debug'),
        sidecar: false,
        overrides: { listen: '127.0.0.1:0' },
      });
      await gw.close();
      const said = workerLogs.slice(from).filter((l) => KEY_WARNING.test(String(l.msg)));
      assert.deepEqual(
        said.map((l) => l.level),
        id === '1' ? [WARN, WARN] : [DEBUG, DEBUG],
        `worker ${id}`,
      );
    }
  });

  test('checkConfig (router -t) lists it as a warning, not a problem', async () => {
    const warnings: string[] = [];
    const problems = await checkConfig(join(stack.dir, 'router.yaml'), { env: stack.env, warnings });
    assert.deepEqual(problems, []);
    const keyLines = warnings.filter((w) => KEY_WARNING.test(w));
    assert.equal(keyLines.length, 2, warnings.join('\n'));
    assert.ok(keyLines.some((w) => w.startsWith("provider 'openai' has no upstream API key")));
    assert.ok(keyLines.some((w) => w.includes('set ROUTER_PROVIDER_MISTRAL_API_KEY')));
  });

  test('router -t prints it as a warning line and exits 0', async () => {
    const run = promisify(execFile);
    const { stdout, stderr } = await run(
      process.execPath,
      [join(ROOT, 'proxy/cli.ts'), '-t', join(stack.dir, 'router.yaml')],
      { env: { PATH: process.env.PATH ?? '', ...stack.env }, timeout: 30_000 },
    );
    assert.match(stdout, /is valid/);
    const lines = stderr.split('\n').filter((l) => KEY_WARNING.test(l));
    assert.equal(lines.length, 2, stderr);
    for (const line of lines) assert.match(line, /^warning: provider '(openai|mistral)' /);
    assert.ok(lines.some((l) => l.includes('set ROUTER_PROVIDER_OPENAI_API_KEY')));
  });
});

test('the warning of a provider no variable can name, and without a keys file', () => {
  const text = missingProviderKeyWarning({
    provider: 'My_Local',
    variable: undefined,
    keysFile: undefined,
    models: ['a', 'b', 'c', 'd'],
  });
  assert.equal(
    text,
    "provider 'My_Local' has no upstream API key: requests for a, b, c and 1 more will be refused with 503 provider_key_missing; add providers.My_Local.api_key to a keys file (`keys:` of the main file)",
  );
});

// ---- upstream failures -------------------------------------------------------------------------

/** One DER element. */
function der(tag: number, ...parts: Buffer[]): Buffer {
  const body = Buffer.concat(parts);
  const n = body.length;
  const length = n < 0x80 ? [n] : n < 0x100 ? [0x81, n] : [0x82, n >> 8, n & 0xff];
  return Buffer.concat([Buffer.from([tag, ...length]), body]);
}

function utcTime(at: Date): Buffer {
  const text = at.toISOString().replace(/[-:T]/g, '').slice(2, 14);
  return der(0x17, Buffer.from(`${text}Z`));
}

/**
 * A self-signed certificate (ECDSA P-256, CN=localhost, valid a day either side of now) and its key,
 * built here so that no key material is kept in the repository and no openssl is needed.
 */
function selfSignedCertificate(): { cert: string; key: string } {
  const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const ecdsaWithSha256 = der(0x30, der(0x06, Buffer.from('2a8648ce3d040302', 'hex')));
  const name = der(
    0x30,
    der(0x31, der(0x30, der(0x06, Buffer.from('550403', 'hex')), der(0x0c, Buffer.from('localhost')))),
  );
  const day = 24 * 3600 * 1000;
  const tbs = der(
    0x30,
    der(0xa0, der(0x02, Buffer.from([2]))),
    der(0x02, Buffer.from([0x01, 0x23, 0x45, 0x67])),
    ecdsaWithSha256,
    name,
    der(0x30, utcTime(new Date(Date.now() - day)), utcTime(new Date(Date.now() + day))),
    name,
    publicKey.export({ type: 'spki', format: 'der' }),
  );
  const signature = sign('sha256', tbs, privateKey);
  const certDer = der(0x30, tbs, ecdsaWithSha256, der(0x03, Buffer.from([0]), signature));
  const cert = new X509Certificate(certDer).toString();
  return { cert, key: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString() };
}

function listen(server: Server): Promise<number> {
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      resolve(typeof address === 'object' && address !== null ? address.port : 0);
    });
  });
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => server.close(() => resolve()));
}

describe('an upstream call that fails before a reply', () => {
  let stack: Stack;
  const logs: LogLine[] = [];
  const servers: Server[] = [];
  const sockets = new Set<Socket>();
  let closedPort = 0;
  let resetPort = 0;
  let silentPort = 0;
  let tlsPort = 0;

  before(async () => {
    // A port that was free a moment ago and has no listener now: connecting is refused.
    const probe = createNetServer();
    closedPort = await listen(probe);
    await closeServer(probe);
    // Reads the request, then resets the connection.
    const reset = createNetServer((socket) => socket.once('data', () => socket.resetAndDestroy()));
    // Reads the request and never answers.
    const silent = createNetServer((socket) => {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.resume();
    });
    const { cert, key } = selfSignedCertificate();
    const tls = createTlsServer({ cert, key }, (socket) => socket.end());
    tls.on('tlsClientError', () => {});
    servers.push(reset, silent, tls);
    resetPort = await listen(reset);
    silentPort = await listen(silent);
    tlsPort = await listen(tls);
    stack = await startStack({
      providers: { querykey: providerFile('querykey', 'auth { auth_query_key "key"; }') },
      baseUrls: {
        deepseek: `http://127.0.0.1:${closedPort}`,
        mistral: 'http://nonexistent.invalid',
        groq: `http://127.0.0.1:${resetPort}`,
        together: `http://127.0.0.1:${silentPort}`,
        xai: `https://127.0.0.1:${tlsPort}`,
        querykey: `http://127.0.0.1:${closedPort}/prefix`,
      },
      modelsYaml: [
        'models:',
        '  m-refused: { providers: [deepseek] }',
        '  m-dns: { providers: [mistral] }',
        '  m-reset: { providers: [groq] }',
        '  m-timeout: { providers: [together] }',
        '  m-tls: { providers: [xai] }',
        '  m-query: { providers: [querykey] }',
        '',
      ].join('\n'),
      extraYaml: 'limits: { upstream_headers_timeout_ms: 500 }',
      logger: capturingLogger(logs, 'info'),
    });
  });
  after(async () => {
    await stack?.close();
    for (const socket of sockets) socket.destroy();
    await Promise.all(servers.map(closeServer));
  });

  /** The reply to one request for `model` and its 'upstream call failed' log line. */
  async function fail(model: string, provider: string, status = 502) {
    const from = logs.length;
    const reply = await postJson(`${stack.url}/v1/chat/completions`, chat(model));
    assert.equal(reply.status, status, reply.text);
    const lines = logs.slice(from).filter((l) => l.msg === 'upstream call failed');
    assert.equal(lines.length, 1, JSON.stringify(logs.slice(from)));
    const line = lines[0]!;
    assert.equal(line.provider, provider);
    assert.equal(line.level, WARN);
    // Nothing of the operator's: no upstream key (header or query) in the line.
    assert.doesNotMatch(JSON.stringify(line), /sim-[a-z]+-key/);
    return { reply, error: errorOf(reply.json), line };
  }

  /** The client's body names nothing of the upstream: no host, port, code or transport message. */
  function assertNothingUpstream(text: string, ...words: string[]): void {
    for (const word of ['127.0.0.1', 'nonexistent', ...words]) {
      assert.ok(!text.includes(word), `client body names ${word}: ${text}`);
    }
  }

  test('connection refused: host:port, ECONNREFUSED and the message in the log; 502 to the client', async () => {
    const { reply, error, line } = await fail('m-refused', 'deepseek');
    assert.equal(error.code, 'upstream_unreachable');
    assert.match(error.message, /^The upstream provider is unreachable \(request id: [0-9a-f-]+\)$/);
    assert.equal(line.upstream, `127.0.0.1:${closedPort}`);
    assert.equal(line.code, 'ECONNREFUSED');
    assert.match(String(line.cause), new RegExp(`ECONNREFUSED 127\\.0\\.0\\.1:${closedPort}`));
    // The catalogue error, as errorText gives it, beside the transport's own fields.
    assert.equal(line.err, 'The upstream provider is unreachable (upstream_unreachable)');
    assertNothingUpstream(reply.text, String(closedPort), 'ECONNREFUSED');
  });

  test('an unresolvable host: ENOTFOUND with the host name and the default port', async () => {
    const { reply, error, line } = await fail('m-dns', 'mistral');
    assert.equal(error.code, 'upstream_unreachable');
    assert.equal(line.upstream, 'nonexistent.invalid:80');
    // `.invalid` is a reserved name that never resolves; a host without any DNS server says EAI_AGAIN instead.
    assert.match(String(line.code), /^(ENOTFOUND|EAI_AGAIN)$/);
    assert.match(String(line.cause), /nonexistent\.invalid/);
    assertNothingUpstream(reply.text, 'ENOTFOUND', 'EAI_AGAIN', 'getaddrinfo');
  });

  test('a self-signed certificate: the TLS code and message', async () => {
    const { reply, error, line } = await fail('m-tls', 'xai');
    assert.equal(error.code, 'upstream_unreachable');
    assert.equal(line.upstream, `127.0.0.1:${tlsPort}`);
    assert.equal(line.code, 'DEPTH_ZERO_SELF_SIGNED_CERT');
    assert.match(String(line.cause), /self-signed certificate/);
    assertNothingUpstream(reply.text, String(tlsPort), 'SELF_SIGNED', 'certificate');
  });

  test('a connection reset before the reply: ECONNRESET', async () => {
    const { reply, error, line } = await fail('m-reset', 'groq');
    assert.equal(error.code, 'upstream_unreachable');
    assert.equal(line.upstream, `127.0.0.1:${resetPort}`);
    assert.equal(line.code, 'ECONNRESET');
    assert.match(String(line.cause), /ECONNRESET/);
    assertNothingUpstream(reply.text, String(resetPort), 'ECONNRESET');
  });

  test('no reply head in time: 504 to the client, the timeout code in the log', async () => {
    const { reply, error, line } = await fail('m-timeout', 'together', 504);
    assert.equal(error.code, 'upstream_timeout');
    assert.equal(line.upstream, `127.0.0.1:${silentPort}`);
    assert.equal(line.code, 'UND_ERR_HEADERS_TIMEOUT');
    assert.match(String(line.cause), /Headers Timeout/);
    assertNothingUpstream(reply.text, String(silentPort), 'UND_ERR');
  });

  test('a key sent in the query: the log line names host:port only, no path and no query', async () => {
    const { line } = await fail('m-query', 'querykey');
    assert.equal(line.upstream, `127.0.0.1:${closedPort}`);
    assert.equal(line.code, 'ECONNREFUSED');
    assert.doesNotMatch(JSON.stringify(line), /prefix|key=|sim-querykey-key/);
  });
});

describe('upstreamFailure', () => {
  test('follows wrapped causes (fetch and undici wrap the system error) and prefers the system code', () => {
    const system = Object.assign(new Error('connect ECONNREFUSED 10.0.0.1:443'), { code: 'ECONNREFUSED' });
    const wrapped = Object.assign(new Error('fetch failed', { cause: system }), { code: 'UND_ERR_SOCKET' });
    assert.deepEqual(upstreamFailure(wrapped, 'https://api.example.com'), {
      upstream: 'api.example.com:443',
      code: 'ECONNREFUSED',
      cause: 'fetch failed: connect ECONNREFUSED 10.0.0.1:443',
    });
  });

  test('an AggregateError of several addresses (happy eyeballs): its code and every message', () => {
    const v6 = Object.assign(new Error('connect ETIMEDOUT ::1:8443'), { code: 'ETIMEDOUT' });
    const v4 = Object.assign(new Error('connect ETIMEDOUT 127.0.0.1:8443'), { code: 'ETIMEDOUT' });
    const all = Object.assign(new AggregateError([v6, v4], ''), { code: 'ETIMEDOUT' });
    assert.deepEqual(upstreamFailure(all, 'http://localhost:8443'), {
      upstream: 'localhost:8443',
      code: 'ETIMEDOUT',
      cause: 'connect ETIMEDOUT ::1:8443; connect ETIMEDOUT 127.0.0.1:8443',
    });
  });

  test("an undici error alone keeps undici's code; the catalogue error's cause is not serialized", () => {
    const socket = Object.assign(new Error('other side closed'), { code: 'UND_ERR_SOCKET' });
    const gw = classifyUpstreamError(socket);
    assert.ok(gw instanceof GatewayError);
    assert.equal(gw.code, 'upstream_unreachable');
    assert.equal(gw.cause, socket);
    assert.doesNotMatch(JSON.stringify(gw), /other side closed|UND_ERR/);
    assert.deepEqual(upstreamFailure(gw, 'http://[::1]:9000'), {
      upstream: '[::1]:9000',
      code: 'UND_ERR_SOCKET',
      cause: 'other side closed',
    });
  });
});
