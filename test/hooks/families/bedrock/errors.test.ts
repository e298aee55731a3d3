import assert from 'node:assert/strict';
import test from 'node:test';
import { GatewayError } from '../../../../common/errors.ts';
import { bedrockExceptionEvent } from '../../../../hooks/families/bedrock/errors.ts';
import { TRANSLATORS, upstreamErrorStatus } from '../../../../hooks/families/index.ts';
import type { TranslatorInit } from '../../../../hooks/translators/types.ts';

const init: TranslatorInit = {
  requestId: 'req_e',
  model: 'm',
  upstreamModel: 'us.anthropic.claude-sonnet-5-v1:0',
  stream: false,
  createdAt: 1760000000,
};

const coral = (name: string) => `${name}:http://internal.amazon.com/coral/com.amazon.bedrock/`;

test('an error reply gets the status its exception stands for, on both Bedrock APIs', () => {
  const cases: [number, string, number][] = [
    [400, 'ValidationException', 400],
    [403, 'AccessDeniedException', 403],
    [404, 'ResourceNotFoundException', 404],
    [429, 'ThrottlingException', 429],
    [429, 'ModelNotReadyException', 503],
    [503, 'ServiceUnavailableException', 503],
    [408, 'ModelTimeoutException', 504],
    [424, 'ModelErrorException', 502],
    [500, 'InternalServerException', 500],
  ];
  for (const format of ['bedrock_invoke', 'bedrock_converse']) {
    const status = upstreamErrorStatus(format);
    assert.ok(status, format);
    for (const [sent, name, expected] of cases) {
      assert.equal(status(sent, { 'x-amzn-errortype': coral(name) }), expected, `${format} ${name}`);
      assert.equal(status(sent, { 'x-amzn-errortype': name }), expected, `${format} ${name} bare`);
    }
    assert.equal(status(418, {}), 418, 'no header: the status stands');
    assert.equal(status(418, { 'x-amzn-errortype': 'SomethingNewException' }), 418);
  }
  assert.equal(upstreamErrorStatus('anthropic'), undefined);
});

test('throttling is upstream_rate_limited with the upstream message, in every translator of Bedrock', () => {
  const names = [...TRANSLATORS.keys()].filter(
    (n) => /_to_bedrock_(invoke|converse)$/.test(n) && !n.includes('_count_'),
  );
  assert.ok(names.length >= 8, names.join());
  for (const name of names) {
    for (const [status, body] of [
      [429, { message: 'Too many requests, please wait before trying again.' }],
      // No header but the body names it.
      [
        400,
        {
          __type: 'com.amazon.coral#ThrottlingException',
          message: 'Too many requests, please wait before trying again.',
        },
      ],
    ] as const) {
      const t = TRANSLATORS.get(name)!.create(init);
      assert.throws(
        () => t.error(status, body),
        (err: unknown) =>
          err instanceof GatewayError &&
          err.code === 'upstream_rate_limited' &&
          err.status === 429 &&
          err.message.includes('Too many requests'),
        `${name} ${status}`,
      );
    }
    const other = TRANSLATORS.get(name)!.create(init).error(400, { message: 'Malformed input request' });
    assert.match(JSON.stringify(other), /Malformed input request/, name);
  }
});

test('a throttling exception frame carries the catalogue code; others their exception name', () => {
  const throttled = bedrockExceptionEvent('throttlingException', '{"message":"slow down"}');
  assert.ok(throttled.type === 'event');
  const error = JSON.parse(throttled.data).error;
  assert.deepEqual(error, {
    type: 'rate_limit_error',
    message: 'slow down',
    code: 'upstream_rate_limited',
    status: 429,
  });
  const broken = bedrockExceptionEvent('modelStreamErrorException', '{"message":"bad"}');
  assert.ok(broken.type === 'event');
  assert.equal(JSON.parse(broken.data).error.code, 'modelStreamErrorException');
  // Every client's translator, on both APIs, keeps the catalogue's code in its error event.
  const names = [...TRANSLATORS.keys()].filter(
    (n) => /_to_bedrock_(invoke|converse)$/.test(n) && !n.includes('_count_'),
  );
  for (const name of names) {
    const t = TRANSLATORS.get(name)!.create({ ...init, stream: true });
    const out = t.streamEvent('error', throttled.data).at(-1);
    assert.ok(out !== undefined, name);
    assert.match(out.data, /"upstream_rate_limited"/, name);
    assert.match(out.data, /slow down/, name);
  }
});
