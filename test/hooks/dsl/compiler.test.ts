// biome-ignore-all lint/suspicious/noTemplateCurlyInString: the DSL's own templates are written ${...} inside plain strings
import assert from 'node:assert/strict';
import { resolve } from 'node:path';
import { test } from 'node:test';
import { compileProviderSource, formatDiagnostic, matchRule } from '../../../hooks/dsl/index.ts';
import type { DslRegistries } from '../../../hooks/dsl/types.ts';

const registries: DslRegistries = {
  translators: new Set(['a_to_b', 'c_to_d']),
  transforms: new Set(['a_to_b', 'strip']),
  usagePresets: new Set(['preset_one', 'preset_two']),
};

function compile(src: string, env: Record<string, string | undefined> = {}, file = '/cfg/providers/p.conf') {
  return compileProviderSource(file, src, { registries, env });
}
function errs(src: string, env: Record<string, string | undefined> = {}): string[] {
  const r = compile(src, env);
  assert.equal(r.provider, undefined, 'no provider is returned when there are diagnostics');
  return r.diagnostics.map((d) => `${d.line}:${d.col}: ${d.message}`);
}
/** A valid file whose rule body starts on line 5; body lines are written with 4 spaces of indent. */
function inRule(body: string): string {
  return `syntax "next-router/0.1";
provider "p" {
  defaults { upstream_config { base_url = "http://h"; } }
  match api = "embeddings" {
${body}
  }
}
`;
}

