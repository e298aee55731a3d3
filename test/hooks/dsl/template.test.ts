// biome-ignore-all lint/suspicious/noTemplateCurlyInString: the DSL's own templates are written ${...} inside plain strings
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  compileTemplate,
  constantTemplate,
  renderHeaderTemplate,
  renderTemplate,
} from '../../../hooks/dsl/template.ts';

const vars = {
  model: 'gemini-pro',
  modelMapped: 'gemini-2.5-pro',
  requestId: 'r1',
  api: 'chat.completions',
  provider: 'gemini',
};

test('templates compile to text and variable parts and render them', () => {
  const r = compileTemplate('/v1beta/models/${request.model_mapped}:generateContent', {});
  assert.ok(r.ok);
  assert.equal(r.template.constant, false);
  assert.deepEqual(r.template.parts, [
    { text: '/v1beta/models/' },
    { variable: 'request.model_mapped' },
    { text: ':generateContent' },
  ]);
  assert.equal(renderTemplate(r.template, vars), '/v1beta/models/gemini-2.5-pro:generateContent');
});

test('every variable renders', () => {
  const r = compileTemplate(
    '${request.model}|${request.id}|${request.api}|${provider.name}|${ request.model_mapped }',
    {},
  );
  assert.ok(r.ok);
  assert.equal(renderTemplate(r.template, vars), 'gemini-pro|r1|chat.completions|gemini|gemini-2.5-pro');
});

test('model_mapped falls back to the requested model, unknown models render empty', () => {
  const r = compileTemplate('${request.model_mapped}/${request.model}', {});
  assert.ok(r.ok);
  assert.equal(renderTemplate(r.template, { ...vars, modelMapped: undefined }), 'gemini-pro/gemini-pro');
  assert.equal(renderTemplate(r.template, { ...vars, model: undefined, modelMapped: undefined }), '/');
});

test('env variables are substituted at compile time; the result is constant', () => {
  const r = compileTemplate('https://${env.HOST}/x', { HOST: 'h.example' });
  assert.ok(r.ok);
  assert.equal(r.template.constant, true);
  assert.deepEqual(r.template.parts, [{ text: 'https://h.example/x' }]);
});

test('errors: unknown variable, unset env, bad env name, unterminated; all reported with offsets', () => {
  const r = compileTemplate('a${request.modl}b${env.NOPE}${env.9x}${request.id', {});
  assert.equal(r.ok, false);
  assert.deepEqual(!r.ok && r.errors.map((e) => [e.index, e.message.split(' (')[0]]), [
    [1, 'unknown template variable "request.modl"'],
    [17, 'environment variable NOPE is not set'],
    [28, 'invalid environment variable name "9x"'],
    [37, 'unterminated "${" in template'],
  ]);
});

test('constantTemplate renders its text', () => {
  assert.equal(renderTemplate(constantTemplate('x-y'), vars), 'x-y');
  assert.deepEqual(constantTemplate('').parts, []);
});

test('in a path, each variable is one escaped segment: no "/", "?", "#" or dot segment from input', () => {
  const r = compileTemplate('/v1beta/models/${request.model_mapped}:generateContent', {});
  assert.ok(r.ok);
  const render = (modelMapped: string) => renderTemplate(r.template, { ...vars, modelMapped }, 'path');
  assert.equal(render('gemini-3.8-flash'), '/v1beta/models/gemini-3.8-flash:generateContent');
  assert.equal(render('a/b'), '/v1beta/models/a%2Fb:generateContent');
  assert.equal(render('x:countTokens?'), '/v1beta/models/x%3AcountTokens%3F:generateContent');
  assert.equal(render('x#y'), '/v1beta/models/x%23y:generateContent');
  assert.equal(render('x%2Fy'), '/v1beta/models/x%252Fy:generateContent');
  assert.equal(render('..'), '/v1beta/models/%2E%2E:generateContent');
  assert.equal(render('ü b'), '/v1beta/models/%C3%BC%20b:generateContent');
  assert.equal(render('llama3:8b@v1+x'), '/v1beta/models/llama3%3A8b@v1+x:generateContent');
  // The operator's literal text is not escaped, and 'text' leaves values as they are.
  assert.equal(
    renderTemplate(r.template, { ...vars, modelMapped: 'a/b' }),
    '/v1beta/models/a/b:generateContent',
  );
});

test('a header value with a control character from a variable is refused', () => {
  const r = compileTemplate('model=${request.model}', {});
  assert.ok(r.ok);
  assert.equal(renderHeaderTemplate(r.template, { ...vars, model: 'gpt-4o' }), 'model=gpt-4o');
  for (const model of ['a\r\nx-injected: 1', 'a\nb', 'a\rb', 'a\u0000b']) {
    assert.equal(renderHeaderTemplate(r.template, { ...vars, model }), undefined, JSON.stringify(model));
  }
  assert.equal(renderHeaderTemplate(r.template, { ...vars, model: 'tab\tok' }), 'model=tab\tok');
});
