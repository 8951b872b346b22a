"""What a namespace uses against a ResourceQuota, read from the store.

The evaluator the ResourceQuota admission plugin (admission.py) and the quota controller
(controllers/quota.py) share, as kube's pkg/quota/v1/evaluator is shared; the arithmetic is
simcluster/validation/quota.py.
"""

from simcluster.validation import quota as quota_mod


def refs(store, resource, ns):
    """The stored objects without deep copies when the store offers it (read-only use)."""
    fn = getattr(store, "list_with_rv", None)
    if fn is not None:
        try:
            return fn(resource, ns, copy=False)[0]
        except TypeError:
            pass
    return store.list(resource, ns)


CLAIMS = "resourceclaims.resource.k8s.io"


def claims_in(store, ns):
    """The namespace's ResourceClaims; none where the API does not serve them (before 1.34)."""
    try:
        return refs(store, CLAIMS, ns)
    except Exception:  # resource not served: nothing to count, like the real evaluator
        return []


def count_keys(resource):
    """The quota keys one object of `resource` counts against (count/<res>, legacy names)."""
    keys = {quota_mod.count_key(resource)}
    if resource in quota_mod.LEGACY_COUNTS:
        keys.add(resource)
    return keys


def object_counts(store, ns, quota):
    """Objects of each counted resource in the namespace, for the quota's count keys."""
    counts = {}
    for key in (quota.get("spec") or {}).get("hard") or {}:
        if key.startswith("count/") and key != "count/pods":
            res = key[len("count/"):]
        elif key in quota_mod.LEGACY_COUNTS and key != "pods":
            res = quota_mod.LEGACY_COUNTS[key]
        else:
            continue
        try:
            counts[key] = len(refs(store, res, ns))
        except Exception:  # unknown resource: counts nothing, like the real evaluator
            counts[key] = 0
    return counts


class UsageMemo:
    """pod_usage(pod), remembered per (uid, resourceVersion): a pod's usage is recounted for
    every quota check of its namespace."""

    def __init__(self, size=50000):
        self.memo = {}
        self.size = size

    def __call__(self, pod):
        meta = pod.get("metadata") or {}
        key = (meta.get("uid"), meta.get("resourceVersion"))
        if key[0] is None or key[1] is None:
            return quota_mod.pod_usage(pod)
        got = self.memo.get(key)
        if got is None:
            if len(self.memo) > self.size:
                self.memo.clear()
            got = self.memo[key] = quota_mod.pod_usage(pod)
        return got
