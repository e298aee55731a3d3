// The token sources against a real token endpoint on a local port: Entra's client-credentials grant
// and a Google service account (its grant sent to the key file's token_uri), cached, refreshed before
// expiry, one grant in flight, a refused grant held for 30 s, an endpoint that fails retried. Also the
// chains without a secret: Google's metadata server (the metadata simulator) and Entra workload identity.

import assert from 'node:assert/strict';
import { generateKeyPairSync, verify } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { after, before, test } from 'node:test';
import pino from 'pino';
import { GatewayError } from '../../../common/errors.ts';
import { entraTokenFetch, entraTokenUrl, entraWorkloadTokenFetch } from '../../../hooks/credentials/entra.ts';
import {
  adcTokenFetch,
  GOOGLE_SCOPE,
  googleTokenFetch,
  metadataServerConfigured,
  metadataTokenFetch,
  readGoogleCredentialsFile,
  readServiceAccount,
} from '../../../hooks/credentials/google.ts';
import { resolveProviderCredentials, ruleAuthorizer } from '../../../hooks/credentials/index.ts';
import { REFUSED_HOLD_MS, TokenCache } from '../../../hooks/credentials/token-cache.ts';
import { compileProviderSource, defaultRegistries } from '../../../hooks/dsl/index.ts';
import { startCloudMetadata } from '../../../sim/upstream/cloud-metadata.ts';
import { startTokenEndpoint, type TokenEndpoint } from '../../support/token-endpoint.ts';

const SECRET = 'entra-client-secret-do-not-log';
const creds = { tenantId: 'tenant-1', clientId: 'client-1', clientSecret: SECRET };

let ep: TokenEndpoint;
let dir: string;
before(async () => {
  ep = await startTokenEndpoint();
  dir = await mkdtemp(join(tmpdir(), 'creds-test-'));
});
after(async () => {
  await ep.close();
  await rm(dir, { recursive: true, force: true });
});

function reset(): void {
  ep.grants.length = 0;
  ep.status = 200;
  ep.expiresIn = 3600;
  ep.delayMs = 0;
  ep.check = undefined;
}

function capture(): { log: pino.Logger; lines: string[] } {
  const lines: string[] = [];
  const log = pino(
    { level: 'debug' },
    new Writable({
      write(chunk, _enc, cb) {
        lines.push(String(chunk));
        cb();
      },
    }),
  );
  return { log, lines };
}

function entraCache(opts: { deadlineMs?: number; now?: () => number } = {}): TokenCache {
  return new TokenCache({
    provider: 'azure-openai',
    scheme: 'entra',
    check: 'check the Entra application client-1 of tenant tenant-1',
    fetch: entraTokenFetch(creds, ep.url),
    deadlineMs: opts.deadlineMs ?? 2000,
    ...(opts.now === undefined ? {} : { now: opts.now }),
  });
}

test('entra: the grant goes to <authority>/<tenant>/oauth2/v2.0/token with the Cognitive Services scope', async () => {
  reset();
  assert.equal(entraTokenUrl('t', undefined), 'https://login.microsoftonline.com/t/oauth2/v2.0/token');
  const cache = entraCache();
  const { log } = capture();
  assert.equal(await cache.token(log), 'tok-1');
  assert.equal(ep.grants.length, 1);
  const g = ep.grants[0]!;
  assert.equal(g.path, '/tenant-1/oauth2/v2.0/token');
  assert.equal(g.form.get('grant_type'), 'client_credentials');
  assert.equal(g.form.get('client_id'), 'client-1');
  assert.equal(g.form.get('client_secret'), SECRET);
  assert.equal(g.form.get('scope'), 'https://cognitiveservices.azure.com/.default');
  // Cached: a valid token is answered without a promise and without a grant.
  assert.equal(cache.token(log), 'tok-1');
  assert.equal(ep.grants.length, 1);
});

