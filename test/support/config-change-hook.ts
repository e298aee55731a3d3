// Preloaded into a `router` process (NODE_OPTIONS=--import) by test/proxy/config-read-once.test.ts: once
// the primary process has read the main file CONFIG_CHANGE_FILE CONFIG_CHANGE_AFTER times, the file on
// disk is replaced by the text of CONFIG_CHANGE_TO. A change between two reads, at a chosen read, every run.

import cluster from 'node:cluster';
import fs from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';

const file = process.env.CONFIG_CHANGE_FILE;
const after = Number(process.env.CONFIG_CHANGE_AFTER ?? '1');
const next = process.env.CONFIG_CHANGE_TO ?? '';

if (file !== undefined && cluster.isPrimary) {
  const readFile = fs.promises.readFile;
  let reads = 0;
  fs.promises.readFile = (async (path: fs.PathLike, ...rest: unknown[]) => {
    const text = await (readFile as (...args: unknown[]) => Promise<unknown>)(path, ...rest);
    if (String(path) === file && ++reads === after) fs.writeFileSync(file, next);
    return text;
  }) as typeof fs.promises.readFile;
  // `import { readFile } from 'node:fs/promises'` in modules loaded after this sees the wrapper.
  syncBuiltinESMExports();
}