test('every directive compiles to its op', () => {
  const r = compile(`syntax "next-router/0.1";
provider "p" {
  match api = "chat.completions" stream = true {
    upstream_config {
      base_url = "https://api.example.com/prefix/";
      connect_timeout_ms = 1000;
      headers_timeout_ms = 2000;
      body_timeout_ms = 3000;
    }
    auth { auth_bearer; auth_query_key "key"; }
    request {
      set_header "X-Fixed" "v";
      set_header "x-model" template("\${request.model}-\${request.model_mapped}-\${provider.name}");
      pass_header "Anthropic-Beta";
      del_header "x-drop";
      json_set "$.stream_options.include_usage" true;
      json_set "$.n" -1.5;
      json_set "$.s" "str";
      json_set "$.z" null;
      json_set "$.f" false;
      json_set "$.arr[0]" [1, "x", { "k": [null] }];
      json_set "$.t" template("\${request.id}");
      json_del "$.user";
      req_map a_to_b;
    }
    upstream {
      set_path template("/v1/\${request.model_mapped}:go");
      set_query "alt" "sse";
      set_query "api" template("\${request.api}");
      del_query "key";
    }
    response { resp_map c_to_d; sse_parse a_to_b; sse_parse strip; }
    metrics {
      usage_extract preset_two;
      usage_path input_tokens "$.usage.in";
      usage_path cache_creation_tokens "$['usage']['cc'][0]";
    }
    hook "./hooks/x.ts" { flag = true; n = 3; list = [1, 2]; obj = { "a": "b" }; }
    hook "some-package";
  }
  match api = "native.messages" {
    upstream_config { base_url = "http://127.0.0.1:8000"; }
    auth { auth_header_key "X-Api-Key"; }
    response { resp_passthrough; }
  }
  match api = "embeddings" {
    upstream_config { base_url = "http://h"; }
    auth { auth_none; }
  }
}
`);
  assert.deepEqual(r.diagnostics, []);
  const p = r.provider;
  assert.ok(p);
  assert.equal(p.name, 'p');
  assert.equal(p.syntax, 'next-router/0.1');
  assert.equal(p.file, '/cfg/providers/p.conf');
  const [chat, messages, embeddings] = p.rules;
  assert.equal(chat!.api, 'chat.completions');
  assert.equal(chat!.stream, true);
  assert.deepEqual(chat!.loc, { file: '/cfg/providers/p.conf', line: 3, col: 3 });
  assert.deepEqual(chat!.upstreamConfig, {
    baseUrl: 'https://api.example.com/prefix',
    connectTimeoutMs: 1000,
    headersTimeoutMs: 2000,
    bodyTimeoutMs: 3000,
  });
  assert.deepEqual(chat!.auth, [{ op: 'auth_bearer' }, { op: 'auth_query_key', param: 'key' }]);
  const t = (source: string, parts: unknown[], constant: boolean) => ({ source, parts, constant });
  assert.deepEqual(chat!.request, [
    { op: 'set_header', name: 'x-fixed', value: t('v', [{ text: 'v' }], true) },
    {
      op: 'set_header',
      name: 'x-model',
      value: t(
        '${request.model}-${request.model_mapped}-${provider.name}',
        [
          { variable: 'request.model' },
          { text: '-' },
          { variable: 'request.model_mapped' },
          { text: '-' },
          { variable: 'provider.name' },
        ],
        false,
      ),
    },
    { op: 'pass_header', name: 'anthropic-beta' },
    { op: 'del_header', name: 'x-drop' },
    { op: 'json_set', path: ['stream_options', 'include_usage'], value: true },
    { op: 'json_set', path: ['n'], value: -1.5 },
    { op: 'json_set', path: ['s'], value: 'str' },
    { op: 'json_set', path: ['z'], value: null },
    { op: 'json_set', path: ['f'], value: false },
    { op: 'json_set', path: ['arr', 0], value: [1, 'x', { k: [null] }] },
    { op: 'json_set', path: ['t'], value: t('${request.id}', [{ variable: 'request.id' }], false) },
    { op: 'json_del', path: ['user'] },
    { op: 'req_map', translator: 'a_to_b' },
  ]);
  assert.deepEqual(chat!.upstream, [
    {
      op: 'set_path',
      value: t(
        '/v1/${request.model_mapped}:go',
        [{ text: '/v1/' }, { variable: 'request.model_mapped' }, { text: ':go' }],
        false,
      ),
    },
    { op: 'set_query', name: 'alt', value: t('sse', [{ text: 'sse' }], true) },
    { op: 'set_query', name: 'api', value: t('${request.api}', [{ variable: 'request.api' }], false) },
    { op: 'del_query', name: 'key' },
  ]);
  assert.deepEqual(chat!.response, [
    { op: 'resp_map', translator: 'c_to_d' },
    { op: 'sse_parse', transform: 'a_to_b' },
    { op: 'sse_parse', transform: 'strip' },
  ]);
  assert.deepEqual(chat!.metrics, [
    { op: 'usage_extract', preset: 'preset_two' },
    { op: 'usage_path', field: 'input_tokens', path: ['usage', 'in'] },
    { op: 'usage_path', field: 'cache_creation_tokens', path: ['usage', 'cc', 0] },
  ]);
  assert.deepEqual(chat!.hooks, [
    {
      module: resolve('/cfg/providers/hooks/x.ts'),
      options: { flag: true, n: 3, list: [1, 2], obj: { a: 'b' } },
      loc: { file: '/cfg/providers/p.conf', line: 38, col: 5 },
    },
    { module: 'some-package', options: {}, loc: { file: '/cfg/providers/p.conf', line: 39, col: 5 } },
  ]);
  assert.equal(messages!.stream, undefined);
  assert.deepEqual(messages!.auth, [{ op: 'auth_header_key', header: 'x-api-key' }]);
  assert.deepEqual(messages!.response, [{ op: 'resp_passthrough' }]);
  assert.deepEqual(messages!.upstreamConfig, { baseUrl: 'http://127.0.0.1:8000' });
  assert.deepEqual(embeddings!.auth, [{ op: 'auth_none' }]);
  assert.deepEqual(embeddings!.request, []);
  assert.deepEqual(embeddings!.metrics, []);
  assert.deepEqual(embeddings!.hooks, []);
});

