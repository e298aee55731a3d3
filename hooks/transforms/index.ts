// SSE transforms that are not translators, by their DSL name (`sse_parse <name>;`): the wire families'
// (hooks/families/*/index.ts `transforms`).

export { TRANSFORMS } from '../families/index.ts';
