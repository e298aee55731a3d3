// Follows the keys file of a running gateway, so access-key changes (router-admin create, revoke, rotate,
// or an editor) take effect without a reload. The directory is watched, not the file: router-admin and
// most editors replace the file by rename, after which a watch on the old inode hears nothing, and a
// Kubernetes Secret volume swaps a symlinked directory beside it. Any event in the directory is debounced,
// the file re-read, and only a changed text is parsed and validated; a bad file keeps the keys in use and
// its problems are logged as file:line:col.

import { type FSWatcher, watch } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Logger } from 'pino';
import client from 'prom-client';
import { formatDiagnostic } from '../common/config-diagnostics.ts';
import type { KeysConfig } from '../common/config-types.ts';
import { errorText } from '../common/errors.ts';
import type { Env } from '../config/interpolate.ts';
import { keysConfigProblems, parseKeysSource } from '../config/keys.ts';

/** Quiet time after the last event in the directory before the file is read (editors write in bursts). */
export const KEYS_WATCH_DEBOUNCE_MS = 100;

export interface KeysWatchOptions {
  readonly file: string;
  /** The environment the configuration was loaded with (ROUTER_ACCESS_KEY_* still apply). */
  readonly env: Env;
  readonly log: Logger;
  readonly registry: client.Registry;
  /** store.access_key_hash_secret ('' = none) and the master key: the checks the loader makes too. */
  readonly hashSecret: string;
  readonly masterKey: string | undefined;
  /** Install the access keys of a valid new file. */
  apply(keys: KeysConfig): void;
  readonly debounceMs?: number;
}

export interface KeysWatch {
  close(): void;
}

interface WatchMetrics {
  readonly reloads: client.Counter<'result'>;
  readonly lastApplied: client.Gauge;
}

/** One set per registry: a reload (SIGHUP) builds a new watch on the same registry. */
const metricsByRegistry = new WeakMap<client.Registry, WatchMetrics>();

function watchMetrics(registry: client.Registry): WatchMetrics {
  let m = metricsByRegistry.get(registry);
  if (m === undefined) {
    m = {
      reloads: new client.Counter({
        name: 'router_access_keys_reloads_total',
        help: 'Changes of the keys file seen by the gateway: applied, or refused (invalid file, previous keys kept)',
        labelNames: ['result'],
        registers: [registry],
      }),
      lastApplied: new client.Gauge({
        name: 'router_access_keys_last_reload_timestamp_seconds',
        help: 'When access keys were last applied from the keys file (start, reload or file change)',
        registers: [registry],
      }),
    };
    metricsByRegistry.set(registry, m);
  }
  return m;
}

export function watchKeysFile(opts: KeysWatchOptions): KeysWatch {
  const { file, log } = opts;
  const debounceMs = opts.debounceMs ?? KEYS_WATCH_DEBOUNCE_MS;
  const metrics = watchMetrics(opts.registry);
  let lastText: string | undefined;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let again = false;
  let closed = false;

  const check = async (): Promise<void> => {
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      log.warn({ file, code }, 'keys file unreadable: the access keys in use are kept');
      return;
    }
    if (closed || text === lastText) return;
    const initial = lastText === undefined;
    lastText = text;
    const { keys, diagnostics } = parseKeysSource(text, file, opts.env);
    diagnostics.push(...keysConfigProblems(keys, { hashSecret: opts.hashSecret, masterKey: opts.masterKey }));
    if (diagnostics.length > 0) {
      metrics.reloads.inc({ result: 'refused' });
      for (const d of diagnostics)
        log.error({ diagnostic: formatDiagnostic(d) }, 'keys file refused: the access keys in use are kept');
      return;
    }
    opts.apply(keys);
    metrics.lastApplied.set(Date.now() / 1000);
    // The read that follows a start or reload only closes the window before the watch began.
    if (initial) return;
    metrics.reloads.inc({ result: 'applied' });
    log.info(
      {
        file,
        accessKeys: keys.accessKeys.length,
        active: keys.accessKeys.filter((k) => k.status === 'active').length,
      },
      'access keys reloaded from the keys file',
    );
  };

  const run = (): void => {
    timer = undefined;
    if (closed) return;
    if (running !== undefined) {
      again = true;
      return;
    }
    running = check()
      .catch((err: unknown) => log.error({ err: errorText(err), file }, 'keys file check failed'))
      .finally(() => {
        running = undefined;
        if (again && !closed) {
          again = false;
          run();
        }
      });
  };
  const schedule = (): void => {
    if (closed) return;
    if (timer !== undefined) clearTimeout(timer);
    timer = setTimeout(run, debounceMs);
    timer.unref();
  };

  let watcher: FSWatcher | undefined;
  try {
    watcher = watch(dirname(file), { persistent: false }, schedule);
    watcher.on('error', (err) => {
      log.error(
        { err: errorText(err), file },
        'watching the keys file failed: key changes need a reload (SIGHUP)',
      );
      watcher?.close();
    });
  } catch (err) {
    log.error(
      { err: errorText(err), file },
      'watching the keys file failed: key changes need a reload (SIGHUP)',
    );
  }
  // The watch began after the configuration was read: one read now catches a change in between.
  run();

  return {
    close() {
      closed = true;
      if (timer !== undefined) clearTimeout(timer);
      watcher?.close();
    },
  };
}
