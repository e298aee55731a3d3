// The one bounding rule for memos keyed by what clients send (secrets, model names, label sets): at
// most `max` entries, and a new key in a full map drops the oldest (insertion order).

export function setBounded<K, V>(map: Map<K, V>, key: K, value: V, max: number): void {
  if (map.size >= max && !map.has(key)) {
    const oldest = map.keys().next();
    if (!oldest.done) map.delete(oldest.value);
  }
  map.set(key, value);
}
