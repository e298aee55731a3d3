// biome-ignore-all lint/suspicious/noTemplateCurlyInString: the DSL's own templates are written ${...} inside plain strings
// The cloud auth directives (auth_sigv4, auth_google, auth_entra) and the provider.* template
// variables: what they compile to, their diagnostics, and how the rule hook treats the key directives
// beside them.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import pino from 'pino';
import { GatewayError } from '../../../common/errors.ts';
import type { RequestContext, UpstreamRequest } from '../../../common/types.ts';
import { createRuleHook } from '../../../hooks/builtin/provider-rule.ts';
import {
  resolveProviderCredentials,
  ruleAuthorizer,
  settingsUsed,
} from '../../../hooks/credentials/index.ts';
import { compileProviderSource, defaultRegistries, renderTemplate } from '../../../hooks/dsl/index.ts';
import { TRANSFORMS, TRANSLATORS } from '../../../hooks/families/index.ts';

function compile(auth: string, extra = '') {
  const src = `syntax "next-router/0.1";
provider "p" {
  defaults {
    upstream_config { base_url = "https://example.test"; }
    auth { ${auth} }
  }
  match api = "chat.completions" {
    upstream { set_path template("/v1/projects/\${provider.project}/locations/\${provider.location}/x"); ${extra} }
  }
}
`;
  return compileProviderSource('p.conf', src, { registries: defaultRegistries(), env: {} });
}

test('auth_sigv4 "<service>", auth_google and auth_entra compile in written order, beside key directives', () => {
  const r = compile('auth_entra; auth_sigv4 "bedrock"; auth_google; auth_header_key "api-key";');
  assert.deepEqual(r.diagnostics, []);
  assert.deepEqual(r.provider!.rules[0]!.auth, [
    { op: 'auth_entra' },
    { op: 'auth_sigv4', service: 'bedrock' },
    { op: 'auth_google' },
    { op: 'auth_header_key', header: 'api-key' },
  ]);
});

for (const [name, auth, message] of [
  ['sigv4 without its service', 'auth_sigv4;', '5:12: "auth_sigv4" expects 1 argument (service), got 0'],
  [
    'sigv4 with a bad service',
    'auth_sigv4 "Bed rock";',
    '5:23: invalid AWS service name "Bed rock" (for example "bedrock")',
  ],
  [
    'sigv4 with a name, not a string',
    'auth_sigv4 bedrock;',
    '5:23: the AWS service name must be a string in double quotes',
  ],
  ['google with an argument', 'auth_google "x";', '5:24: "auth_google" takes no arguments (none)'],
  ['entra twice', 'auth_entra; auth_entra;', '5:24: only one auth_entra per rule (the first is at 5:12)'],
  [
    'none with a cloud directive',
    'auth_none; auth_entra;',
    '5:12: auth_none cannot be combined with other auth directives',
  ],
] as const) {
  test(`diagnostic: ${name}`, () => {
    const r = compile(auth);
    assert.deepEqual(
      r.diagnostics.map((d) => `${d.line}:${d.col}: ${d.message}`),
      [message],
    );
  });
}

test('${provider.region|project|location} are request-time variables filled from the provider settings', () => {
  const r = compile('auth_google;', 'set_query "region" template("${provider.region}");');
  assert.deepEqual(r.diagnostics, []);
  const rule = r.provider!.rules[0]!;
  assert.deepEqual([...settingsUsed(r.provider!)].sort(), ['location', 'project', 'region']);
  const path = rule.upstream.find((op) => op.op === 'set_path')!;
  assert.ok(path.op === 'set_path');
  const vars = {
    model: 'm',
    modelMapped: 'm',
    requestId: 'r',
    api: 'chat.completions',
    provider: 'p',
    settings: { project: 'my-proj', location: 'us-east5', region: undefined },
  };
  assert.equal(renderTemplate(path.value, vars, 'path'), '/v1/projects/my-proj/locations/us-east5/x');
  // Missing settings are problems router -t names (the provider is then not offered).
  const creds = resolveProviderCredentials({
    provider: r.provider!,
    keys: [],
    file: undefined,
    env: { ROUTER_PROVIDER_P_LOCATION: 'global', AWS_REGION: 'eu-west-1' },
    connectTimeoutMs: 1000,
  });
  assert.deepEqual(creds.settings, { region: 'eu-west-1', project: undefined, location: 'global' });
  assert.match(
    creds.problems.join('\n'),
    /\$\{provider\.project\}: set ROUTER_PROVIDER_P_PROJECT \(or GOOGLE_CLOUD_PROJECT, or a credentials file with project_id\)/,
  );
});

function upstreamReq(): UpstreamRequest {
  return {
    method: 'POST',
    origin: 'https://example.test',
    path: '/',
    query: new URLSearchParams(),
    headers: {},
    body: {},
  };
}
const ctx = {
  log: pino({ level: 'silent' }),
  headers: {},
  id: 'r',
  api: 'chat.completions',
  model: 'm',
} as unknown as RequestContext;

