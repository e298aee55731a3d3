// deploy/k8s: every manifest validates against the focused Kubernetes schemas (test/deploy/schemas),
// and the pieces fit together: the billing sidecar is the pod's second container, probes hit /readyz and
// /healthz on the right ports, non-root everywhere, resources set, selectors and references resolve,
// the grace period covers the drain, the spool is on a writable volume, and the ConfigMap's configuration
// loads with the Secret's values.

import assert from 'node:assert/strict';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { before, test } from 'node:test';
import { Ajv } from 'ajv';
import { loadAll as loadAllYaml, load as loadYaml } from 'js-yaml';
import { loadConfig } from '../../config/load.ts';
import { ROOT } from '../support/stack.ts';

type Obj = Record<string, unknown>;
interface Doc {
  file: string;
  kind: string;
  name: string;
  body: Obj;
}

const DIR = join(ROOT, 'deploy/k8s');
const docs: Doc[] = [];
/** The main configuration shipped in the ConfigMap (key `router.yaml`), parsed. */
const routerYaml = (): Obj => {
  const text = (one('ConfigMap', 'router-config').data as Record<string, string>)['router.yaml'];
  assert.ok(text, 'router.yaml in the ConfigMap');
  return loadYaml(text) as Obj;
};

const get = (o: unknown, path: string): unknown =>
  path
    .split('.')
    .reduce<unknown>((v, k) => (v !== null && typeof v === 'object' ? (v as Obj)[k] : undefined), o);
const arr = (o: unknown, path: string): Obj[] => (get(o, path) as Obj[] | undefined) ?? [];
const one = (kind: string, name?: string): Obj => {
  const found = docs.filter((d) => d.kind === kind && (name === undefined || d.name === name));
  const [doc] = found;
  assert.equal(found.length, 1, `exactly one ${kind}${name ? ` ${name}` : ''}`);
  assert.ok(doc);
  return doc.body;
};

before(async () => {
  for (const file of (await readdir(DIR)).filter((f) => f.endsWith('.yaml')).sort()) {
    for (const body of loadAllYaml(await readFile(join(DIR, file), 'utf8'))) {
      if (body === null || body === undefined) continue;
      const o = body as Obj;
      docs.push({ file, kind: String(o.kind), name: String(get(o, 'metadata.name') ?? ''), body: o });
    }
  }
});

test('every manifest validates against the schema of its kind', async () => {
  const schema = JSON.parse(await readFile(join(ROOT, 'test/deploy/schemas/k8s.schema.json'), 'utf8')) as {
    $defs: Record<string, unknown>;
  };
  const ajv = new Ajv({ allErrors: true, strict: true, strictRequired: false });
  ajv.addSchema(schema);
  const kinds = new Set(docs.map((d) => d.kind));
  for (const k of [
    'Deployment',
    'Service',
    'ConfigMap',
    'Secret',
    'PodDisruptionBudget',
    'HorizontalPodAutoscaler',
  ])
    assert.ok(kinds.has(k), `a ${k} is shipped`);
  for (const d of docs) {
    assert.ok(d.kind in schema.$defs, `${d.file}: no schema for kind ${d.kind}`);
    const validate = ajv.getSchema(`https://router.invalid/schemas/k8s.json#/$defs/${d.kind}`);
    assert.ok(validate);
    const ok = validate(d.body);
    assert.ok(ok, `${d.file} ${d.kind}/${d.name}: ${ajv.errorsText(validate.errors, { separator: '\n' })}`);
  }
});

test('the schemas reject what they should (a misspelt probe field, a missing selector)', async () => {
  const schema = JSON.parse(await readFile(join(ROOT, 'test/deploy/schemas/k8s.schema.json'), 'utf8')) as Obj;
  const ajv = new Ajv({ allErrors: true, strict: true, strictRequired: false });
  ajv.addSchema(schema);
  const validate = ajv.getSchema('https://router.invalid/schemas/k8s.json#/$defs/Deployment');
  assert.ok(validate);
  const good = structuredClone(one('Deployment'));
  assert.equal(validate(good), true);
  const typo = structuredClone(good);
  (arr(typo, 'spec.template.spec.containers')[0]!.readinessProbe as Obj).periodSecond = 5;
  assert.equal(validate(typo), false);
  const noSelector = structuredClone(good);
  delete (noSelector.spec as Obj).selector;
  assert.equal(validate(noSelector), false);
});

