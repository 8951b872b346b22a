"""Chunked lists at scale: JSON, Table (kubectl) and protobuf pages, continue tokens,
remainingItemCount, 410 for an expired token, resourceVersionMatch."""
import base64
import json
import os
import shutil
import subprocess
import urllib.error
import urllib.request

import pytest

from simcluster import kubeconfig, protobuf
from simcluster.store import Store
from simcluster.testing import VENV_BIN, InProcess

KUBECTL = shutil.which("kubectl", path=VENV_BIN) or shutil.which("kubectl")
N_CM = 1203          # more than two kubectl chunks of 500
N_PODS = 1100


def _cm(name, ns="many"):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns},
            "data": {"k": name}}


def _pod(name, ns, node):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox:1.36"}]}}


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    store = Store()
    for ns in ["many"] + ["team-%02d" % i for i in range(11)]:
        store.create("namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                    "metadata": {"name": ns}}, admit=False)
    for i in range(N_CM):
        store.create("configmaps", _cm("cm-%04d" % i), admit=False)
    for i in range(N_PODS):
        store.create("pods", _pod("p-%04d" % i, "team-%02d" % (i % 11), "node-%d" % (i % 7)),
                     admit=False)
    with InProcess(store) as srv:
        path = str(tmp_path_factory.mktemp("paging") / "kubeconfig")
        kubeconfig.write(path, srv.url)
        srv.kubeconfig = path
        yield srv


def get(srv, path, accept="application/json"):
    req = urllib.request.Request(srv.url + path, headers={"Accept": accept})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def jget(srv, path, accept="application/json"):
    code, body = get(srv, path, accept)
    return code, json.loads(body)


def kubectl(srv, *args):
    if KUBECTL is None:
        pytest.skip("kubectl not installed in .venv/bin")
    env = dict(os.environ, KUBECONFIG=srv.kubeconfig)
    res = subprocess.run([KUBECTL, *args], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_kubectl_lists_every_object_in_table_chunks(big):
    out = kubectl(big, "get", "configmaps", "-n", "many", "--no-headers")
    names = [line.split()[0] for line in out.splitlines()]
    # + kube-root-ca.crt, which the namespace controller twin creates
    assert len(names) == N_CM + 1 and len(set(names)) == N_CM + 1
    pods = kubectl(big, "get", "pods", "-A", "--no-headers").splitlines()
    assert len(pods) == N_PODS
    assert kubectl(big, "get", "pods", "-A", "--chunk-size=100", "-o", "name").count("\n") \
        == N_PODS


def test_table_pages_carry_continue_and_remaining_count(big):
    accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
    code, page = jget(big, "/api/v1/pods?limit=500", accept)
    assert code == 200 and page["kind"] == "Table" and len(page["rows"]) == 500
    assert page["metadata"]["remainingItemCount"] == N_PODS - 500
    seen = len(page["rows"])
    while page["metadata"].get("continue"):
        code, page = jget(big, "/api/v1/pods?limit=500&continue=" + page["metadata"]["continue"],
                          accept)
        assert code == 200
        seen += len(page["rows"])
    assert seen == N_PODS


def test_json_pages_are_one_consistent_snapshot(big):
    code, first = jget(big, "/api/v1/namespaces/many/configmaps?limit=1000")
    assert code == 200 and len(first["items"]) == 1000
    assert first["metadata"]["remainingItemCount"] == N_CM + 1 - 1000
    rv = first["metadata"]["resourceVersion"]
    # changes after the first page are not in the following pages (the token pins rv)
    big.store.create("configmaps", _cm("zz-late"), admit=False)
    big.store.delete("configmaps", "many", "kube-root-ca.crt", admit=False)
    code, rest = jget(big, "/api/v1/namespaces/many/configmaps?limit=1000&continue="
                      + first["metadata"]["continue"])
    assert code == 200 and rest["metadata"]["resourceVersion"] == rv
    names = [o["metadata"]["name"] for o in first["items"] + rest["items"]]
    assert len(names) == N_CM + 1 and "zz-late" not in names and "kube-root-ca.crt" in names
    assert "continue" not in rest["metadata"] and "remainingItemCount" not in rest["metadata"]
    # a fresh list sees the new state
    code, now = jget(big, "/api/v1/namespaces/many/configmaps?limit=2000")
    names = [o["metadata"]["name"] for o in now["items"]]
    assert "zz-late" in names and "kube-root-ca.crt" not in names


def test_selector_pages_have_no_remaining_count(big):
    code, page = jget(big, "/api/v1/pods?limit=10&fieldSelector=spec.nodeName%3Dnode-3")
    assert code == 200 and len(page["items"]) == 10 and page["metadata"]["continue"]
    assert "remainingItemCount" not in page["metadata"]


def test_protobuf_pages(big):
    code, body = get(big, "/api/v1/namespaces/many/configmaps?limit=7",
                     protobuf.CONTENT_TYPE)
    assert code == 200 and body.startswith(protobuf.MAGIC)
    page = protobuf.decode(body)
    assert page["kind"] == "ConfigMapList" and len(page["items"]) == 7
    assert page["metadata"]["continue"] and page["metadata"]["remainingItemCount"] > 1000


def test_resource_version_match_exact_serves_the_old_state(big):
    code, before = jget(big, "/api/v1/namespaces/many/configmaps")
    rv = before["metadata"]["resourceVersion"]
    big.store.create("configmaps", _cm("after-exact"), admit=False)
    code, exact = jget(big, "/api/v1/namespaces/many/configmaps?resourceVersion=%s"
                            "&resourceVersionMatch=Exact" % rv)
    assert code == 200 and exact["metadata"]["resourceVersion"] == rv
    assert len(exact["items"]) == len(before["items"])
    code, newer = jget(big, "/api/v1/namespaces/many/configmaps?resourceVersion=%s"
                            "&resourceVersionMatch=NotOlderThan" % rv)
    assert code == 200 and len(newer["items"]) == len(before["items"]) + 1
    code, err = jget(big, "/api/v1/configmaps?resourceVersion=99999999"
                          "&resourceVersionMatch=NotOlderThan")
    assert code == 504 and err["message"].startswith("Too large resource version: 99999999")


@pytest.mark.parametrize("query, message", [
    ("resourceVersionMatch=Exact", "resourceVersionMatch is forbidden unless resourceVersion "
                                   "is provided"),
    ("resourceVersion=0&resourceVersionMatch=Exact",
     'resourceVersionMatch "exact" is forbidden for resourceVersion "0"'),
    ("resourceVersion=5&resourceVersionMatch=Sometimes", 'Unsupported value: "Sometimes"'),
])
def test_list_options_are_validated(big, query, message):
    code, err = jget(big, "/api/v1/configmaps?" + query)
    assert code == 422 and err["reason"] == "Invalid" and message in err["message"]


def test_expired_continue_token_is_410_with_a_fresh_token():
    store = Store(history=20)
    store.create("namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                "metadata": {"name": "x"}}, admit=False)
    for i in range(30):
        store.create("configmaps", _cm("c-%02d" % i, "x"), admit=False)
    with InProcess(store) as srv:
        code, page = jget(srv, "/api/v1/namespaces/x/configmaps?limit=10")
        assert code == 200
        for i in range(25):           # push the page's resourceVersion out of the history
            store.create("configmaps", _cm("d-%02d" % i, "x"), admit=False)
        code, err = jget(srv, "/api/v1/namespaces/x/configmaps?limit=10&continue="
                              + page["metadata"]["continue"])
        assert code == 410 and err["reason"] == "Expired"
        assert err["message"].startswith("The provided continue parameter is too old")
        code, rest = jget(srv, "/api/v1/namespaces/x/configmaps?limit=100&continue="
                               + err["metadata"]["continue"])
        assert code == 200
        names = [o["metadata"]["name"] for o in rest["items"]]
        assert names[0] > page["items"][-1]["metadata"]["name"] and "d-24" in names
        code, bad = jget(srv, "/api/v1/namespaces/x/configmaps?continue="
                              + base64.urlsafe_b64encode(b"junk").decode())
        assert code == 400