test('"entra when configured, else api-key": the rule hook applies the key directive only as the fallback', async () => {
  const r = compile('auth_entra; auth_header_key "api-key";');
  const provider = r.provider!;
  const rule = provider.rules[0]!;
  const keys = [{ name: 'default', value: 'azure-key' }];
  const deps = { provider: 'p', translators: TRANSLATORS, transforms: TRANSFORMS, keys };

  const none = resolveProviderCredentials({
    provider,
    keys,
    file: undefined,
    env: {},
    connectTimeoutMs: 1000,
  });
  assert.equal(ruleAuthorizer(rule.auth, none), undefined);
  const plain = createRuleHook(rule, { ...deps, cloudAuth: false }).rewriteBody!(
    ctx,
    upstreamReq(),
  ) as UpstreamRequest;
  assert.equal(plain.headers['api-key'], 'azure-key');

  const entra = resolveProviderCredentials({
    provider,
    keys,
    file: { entra: { tenantId: 't', clientId: 'c', clientSecret: 's' } },
    env: {},
    connectTimeoutMs: 1000,
  });
  assert.equal(ruleAuthorizer(rule.auth, entra)?.scheme, 'entra');
  const cloud = createRuleHook(rule, { ...deps, cloudAuth: true }).rewriteBody!(
    ctx,
    upstreamReq(),
  ) as UpstreamRequest;
  assert.equal(cloud.headers['api-key'], undefined);
});

test('a cloud directive alone, not configured: the request is refused, nothing unauthenticated goes out', () => {
  const r = compile('auth_google;');
  const hook = createRuleHook(r.provider!.rules[0]!, {
    provider: 'p',
    translators: TRANSLATORS,
    transforms: TRANSFORMS,
    keys: [],
  });
  assert.throws(
    () => hook.rewriteBody!(ctx, upstreamReq()),
    (err: unknown) => err instanceof GatewayError && err.code === 'provider_key_missing',
  );
});

function regional(env: Record<string, string>, host = 'bedrock-runtime.${provider.region}.amazonaws.com') {
  const src = `syntax "next-router/0.1";
provider "bedrock-eu" {
  defaults {
    upstream_config { base_url = template("https://${host}"); }
    auth { auth_sigv4 "bedrock"; }
  }
  match api = "native.messages" { upstream { set_path "/x"; } }
}
`;
  return compileProviderSource('bedrock-eu.conf', src, { registries: defaultRegistries(), env });
}

test('base_url may use ${provider.region} and ${provider.location}, filled in at load time', () => {
  const own = regional({ ROUTER_PROVIDER_BEDROCK_EU_REGION: 'eu-central-1', AWS_REGION: 'us-east-1' });
  assert.deepEqual(own.diagnostics, []);
  assert.equal(
    own.provider!.rules[0]!.upstreamConfig.baseUrl,
    'https://bedrock-runtime.eu-central-1.amazonaws.com',
  );
  assert.deepEqual(own.provider!.baseUrlSettings, ['region']);
  const fallback = regional({ AWS_REGION: 'us-west-2' });
  assert.equal(
    fallback.provider!.rules[0]!.upstreamConfig.baseUrl,
    'https://bedrock-runtime.us-west-2.amazonaws.com',
  );
  const loc = regional(
    { ROUTER_PROVIDER_BEDROCK_EU_LOCATION: 'us-east5' },
    '${provider.location}-aiplatform.googleapis.com',
  );
  assert.equal(loc.provider!.rules[0]!.upstreamConfig.baseUrl, 'https://us-east5-aiplatform.googleapis.com');
  // The base URL variable replaces the file's base_url, settings and all.
  const overridden = regional({ ROUTER_PROVIDER_BEDROCK_EU_BASE_URL: 'http://127.0.0.1:9' });
  assert.equal(overridden.provider!.rules[0]!.upstreamConfig.baseUrl, 'http://127.0.0.1:9');
  assert.equal(overridden.provider!.baseUrlSettings, undefined);
  // A request variable, or the project (which may come from a key file), is not a host.
  const bad = regional({}, '${provider.project}.example.com');
  assert.deepEqual(
    bad.diagnostics.map((d) => d.message),
    ['base_url may use ${env.NAME}, ${provider.region} and ${provider.location}, no request variables'],
  );
});

test('an unset region in base_url loads the file, but the provider is reported and every request refused', () => {
  const r = regional({});
  assert.deepEqual(r.diagnostics, []);
  const provider = r.provider!;
  const creds = resolveProviderCredentials({
    provider,
    keys: [],
    file: { aws: { accessKeyId: 'AKID', secretAccessKey: 's' } },
    env: {},
    connectTimeoutMs: 1000,
  });
  assert.match(
    creds.problems.join('\n'),
    /\$\{provider\.region\}: set ROUTER_PROVIDER_BEDROCK_EU_REGION or AWS_REGION/,
  );
  const hook = createRuleHook(provider.rules[0]!, {
    provider: 'bedrock-eu',
    translators: TRANSLATORS,
    transforms: TRANSFORMS,
    keys: [],
    unavailable: creds.problems.length > 0,
  });
  assert.throws(
    () => hook.rewriteBody!(ctx, upstreamReq()),
    (err: unknown) =>
      err instanceof GatewayError &&
      err.code === 'provider_key_missing' &&
      err.message.includes("'bedrock-eu'"),
  );
});