test('defaults merge: upstream_config key by key, request/upstream concatenated, the rest replaced', () => {
  const r = compile(`syntax "next-router/0.1";
provider "p" {
  defaults {
    upstream_config { base_url = "https://d.example"; connect_timeout_ms = 10; body_timeout_ms = 30; }
    auth { auth_bearer; }
    request { set_header "a" "1"; }
    upstream { set_query "v" "1"; }
    response { resp_passthrough; }
    metrics { usage_extract preset_one; }
    hook "/abs/h.ts";
  }
  match api = "chat.completions" {
    upstream_config { connect_timeout_ms = 99; headers_timeout_ms = 20; }
    auth { auth_header_key "k"; }
    request { del_header "b"; }
    upstream { set_path "/x"; }
    response { sse_parse strip; }
    metrics { usage_extract preset_two; }
    hook "/abs/other.ts";
  }
  match api = "embeddings" { }
}
`);
  assert.deepEqual(r.diagnostics, []);
  const [rule, plain] = r.provider?.rules ?? [];
  assert.deepEqual(rule!.upstreamConfig, {
    baseUrl: 'https://d.example',
    connectTimeoutMs: 99,
    headersTimeoutMs: 20,
    bodyTimeoutMs: 30,
  });
  assert.deepEqual(rule!.auth, [{ op: 'auth_header_key', header: 'k' }]);
  assert.deepEqual(
    rule!.request.map((o) => o.op),
    ['set_header', 'del_header'],
  );
  assert.deepEqual(
    rule!.upstream.map((o) => o.op),
    ['set_query', 'set_path'],
  );
  assert.deepEqual(rule!.response, [{ op: 'sse_parse', transform: 'strip' }]);
  assert.deepEqual(rule!.metrics, [{ op: 'usage_extract', preset: 'preset_two' }]);
  assert.deepEqual(
    rule!.hooks.map((h) => h.module),
    ['/abs/other.ts'],
  );
  // A rule without blocks gets the defaults as they are.
  assert.deepEqual(plain!.upstreamConfig, {
    baseUrl: 'https://d.example',
    connectTimeoutMs: 10,
    bodyTimeoutMs: 30,
  });
  assert.deepEqual(plain!.auth, [{ op: 'auth_bearer' }]);
  assert.deepEqual(
    plain!.request.map((o) => o.op),
    ['set_header'],
  );
  assert.deepEqual(plain!.response, [{ op: 'resp_passthrough' }]);
  assert.deepEqual(plain!.metrics, [{ op: 'usage_extract', preset: 'preset_one' }]);
  assert.deepEqual(
    plain!.hooks.map((h) => h.module),
    ['/abs/h.ts'],
  );
});

test('matchRule: top to bottom, first match wins, stream only tested when the rule names it', () => {
  const r = compile(`syntax "next-router/0.1";
provider "p" {
  defaults { upstream_config { base_url = "http://h"; } }
  match api = "chat.completions" stream = true { upstream { set_path "/stream"; } }
  match api = "chat.completions" { upstream { set_path "/any"; } }
  match api = "embeddings" stream = false { upstream { set_path "/emb"; } }
}
`);
  const p = r.provider;
  assert.ok(p);
  const path = (api: Parameters<typeof matchRule>[1], stream: boolean) => {
    const rule = matchRule(p, api, stream);
    const op = rule?.upstream[0];
    return op?.op === 'set_path' ? op.value.source : undefined;
  };
  assert.equal(path('chat.completions', true), '/stream');
  assert.equal(path('chat.completions', false), '/any');
  assert.equal(path('embeddings', false), '/emb');
  assert.equal(path('embeddings', true), undefined);
  assert.equal(path('responses', false), undefined);
});

test('match model = "<glob>": the rule applies to upstream models matching it; one without a model is the fallback', () => {
  const r = compile(`syntax "next-router/0.1";
provider "p" {
  defaults { upstream_config { base_url = "http://h"; } }
  match api = "chat.completions" model = "*anthropic.*" { upstream { set_path "/invoke"; } }
  match api = "chat.completions" stream = true model = "claude*" { upstream { set_path "/claude-stream"; } }
  match api = "chat.completions" { upstream { set_path "/converse"; } }
}
`);
  const p = r.provider;
  assert.ok(p, r.diagnostics.map(formatDiagnostic).join('\n'));
  const path = (stream: boolean, model: string | undefined) => {
    const op = matchRule(p, 'chat.completions', stream, model)?.upstream[0];
    return op?.op === 'set_path' ? op.value.source : undefined;
  };
  assert.equal(path(false, 'anthropic.claude-3-haiku'), '/invoke');
  assert.equal(path(true, 'us.anthropic.claude-sonnet-4'), '/invoke');
  assert.equal(path(false, 'arn:aws:bedrock:us-east-1:1:inference-profile/eu.anthropic.claude'), '/invoke');
  assert.equal(path(true, 'claude-sonnet-4@20250514'), '/claude-stream');
  assert.equal(path(false, 'claude-sonnet-4@20250514'), '/converse');
  assert.equal(path(false, 'meta.llama3'), '/converse');
  assert.equal(
    path(false, undefined),
    '/converse',
    'a rule with a model never matches a request without one',
  );
  assert.equal(path(false, 'ANTHROPIC.claude'), '/converse', 'globs are case-sensitive');
});

