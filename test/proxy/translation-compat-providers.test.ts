// Every shipped OpenAI-compatible provider serves every client family with the shipped provider files:
// each (client family, provider) pair once plain and once streamed, chosen with x-router-provider, with
// the official SDKs and with the Vercel AI SDK.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createAnthropic } from '@ai-sdk/anthropic';
import { createGoogleGenerativeAI } from '@ai-sdk/google';
import { createOpenAI } from '@ai-sdk/openai';
import Anthropic from '@anthropic-ai/sdk';
import { GoogleGenAI } from '@google/genai';
import { generateText, type LanguageModel, streamText } from 'ai';
import OpenAI from 'openai';
import { ACCESS_KEY, type Stack, startStack } from '../support/stack.ts';

let stack: Stack;

before(async () => {
  // Azure's key travels in `api-key`, which the simulator's OpenAI dialect does not read.
  stack = await startStack({ sim: { requireAuth: false } });
});
after(async () => {
  await stack?.close();
});

const MODEL = 'compat-model';

/** Where each provider's request lands; vLLM and xAI serve Responses clients natively. */
const PROVIDERS: Record<string, { chat: RegExp; responses: RegExp }> = {
  'azure-openai': {
    chat: /^\/openai\/deployments\/compat-model\/chat\/completions\?api-version=[\d-]+$/,
    responses: /^\/openai\/deployments\/compat-model\/chat\/completions\?api-version=[\d-]+$/,
  },
  deepseek: { chat: /^\/v1\/chat\/completions$/, responses: /^\/v1\/chat\/completions$/ },
  groq: { chat: /^\/v1\/chat\/completions$/, responses: /^\/v1\/chat\/completions$/ },
  mistral: { chat: /^\/v1\/chat\/completions$/, responses: /^\/v1\/chat\/completions$/ },
  ollama: { chat: /^\/v1\/chat\/completions$/, responses: /^\/v1\/chat\/completions$/ },
  openrouter: { chat: /^\/v1\/chat\/completions$/, responses: /^\/v1\/chat\/completions$/ },
  together: { chat: /^\/v1\/chat\/completions$/, responses: /^\/v1\/chat\/completions$/ },
  vllm: { chat: /^\/v1\/chat\/completions$/, responses: /^\/v1\/responses$/ },
  xai: { chat: /^\/v1\/chat\/completions$/, responses: /^\/v1\/responses$/ },
};

type Call = (provider: string, stream: boolean) => Promise<string>;

const CLIENTS: Record<string, { call: Call; path: 'chat' | 'responses' }> = {
  'chat completions': {
    path: 'chat',
    async call(provider, stream) {
      const client = new OpenAI({
        apiKey: ACCESS_KEY,
        baseURL: `${stack.url}/v1`,
        maxRetries: 0,
        defaultHeaders: { 'x-router-provider': provider },
      });
      const messages = [{ role: 'user' as const, content: 'hello compat' }];
      if (!stream)
        return (
          (await client.chat.completions.create({ model: MODEL, messages })).choices[0]?.message.content ?? ''
        );
      const r = await client.chat.completions.stream({ model: MODEL, messages }).finalChatCompletion();
      return r.choices[0]?.message.content ?? '';
    },
  },
  responses: {
    path: 'responses',
    async call(provider, stream) {
      const client = new OpenAI({
        apiKey: ACCESS_KEY,
        baseURL: `${stack.url}/v1`,
        maxRetries: 0,
        defaultHeaders: { 'x-router-provider': provider },
      });
      if (!stream)
        return (await client.responses.create({ model: MODEL, input: 'hello compat' })).output_text;
      return (await client.responses.stream({ model: MODEL, input: 'hello compat' }).finalResponse())
        .output_text;
    },
  },
  'anthropic messages': {
    path: 'chat',
    async call(provider, stream) {
      const client = new Anthropic({
        apiKey: ACCESS_KEY,
        baseURL: stack.url,
        maxRetries: 0,
        defaultHeaders: { 'x-router-provider': provider },
      });
      const params = {
        model: MODEL,
        max_tokens: 200,
        messages: [{ role: 'user' as const, content: 'hello compat' }],
      };
      const m = stream
        ? await client.messages.stream(params).finalMessage()
        : await client.messages.create(params);
      return m.content.map((b) => (b.type === 'text' ? b.text : '')).join('');
    },
  },
  'gemini generateContent': {
    path: 'chat',
    async call(provider, stream) {
      const client = new GoogleGenAI({
        apiKey: ACCESS_KEY,
        httpOptions: { baseUrl: stack.url, headers: { 'x-router-provider': provider } },
      });
      if (!stream)
        return (await client.models.generateContent({ model: MODEL, contents: 'hello compat' })).text ?? '';
      let text = '';
      for await (const chunk of await client.models.generateContentStream({
        model: MODEL,
        contents: 'hello compat',
      })) {
        text += chunk.text ?? '';
      }
      return text;
    },
  },
};

