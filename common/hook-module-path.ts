// Where a custom hook module lives: the one rule for the main file's `hooks[].module` and a provider
// file's `hook "<module>"` directive (docs/configuration.md, docs/dsl.md). A path is relative to the file
// that names it; a bare package name is looked up from that file's folder upwards, as Node would.

import { createRequire } from 'node:module';
import { dirname, isAbsolute, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { errorText } from './errors.ts';

/**
 * The module as written, made independent of the working directory: a path (starting with `.`, absolute,
 * or a `file:` URL) becomes absolute, from the folder of `fromFile`; a bare package name stays as it is.
 * Throws on a `file:` URL that names no local file.
 */
export function hookModulePath(spec: string, fromFile: string): string {
  if (spec.startsWith('file:')) return fileURLToPath(spec);
  if (isAbsolute(spec)) return spec;
  if (spec.startsWith('.')) return resolve(dirname(resolve(fromFile)), spec);
  return spec;
}

/**
 * The URL to import: hookModulePath's file, or the file Node's require.resolve finds for a bare package
 * name from the folder of `fromFile` (its node_modules, then its parents'), never from the gateway's.
 */
export function hookModuleUrl(spec: string, fromFile: string): string {
  const path = hookModulePath(spec, fromFile);
  if (isAbsolute(path)) return pathToFileURL(path).href;
  try {
    return pathToFileURL(createRequire(resolve(fromFile)).resolve(path)).href;
  } catch (err) {
    throw new Error(`${errorText(err)} (looked up from ${dirname(resolve(fromFile))})`);
  }
}