test('match model: a bad value is an error, and a rule with a model does not shadow a later one', () => {
  assert.deepEqual(
    errs(`syntax "next-router/0.1";
provider "p" {
  defaults { upstream_config { base_url = "http://h"; } }
  match api = "embeddings" model = claude { }
}
`),
    ['4:36: model must be a non-empty glob in double quotes (e.g. "*claude*")'],
  );
  assert.deepEqual(
    errs(`syntax "next-router/0.1";
provider "p" {
  defaults { upstream_config { base_url = "http://h"; } }
  match api = "embeddings" { }
  match api = "embeddings" model = "x*" { }
}
`),
    ['5:3: rule is unreachable: the rule at 4:3 already matches everything it matches'],
  );
  const ok = compile(`syntax "next-router/0.1";
provider "p" {
  defaults { upstream_config { base_url = "http://h"; } }
  match api = "embeddings" model = "x*" { }
  match api = "embeddings" { }
}
`);
  assert.deepEqual(ok.diagnostics, []);
});

test('ROUTER_PROVIDER_<NAME>_BASE_URL replaces base_url in every rule', () => {
  const src = `syntax "next-router/0.1";
provider "azure-openai" {
  defaults { upstream_config { base_url = "https://a.example"; } }
  match api = "chat.completions" { upstream_config { base_url = "https://b.example/x"; } }
  match api = "embeddings" { }
}
`;
  const file = '/p/azure-openai.conf';
  const env = { ROUTER_PROVIDER_AZURE_OPENAI_BASE_URL: 'http://proxy:8080/openai/' };
  const r = compileProviderSource(file, src, { registries, env });
  assert.deepEqual(r.diagnostics, []);
  assert.deepEqual(
    r.provider?.rules.map((x) => x.upstreamConfig.baseUrl),
    ['http://proxy:8080/openai', 'http://proxy:8080/openai'],
  );
  const unset = compileProviderSource(file, src, {
    registries,
    env: { ROUTER_PROVIDER_AZURE_OPENAI_BASE_URL: '' },
  });
  assert.deepEqual(
    unset.provider?.rules.map((x) => x.upstreamConfig.baseUrl),
    ['https://b.example/x', 'https://a.example'],
  );
  const bad = compileProviderSource(file, src, {
    registries,
    env: { ROUTER_PROVIDER_AZURE_OPENAI_BASE_URL: 'ftp://x' },
  });
  assert.deepEqual(bad.diagnostics.map(formatDiagnostic), [
    '/p/azure-openai.conf:2:10: ROUTER_PROVIDER_AZURE_OPENAI_BASE_URL: base_url must use http or https, not "ftp"',
  ]);
});

test('the env override also supplies a base_url that the file leaves out', () => {
  const src = 'syntax "next-router/0.1";\nprovider "p" { match api = "embeddings" { } }\n';
  assert.deepEqual(errs(src), [
    '2:16: no base_url for this rule: set upstream_config { base_url = "..."; } in the rule or in defaults',
  ]);
  const r = compile(src, { ROUTER_PROVIDER_P_BASE_URL: 'https://e.example' });
  assert.equal(r.provider?.rules[0]?.upstreamConfig.baseUrl, 'https://e.example');
});