test('a token is renewed in the background before it expires, and fetched again after expiry', async () => {
  reset();
  ep.expiresIn = 600;
  let now = Date.now();
  const grant = entraTokenFetch(creds, ep.url);
  const cache = new TokenCache({
    provider: 'azure-openai',
    scheme: 'entra',
    check: 'x',
    deadlineMs: 2000,
    now: () => now,
    // The endpoint's expiry, moved onto the test's clock.
    fetch: async (t) => {
      const f = await grant(t);
      return { token: f.token, expiresAt: now + (f.expiresAt - Date.now()) };
    },
  });
  const { log } = capture();
  const first = await cache.token(log);
  // Past its refresh point (5 minutes before expiry): still served at once, one grant starts behind it.
  now += 301_000;
  assert.equal(cache.token(log), first);
  assert.equal(cache.token(log), first);
  let second = first;
  while (second === first) {
    await new Promise((r) => setImmediate(r));
    second = await cache.token(log);
  }
  assert.equal(ep.grants.length, 2);
  assert.ok(ep.isValid(second));
  // Nobody asked past its expiry: the expired token is never served, a grant is awaited.
  now += 601_000;
  const pending = cache.token(log);
  assert.ok(pending instanceof Promise);
  const third = await pending;
  assert.notEqual(third, second);
  assert.equal(ep.grants.length, 3);
});

test('one grant in flight: 200 concurrent callers share it', async () => {
  reset();
  ep.delayMs = 150;
  const cache = entraCache();
  const { log } = capture();
  const tokens = await Promise.all(Array.from({ length: 200 }, () => cache.token(log)));
  assert.equal(new Set(tokens).size, 1);
  assert.equal(ep.grants.length, 1);
});

test('a refused grant (4xx): upstream_auth_failed naming the provider, not asked again for 30 s', async () => {
  reset();
  ep.status = 401;
  let now = Date.now();
  const cache = entraCache({ now: () => now });
  const { log, lines } = capture();
  await assert.rejects(
    async () => cache.token(log),
    (err: unknown) =>
      err instanceof GatewayError &&
      err.code === 'upstream_auth_failed' &&
      err.status === 502 &&
      err.message.includes("'azure-openai'"),
  );
  assert.equal(ep.grants.length, 1, 'a refusal is not retried');
  const logged = lines.join('');
  assert.match(logged, /check the Entra application client-1 of tenant tenant-1/);
  assert.match(logged, /invalid_client/);
  assert.equal(logged.includes(SECRET), false, 'the secret is never logged');
  // Held: the endpoint is not asked again...
  ep.status = 200;
  now += REFUSED_HOLD_MS - 1000;
  await assert.rejects(async () => cache.token(log), { code: 'upstream_auth_failed' });
  assert.equal(ep.grants.length, 1);
  // ...until the hold is over.
  now += 2000;
  assert.ok(ep.isValid(await cache.token(log)));
  assert.equal(ep.grants.length, 2);
});

test('an endpoint answering 5xx is retried with backoff until it answers', async () => {
  reset();
  ep.status = (_g, i) => (i < 2 ? 503 : 200);
  const cache = entraCache();
  const { log } = capture();
  const token = await cache.token(log);
  assert.ok(ep.isValid(token));
  assert.equal(ep.grants.length, 3);
});

test('an endpoint that keeps failing: retried within the connect timeout, then upstream_unreachable', async () => {
  reset();
  ep.status = 500;
  const cache = entraCache({ deadlineMs: 600 });
  const { log, lines } = capture();
  const t0 = Date.now();
  await assert.rejects(
    async () => cache.token(log),
    (err: unknown) =>
      err instanceof GatewayError &&
      err.code === 'upstream_unreachable' &&
      err.message.includes("'azure-openai'"),
  );
  const took = Date.now() - t0;
  assert.ok(ep.grants.length >= 2, `retried (${ep.grants.length} grants)`);
  assert.ok(took < 1500, `within the deadline (${took} ms)`);
  assert.equal(lines.join('').includes(SECRET), false);
  // Not held: the next request asks again.
  ep.status = 200;
  assert.ok(ep.isValid(await cache.token(log)));
});

