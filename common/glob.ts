// Glob patterns over model ids (`*` any run of characters, `?` one), as the keys' model lists and the
// DSL's `match model = "..."` write them.

export function globToRegExp(pattern: string): RegExp {
  const body = pattern
    .replace(/[.+^${}()|[\]\\]/g, '\\$&')
    .replaceAll('*', '.*')
    .replaceAll('?', '.');
  return new RegExp(`^${body}$`, 's');
}

/** True when `model` matches any of `patterns`. */
export function globMatcher(patterns: readonly string[]): (model: string) => boolean {
  const res = patterns.map(globToRegExp);
  return (model) => res.some((re) => re.test(model));
}
