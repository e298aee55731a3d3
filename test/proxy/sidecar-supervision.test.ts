// `router` without --no-sidecar runs `router-billing` as its child: under SCHED_IDLE (ROUTER_SIDECAR_SCHED)
// at the niceness of ROUTER_SIDECAR_NICE, with the gateway's V8 flag plus ROUTER_SIDECAR_NODE_FLAGS, restarted when it dies
// (at once for its first crashes, common/restart-policy.ts), and stopped with the gateway. The child
// delivers the gateway's usage events.

import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { sidecarLauncher } from '../../proxy/sidecar-supervisor.ts';
import { spawnLogged, startBillingStack, waitUntil } from '../support/billing-stack.ts';
import { ACCESS_KEY } from '../support/stack.ts';

interface Proc {
  pid: number;
  nice: number;
  /** Scheduling policy (0 SCHED_OTHER, 5 SCHED_IDLE). */
  policy: number;
  cmdline: string[];
}

/** The live child processes of `parent`, from /proc. */
async function childrenOf(parent: number): Promise<Proc[]> {
  const out: Proc[] = [];
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = await readFile(`/proc/${name}/stat`, 'utf8');
      // Fields after the parenthesised command name: state ppid ... (nice is field 19 overall).
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(fields[1]) !== parent || fields[0] === 'Z') continue;
      const cmdline = (await readFile(`/proc/${name}/cmdline`, 'utf8')).split('\0').filter((a) => a !== '');
      out.push({ pid: Number(name), nice: Number(fields[16]), policy: Number(fields[38]), cmdline });
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/**
 * The sidecar child once it runs node: the launcher (chrt) execs node in the same process, and while it
 * does its cmdline names the sidecar already but its scheduling is not final, and for an instant /proc
 * may show no cmdline at all.
 */
async function sidecarOf(parent: number): Promise<Proc | undefined> {
  return (await childrenOf(parent)).find(
    (p) => p.cmdline[0] === process.execPath && p.cmdline.some((a) => a.endsWith('sidecar-main.ts')),
  );
}

/** `router` (proxy/cli.ts) with its supervised sidecar, once the sidecar child exists. */
async function startSupervising(
  t: { after: (fn: () => unknown) => void },
  stack: Awaited<ReturnType<typeof startBillingStack>>,
  env: Record<string, string> = {},
): Promise<{ gw: Awaited<ReturnType<typeof spawnLogged>>; pid: number; sidecar: Proc }> {
  const gw = await spawnLogged(
    'proxy/cli.ts',
    ['-c', stack.configFile],
    { ...stack.env, ...env },
    'router listening',
  );
  t.after(() => {
    if (gw.child.exitCode === null) gw.child.kill('SIGKILL');
  });
  const pid = gw.child.pid;
  assert.ok(pid !== undefined);
  let sidecar: Proc | undefined;
  await waitUntil(async () => {
    sidecar = await sidecarOf(pid);
    return sidecar !== undefined;
  }, 'the sidecar child');
  assert.ok(sidecar);
  return { gw, pid, sidecar };
}

/** Resolves once `pid` has exited (gone, or a zombie not reaped yet). */
function exitOf(pid: number, what: string): Promise<void> {
  return waitUntil(async () => {
    try {
      const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
      return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
    } catch {
      return true;
    }
  }, what);
}

test('router supervises router-billing: nice, node flags, delivery, restart after kill -9, stop with the gateway', async (t) => {
  const stack = await startBillingStack({ gateway: false, sidecar: false });
  t.after(() => stack.close());
  const { gw, pid, sidecar } = await startSupervising(t, stack, {
    ROUTER_SIDECAR_NICE: '7',
    ROUTER_SIDECAR_NODE_FLAGS: '--stack-size=983  --no-warnings',
  });
  assert.equal(sidecar.nice, 7);
  // SCHED_IDLE (through chrt) unless the machine has no chrt.
  assert.equal(sidecar.policy, sidecarLauncher({}).length > 0 ? 5 : 0);
  for (const flag of ['--max-semi-space-size=8', '--stack-size=983', '--no-warnings']) {
    assert.ok(sidecar.cmdline.includes(flag), `${flag} in ${sidecar.cmdline.join(' ')}`);
  }

  // It delivers what the gateway serves.
  const res = await fetch(`${gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${ACCESS_KEY}`,
      'content-type': 'application/json',
      'x-router-request-id': 'sup-1',
    },
    body: JSON.stringify({ model: 'gpt-5.4-mini', messages: [{ role: 'user', content: 'hi' }] }),
  });
  assert.equal(res.status, 200);
  await res.arrayBuffer();
  await waitUntil(() => stack.billing.events.some((e) => e.external_event_id === 'sup-1'), 'the event');

  // Killed twice in a row, it comes back at once each time (a new process), and what was served
  // meanwhile is delivered.
  let killed = sidecar.pid;
  for (const _ of [1, 2]) {
    const victim = killed;
    process.kill(victim, 'SIGKILL');
    await waitUntil(async () => {
      const next = await sidecarOf(pid);
      if (next === undefined || next.pid === victim) return false;
      killed = next.pid;
      return true;
    }, 'the restarted sidecar');
  }
  const restarts = () => gw.lines.filter((l) => l.msg === 'billing sidecar exited; restarting');
  // The line is written before the restart; it may reach this process a moment after the new child shows.
  await waitUntil(() => restarts().length === 2, 'both restarts logged');
  assert.deepEqual(
    restarts().map((l) => [l.signal, l.restartInMs]),
    [
      ['SIGKILL', 0],
      ['SIGKILL', 0],
    ],
  );
  const again = await fetch(`${gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${ACCESS_KEY}`,
      'content-type': 'application/json',
      'x-router-request-id': 'sup-2',
    },
    body: JSON.stringify({ model: 'gpt-5.4-mini', messages: [{ role: 'user', content: 'hi' }] }),
  });
  assert.equal(again.status, 200);
  await again.arrayBuffer();
  await waitUntil(
    () => stack.billing.events.some((e) => e.external_event_id === 'sup-2'),
    'the second event',
  );

  // SIGTERM: the gateway stops its sidecar and exits cleanly.
  const current = await sidecarOf(pid);
  assert.ok(current);
  gw.child.kill('SIGTERM');
  const exit = await gw.exited;
  assert.equal(exit.code, 0);
  await exitOf(current.pid, 'the sidecar to exit');
});

test('kill -9 of the gateway: its sidecar notices (its stdin pipe closes) and stops instead of living on', async (t) => {
  const stack = await startBillingStack({ gateway: false, sidecar: false });
  t.after(() => stack.close());
  const { gw, sidecar } = await startSupervising(t, stack);
  // Up: it holds the outbox's reader lock (its pid in reader.lock).
  await waitUntil(
    async () =>
      (await readFile(join(stack.outboxDir, 'reader.lock'), 'utf8').catch(() => '')).includes(
        String(sidecar.pid),
      ),
    'the sidecar to hold the outbox',
  );

  gw.child.kill('SIGKILL');
  await gw.exited;
  // Orphaned, it is re-parented; it must exit on its own, gracefully (SIGTERM path: exit code 0 lets
  // the next gateway's sidecar take the port and the outbox).
  await exitOf(sidecar.pid, 'the orphaned sidecar to exit');
});
