"""Discovery documents (legacy, non-aggregated form), cached per registry generation.

Clients that ask for aggregated discovery (apidiscovery.k8s.io/v2) get the
legacy documents with Content-Type application/json and fall back to them,
exactly as they do against an API server without aggregated discovery.
"""

import hashlib
import json
import threading

# subresource -> (kind, group, version, verbs); group None = the parent's group.
SUBRESOURCES = {
    "status": (None, None, None, ["get", "patch", "update"]),
    "scale": ("Scale", "autoscaling", "v1", ["get", "patch", "update"]),
    "log": ("Pod", "", "v1", ["get"]),
    "eviction": ("Eviction", "policy", "v1", ["create"]),
    "binding": ("Binding", "", "v1", ["create"]),
    "finalize": ("Namespace", "", "v1", ["update"]),
    "token": ("TokenRequest", "authentication.k8s.io", "v1", ["create"]),
    "ephemeralcontainers": ("Pod", "", "v1", ["get", "patch", "update"]),
    "resize": ("Pod", "", "v1", ["get", "patch", "update"]),
}


def _hash(text):
    return hashlib.sha256(text.encode()).hexdigest()[:12]


class Discovery:
    def __init__(self, registry):
        self.registry = registry
        self._lock = threading.Lock()
        self._gen = None
        self._cache = {}

    def _docs(self):
        with self._lock:
            if self._gen != self.registry.generation:
                self._cache = {}
                self._gen = self.registry.generation
            return self._cache

    def _cached(self, key, build):
        cache = self._docs()
        body = cache.get(key)
        if body is None:
            doc = build()
            body = None if doc is None else json.dumps(doc).encode()
            cache[key] = body
        return body

    def api_versions(self, server_address):
        return self._cached(("api", server_address), lambda: {
            "kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0",
                                            "serverAddress": server_address}]})

    def _group_doc(self, group, versions):
        gvs = [{"groupVersion": "%s/%s" % (group, v), "version": v} for v in versions]
        return {"name": group, "versions": gvs, "preferredVersion": gvs[0]}

    def group_list(self):
        def build():
            groups = self.registry.groups()
            return {"kind": "APIGroupList", "apiVersion": "v1",
                    "groups": [self._group_doc(g, groups[g]) for g in self.registry.group_names()]}
        return self._cached(("apis",), build)

    def group(self, group):
        def build():
            versions = self.registry.groups().get(group)
            if not versions or not group:
                return None
            doc = self._group_doc(group, versions)
            doc.update({"kind": "APIGroup", "apiVersion": "v1"})
            return doc
        return self._cached(("group", group), build)

    def resource_list(self, group, version):
        def build():
            infos = self.registry.in_group_version(group, version)
            if not infos:
                return None
            resources = []
            for info in sorted(infos, key=lambda i: i.plural):
                entry = {"name": info.plural, "singularName": info.singular,
                         "namespaced": info.namespaced, "kind": info.kind,
                         "verbs": list(info.verbs),
                         "storageVersionHash": _hash(info.key)}
                if info.short_names:
                    entry["shortNames"] = list(info.short_names)
                if info.categories:
                    entry["categories"] = list(info.categories)
                resources.append(entry)
                for sub in sorted(info.subresources):
                    kind, sgroup, sversion, verbs = SUBRESOURCES.get(
                        sub, (None, None, None, ["get"]))
                    sentry = {"name": "%s/%s" % (info.plural, sub), "singularName": "",
                              "namespaced": info.namespaced, "kind": kind or info.kind,
                              "verbs": verbs}
                    if sgroup is not None and (sgroup, sversion) != (group, version):
                        sentry["group"] = sgroup
                        sentry["version"] = sversion
                    resources.append(sentry)
            gv = version if not group else "%s/%s" % (group, version)
            return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv,
                    "resources": resources}
        return self._cached(("resources", group, version), build)
