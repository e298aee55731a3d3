// Starting a keys file (docs/configuration.md "Keys file"): `router-admin access-key init`, and `create`
// when the file the configuration names is missing or empty. The file written is valid against
// config/keys.schema.json with no keys in it, and readable by its owner only (mode 0600): in file
// mode without store.access_key_hash_secret it will hold secrets in plain text.

import { chmod, open, readFile, rename, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { ConfigDiagnostic } from '../common/config-types.ts';
import { EXIT } from '../common/exit-codes.ts';
import { type LoadConfigResult, loadConfig } from '../config/load.ts';
import { AdminError } from './admin-error.ts';

/** An empty keys file: what `init` writes. */
export const KEYS_FILE_SKELETON =
  '# Keys file of the LLM router gateway (docs/configuration.md "Keys file"): client access keys and\n' +
  '# upstream provider keys. router-admin access-key create, rotate and revoke edit access_keys.\n' +
  'access_keys: []\n';

/** What config/ (common/yaml-source.ts readYaml) reports for a keys file that does not exist. */
const KEYS_FILE_NOT_FOUND = 'cannot read keys file: file not found';

/** Nothing but blanks: an "empty" keys file, which `init` and `create` may fill. */
export function isBlank(text: string): boolean {
  return text.trim() === '';
}

/**
 * The keys file the configuration names when that file is missing: the path of the loader's "file not
 * found" diagnostic (already resolved against the configuration's folder), else undefined.
 */
export function missingKeysFile(diagnostics: readonly ConfigDiagnostic[]): string | undefined {
  return diagnostics.find((d) => d.message === KEYS_FILE_NOT_FOUND)?.file;
}

/**
 * Writes an empty keys file at `file` (absolute), mode 0600: a new file, or over one that is empty. A file
 * with content is never replaced (AdminError, exit code 1). Returns what was there before.
 */
export async function startKeysFile(file: string): Promise<'missing' | 'empty'> {
  let handle: Awaited<ReturnType<typeof open>> | undefined;
  try {
    handle = await open(file, 'wx', 0o600);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT')
      throw new AdminError(
        `cannot create the keys file ${file}: the directory ${dirname(file)} does not exist; create it ` +
          '(mkdir -p), or name another path',
        EXIT.usage,
      );
    if (code !== 'EEXIST') throw err;
  }
  if (handle !== undefined) {
    try {
      await handle.writeFile(KEYS_FILE_SKELETON);
    } finally {
      await handle.close();
    }
    await chmod(file, 0o600);
    return 'missing';
  }
  if (!isBlank(await readFile(file, 'utf8')))
    throw new AdminError(
      `the keys file ${file} exists and is not empty; nothing was changed. Add keys with ` +
        '`router-admin access-key create`, or move the file away to start a new one',
      EXIT.failed,
    );
  // Replaced in one rename: a running gateway watching the folder never reads a half-written file.
  const tmp = `${file}.${process.pid}.tmp`;
  await writeFile(tmp, KEYS_FILE_SKELETON, { mode: 0o600 });
  await chmod(tmp, 0o600);
  await rename(tmp, file);
  return 'empty';
}

/** `create` and `init` say this on stderr once they have started the keys file. */
export function startedNote(file: string, before: 'missing' | 'empty'): string {
  return `started the keys file ${file} (it ${before === 'missing' ? 'did not exist' : 'was empty'}): no keys yet, mode 0600`;
}

/**
 * The main configuration, for router-admin. With `startKeysFile`, a keys file the configuration names but
 * that does not exist yet is started (only when that is the configuration's one problem) and one that is
 * empty is filled (file mode only: the store keeps the keys otherwise), each said through `note`.
 */
export async function loadAdminConfig(
  configFile: string,
  opts: { startKeysFile: boolean; note: (line: string) => void },
): Promise<LoadConfigResult> {
  let loaded = await loadConfig(configFile);
  if (loaded.config === undefined) {
    const missing = missingKeysFile(loaded.diagnostics);
    if (!opts.startKeysFile || missing === undefined || loaded.diagnostics.length !== 1) return loaded;
    opts.note(startedNote(missing, await startKeysFile(missing)));
    loaded = await loadConfig(configFile);
    return loaded;
  }
  const file = loaded.config.keys.file;
  if (opts.startKeysFile && file !== undefined && !loaded.config.store.enabled) {
    let text: string | undefined;
    try {
      text = await readFile(file, 'utf8');
    } catch {
      // the key backend reports it
    }
    if (text !== undefined && isBlank(text)) opts.note(startedNote(file, await startKeysFile(file)));
  }
  return loaded;
}

/** For a configuration that failed: how to fix a missing keys file, if that is one of its problems. */
export function missingKeysFileHint(configFile: string, diagnostics: readonly ConfigDiagnostic[]): string {
  const missing = missingKeysFile(diagnostics);
  if (missing === undefined) return '';
  return (
    `the keys file ${missing} named by \`keys:\` in ${configFile} does not exist: start it with ` +
    `\`router-admin access-key init --config ${configFile}\`, or correct \`keys:\``
  );
}
