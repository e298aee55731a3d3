// The examples `npm start` prints (scripts/local-stack.ts): shell commands a user pastes as they are, from
// the project folder (the Node ones import the SDKs installed there). Each makes a call and prints its
// answer; test/scripts/quickstart.test.ts finds each one in the printed text and runs it as printed.

export interface QuickstartExample {
  readonly title: string;
  /** A bash command, printed and run exactly as it is. */
  readonly command: string;
  /** What its output shows when it worked (for the test). */
  readonly expect: RegExp;
  /** Shows it only once the sidecar has delivered the events of the examples before it (asynchronous). */
  readonly eventually?: boolean;
}

export interface QuickstartTargets {
  /** The gateway's base URL. */
  readonly base: string;
  readonly accessKey: string;
  readonly billingUrl: string;
  readonly billingApiKey: string;
  readonly project: string;
}

/** `node` reading an ES module from the here-document (the SDKs resolve from this folder). */
function node(code: string): string {
  return `node --input-type=module <<'EOF'\n${code.trim()}\nEOF`;
}

export function quickstartExamples(t: QuickstartTargets): QuickstartExample[] {
  const { base, accessKey } = t;
  const json = `-H 'content-type: application/json'`;
  return [
    {
      title: 'Chat, completion-style (curl)',
      command: `curl -s ${base}/v1/chat/completions -H "Authorization: Bearer ${accessKey}" ${json} \\\n  -d '{"model":"gpt-5.4-mini","messages":[{"role":"user","content":"Say hello"}]}'`,
      expect: /"content":"Echo: Say hello/,
    },
    {
      title: 'A stream from Claude, asked in the completion style (curl)',
      command: `curl -sN ${base}/v1/chat/completions -H "Authorization: Bearer ${accessKey}" ${json} \\\n  -d '{"model":"claude-sonnet-5","stream":true,"messages":[{"role":"user","content":"Say hello"}]}'`,
      expect: /data: \[DONE\]/,
    },
    {
      title: 'Anthropic Messages (curl)',
      command: `curl -s ${base}/v1/messages -H "x-api-key: ${accessKey}" -H 'anthropic-version: 2023-06-01' ${json} \\\n  -d '{"model":"claude-haiku-5-5","max_tokens":100,"messages":[{"role":"user","content":"Say hello"}]}'`,
      expect: /"type":"message"/,
    },
    {
      title: 'Gemini generateContent (curl)',
      command: `curl -s "${base}/v1beta/models/gemini-3.8-flash:generateContent" -H "x-goog-api-key: ${accessKey}" ${json} \\\n  -d '{"contents":[{"role":"user","parts":[{"text":"Say hello"}]}]}'`,
      expect: /"candidates"/,
    },
    {
      title: 'Any provider by name, whatever the model (curl, x-router-provider)',
      command: `curl -s ${base}/v1/chat/completions -H "Authorization: Bearer ${accessKey}" ${json} \\\n  -H 'x-router-provider: deepseek' -d '{"model":"any-model-name","messages":[{"role":"user","content":"Say hello"}]}'`,
      expect: /"content":"Echo: Say hello/,
    },
    {
      title: 'OpenAI SDK: a chat, then a stream, then a tool call (Node)',
      command: node(`
import OpenAI from 'openai';
const client = new OpenAI({ apiKey: '${accessKey}', baseURL: '${base}/v1' });
const chat = await client.chat.completions.create({ model: 'gpt-5.4-mini', messages: [{ role: 'user', content: 'Say hello' }] });
console.log('chat:', chat.choices[0].message.content);
const stream = await client.chat.completions.create({ model: 'gpt-5.4-mini', stream: true, messages: [{ role: 'user', content: 'Count to five' }] });
let text = '';
for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
console.log('stream:', text);
const tools = [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
const call = await client.chat.completions.create({ model: 'gpt-5.4-mini', tools, messages: [{ role: 'user', content: 'Weather in Paris?' }] });
console.log('tool call:', JSON.stringify(call.choices[0].message.tool_calls[0].function));
`),
      expect:
        /chat: Echo: Say hello[\s\S]*stream: Echo: Count to five[\s\S]*tool call: \{"name":"get_weather"/,
    },
    {
      title: 'Anthropic SDK: Claude, then a GPT model through the same client (Node)',
      command: node(`
import Anthropic from '@anthropic-ai/sdk';
const claude = new Anthropic({ apiKey: '${accessKey}', baseURL: '${base}' });
for (const model of ['claude-haiku-5-5', 'gpt-5.4-mini']) {
  const msg = await claude.messages.create({ model, max_tokens: 100, messages: [{ role: 'user', content: 'Say hello' }] });
  console.log(model + ':', msg.content[0].text);
}
`),
      expect: /claude-haiku-5-5: Echo: Say hello[\s\S]*gpt-5\.4-mini: Echo: Say hello/,
    },
    {
      title: 'Gemini SDK (Node)',
      command: node(`
import { GoogleGenAI } from '@google/genai';
const gemini = new GoogleGenAI({ apiKey: '${accessKey}', httpOptions: { baseUrl: '${base}' } });
const reply = await gemini.models.generateContent({ model: 'gemini-3.8-flash', contents: 'Say hello' });
console.log('gemini:', reply.text);
`),
      expect: /gemini: Echo: Say hello/,
    },
    {
      title: "What the billing service received (the simulator's API; the sidecar delivers within a moment)",
      command: `curl -s "${t.billingUrl}/v1/projects/${t.project}/usage/events/details?limit=3" -H "Authorization: Bearer ${t.billingApiKey}"`,
      expect: /external_event_id/,
      eventually: true,
    },
  ];
}

/** The examples as `npm start` prints them. */
export function renderQuickstart(examples: readonly QuickstartExample[]): string {
  return examples.map((e) => `# ${e.title}\n${e.command}\n`).join('\n');
}