test('an endpoint that is not listening: upstream_unreachable', async () => {
  const closed = await startTokenEndpoint();
  const url = closed.url;
  await closed.close();
  const cache = new TokenCache({
    provider: 'azure-openai',
    scheme: 'entra',
    check: 'x',
    fetch: entraTokenFetch(creds, url),
    deadlineMs: 400,
  });
  await assert.rejects(async () => cache.token(capture().log), { code: 'upstream_unreachable' });
});

test("a provider whose token endpoint hangs does not hold up another provider's", async () => {
  reset();
  const hanging = new TokenCache<string>({
    provider: 'slow',
    scheme: 'entra',
    check: 'x',
    fetch: () => new Promise(() => undefined),
    deadlineMs: 60_000,
  });
  const { log } = capture();
  void hanging.token(log);
  const t0 = Date.now();
  assert.ok(ep.isValid(await entraCache().token(log)));
  assert.ok(Date.now() - t0 < 1000);
});

async function serviceAccountFile(
  tokenUri: string | undefined,
): Promise<{ file: string; publicKey: string }> {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', {
    modulusLength: 2048,
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
    publicKeyEncoding: { type: 'spki', format: 'pem' },
  });
  const file = join(dir, `sa-${Math.random().toString(36).slice(2)}.json`);
  await writeFile(
    file,
    JSON.stringify({
      type: 'service_account',
      project_id: 'proj-1',
      private_key_id: 'kid-1',
      private_key: privateKey,
      client_email: 'gw@proj-1.iam.gserviceaccount.com',
      ...(tokenUri === undefined ? {} : { token_uri: tokenUri }),
    }),
  );
  return { file, publicKey };
}

test("google: the signed grant goes to the key file's token_uri, with that aud and the cloud-platform scope", async () => {
  reset();
  const tokenUri = `${ep.url}/private-cloud/token`;
  const { file, publicKey } = await serviceAccountFile(tokenUri);
  const read = readServiceAccount(file);
  assert.ok(read.ok);
  assert.equal(read.account.projectId, 'proj-1');
  ep.check = (grant) => {
    if (grant.form.get('grant_type') !== 'urn:ietf:params:oauth:grant-type:jwt-bearer')
      return 'unsupported_grant_type';
    const [h, p, s] = (grant.form.get('assertion') ?? '').split('.');
    const signed = verify(
      'RSA-SHA256',
      Buffer.from(`${h}.${p}`),
      publicKey,
      Buffer.from(s ?? '', 'base64url'),
    );
    if (!signed) return 'invalid_grant';
    const claims = JSON.parse(Buffer.from(p!, 'base64url').toString('utf8'));
    if (claims.aud !== tokenUri || claims.scope !== GOOGLE_SCOPE) return 'invalid_scope';
    if (claims.iss !== 'gw@proj-1.iam.gserviceaccount.com') return 'invalid_client';
    return undefined;
  };
  ep.expiresIn = 120;
  const cache = new TokenCache({
    provider: 'vertex',
    scheme: 'google',
    check: 'check the service account',
    fetch: googleTokenFetch(read.account),
    deadlineMs: 3000,
  });
  const { log } = capture();
  const token = await cache.token(log);
  assert.ok(ep.isValid(token));
  assert.equal(ep.grants.length, 1);
  assert.equal(ep.grants[0]!.path, '/private-cloud/token');
  assert.equal(cache.token(log), token);
});

