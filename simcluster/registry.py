"""The resource types the simulated API server serves.

Built-in types are a fixed table; CustomResourceDefinitions add types at
runtime (Registry.sync_crds). Every type has a key "plural.group" ("pods" for
the core group), the key the Store and admission use.
"""

import threading

SERVER_VERSION = {
    "major": "1", "minor": "35", "gitVersion": "v1.35.0-simcluster",
    "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.25.0", "compiler": "gc",
    "platform": "linux/amd64", "emulationMajor": "1", "emulationMinor": "35",
    "minCompatibilityMajor": "1", "minCompatibilityMinor": "34",
}

ALL_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


class ResourceInfo:
    """One served resource type (all served versions share one storage)."""

    def __init__(self, group, versions, plural, kind, namespaced, *, singular=None,
                 short_names=(), categories=(), subresources=(), verbs=None,
                 crd=None, storage_version=None, since=None):
        self.group = group
        self.since = since                      # (major, minor) of the first release serving it
        self.versions = list(versions)          # served versions, preferred first
        self.storage_version = storage_version or self.versions[0]
        self.plural = plural
        self.kind = kind
        self.list_kind = kind + "List"
        self.namespaced = namespaced
        self.singular = singular or kind.lower()
        self.short_names = list(short_names)
        self.categories = list(categories)
        self.subresources = set(subresources)
        self.verbs = list(verbs or ALL_VERBS)
        self.crd = crd                          # the CRD object for custom resources
        self.key = plural + ("." + group if group else "")

    def api_version(self, version=None):
        version = version or self.storage_version
        return version if not self.group else "%s/%s" % (self.group, version)

    @property
    def has_generation(self):
        return self.crd is not None or self.key in GENERATION

    @property
    def has_status(self):
        return "status" in self.subresources

    def qualified(self):
        """The name used in error messages: "pods", "deployments.apps"."""
        return self.key


def _b(group, versions, plural, kind, namespaced, **kw):
    return ResourceInfo(group, versions if isinstance(versions, list) else [versions],
                        plural, kind, namespaced, **kw)


_ST = ("status",)
_SC = ("status", "scale")

