"""The kube-controller-manager controllers whose status the API server's rules read.

ResourceQuota status (controllers/quota.py) and PodDisruptionBudget status
(controllers/disruption.py), fed by the store's commit events. attach(store) is called once
when a Store is built (idempotent); the cluster twins live in simcluster/twins.
"""

import threading
import weakref

from . import disruption, quota

_ATTACHED = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


class Controllers:
    def __init__(self, store):
        self.quota = quota.QuotaController(store)
        self.disruption = disruption.DisruptionController(store)

    def resync(self):
        """Read every quota and budget again (after a store was loaded without events)."""
        self.quota.sync()
        self.disruption.sync()

    def on_event(self, event, resource, obj):
        try:
            self.quota.on_event(event, resource, obj)
            self.disruption.on_event(event, resource, obj)
        except (AttributeError, TypeError, ValueError, KeyError):
            pass  # objects written without admission may be malformed: nothing to count


def attach(store):
    """Run the controllers on the store's events (idempotent); returns them."""
    with _LOCK:
        ctl = _ATTACHED.get(store)
        if ctl is not None:
            return ctl
        ctl = _ATTACHED[store] = Controllers(store)
    store.subscribe(ctl.on_event)
    ctl.resync()
    return ctl