test('google: a refused grant is upstream_auth_failed; a 5xx is retried by the cache, not the library', async () => {
  reset();
  const { file } = await serviceAccountFile(`${ep.url}/token`);
  const read = readServiceAccount(file);
  assert.ok(read.ok);
  ep.status = 400;
  const cache = new TokenCache({
    provider: 'vertex',
    scheme: 'google',
    check: 'check the service account',
    fetch: googleTokenFetch(read.account),
    deadlineMs: 3000,
  });
  await assert.rejects(async () => cache.token(capture().log), { code: 'upstream_auth_failed' });
  assert.equal(ep.grants.length, 1);

  reset();
  ep.status = (_g, i) => (i < 1 ? 503 : 200);
  const again = new TokenCache({
    provider: 'vertex',
    scheme: 'google',
    check: 'x',
    fetch: googleTokenFetch(read.account),
    deadlineMs: 3000,
  });
  assert.ok(ep.isValid(await again.token(capture().log)));
  assert.equal(ep.grants.length, 2);
});

test('google: an unreadable or wrong key file is a problem that names the file, never its content', async () => {
  const missing = readServiceAccount(join(dir, 'nope.json'));
  assert.equal(missing.ok, false);
  assert.match(
    !missing.ok ? missing.problem : '',
    /cannot read the service account file .*nope\.json \(ENOENT\)/,
  );
  const notSa = join(dir, 'user.json');
  await writeFile(notSa, JSON.stringify({ type: 'authorized_user', refresh_token: 'secret-refresh' }));
  const wrong = readServiceAccount(notSa);
  assert.equal(wrong.ok, false);
  assert.equal(!wrong.ok && wrong.problem.includes('secret-refresh'), false);
  // No token_uri: Google's.
  const { file } = await serviceAccountFile(undefined);
  const r = readServiceAccount(file);
  assert.ok(r.ok && r.account.tokenUri === 'https://oauth2.googleapis.com/token');
});

test('a token the upstream refuses is dropped once it is older than the hold; a fresh one is kept', async () => {
  reset();
  let now = Date.now();
  const cache = entraCache({ now: () => now });
  const { log } = capture();
  const first = await cache.token(log);
  cache.refused();
  assert.equal(cache.token(log), first, 'just fetched: kept, no grant per refused request');
  now += REFUSED_HOLD_MS;
  cache.refused();
  const second = await cache.token(log);
  assert.notEqual(second, first);
  assert.equal(ep.grants.length, 2);
});

test("google: without a key file, the metadata server's token (GCE_METADATA_HOST, or found on Google Cloud)", async () => {
  const meta = await startCloudMetadata({ lifetimeS: 1200 });
  const saved = process.env.GCE_METADATA_HOST;
  // gcp-metadata reads the host from the process environment only.
  process.env.GCE_METADATA_HOST = new URL(meta.url).host;
  try {
    const env = { GCE_METADATA_HOST: new URL(meta.url).host };
    assert.equal(
      metadataServerConfigured(env, () => false),
      true,
    );
    assert.equal(
      metadataServerConfigured({}, () => true),
      true,
    );
    assert.equal(
      metadataServerConfigured({}, () => false),
      false,
    );
    assert.equal(
      metadataServerConfigured({ ...env, METADATA_SERVER_DETECTION: 'none' }, () => true),
      false,
    );
    const cache = new TokenCache({
      provider: 'vertex',
      scheme: 'google-metadata',
      check: 'check the attached service account',
      fetch: metadataTokenFetch(),
      deadlineMs: 3000,
    });
    const { log } = capture();
    const token = await cache.token(log);
    assert.ok(meta.googleTokenValid(token));
    assert.equal(cache.token(log), token, 'cached');
    assert.equal(meta.stats.gce, 1);

    meta.fail('gce', 404, 1);
    const refused = new TokenCache({
      provider: 'vertex',
      scheme: 'google-metadata',
      check: 'check the attached service account',
      fetch: metadataTokenFetch(),
      deadlineMs: 3000,
    });
    const { log: log2, lines } = capture();
    await assert.rejects(async () => refused.token(log2), { code: 'upstream_auth_failed' });
    assert.match(lines.join(''), /check the attached service account/);

    meta.fail('gce', 503, 2);
    const retried = new TokenCache({
      provider: 'vertex',
      scheme: 'google-metadata',
      check: 'x',
      fetch: metadataTokenFetch(),
      deadlineMs: 5000,
    });
    assert.ok(meta.googleTokenValid(await retried.token(log)));
  } finally {
    if (saved === undefined) delete process.env.GCE_METADATA_HOST;
    else process.env.GCE_METADATA_HOST = saved;
    await meta.close();
  }
});

