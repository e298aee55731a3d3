// Provider base URLs split into origin and path prefix, shared by the rule hook (which builds the
// upstream path) and the upstream client (which keeps one pool per origin).

const baseUrls = new Map<string, { origin: string; prefix: string }>();

/**
 * Origin and path prefix of a provider base URL (`http://h:8000/openai/` -> `http://h:8000`, `/openai`),
 * parsed once per distinct URL: base URLs come from configuration, so the map stays small.
 */
export function splitBaseUrl(baseUrl: string): { origin: string; prefix: string } {
  let hit = baseUrls.get(baseUrl);
  if (hit === undefined) {
    const url = new URL(baseUrl);
    hit = { origin: url.origin, prefix: url.pathname.replace(/\/+$/, '') };
    baseUrls.set(baseUrl, hit);
  }
  return hit;
}
