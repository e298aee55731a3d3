// Bedrock model ids: which API serves one, and how one goes into a path.

/** Cross-region inference-profile prefixes before a base model id (`us.anthropic.claude-...`). */
const PROFILE_PREFIX = /^(?:us|eu|apac|global|us-gov|jp|au|ca)\./;

/** The base model id: an ARN's resource name (after its last `/`), without an inference-profile prefix. */
export function bedrockBaseModelId(modelId: string): string {
  const resource = modelId.startsWith('arn:') ? modelId.slice(modelId.lastIndexOf('/') + 1) : modelId;
  return resource.replace(PROFILE_PREFIX, '');
}

/**
 * The API the `bedrock` provider calls a model through: Anthropic models through InvokeModel (the
 * Messages body, every Anthropic feature), every other model through Converse.
 */
export function bedrockApiFor(modelId: string): 'invoke' | 'converse' {
  return bedrockBaseModelId(modelId).startsWith('anthropic.') ? 'invoke' : 'converse';
}

/**
 * A model id or ARN as one path segment, the way the AWS SDK writes its `{modelId}` label (Smithy's
 * extendedEncodeURIComponent): `encodeURIComponent` plus `!'()*`, so `/` and `:` are escaped.
 */
export function bedrockModelSegment(modelId: string): string {
  if (/^[\w.~-]+$/.test(modelId)) return modelId;
  return encodeURIComponent(modelId).replace(
    /[!'()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
}

/** The path of a Bedrock runtime call for a model (`/model/{modelId}/converse-stream`). */
export function bedrockPath(
  modelId: string,
  action: 'invoke' | 'invoke-with-response-stream' | 'converse' | 'converse-stream' | 'count-tokens',
): string {
  return `/model/${bedrockModelSegment(modelId)}/${action}`;
}
