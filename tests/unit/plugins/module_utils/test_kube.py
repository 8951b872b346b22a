"""kube.Kube: every client failure becomes an ApiError naming verb, kind and object; bounded retries."""

import json

import pytest

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import ApiError
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.kube import Kube


class FakeApiException(Exception):
    def __init__(self, status, reason, message, headers=None):
        super().__init__(reason)
        self.status, self.reason, self.headers = status, reason, headers or {}
        self.body = json.dumps({"kind": "Status", "message": message}).encode()


class Res:
    def __init__(self, outcomes):
        self.outcomes = list(outcomes)
        self.calls = 0

    def _next(self):
        self.calls += 1
        out = self.outcomes.pop(0)
        if isinstance(out, Exception):
            raise out
        return out

    def get(self, **kw):
        return self._next()

    def patch(self, **kw):
        return self._next()


class Client:
    def __init__(self, res):
        self.client = self
        self.resources = self
        self._res = res
        self.configuration = type("C", (), {"host": "https://api.example:6443"})()

    def get(self, **kw):  # resources.get(api_version=, kind=)
        return self._res


def kube(outcomes, sleeps):
    clock = [0.0]

    def sleep(s):
        sleeps.append(s)
        clock[0] += s
    res = Res(outcomes)
    return Kube(Client(res), retry_seconds=10, sleep=sleep, clock=lambda: clock[0]), res


def test_forbidden_names_verb_object_and_rbac_verb():
    sleeps = []
    k = kube([FakeApiException(403, "Forbidden", 'nodes "gpu-1" is forbidden')], sleeps)[0]
    with pytest.raises(ApiError) as err:
        k.patch("v1", "Node", "gpu-1", {"metadata": {}})
    text = str(err.value)
    assert text.startswith("PATCH Node gpu-1: HTTP 403 Forbidden: nodes \"gpu-1\" is forbidden")
    assert "RBAC verb 'patch' on nodes cluster-wide" in text
    assert sleeps == []


@pytest.mark.parametrize("message,hint", [
    # kube-apiserver's quota admission (plugin/pkg/admission/resourcequota) answers 403, not RBAC
    ('pods "probe" is forbidden: failed quota: team-a: must specify requests.cpu for: probe',
     "ResourceQuota refused it"),
    ('pods "probe" is forbidden: exceeded quota: team-a, requested: requests.nvidia.com/gpu=1, '
     'used: requests.nvidia.com/gpu=4, limited: requests.nvidia.com/gpu=4', "ResourceQuota refused it"),
    ('pods "probe" is forbidden: violates PodSecurity "restricted:latest": privileged', "Pod Security level"),
    ('pods is forbidden: User "alice" cannot create resource "pods" in API group "" in the namespace "team-a"',
     "RBAC verb 'patch' on pods in namespace team-a"),
])
def test_forbidden_hint_follows_who_refused(message, hint):
    k = kube([FakeApiException(403, "Forbidden", message)], [])[0]
    with pytest.raises(ApiError) as err:
        k.patch("v1", "Pod", "probe", {"metadata": {}}, namespace="team-a")
    assert hint in str(err.value)
    if "RBAC" not in hint:
        assert "RBAC" not in str(err.value)


def test_read_retries_429_with_retry_after_then_succeeds():
    sleeps = []
    k, res = kube([FakeApiException(429, "Too Many Requests", "slow down", {"Retry-After": "2"}),
                   {"metadata": {"name": "a"}}], sleeps)
    assert k.get("v1", "ConfigMap", "a", "ns") == {"metadata": {"name": "a"}}
    assert sleeps == [2.0] and res.calls == 2


def test_read_5xx_retried_for_a_bounded_time_then_reported():
    sleeps = []
    k, res = kube([FakeApiException(500, "Internal Server Error", "boom")] * 50, sleeps)
    with pytest.raises(ApiError) as err:
        k.list("v1", "Pod", namespace="ns")
    assert err.value.status == 500 and sum(sleeps) <= 10
    assert "LIST Pod in namespace ns: HTTP 500" in str(err.value)


def test_write_5xx_is_not_retried():
    sleeps = []
    k, res = kube([FakeApiException(500, "Internal Server Error", "boom"), {}], sleeps)
    with pytest.raises(ApiError):
        k.patch("v1", "Node", "gpu-1", {})
    assert res.calls == 1 and sleeps == []


def test_get_404_is_none_and_lost_connection_names_the_url():
    sleeps = []
    k = kube([FakeApiException(404, "Not Found", "not found")], sleeps)[0]
    assert k.get("v1", "Node", "x") is None
    k = kube([ConnectionResetError("Connection reset by peer")] * 50, sleeps)[0]
    with pytest.raises(ApiError) as err:
        k.get("v1", "Node", "x")
    assert err.value.status is None
    assert "cannot reach the API server at https://api.example:6443" in str(err.value)


class StaleDiscovery:
    """A discovery cache file from an earlier cluster at the same address: it still resolves Queue,
    the server's own discovery document and collections no longer have it."""

    def __init__(self, served_now):
        self.client = self
        self.resources = self
        self.served_now = set(served_now)
        self.fresh = False
        self.requests = []
        self.configuration = type("C", (), {"host": "https://api.example:6443"})()

    def get(self, api_version, kind):   # resources.get: the cache, until invalidated
        if self.fresh and kind not in self.served_now:
            from kubernetes.dynamic.exceptions import ResourceNotFoundError
            raise ResourceNotFoundError("No matches found for {'kind': '%s'}" % kind)
        outer = self

        class Collection:
            def get(self, **kw):
                outer.requests.append(("LIST", kind))
                if kind not in outer.served_now:
                    raise FakeApiException(404, "Not Found", "the server could not find the requested resource")
                return {"items": [], "metadata": {"resourceVersion": "7"}}
        return Collection()

    def request(self, method, path, **kw):
        self.requests.append((method, path))
        return {"resources": [{"name": k.lower() + "s", "kind": k} for k in self.served_now]}

    def invalidate_cache(self):
        self.fresh = True


def test_a_stale_discovery_cache_is_confirmed_against_the_server_once():
    dyn = StaleDiscovery(served_now=["Pod"])
    k = Kube(dyn, retry_seconds=0)
    assert k.served("scheduling.run.ai/v2", "Queue") is False
    assert dyn.requests == [("GET", "/apis/scheduling.run.ai/v2")] and dyn.fresh
    assert k.served("v1", "Pod") is True and k.served("v1", "Pod") is True
    assert dyn.requests[1:] == [("GET", "/api/v1")]      # confirmed once per client


def test_a_list_that_404s_says_the_kind_is_not_served():
    dyn = StaleDiscovery(served_now=["Pod"])
    k = Kube(dyn, retry_seconds=0)
    with pytest.raises(ApiError) as err:
        k.list("scheduling.run.ai/v2", "Queue")
    assert err.value.status == 404 and "does not serve this kind" in str(err.value)
    assert "its CRD is not installed" in str(err.value)
    assert k.list("v1", "Pod") == ([], "7")


def test_list_if_served_reads_a_stale_kind_as_empty_without_an_extra_get():
    dyn = StaleDiscovery(served_now=["Pod"])
    k = Kube(dyn, retry_seconds=0)
    assert k.list_if_served("scheduling.run.ai/v2", "Queue") == ([], None)
    assert k.list_if_served("v1", "Pod") == ([], "7")
    assert [r for r in dyn.requests if r[0] == "GET"] == []      # the LISTs alone decided
