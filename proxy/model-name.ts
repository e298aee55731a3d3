// The model names the gateway accepts from clients, checked before routing. A model name is routed,
// rendered into upstream paths and headers, priced, logged and put into the usage event, so it is held
// to a documented shape (docs/operations.md "Limits") that every real id fits:
// `meta-llama/Llama-3.1-8B-Instruct`, `llama3:8b`, `ft:gpt-4o-mini:org::id`, `claude-opus-5@20261101`,
// `accounts/fireworks/models/x`, `anthropic.claude-3-5-sonnet-20240620-v1:0`.

export const MAX_MODEL_NAME_LENGTH = 256;

export const MODEL_NAME_RULE =
  'A model name has 1 to 256 characters: letters, digits and . _ - : @ / +, with no empty, "." or ".." segment between slashes.';

const MODEL_CHARS = /^[A-Za-z0-9._\-:@/+]+$/;

/** Why `name` is not an acceptable model name, or undefined when it is. */
export function modelNameProblem(name: string): string | undefined {
  if (name.length === 0) return 'it is empty';
  if (name.length > MAX_MODEL_NAME_LENGTH) return `it is longer than ${MAX_MODEL_NAME_LENGTH} characters`;
  if (!MODEL_CHARS.test(name)) {
    return 'it has a character outside letters, digits and . _ - : @ / +';
  }
  for (const segment of name.split('/')) {
    if (segment === '') return 'it has an empty "/" segment (leading, trailing or doubled "/")';
    if (segment === '.' || segment === '..') return 'it has a "." or ".." segment';
  }
  return undefined;
}
