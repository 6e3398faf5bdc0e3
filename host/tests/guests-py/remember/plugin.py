"""Test guest: remembers every primary it reconciled in module state and reports the list in
its status, so a test can see whether one reconcile's state reaches the next. A ConfigMap with
`data.raise` makes it read a key that is not there: a bug, for the tests of how the SDK reports
one."""

from wasmloop import Manifest, Reconciler, kinds, status

SEEN = []


class Remember(Reconciler):
    def manifest(self):
        return Manifest("remember", "0.1.0", primary=kinds.ConfigMap)

    def reconcile(self, request):
        data = request.object.get("data") or {}
        if "raise" in data:
            return [status({"value": data["missing"]})]
        SEEN.append(request.name)
        return [status({"seen": list(SEEN)})]