for (const [clientName, client] of Object.entries(CLIENTS)) {
  describe(`${clientName} client`, () => {
    for (const [provider, paths] of Object.entries(PROVIDERS)) {
      for (const stream of [false, true]) {
        test(`-> ${provider}${stream ? ', streamed' : ''}`, async () => {
          const before = stack.sim.requests.length;
          const text = await client.call(provider, stream);
          assert.match(text, /^Echo: hello compat\./);
          const up = stack.sim.requests.at(-1);
          assert.equal(stack.sim.requests.length, before + 1);
          assert.match(up?.path ?? '', paths[client.path]);
          assert.equal(
            up?.headers['x-router-provider'],
            undefined,
            'the routing header stays at the gateway',
          );
        });
      }
    }
  });
}

// The same pairs with the Vercel AI SDK, which checks every reply and chunk against the vendor's schema.
(globalThis as { AI_SDK_LOG_WARNINGS?: boolean }).AI_SDK_LOG_WARNINGS = false;

const AI_SDK_CLIENTS: Record<string, (provider: string) => LanguageModel> = {
  'chat completions (@ai-sdk/openai .chat)': (provider) =>
    createOpenAI({
      apiKey: ACCESS_KEY,
      baseURL: `${stack.url}/v1`,
      headers: { 'x-router-provider': provider },
    }).chat(MODEL),
  'responses (@ai-sdk/openai .responses)': (provider) =>
    createOpenAI({
      apiKey: ACCESS_KEY,
      baseURL: `${stack.url}/v1`,
      headers: { 'x-router-provider': provider },
    }).responses(MODEL),
  'messages (@ai-sdk/anthropic)': (provider) =>
    createAnthropic({
      apiKey: ACCESS_KEY,
      baseURL: `${stack.url}/v1`,
      headers: { 'x-router-provider': provider },
    })(MODEL),
  'generateContent (@ai-sdk/google)': (provider) =>
    createGoogleGenerativeAI({
      apiKey: ACCESS_KEY,
      baseURL: `${stack.url}/v1beta`,
      headers: { 'x-router-provider': provider },
    })(MODEL),
};

for (const [clientName, client] of Object.entries(AI_SDK_CLIENTS)) {
  describe(`${clientName} client (AI SDK)`, () => {
    for (const provider of Object.keys(PROVIDERS)) {
      test(`-> ${provider}, plain and streamed`, async () => {
        const plain = await generateText({ model: client(provider), prompt: 'hello compat', maxRetries: 0 });
        assert.match(plain.text, /^Echo: hello compat\./);
        const errors: unknown[] = [];
        const s = streamText({
          model: client(provider),
          prompt: 'hello compat',
          maxRetries: 0,
          onError: ({ error }) => errors.push(error),
        });
        assert.equal(await s.text, plain.text);
        assert.deepEqual(errors, []);
      });
    }
  });
}
