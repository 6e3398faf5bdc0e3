// Test guest: the `roller` guest (host/tests/guests/roller, Rust) in JavaScript, held to the same
// actions by the golden tests (host/tests/offline.rs), so contract 0.3's features are shown to
// cross the JavaScript SDK as they cross the Rust one: annotation, generation and field filters,
// an index and `map` through it, triggers, and an unforced apply that gives a field up on a
// conflict.
import { CacheError, apply, cache, grant, index, kinds, log, manifest, ref, watch } from '@wasmloop/sdk';

const MOUNTS = 'configmap';
const SECRET = 'roll-secret';
const ROLLED_FOR = 'wasmloop.dev/rolled-for';

function shown(t) {
  switch (t.kind) {
    case 'primary-changed': {
      const g = (n) => (n === undefined || n === null ? '-' : String(n));
      return `primary ${g(t.generation.old)}->${g(t.generation.new)}`;
    }
    case 'owned-changed':
    case 'related-changed':
      return `${t.kind.split('-')[0]} ${t.ref.kind}/${t.ref.name}`;
    case 'conflict':
      return `conflict ${t.conflict.target.name}`;
    default:
      return t.kind;
  }
}

const names = (kind, namespace) => cache.list(kind, { namespace }).map((o) => o.metadata.name).join(',');

export default {
  manifest: () =>
    manifest({
      name: 'roller',
      version: '0.1.0',
      primary: watch(kinds.Deployment, { annotations: { 'wasmloop.dev/roll': null }, generationChanged: true }),
      watches: [kinds.ConfigMap, watch(kinds.Secret, { fields: `metadata.name=${SECRET}` })],
      indexes: [index(MOUNTS, kinds.Deployment, ['spec.template.spec.volumes[*].configMap.name', 'spec.template.spec.containers[*].envFrom[*].configMapRef.name'])],
      writes: [grant(kinds.Deployment, { apply: true }), grant(kinds.ConfigMap, { apply: true })],
    }),

  reconcile(request) {
    if (request.phase !== 'apply') return [];
    const replicas = request.config?.replicas;
    const namespace = request.namespace;
    const triggers = request.triggers.map(shown);
    const rolled = request.triggers.filter((t) => t.kind === 'related-changed' && t.ref.kind === 'ConfigMap').map((t) => t.ref.name);
    const conflict = request.triggers.filter((t) => t.kind === 'conflict').flatMap((t) => t.conflict.fields.map((f) => `${f.manager} ${f.field}`));
    const observation = `roller-observed-${request.name}`;
    const counted = cache.get(kinds.ConfigMap, observation, namespace)?.data?.calls ?? '';
    const calls = /^[0-9]+$/.test(counted) ? Number(counted) : 0;
    const observed = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: observation },
      data: {
        calls: String(calls + 1),
        triggers: triggers.join(';'),
        deployments: names(kinds.Deployment, namespace),
        secrets: names(kinds.Secret, namespace),
        conflict: conflict.join(';'),
      },
    };
    const actions = [apply(observed)];
    const desired = { apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: request.name } };
    let sets = false;
    if (replicas !== undefined && replicas !== null && conflict.length === 0) {
      desired.spec = { replicas };
      sets = true;
    }
    const kept = request.object.spec?.template?.metadata?.annotations?.[ROLLED_FOR];
    const roll = rolled.length ? rolled.join(',') : typeof kept === 'string' ? kept : undefined;
    if (roll !== undefined) {
      desired.spec ??= {};
      desired.spec.template = { metadata: { annotations: { [ROLLED_FOR]: roll } } };
      sets = true;
    }
    if (sets) actions.push(apply(desired, { force: false }));
    return actions;
  },

  map(related) {
    const { name, namespace } = related.metadata ?? {};
    let users;
    try {
      users = related.kind === 'ConfigMap' ? cache.byIndex(kinds.Deployment, MOUNTS, name, { namespace }) : cache.list(kinds.Deployment, { namespace });
    } catch (e) {
      if (!(e instanceof CacheError)) throw e;
      users = [];
    }
    log.info(`map of ${related.kind} ${name} found ${users.length}`);
    return users.map((u) => ref(u));
  },
};