test('google: a provider resolves to the metadata server only without a key file; project from GOOGLE_CLOUD_PROJECT', () => {
  const r = compileProviderSource(
    'vertex-x.conf',
    `syntax "next-router/0.1";
provider "vertex-x" {
  defaults {
    upstream_config { base_url = "http://127.0.0.1:1"; }
    auth { auth_google; }
  }
  match api = "chat.completions" { upstream { set_path template("/v1/projects/\${provider.project}/x"); } }
}
`,
    { registries: defaultRegistries(), env: {} },
  );
  assert.deepEqual(r.diagnostics, []);
  const provider = r.provider!;
  const resolve = (env: Record<string, string>, gcp: boolean) =>
    resolveProviderCredentials({
      provider,
      keys: [],
      file: undefined,
      env,
      connectTimeoutMs: 1000,
      host: { ec2: () => false, gcp: () => gcp },
    });
  const onGcp = resolve({ GOOGLE_CLOUD_PROJECT: 'proj-9' }, true);
  assert.equal(ruleAuthorizer(provider.rules[0]!.auth, onGcp)?.channel, 'google-metadata');
  assert.equal(onGcp.settings.project, 'proj-9');
  assert.deepEqual(onGcp.problems, []);
  const offGcp = resolve({}, false);
  assert.equal(ruleAuthorizer(provider.rules[0]!.auth, offGcp), undefined);
  assert.match(offGcp.problems.join('\n'), /\$\{provider\.project\}: set ROUTER_PROVIDER_VERTEX_X_PROJECT/);
});

test('entra workload identity: the federated token file is the client assertion, read at every grant', async () => {
  reset();
  const file = join(dir, 'azure-identity-token');
  await writeFile(file, 'federated-jwt-1\n');
  ep.check = (g) =>
    g.form.get('client_assertion_type') === 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer' &&
    g.form.get('client_assertion')?.startsWith('federated-jwt-') &&
    g.form.get('client_secret') === null
      ? undefined
      : 'invalid_client';
  const cache = new TokenCache({
    provider: 'azure-openai',
    scheme: 'entra-workload-identity',
    check: 'check the federated credential',
    fetch: entraWorkloadTokenFetch({ tenantId: 'tenant-1', clientId: 'client-1', tokenFile: file }, ep.url),
    deadlineMs: 2000,
  });
  const { log, lines } = capture();
  assert.ok(ep.isValid(await cache.token(log)));
  const g = ep.grants[0]!;
  assert.equal(g.path, '/tenant-1/oauth2/v2.0/token');
  assert.equal(g.form.get('client_id'), 'client-1');
  assert.equal(g.form.get('client_assertion'), 'federated-jwt-1');
  assert.equal(g.form.get('scope'), 'https://cognitiveservices.azure.com/.default');

  // A rotated file is read at the next grant; a refused assertion is upstream_auth_failed.
  await writeFile(file, 'rotated-but-refused\n');
  const next = new TokenCache({
    provider: 'azure-openai',
    scheme: 'entra-workload-identity',
    check: 'check the federated credential',
    fetch: entraWorkloadTokenFetch({ tenantId: 'tenant-1', clientId: 'client-1', tokenFile: file }, ep.url),
    deadlineMs: 2000,
  });
  await assert.rejects(async () => next.token(log), { code: 'upstream_auth_failed' });
  assert.equal(ep.grants.at(-1)!.form.get('client_assertion'), 'rotated-but-refused');
  assert.equal(lines.join('').includes('federated-jwt-1'), false, 'the assertion is never logged');
});

