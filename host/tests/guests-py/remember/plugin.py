"""Test guest: remembers every primary it reconciled in module state and reports the list in
its status, so a test can see whether one reconcile's state reaches the next."""

from wasmloop import Manifest, Reconciler, kinds, status

SEEN = []


class Remember(Reconciler):
    def manifest(self):
        return Manifest("remember", "0.1.0", primary=kinds.ConfigMap)

    def reconcile(self, request):
        SEEN.append(request.name)
        return [status({"seen": list(SEEN)})]
