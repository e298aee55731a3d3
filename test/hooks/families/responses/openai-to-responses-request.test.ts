import assert from 'node:assert/strict';
import { test } from 'node:test';
import { chatToResponsesRequest } from '../../../../hooks/families/responses/openai-to-responses-request.ts';

test('a chat request becomes the Responses request OpenAI counts: items, flat tools, tool choice', () => {
  const out = chatToResponsesRequest({
    model: 'gpt-5.4-mini',
    temperature: 0.2,
    messages: [
      { role: 'system', content: 'Be brief.' },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'What is in it?' },
          { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA', detail: 'low' } },
        ],
      },
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'look', arguments: '{"x":1}' } }],
      },
      { role: 'tool', tool_call_id: 'call_1', content: 'a cat' },
      { role: 'assistant', content: 'A cat.' },
    ],
    tools: [
      {
        type: 'function',
        function: { name: 'look', description: 'Look closer.', parameters: { type: 'object' } },
      },
    ],
    tool_choice: { type: 'function', function: { name: 'look' } },
    reasoning_effort: 'low',
  });
  assert.deepEqual(out, {
    model: 'gpt-5.4-mini',
    input: [
      { role: 'system', content: 'Be brief.' },
      {
        role: 'user',
        content: [
          { type: 'input_text', text: 'What is in it?' },
          { type: 'input_image', image_url: 'data:image/png;base64,AAAA', detail: 'low' },
        ],
      },
      { type: 'function_call', call_id: 'call_1', name: 'look', arguments: '{"x":1}' },
      { type: 'function_call_output', call_id: 'call_1', output: 'a cat' },
      { role: 'assistant', content: 'A cat.' },
    ],
    tools: [{ type: 'function', name: 'look', description: 'Look closer.', parameters: { type: 'object' } }],
    tool_choice: { type: 'function', name: 'look' },
    reasoning: { effort: 'low' },
  });
});