test('entra: a secret wins over workload identity; workload identity needs its tenant and client; unreadable file', async () => {
  const r = compileProviderSource(
    'az.conf',
    `syntax "next-router/0.1";
provider "az" {
  defaults { upstream_config { base_url = "http://127.0.0.1:1"; } auth { auth_entra; } }
  match api = "chat.completions" { upstream { set_path "/x"; } }
}
`,
    { registries: defaultRegistries(), env: {} },
  );
  assert.deepEqual(r.diagnostics, []);
  const provider = r.provider!;
  const file = join(dir, 'fed-token');
  await writeFile(file, 'jwt');
  const resolve = (env: Record<string, string>, fileCreds?: { entra: typeof creds }) =>
    resolveProviderCredentials({ provider, keys: [], file: fileCreds, env, connectTimeoutMs: 1000 });
  const channel = (c: ReturnType<typeof resolve>) => ruleAuthorizer(provider.rules[0]!.auth, c)?.channel;
  const workload = { AZURE_TENANT_ID: 't', AZURE_CLIENT_ID: 'c', AZURE_FEDERATED_TOKEN_FILE: file };
  assert.equal(channel(resolve(workload)), 'entra-workload-identity');
  assert.deepEqual(resolve(workload).problems, []);
  assert.equal(channel(resolve({ ...workload, AZURE_CLIENT_SECRET: 's' })), 'entra');
  assert.equal(channel(resolve(workload, { entra: creds })), 'entra');
  assert.match(
    resolve({ AZURE_FEDERATED_TOKEN_FILE: file, AZURE_TENANT_ID: 't' }).problems.join('\n'),
    /AZURE_FEDERATED_TOKEN_FILE set but AZURE_CLIENT_ID not/,
  );
  const unreadable = resolve({ ...workload, AZURE_FEDERATED_TOKEN_FILE: '/nonexistent/azure-token' });
  assert.equal(channel(unreadable), undefined);
  assert.match(
    unreadable.problems.join('\n'),
    /cannot read the federated token file \/nonexistent\/azure-token \(ENOENT\)/,
  );
});

test("google ADC: a user's credentials file (authorized_user) refreshes its token at the file's token_uri", async () => {
  reset();
  const file = join(dir, 'adc-user.json');
  const REFRESH = 'refresh-token-never-logged';
  await writeFile(
    file,
    JSON.stringify({
      type: 'authorized_user',
      client_id: 'user-client.apps.googleusercontent.com',
      client_secret: 'user-client-secret-never-logged',
      refresh_token: REFRESH,
      token_uri: `${ep.url}/user-token`,
    }),
  );
  const read = readGoogleCredentialsFile(file);
  assert.ok(read.ok && read.adc !== undefined);
  assert.equal(read.adc.channel, 'google-authorized-user');
  ep.check = (g) =>
    g.form.get('grant_type') === 'refresh_token' && g.form.get('refresh_token') === REFRESH
      ? undefined
      : 'invalid_grant';
  const cache = new TokenCache({
    provider: 'vertex',
    scheme: read.adc.channel,
    check: read.adc.check,
    fetch: adcTokenFetch(read.adc),
    deadlineMs: 3000,
  });
  const { log, lines } = capture();
  assert.ok(ep.isValid(await cache.token(log)));
  assert.equal(ep.grants.at(-1)!.path, '/user-token');

  ep.check = () => 'invalid_grant';
  const revoked = new TokenCache({
    provider: 'vertex',
    scheme: read.adc.channel,
    check: read.adc.check,
    fetch: adcTokenFetch(read.adc),
    deadlineMs: 3000,
  });
  await assert.rejects(async () => revoked.token(log), { code: 'upstream_auth_failed' });
  const logged = lines.join('');
  assert.match(logged, /gcloud auth application-default login/);
  assert.equal(logged.includes(REFRESH) || logged.includes('user-client-secret-never-logged'), false);
});

