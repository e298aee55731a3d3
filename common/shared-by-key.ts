// One resource per key and process, shared by whoever needs it: the first user opens it, the last one
// to release it closes it. A failed open is forgotten, so the next user tries again.

export interface Shared<T> {
  readonly value: T;
  /** Idempotent; the resource closes when no user holds it any more. */
  release(): Promise<void>;
}

/** `acquire(key, using)`: `using` is what the first user opens the resource with; later users share it. */
export function sharedByKey<T, With>(
  open: (key: string, using: With) => Promise<T>,
  close: (value: T) => Promise<void>,
): (key: string, using: With) => Promise<Shared<T>> {
  const entries = new Map<string, { value: Promise<T>; users: number }>();
  return async (key, using) => {
    let entry = entries.get(key);
    if (entry === undefined) {
      const opened = open(key, using);
      entry = { value: opened, users: 0 };
      entries.set(key, entry);
      opened.catch(() => entries.delete(key));
    }
    const mine = entry;
    mine.users++;
    let value: T;
    try {
      value = await mine.value;
    } catch (err) {
      mine.users--;
      throw err;
    }
    let released = false;
    return {
      value,
      async release() {
        if (released) return;
        released = true;
        if (--mine.users > 0) return;
        if (entries.get(key) === mine) entries.delete(key);
        await close(value);
      },
    };
  };
}
