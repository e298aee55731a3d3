// Temporary folders for configuration files; each test removes its own.

import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface TempDir {
  readonly dir: string;
  write(name: string, text: string): Promise<string>;
  remove(): Promise<void>;
}

export async function tempDir(): Promise<TempDir> {
  const dir = await mkdtemp(join(tmpdir(), 'router-config-'));
  return {
    dir,
    async write(name, text) {
      const path = join(dir, name);
      await writeFile(path, text);
      return path;
    },
    remove: () => rm(dir, { recursive: true, force: true }),
  };
}