test('base_url may read the environment through template("${env.NAME}")', () => {
  const r = compile(inRule('    upstream_config { base_url = template("https://${env.HOST}/v1/"); }'), {
    HOST: 'h.example',
  });
  assert.deepEqual(r.diagnostics, []);
  assert.equal(r.provider?.rules[0]?.upstreamConfig.baseUrl, 'https://h.example/v1');
});

const DIAGNOSTIC_CASES: [string, string, string[]][] = [
  // upstream_config
  [
    'bad scheme',
    '    upstream_config { base_url = "ftp://x"; }',
    ['5:34: base_url must use http or https, not "ftp"'],
  ],
  ['not a URL', '    upstream_config { base_url = "nope"; }', ['5:34: base_url "nope" is not a valid URL']],
  [
    'query in base_url',
    '    upstream_config { base_url = "http://h/?a=1"; }',
    ['5:34: base_url must not contain a query or a fragment'],
  ],
  [
    'credentials in base_url',
    '    upstream_config { base_url = "http://u:p@h"; }',
    ['5:34: base_url must not contain credentials'],
  ],
  [
    'request variable in base_url',
    '    upstream_config { base_url = template("http://${request.model}"); }',
    ['5:34: base_url may use ${env.NAME}, ${provider.region} and ${provider.location}, no request variables'],
  ],
  [
    'unknown upstream_config key',
    '    upstream_config { timeout = 1; }',
    [
      '5:23: unknown directive "timeout" in upstream_config (expected base_url, connect_timeout_ms, headers_timeout_ms, body_timeout_ms)',
    ],
  ],
  [
    'duplicate key',
    '    upstream_config { body_timeout_ms = 1; body_timeout_ms = 2; }',
    ['5:44: duplicate "body_timeout_ms"'],
  ],
  [
    'missing =',
    '    upstream_config { body_timeout_ms 5; }',
    ['5:39: expected "body_timeout_ms = <value>;"'],
  ],
  [
    'bad timeout',
    '    upstream_config { connect_timeout_ms = 1.5; headers_timeout_ms = 0; }',
    [
      '5:44: connect_timeout_ms must be a whole number of milliseconds between 1 and 2147483647',
      '5:70: headers_timeout_ms must be a whole number of milliseconds between 1 and 2147483647',
    ],
  ],
  // auth
  [
    'auth_none combined',
    '    auth { auth_bearer; auth_none; }',
    ['5:25: auth_none cannot be combined with other auth directives'],
  ],
  [
    'unknown auth directive',
    '    auth { auth_basic; }',
    [
      '5:12: unknown directive "auth_basic" in auth (expected auth_bearer, auth_header_key, auth_query_key, auth_none, auth_sigv4, auth_google, auth_entra)',
    ],
  ],
  ['bad header name', '    auth { auth_header_key "x key"; }', ['5:28: invalid header name "x key"']],
  [
    'auth_bearer with an argument',
    '    auth { auth_bearer "x"; }',
    ['5:24: "auth_bearer" takes no arguments (none)'],
  ],
  [
    'auth_header_key without argument',
    '    auth { auth_header_key; }',
    ['5:12: "auth_header_key" expects 1 argument (header name), got 0'],
  ],
  [
    'empty query key',
    '    auth { auth_query_key ""; }',
    ['5:27: the query parameter name must not be empty'],
  ],
  [
    'header name not a string',
    '    auth { auth_header_key key; }',
    ['5:28: a header name must be a string in double quotes'],
  ],
  // request
  [
    'managed header',
    '    request { set_header "Host" "x"; }',
    ['5:26: header "host" is managed by the gateway and cannot be set'],
  ],
  [
    'header value with newline',
    '    request { set_header "a" "x\\ny"; }',
    ['5:30: a header value must not contain line breaks or NUL'],
  ],
  [
    'bad JSON path points inside the string',
    '    request { json_del "$.a[x]"; }',
    ['5:28: expected an array index or a quoted key after "["'],
  ],
  [
    'root path',
    '    request { json_set "$" 1; }',
    ['5:24: the JSON path must name a field, not the whole body "$"'],
  ],
  [
    'bad literal',
    '    request { json_set "$.a" yes; }',
    ['5:30: expected a value (string, number, true, false, null), found "yes"'],
  ],
  [
    'unknown template variable points inside the string',
    '    request { set_header "x" template("a-${request.modle}"); }',
    [
      '5:42: unknown template variable "request.modle" (known: request.model, request.model_mapped, request.id, request.api, provider.name, provider.region, provider.project, provider.location, env.NAME)',
    ],
  ],
  [
    'unset env in template',
    '    request { set_header "x" template("${env.NOPE_X}"); }',
    ['5:40: environment variable NOPE_X is not set'],
  ],
  [
    'unknown function',
    '    request { set_header "x" concat("a"); }',
    ['5:30: unknown function "concat" (only template("...") is known)'],
  ],
  [
    'template with two args',
    '    request { set_header "x" template("a", "b"); }',
    ['5:30: template(...) takes exactly one string'],
  ],
  [
    'value not a string',
    '    request { set_header "x" 5; }',
    ['5:30: the header value must be a string or template("...")'],
  ],
  [
    'unknown translator',
    '    request { req_map nope; }',
    ['5:23: unknown translator "nope" (known: a_to_b, c_to_d)'],
  ],
  [
    'two req_map',
    '    request { req_map a_to_b; req_map c_to_d; }',
    ['5:31: only one req_map per rule (the first is at 5:15)'],
  ],
  [
    'too many arguments',
    '    request { del_header "a" "b"; }',
    ['5:30: "del_header" takes at most 1 argument (name)'],
  ],
  [
    'directive takes no block',
    '    request { del_header "a" { } }',
    ['5:30: "del_header" takes no block; end it with ";"'],
  ],
  [
    'directive in the wrong block',
    '    request { set_path "/x"; }',
    [
      '5:15: unknown directive "set_path" in request (expected set_header, pass_header, del_header, json_set, json_del, req_map); "set_path" belongs in the upstream block',
    ],
  ],
  // upstream
  ['set_path without slash', '    upstream { set_path "v1/x"; }', ['5:25: set_path must start with "/"']],
  [
    'set_path with query',
    '    upstream { set_path "/v1?x=1"; }',
    ['5:25: set_path must not contain "?", "#" or spaces; use set_query for parameters'],
  ],
  [
    'empty query name',
    '    upstream { set_query "" "x"; }',
    ['5:26: the query parameter name must not be empty'],
  ],
  // response
  [
    'passthrough with resp_map',
    '    response { resp_passthrough; resp_map a_to_b; }',
    ['5:16: resp_passthrough cannot be combined with resp_map'],
  ],
  [
    'two resp_map',
    '    response { resp_map a_to_b; resp_map c_to_d; }',
    ['5:33: only one resp_map per rule (the first is at 5:16)'],
  ],
  [
    'unknown transform',
    '    response { sse_parse c_to_d; }',
    ['5:26: unknown transform "c_to_d" (known: a_to_b, strip)'],
  ],
  ['translator name as a number', '    response { resp_map 5; }', ['5:25: a translator name must be a name']],
  // metrics
  [
    'unknown preset',
    '    metrics { usage_extract openai; }',
    ['5:29: unknown usage preset "openai" (known: preset_one, preset_two)'],
  ],
  [
    'unknown usage field',
    '    metrics { usage_path tokens "$.u"; }',
    [
      '5:26: unknown usage field "tokens" (known: input_tokens, output_tokens, total_tokens, cache_read_tokens, cache_creation_tokens, reasoning_tokens)',
    ],
  ],
  [
    'duplicate usage field',
    '    metrics { usage_path input_tokens "$.a"; usage_path input_tokens "$.b"; }',
    ['5:46: duplicate usage_path for input_tokens'],
  ],
  [
    'two usage_extract',
    '    metrics { usage_extract preset_one; usage_extract preset_two; }',
    ['5:41: only one usage_extract per rule (the first is at 5:15)'],
  ],
  // hooks
  ['duplicate hook option', '    hook "./h.ts" { a = 1; a = 2; }', ['5:28: duplicate hook option "a"']],
  [
    'template in hook option',
    '    hook "./h.ts" { a = template("x"); }',
    ['5:25: template(...) is not allowed here; use a JSON value'],
  ],
  ['empty hook path', '    hook "" ;', ['5:10: the hook module path must not be empty']],
  ['hook without path', '    hook { }', ['5:5: "hook" expects 1 argument (module path), got 0']],
  // body structure
  [
    'duplicate block',
    '    auth { auth_bearer; }\n    auth { auth_none; }',
    ['6:5: duplicate auth block (the first is at 5:5)'],
  ],
  [
    'unknown block',
    '    rewrite { }',
    [
      '5:5: unknown directive "rewrite" (expected upstream_config, auth, request, upstream, response, metrics, hook)',
    ],
  ],
  [
    'op outside its block',
    '    set_path "/x";',
    [
      '5:5: unknown directive "set_path" (expected upstream_config, auth, request, upstream, response, metrics, hook); put "set_path" inside a upstream { } block',
    ],
  ],
  ['block without braces', '    auth;', ['5:5: "auth" needs a block { ... }']],
  ['block with arguments', '    auth "x" { }', ['5:10: "auth" takes no arguments (none)']],
];

