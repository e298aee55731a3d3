// The compiled price entries, looked up by provider, model and channel: exact names first, then the
// longest `prefix*` pattern.

import type { PriceEntry } from './price-types.ts';

export function entryKey(provider: string, model: string, channel: string | undefined): string {
  return `${provider}\u0000${channel ?? ''}\u0000${model}`;
}

/** Exact entries by key, patterns per provider+channel ordered longest prefix first. */
export class PriceTable {
  readonly exact = new Map<string, PriceEntry>();
  readonly patterns = new Map<string, { prefix: string; entry: PriceEntry }[]>();

  add(entry: PriceEntry): void {
    if (entry.model.endsWith('*')) {
      const group = `${entry.provider}\u0000${entry.channel ?? ''}`;
      const prefix = entry.model.slice(0, -1);
      const list = (this.patterns.get(group) ?? []).filter((p) => p.prefix !== prefix);
      list.push({ prefix, entry });
      list.sort((a, b) => b.prefix.length - a.prefix.length);
      this.patterns.set(group, list);
    } else {
      this.exact.set(entryKey(entry.provider, entry.model, entry.channel), entry);
    }
  }

  find(provider: string, model: string, channel: string | undefined): PriceEntry | undefined {
    const exact = this.exact.get(entryKey(provider, model, channel));
    if (exact) return exact;
    const list = this.patterns.get(`${provider}\u0000${channel ?? ''}`);
    return list?.find((p) => model.startsWith(p.prefix))?.entry;
  }

  /** Some entry (exact or pattern) could price a model starting with `prefix`. */
  coversPrefix(provider: string, prefix: string): boolean {
    const start = `${provider}\u0000\u0000`;
    for (const key of this.exact.keys()) if (key.startsWith(start + prefix)) return true;
    const list = this.patterns.get(`${provider}\u0000`) ?? [];
    return list.some((p) => p.prefix.startsWith(prefix) || prefix.startsWith(p.prefix));
  }

  /** Every entry in effect (an entry replaced by a later one of the same key is not among them). */
  *entries(): IterableIterator<PriceEntry> {
    yield* this.exact.values();
    for (const list of this.patterns.values()) for (const p of list) yield p.entry;
  }

  get size(): number {
    let size = this.exact.size;
    for (const list of this.patterns.values()) size += list.length;
    return size;
  }
}