test("google ADC: gcloud's well-known file when nothing else is set; external_account files; other types refused", async () => {
  const gcloud = join(dir, 'gcloud');
  const { mkdir } = await import('node:fs/promises');
  await mkdir(gcloud, { recursive: true });
  await writeFile(
    join(gcloud, 'application_default_credentials.json'),
    JSON.stringify({ type: 'authorized_user', client_id: 'c', client_secret: 's', refresh_token: 'r' }),
  );
  const r = compileProviderSource(
    'vertex-y.conf',
    `syntax "next-router/0.1";
provider "vertex-y" {
  defaults { upstream_config { base_url = "http://127.0.0.1:1"; } auth { auth_google; } }
  match api = "chat.completions" { upstream { set_path "/x"; } }
}
`,
    { registries: defaultRegistries(), env: {} },
  );
  const provider = r.provider!;
  const resolve = (env: Record<string, string>) =>
    resolveProviderCredentials({
      provider,
      keys: [],
      file: undefined,
      env,
      connectTimeoutMs: 1000,
      host: { ec2: () => false, gcp: () => true },
    });
  const channel = (env: Record<string, string>) =>
    ruleAuthorizer(provider.rules[0]!.auth, resolve(env))?.channel;
  assert.equal(channel({ CLOUDSDK_CONFIG: gcloud }), 'google-authorized-user');
  assert.equal(channel({ CLOUDSDK_CONFIG: join(dir, 'no-gcloud') }), 'google-metadata');

  const external = join(dir, 'wif.json');
  await writeFile(
    external,
    JSON.stringify({
      type: 'external_account',
      audience: '//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/q',
      subject_token_type: 'urn:ietf:params:oauth:token-type:jwt',
      token_url: 'https://sts.googleapis.com/v1/token',
      credential_source: { file: '/var/run/token' },
    }),
  );
  assert.equal(channel({ GOOGLE_APPLICATION_CREDENTIALS: external }), 'google-external-account');

  const odd = join(dir, 'odd.json');
  await writeFile(odd, JSON.stringify({ type: 'gdch_service_account', private_key: 'x' }));
  const bad = resolve({ GOOGLE_APPLICATION_CREDENTIALS: odd });
  assert.equal(ruleAuthorizer(provider.rules[0]!.auth, bad), undefined);
  assert.match(bad.problems.join('\n'), /is not a Google credentials file of a type the gateway takes/);
});

test('a token is not sent in the last quarter of its life (at most 30 s): callers wait for a fresh one', async () => {
  let now = 1_000_000;
  let fetched = 0;
  const cache = new TokenCache<string>({
    provider: 'vertex',
    scheme: 'google',
    check: 'x',
    deadlineMs: 2000,
    now: () => now,
    fetch: async () => {
      fetched++;
      return { token: `t${fetched}`, expiresAt: now + 2000 };
    },
  });
  const { log } = capture();
  assert.equal(await cache.token(log), 't1');
  now += 1400;
  // Past its refresh point (half its life) it is still sent while a new one is fetched behind it.
  assert.equal(cache.token(log), 't1');
  await new Promise((r) => setImmediate(r));
  assert.equal(fetched, 2);
  now += 1000;
  assert.equal(cache.token(log), 't2');
  // t2 came at 1,001,400 for 2 s: from 1,002,900 (1.5 s into it) callers wait for t3, though t2 lives on.
  now = 1_000_000 + 1400 + 1500;
  const next = cache.token(log);
  assert.ok(next instanceof Promise, 'a token this close to its expiry is not handed out');
  assert.equal(await next, 't3');
});