test('Deployment: gateway and billing sidecar containers with probes, ports, resources, non-root', () => {
  const dep = one('Deployment', 'router');
  const pod = get(dep, 'spec.template.spec') as Obj;
  const containers = arr(pod, 'containers');
  assert.deepEqual(
    containers.map((c) => c.name),
    ['gateway', 'billing'],
  );
  const portOf = (c: Obj, name: unknown) =>
    typeof name === 'number' ? name : arr(c, 'ports').find((p) => p.name === name)?.containerPort;
  const expect = { gateway: 8080, billing: 8081 } as const;
  for (const c of containers) {
    const port = expect[c.name as keyof typeof expect];
    assert.equal(get(c, 'readinessProbe.httpGet.path'), '/readyz', `${c.name} readiness`);
    assert.equal(portOf(c, get(c, 'readinessProbe.httpGet.port')), port);
    assert.equal(get(c, 'livenessProbe.httpGet.path'), '/healthz', `${c.name} liveness`);
    assert.equal(portOf(c, get(c, 'livenessProbe.httpGet.port')), port);
    assert.ok(get(c, 'resources.requests.cpu') && get(c, 'resources.requests.memory'), `${c.name} requests`);
    assert.ok(get(c, 'resources.limits.memory'), `${c.name} memory limit`);
    assert.equal(get(c, 'securityContext.allowPrivilegeEscalation'), false);
    assert.equal(get(c, 'securityContext.readOnlyRootFilesystem'), true);
    assert.deepEqual(get(c, 'securityContext.capabilities.drop'), ['ALL']);
    assert.deepEqual(
      arr(c, 'envFrom').map((e) => get(e, 'secretRef.name')),
      ['router-secrets'],
    );
  }
  const [gateway, billing] = containers;
  assert.ok(gateway && billing);
  const gwArgs = gateway.args as string[];
  assert.equal(gwArgs[0], 'proxy/cli.ts');
  assert.ok(gwArgs.includes('--no-sidecar'), 'the sidecar is the second container, not a child process');
  assert.equal((billing.args as string[])[0], 'bin/sidecar-main.ts');
  assert.equal(get(pod, 'securityContext.runAsNonRoot'), true);
  assert.ok(Number(get(pod, 'securityContext.runAsUser')) > 0);
  // The grace period covers the shutdown delay plus the drain timeout of the configuration.
  const delayMs = Number(gwArgs[gwArgs.indexOf('--shutdown-delay-ms') + 1]);
  const config = routerYaml();
  const drainMs = Number(get(config, 'limits.drain_timeout_ms'));
  // Plus the completion of requests cut at the drain timeout (given up after 5 s without progress) and
  // 2 s moving the spool to Redis.
  assert.ok(Number(pod.terminationGracePeriodSeconds) * 1000 > delayMs + drainMs + 7000);
  // Volumes mounted exist; the ConfigMap and Secret referenced are shipped.
  const volumes = new Set(arr(pod, 'volumes').map((v) => v.name));
  for (const c of containers)
    for (const m of arr(c, 'volumeMounts')) assert.ok(volumes.has(m.name), String(m.name));
  one('Secret', 'router-secrets');
  assert.equal(
    get(
      arr(pod, 'volumes').find((v) => v.name === 'config'),
      'configMap.name',
    ),
    'router-config',
  );
  assert.equal(get(dep, 'spec.strategy.rollingUpdate.maxUnavailable'), 0);
});