BUILTINS = [
    _b("", "v1", "namespaces", "Namespace", False, short_names=["ns"],
       subresources=("status", "finalize"), verbs=["create", "delete", "get", "list", "patch",
                                                    "update", "watch"]),
    _b("", "v1", "nodes", "Node", False, short_names=["no"], subresources=_ST),
    _b("", "v1", "pods", "Pod", True, short_names=["po"], categories=["all"],
       subresources=("status", "log", "eviction", "binding", "ephemeralcontainers", "resize")),
    _b("", "v1", "services", "Service", True, short_names=["svc"], categories=["all"],
       subresources=_ST, verbs=["create", "delete", "deletecollection", "get", "list", "patch",
                                "update", "watch"]),
    _b("", "v1", "endpoints", "Endpoints", True, short_names=["ep"]),
    _b("", "v1", "configmaps", "ConfigMap", True, short_names=["cm"]),
    _b("", "v1", "secrets", "Secret", True),
    _b("", "v1", "serviceaccounts", "ServiceAccount", True, short_names=["sa"],
       subresources=("token",)),
    _b("", "v1", "events", "Event", True, short_names=["ev"]),
    _b("", "v1", "resourcequotas", "ResourceQuota", True, short_names=["quota"],
       subresources=_ST),
    _b("", "v1", "limitranges", "LimitRange", True, short_names=["limits"]),
    _b("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True, short_names=["pvc"],
       subresources=_ST),
    _b("", "v1", "persistentvolumes", "PersistentVolume", False, short_names=["pv"],
       subresources=_ST),
    _b("", "v1", "replicationcontrollers", "ReplicationController", True, short_names=["rc"],
       categories=["all"], subresources=_SC),
    _b("apps", "v1", "deployments", "Deployment", True, short_names=["deploy"],
       categories=["all"], subresources=_SC),
    _b("apps", "v1", "daemonsets", "DaemonSet", True, short_names=["ds"], categories=["all"],
       subresources=_ST),
    _b("apps", "v1", "statefulsets", "StatefulSet", True, short_names=["sts"],
       categories=["all"], subresources=_SC),
    _b("apps", "v1", "replicasets", "ReplicaSet", True, short_names=["rs"], categories=["all"],
       subresources=_SC),
    _b("apps", "v1", "controllerrevisions", "ControllerRevision", True),
    _b("batch", "v1", "jobs", "Job", True, categories=["all"], subresources=_ST),
    _b("batch", "v1", "cronjobs", "CronJob", True, short_names=["cj"], categories=["all"],
       subresources=_ST),
    _b("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", True,
       short_names=["hpa"], categories=["all"], subresources=_ST),
    _b("rbac.authorization.k8s.io", "v1", "roles", "Role", True),
    _b("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True),
    _b("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False),
    _b("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False),
    _b("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", True,
       short_names=["netpol"]),
    _b("networking.k8s.io", "v1", "ingresses", "Ingress", True, short_names=["ing"],
       subresources=_ST),
    _b("networking.k8s.io", "v1", "ingressclasses", "IngressClass", False),
    _b("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True,
       short_names=["pdb"], subresources=_ST),
    _b("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition",
       False, short_names=["crd", "crds"], categories=["api-extensions"], subresources=_ST),
    _b("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, short_names=["pc"]),
    _b("coordination.k8s.io", "v1", "leases", "Lease", True),
    _b("events.k8s.io", "v1", "events", "Event", True, short_names=["ev"]),
    _b("storage.k8s.io", "v1", "storageclasses", "StorageClass", False, short_names=["sc"]),
    _b("node.k8s.io", "v1", "runtimeclasses", "RuntimeClass", False),
    _b("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", True),
    _b("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations",
       "MutatingWebhookConfiguration", False, categories=["api-extensions"]),
    _b("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations",
       "ValidatingWebhookConfiguration", False, categories=["api-extensions"]),
    # queues work: VAP evaluated by validation/vap.py; APIService stored only (Kueue's chart)
    _b("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies",
       "ValidatingAdmissionPolicy", False, categories=["api-extensions"], subresources=_ST),
    _b("admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings",
       "ValidatingAdmissionPolicyBinding", False, categories=["api-extensions"]),
    _b("apiregistration.k8s.io", "v1", "apiservices", "APIService", False,
       categories=["api-extensions"], subresources=_ST),
    # Dynamic Resource Allocation: resource.k8s.io/v1 is served from Kubernetes 1.34 (GA)
    _b("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", False, since=(1, 34)),
    _b("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", True, subresources=_ST,
       since=(1, 34)),
    _b("resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate", True,
       since=(1, 34)),
    _b("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", False, since=(1, 34)),
    _b("authorization.k8s.io", "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview",
       False, verbs=["create"]),
    _b("authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview",
       False, verbs=["create"]),
]

# Group order of a real 1.35 API server's /apis (clients pick the first match of a kind).
GROUP_ORDER = ["apiregistration.k8s.io", "apps", "events.k8s.io", "authentication.k8s.io",
               "authorization.k8s.io", "autoscaling", "batch", "certificates.k8s.io",
               "networking.k8s.io", "policy", "rbac.authorization.k8s.io", "storage.k8s.io",
               "admissionregistration.k8s.io", "apiextensions.k8s.io", "scheduling.k8s.io",
               "coordination.k8s.io", "node.k8s.io", "discovery.k8s.io", "resource.k8s.io"]

# Built-in types whose strategy maintains metadata.generation (custom resources all do).
GENERATION = {"pods", "replicationcontrollers", "deployments.apps", "daemonsets.apps",
              "statefulsets.apps", "replicasets.apps", "jobs.batch", "cronjobs.batch",
              "horizontalpodautoscalers.autoscaling", "poddisruptionbudgets.policy",
              "networkpolicies.networking.k8s.io", "ingresses.networking.k8s.io",
              "customresourcedefinitions.apiextensions.k8s.io",
              "mutatingwebhookconfigurations.admissionregistration.k8s.io",
              "validatingwebhookconfigurations.admissionregistration.k8s.io",
              "validatingadmissionpolicies.admissionregistration.k8s.io",
              "validatingadmissionpolicybindings.admissionregistration.k8s.io",
              "deviceclasses.resource.k8s.io", "resourceclaims.resource.k8s.io",
              "resourceslices.resource.k8s.io"}

# Resources that only accept create and are never stored.
VIRTUAL = {"selfsubjectaccessreviews.authorization.k8s.io",
           "subjectaccessreviews.authorization.k8s.io"}


class Registry:
    """Thread-safe lookup of served types; `generation` changes when CRDs change."""

    def __init__(self, kubernetes_version=None):
        self._lock = threading.Lock()
        self._by_key = {}
        self.generation = 0
        release = release_of(kubernetes_version)
        self.server_version = server_version(kubernetes_version)
        for info in BUILTINS:
            if info.since is not None and release is not None and release < info.since:
                continue    # not served by that release (the cluster file's kubernetes_version)
            self._by_key[info.key] = info
        self._rebuild()

    def _rebuild(self):
        by_gvr = {}
        groups = {}
        for info in self._by_key.values():
            for v in info.versions:
                by_gvr[(info.group, v, info.plural)] = info
            groups.setdefault(info.group, [])
            for v in info.versions:
                if v not in groups[info.group]:
                    groups[info.group].append(v)
        self._by_gvr = by_gvr
        self._groups = groups
        self.generation += 1

    def get(self, key):
        return self._by_key.get(key)

    def lookup(self, group, version, plural):
        return self._by_gvr.get((group, version, plural))

    def all(self):
        return list(self._by_key.values())

    def groups(self):
        """{group: [versions, preferred first]} ("" = core)."""
        return {g: list(v) for g, v in self._groups.items()}

    def group_names(self):
        names = [g for g in self._groups if g]
        order = {g: i for i, g in enumerate(GROUP_ORDER)}
        return sorted(names, key=lambda g: (order.get(g, len(order)), g))

    def in_group_version(self, group, version):
        return [i for i in self._by_key.values() if i.group == group and version in i.versions]

    def by_kind(self, group, kind):
        for info in self._by_key.values():
            if info.group == group and info.kind == kind:
                return info
        return None

    def sync_crds(self, crds):
        """Serve exactly the established CRDs given (list of CRD objects)."""
        with self._lock:
            keep = {k: v for k, v in self._by_key.items() if v.crd is None}
            for crd in crds:
                info = info_from_crd(crd)
                if info is not None and info.key not in keep:
                    keep[info.key] = info
            self._by_key = keep
            self._rebuild()


def server_version(version):
    """GET /version of a control plane at `version` (the cluster file's kubernetes_version)."""
    release = release_of(version)
    if release is None:
        return dict(SERVER_VERSION)
    text = str(version) if str(version).startswith("v") else "v" + str(version)
    major, minor = release
    return dict(SERVER_VERSION, major=str(major), minor=str(minor), gitVersion=text.split("-")[0] + "-simcluster",
                emulationMajor=str(major), emulationMinor=str(minor), minCompatibilityMajor=str(major),
                minCompatibilityMinor=str(minor - 1))


def release_of(version):
    """(major, minor) of "v1.34.2" / "1.33", or None."""
    import re
    m = re.match(r"^v?(\d+)\.(\d+)", str(version or ""))
    return (int(m.group(1)), int(m.group(2))) if m else None


def _version_key(v):
    """Kubernetes version priority: GA > beta > alpha, higher numbers first."""
    import re
    m = re.match(r"^v(\d+)(?:(alpha|beta)(\d+))?$", v)
    if not m:
        return (3, 0, 0, v)
    major, kind, minor = int(m.group(1)), m.group(2), int(m.group(3) or 0)
    rank = {None: 0, "beta": 1, "alpha": 2}[kind]
    return (rank, -major, -minor, v)


def info_from_crd(crd):
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group = spec.get("group")
    plural = names.get("plural")
    if not group or not plural or not names.get("kind"):
        return None
    served = [v for v in spec.get("versions") or [] if v.get("served", True)]
    if not served:
        return None
    versions = sorted((v["name"] for v in served), key=_version_key)
    storage = next((v["name"] for v in spec.get("versions") or [] if v.get("storage")),
                   versions[0])
    subs = set()
    for v in served:
        sr = v.get("subresources") or {}
        if "status" in sr:
            subs.add("status")
        if "scale" in sr:
            subs.add("scale")
    return ResourceInfo(group, versions, plural, names["kind"],
                        spec.get("scope", "Namespaced") == "Namespaced",
                        singular=names.get("singular") or names["kind"].lower(),
                        short_names=names.get("shortNames") or (),
                        categories=names.get("categories") or (),
                        subresources=subs, crd=crd, storage_version=storage)


def crd_version(crd, version):
    for v in (crd.get("spec") or {}).get("versions") or []:
        if v.get("name") == version:
            return v
    return None
