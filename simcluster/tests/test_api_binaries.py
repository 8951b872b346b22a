"""The real kubectl (1.35) and helm (3.17, 4.1) binaries against the simulated API."""

import json
import os

import pytest

from kit.paths import binary

pytestmark = pytest.mark.slow

HERE = os.path.dirname(os.path.abspath(__file__))
CHART = os.path.join(HERE, "charts", "tiny")

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: kubectl-test
  labels: {app: web}
spec:
  replicas: %d
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
        - name: web
          image: registry.local/web:1
          env: [{name: A, value: "1"}]
"""

WIDGET_CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gizmos.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gizmos, singular: gizmo, kind: Gizmo, shortNames: [gz]}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                size: {type: integer}
"""


@pytest.fixture(scope="module")
def kubectl(simcluster):
    exe = binary("kubectl")

    def run(*args, stdin=None, check=True):
        return simcluster.run(exe, *args, input=stdin, check=check)
    run("create", "namespace", "kubectl-test")       # typed client: protobuf body
    return run


def test_kubectl_apply_get_patch_delete(kubectl):
    assert "created" in kubectl("apply", "-f", "-", stdin=DEPLOYMENT % 1).stdout
    assert "unchanged" in kubectl("apply", "-f", "-", stdin=DEPLOYMENT % 1).stdout
    assert "configured" in kubectl("apply", "-f", "-", stdin=DEPLOYMENT % 2).stdout
    table = kubectl("get", "deployments", "-n", "kubectl-test").stdout
    assert table.splitlines()[0].split()[:2] == ["NAME", "READY"] and "web" in table
    obj = json.loads(kubectl("get", "deploy", "web", "-n", "kubectl-test", "-o", "json").stdout)
    assert obj["spec"]["replicas"] == 2
    assert "kubectl.kubernetes.io/last-applied-configuration" in obj["metadata"]["annotations"]
    kubectl("patch", "deploy", "web", "-n", "kubectl-test", "-p",
            '{"spec":{"template":{"spec":{"containers":[{"name":"web",'
            '"env":[{"name":"B","value":"2"}]}]}}}}')
    kubectl("patch", "deploy", "web", "-n", "kubectl-test", "--type=json", "-p",
            '[{"op":"replace","path":"/spec/replicas","value":3}]')
    obj = json.loads(kubectl("get", "deploy", "web", "-n", "kubectl-test", "-o", "json").stdout)
    assert [e["name"] for e in obj["spec"]["template"]["spec"]["containers"][0]["env"]] == \
        ["A", "B"]
    assert obj["spec"]["replicas"] == 3
    kubectl("label", "deploy", "web", "-n", "kubectl-test", "tier=front")
    kubectl("rollout", "restart", "deploy/web", "-n", "kubectl-test")
    obj = json.loads(kubectl("get", "deploy", "web", "-n", "kubectl-test", "-o", "json").stdout)
    assert obj["metadata"]["labels"]["tier"] == "front"
    assert "kubectl.kubernetes.io/restartedAt" in obj["spec"]["template"]["metadata"][
        "annotations"]
    kubectl("delete", "deploy", "web", "-n", "kubectl-test")
    res = kubectl("get", "deploy", "web", "-n", "kubectl-test", check=False)
    assert res.returncode == 1
    assert 'Error from server (NotFound): deployments.apps "web" not found' in res.stderr


def test_kubectl_server_side_apply_conflicts(kubectl):
    cm = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ssa, namespace: kubectl-test}\n" \
         "data: {key: %s}\n"
    assert "serverside-applied" in kubectl("apply", "--server-side", "-f", "-",
                                           stdin=cm % "one").stdout
    res = kubectl("apply", "--server-side", "--field-manager", "other", "-f", "-",
                  stdin=cm % "two", check=False)
    assert res.returncode != 0 and "conflict" in res.stderr.lower()
    kubectl("apply", "--server-side", "--field-manager", "other", "--force-conflicts", "-f", "-",
            stdin=cm % "two")
    assert kubectl("get", "cm", "ssa", "-n", "kubectl-test", "-o",
                   "jsonpath={.data.key}").stdout == "two"


def test_kubectl_cordon_and_crd(kubectl):
    nodes = kubectl("get", "nodes", "-o", "name").stdout.split()
    if not nodes:
        kubectl("apply", "-f", "-", stdin="apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n")
        nodes = ["node/n1"]
    node = nodes[0].split("/")[1]
    kubectl("cordon", node)
    assert kubectl("get", "node", node, "-o", "jsonpath={.spec.unschedulable}").stdout == "true"
    kubectl("uncordon", node)
    assert kubectl("get", "node", node, "-o", "jsonpath={.spec.unschedulable}").stdout == ""
    kubectl("apply", "-f", "-", stdin=WIDGET_CRD)
    gizmo = "apiVersion: example.com/v1\nkind: Gizmo\nmetadata: {name: g, namespace: " \
            "kubectl-test}\nspec: {size: %d}\n"
    kubectl("apply", "-f", "-", stdin=gizmo % 1)
    kubectl("apply", "-f", "-", stdin=gizmo % 2)          # JSON merge patch for CRs
    assert kubectl("get", "gz", "g", "-n", "kubectl-test", "-o",
                   "jsonpath={.spec.size}").stdout == "2"


@pytest.mark.parametrize("helm", ["helm3", "helm4"])
def test_helm_release_lifecycle(simcluster, helm):
    exe = binary(helm)
    ns = "release-" + helm
    run = lambda *a: simcluster.run(exe, *a, "-n", ns)
    run("install", "tiny", CHART, "--create-namespace")
    run("upgrade", "tiny", CHART, "--set", "replicas=3", "--set", "message=bye")
    values = run("get", "values", "tiny", "-o", "json").stdout
    assert json.loads(values) == {"message": "bye", "replicas": 3}
    dyn = simcluster.dynamic()
    deploy = dyn.resources.get(api_version="apps/v1", kind="Deployment")
    assert deploy.get(name="tiny", namespace=ns).spec.replicas == 3
    run("rollback", "tiny", "1")
    assert deploy.get(name="tiny", namespace=ns).spec.replicas == 1
    cm = dyn.resources.get(api_version="v1", kind="ConfigMap")
    assert cm.get(name="tiny-config", namespace=ns).data.message == "hello"
    listed = json.loads(run("list", "-o", "json").stdout)
    assert [(r["name"], r["revision"], r["status"]) for r in listed] == \
        [("tiny", "3", "deployed")]
    secrets = dyn.resources.get(api_version="v1", kind="Secret").get(
        namespace=ns, label_selector="owner=helm,name=tiny")
    assert sorted(s.metadata.labels.version for s in secrets.items) == ["1", "2", "3"]
    assert {s.type for s in secrets.items} == {"helm.sh/release.v1"}
    run("uninstall", "tiny")
    assert deploy.get(namespace=ns).items == []
    assert json.loads(run("list", "-o", "json").stdout) == []
