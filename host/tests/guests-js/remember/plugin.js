// Test guest: remembers every primary it reconciled in module state and reports the list in its
// status, so a test can see whether one reconcile's state reaches the next. A ConfigMap with
// `data.raise` makes it read a property of a key that is not there: a bug, for the tests of how
// the SDK reports one.
import { kinds, manifest, status } from '@wasmloop/sdk';

const seen = [];

export default {
  manifest: () => manifest({ name: 'remember', version: '0.1.0', primary: kinds.ConfigMap }),
  reconcile(request) {
    const data = request.object.data ?? {};
    if ('raise' in data) return [status({ value: data.missing.length })];
    seen.push(request.name);
    return [status({ seen: [...seen] })];
  },
};