for (const [name, body, expected] of DIAGNOSTIC_CASES) {
  test(`diagnostic: ${name}`, () => {
    assert.deepEqual(errs(inRule(body)), expected);
  });
}

test('diagnostics of the file structure, provider and match heads', () => {
  assert.deepEqual(
    errs('provider "p" { match api = "embeddings" { upstream_config { base_url = "http://h"; } } }'),
    ['1:1: missing `syntax "next-router/0.1";` at the top of the file'],
  );
  assert.deepEqual(errs('syntax "next-router/9";'), [
    '1:1: missing provider "<name>" { ... } block',
    '1:8: unsupported syntax "next-router/9" (expected "next-router/0.1")',
  ]);
  assert.deepEqual(
    errs(`provider "p" { match api = "embeddings" { upstream_config { base_url = "http://h"; } } }
syntax "next-router/0.1";
syntax "next-router/0.1";
provider "q" { }
upstream { }
`),
    [
      '2:1: syntax must come before the provider block',
      '3:1: duplicate syntax directive',
      '4:1: only one provider per file',
      '5:1: unknown directive "upstream" at the top level (expected syntax, provider)',
    ],
  );
  assert.deepEqual(errs('syntax "next-router/0.1";\nprovider "other" { }'), [
    '2:1: the provider has no match rules',
    '2:10: provider name "other" does not match the file name "p.conf"',
  ]);
  assert.deepEqual(errs('syntax "next-router/0.1";\nprovider "P q" { }'), [
    '2:1: the provider has no match rules',
    '2:10: invalid provider name "P q" (use lower-case letters, digits, "-" and "_")',
  ]);
  assert.deepEqual(errs('syntax "next-router/0.1";\nprovider "p";'), [
    '2:1: "provider" needs a block { ... }',
  ]);
  assert.deepEqual(
    errs(`syntax "next-router/0.1";
provider "p" {
  defaults { upstream_config { base_url = "http://h"; } }
  defaults { }
  auth { }
  match api = "chat" { }
  match api = "embeddings" stream = yes { }
  match api = "embeddings" api = "responses" { }
  match stream = true { }
  match api "x" { }
  match kind = "x" { }
  match api = 5 { }
  match api = "responses";
}
`),
    [
      '4:3: duplicate defaults block (the first is at 3:3)',
      '5:3: unknown directive "auth" in provider (expected defaults, match); "auth" goes inside defaults or match',
      '6:15: unknown api "chat" (known: completions, chat.completions, responses, native.messages, embeddings, images.generations, images.edits, audio.speech, audio.transcriptions, audio.translations, native.generateContent, native.streamGenerateContent, realtime, native.live, messages.count_tokens, native.countTokens, responses.input_tokens)',
      '7:37: stream must be true or false',
      '8:28: duplicate "api" in match',
      '9:3: match needs api = "<api>"',
      '10:13: expected api = <value>',
      '11:9: expected api = "<api>", stream = true|false or model = "<glob>"',
      '12:15: api must be a string in double quotes',
      '13:3: "match" needs a block { ... }',
    ],
  );
});