test('Service, PodDisruptionBudget and HPA point at the Deployment', () => {
  const dep = one('Deployment', 'router');
  const podLabels = get(dep, 'spec.template.metadata.labels') as Record<string, string>;
  const matches = (sel: Record<string, string>) => Object.entries(sel).every(([k, v]) => podLabels[k] === v);
  assert.ok(matches(get(dep, 'spec.selector.matchLabels') as Record<string, string>));
  const svc = one('Service', 'router');
  assert.ok(matches(get(svc, 'spec.selector') as Record<string, string>));
  const portNames = new Set(
    arr(dep, 'spec.template.spec.containers').flatMap((c) => arr(c, 'ports').map((p) => p.name)),
  );
  for (const p of arr(svc, 'spec.ports'))
    assert.ok(portNames.has(p.targetPort), `targetPort ${String(p.targetPort)}`);
  const pdb = one('PodDisruptionBudget');
  assert.ok(matches(get(pdb, 'spec.selector.matchLabels') as Record<string, string>));
  const hpa = one('HorizontalPodAutoscaler');
  assert.deepEqual(get(hpa, 'spec.scaleTargetRef'), {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    name: 'router',
  });
  // A voluntary disruption always leaves a pod serving.
  assert.ok(Number(get(hpa, 'spec.minReplicas')) > Number(get(pdb, 'spec.minAvailable')));
  assert.ok(Number(get(dep, 'spec.replicas')) >= Number(get(hpa, 'spec.minReplicas')));
});

test('Redis for shared-store mode: a StatefulSet and its Service, named by the configuration', () => {
  const sts = one('StatefulSet', 'router-redis');
  const svc = one('Service', 'router-redis');
  assert.equal(get(sts, 'spec.serviceName'), 'router-redis');
  const labels = get(sts, 'spec.template.metadata.labels') as Record<string, string>;
  for (const [k, v] of Object.entries(get(svc, 'spec.selector') as Record<string, string>))
    assert.equal(labels[k], v);
  assert.ok((arr(sts, 'spec.template.spec.containers')[0]!.args as string[]).includes('--appendonly'));
  const config = routerYaml();
  assert.equal(get(config, 'store.enabled'), true);
  assert.equal(get(config, 'store.addr'), 'redis://router-redis:6379');
});

test('kustomization lists every manifest', async () => {
  const k = one('Kustomization');
  const files = (await readdir(DIR)).filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml');
  assert.deepEqual([...(k.resources as string[])].sort(), files.sort());
});

test("the ConfigMap's router.yaml loads with the Secret's values (paths mapped to this checkout)", async () => {
  const cm = one('ConfigMap', 'router-config');
  const secret = one('Secret', 'router-secrets');
  const dir = await mkdtemp(join(tmpdir(), 'router-k8s-'));
  try {
    const data = cm.data as Record<string, string>;
    for (const [name, text] of Object.entries(data)) {
      // /etc/router is where the ConfigMap is mounted, /app the image's working directory.
      await writeFile(
        join(dir, name),
        text.replaceAll('/etc/router/', `${dir}/`).replaceAll('/app/', `${ROOT}/`),
      );
    }
    const env = { ...(secret.stringData as Record<string, string>) };
    for (const key of Object.keys(env)) assert.match(key, /^ROUTER_[A-Z0-9_]+$/);
    const { config, diagnostics } = await loadConfig(join(dir, 'router.yaml'), { env });
    assert.deepEqual(
      diagnostics.map((d) => d.message),
      [],
    );
    assert.ok(config);
    assert.equal(config.listen.port, 8080);
    assert.equal(config.billing.listen.port, 8081);
    assert.equal(config.sidecar.enabled, false);
    assert.equal(config.store.enabled, true);
    assert.ok(config.models.entries.length > 0);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("Redis mode: the gateway's spool (<billing.outbox_dir>/spool) is on a writable volume on disk", () => {
  const pod = get(one('Deployment', 'router'), 'spec.template.spec') as Obj;
  const gateway = arr(pod, 'containers').find((c) => c.name === 'gateway');
  assert.ok(gateway);
  const config = routerYaml();
  assert.equal(get(config, 'store.enabled'), true);
  const spool = `${String(get(config, 'billing.outbox_dir'))}/spool`;
  const mount = arr(gateway, 'volumeMounts').find((m) => spool.startsWith(`${String(m.mountPath)}/`));
  assert.ok(mount, `a volume of the gateway holds ${spool} (the root filesystem is read-only)`);
  assert.notEqual(mount.readOnly, true);
  const volume = arr(pod, 'volumes').find((v) => v.name === mount.name);
  assert.ok(volume?.emptyDir !== undefined || volume?.persistentVolumeClaim !== undefined);
  assert.notEqual(get(volume, 'emptyDir.medium'), 'Memory', 'on disk, not in the memory limit');
});