test('unreachable rules are reported where they start', () => {
  assert.deepEqual(
    errs(`syntax "next-router/0.1";
provider "p" {
  defaults { upstream_config { base_url = "http://h"; } }
  match api = "chat.completions" { }
  match api = "chat.completions" stream = true { }
  match api = "embeddings" stream = false { }
  match api = "embeddings" stream = false { }
  match api = "embeddings" stream = true { }
}
`),
    [
      '5:3: rule is unreachable: the rule at 4:3 already matches everything it matches',
      '7:3: rule is unreachable: the rule at 6:3 already matches everything it matches',
    ],
  );
});

test('req_map in both defaults and the rule is reported at the rule', () => {
  assert.deepEqual(
    errs(`syntax "next-router/0.1";
provider "p" {
  defaults { upstream_config { base_url = "http://h"; } request { req_map a_to_b; } }
  match api = "embeddings" { request { req_map c_to_d; } }
}
`),
    ['4:40: only one req_map per rule (defaults already has one at 3:67)'],
  );
});

test('realtime rules take realtime translators, and only realtime rules do', () => {
  const withRealtime: DslRegistries = {
    ...registries,
    realtimeTranslators: new Map([['rt_to_live', 'realtime']]),
  };
  const diagnostics = (api: string, translator: string) =>
    compileProviderSource(
      '/cfg/providers/p.conf',
      `syntax "next-router/0.1";
provider "p" {
  match api = "${api}" {
    upstream_config { base_url = "http://h"; }
    request { req_map ${translator}; }
  }
}
`,
      { registries: withRealtime, env: {} },
    ).diagnostics.map((d) => `${d.line}:${d.col}: ${d.message}`);
  assert.deepEqual(diagnostics('realtime', 'rt_to_live'), []);
  assert.deepEqual(diagnostics('embeddings', 'rt_to_live'), [
    '5:15: translator "rt_to_live" translates realtime sessions of api "realtime", not requests of api "embeddings"',
  ]);
  assert.deepEqual(diagnostics('native.live', 'rt_to_live'), [
    '5:15: translator "rt_to_live" translates realtime sessions of api "realtime", not requests of api "native.live"',
  ]);
  assert.deepEqual(diagnostics('realtime', 'a_to_b'), [
    `5:15: a realtime rule's req_map names a realtime translator (for api "realtime": rt_to_live)`,
  ]);
  assert.deepEqual(diagnostics('embeddings', 'nope'), [
    '5:23: unknown translator "nope" (known: a_to_b, c_to_d, rt_to_live)',
  ]);
});

test('many problems in one file are all reported, in position order, parse errors included', () => {
  const d = errs(`syntax "next-router/0.1";
provider "p" {
  defaults { upstream_config { base_url = "http://h"; } }
  match api = "embeddings" {
    request { req_map x; json_set "$." 1 }
    response { sse_parse y; }
    metrics { usage_extract z @; }
  }
}
`);
  assert.deepEqual(d, [
    '5:23: unknown translator "x" (known: a_to_b, c_to_d)',
    '5:37: empty key after "."',
    '5:41: expected ";" or "{" after directive "json_set"',
    '6:26: unknown transform "y" (known: a_to_b, strip)',
    '7:29: unknown usage preset "z" (known: preset_one, preset_two)',
    '7:31: unexpected character "@"',
  ]);
});

test('hook module paths resolve relative to the provider file; absolute, file: and bare names are kept', () => {
  const r = compile(
    inRule(
      '    hook "../h/a.ts";\n    hook "/opt/b.ts";\n    hook "file:///opt/c.ts";\n    hook "@scope/pkg";',
    ),
  );
  assert.deepEqual(r.diagnostics, []);
  assert.deepEqual(
    r.provider?.rules[0]?.hooks.map((h) => h.module),
    [resolve('/cfg/h/a.ts'), '/opt/b.ts', '/opt/c.ts', '@scope/pkg'],
  );
});

test('a file name that is not <name>.conf is not checked against the provider name', () => {
  const r = compileProviderSource('<stdin>', inRule(''), { registries, env: {} });
  assert.deepEqual(r.diagnostics, []);
  assert.equal(r.provider?.name, 'p');
});
