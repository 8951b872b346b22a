"""The real kubectl 1.35: `apply -f` of a List with a custom resource, and `get` tables
(CRD printer columns, Init:CrashLoopBackOff restarts, events)."""

import re

import pytest

from kit.paths import binary

pytestmark = [pytest.mark.slow, pytest.mark.needs_shared, pytest.mark.cluster("crashloop.yaml")]

# One `kind: List`: kubectl validates its items client-side against /openapi/v2.
OPERATOR_LIST = """\
apiVersion: v1
kind: List
items:
  - apiVersion: v1
    kind: Namespace
    metadata:
      name: gpu-operator
      labels: {pod-security.kubernetes.io/enforce: privileged}
  - apiVersion: apps/v1
    kind: Deployment
    metadata:
      name: gpu-operator
      namespace: gpu-operator
      labels: {app: gpu-operator, app.kubernetes.io/component: gpu-operator}
    spec:
      replicas: 1
      selector: {matchLabels: {app: gpu-operator}}
      template:
        metadata: {labels: {app: gpu-operator, app.kubernetes.io/component: gpu-operator}}
        spec:
          containers: [{name: gpu-operator, image: nvcr.io/nvidia/gpu-operator:v25.3.0, command: [gpu-operator]}]
  # the chart's NFD subchart, reduced to what the twins key on (nfd-master, nfd-worker)
  - apiVersion: apps/v1
    kind: Deployment
    metadata: {name: nfd-master, namespace: gpu-operator}
    spec:
      selector: {matchLabels: {role: master}}
      template:
        metadata: {labels: {role: master}}
        spec:
          containers: [{name: master, image: registry.k8s.io/nfd/node-feature-discovery:v0.19.0, command: [nfd-master]}]
  - apiVersion: apps/v1
    kind: DaemonSet
    metadata: {name: nfd-worker, namespace: gpu-operator}
    spec:
      selector: {matchLabels: {role: worker}}
      template:
        metadata: {labels: {role: worker}}
        spec:
          tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
          containers: [{name: worker, image: registry.k8s.io/nfd/node-feature-discovery:v0.19.0, command: [nfd-worker]}]
  - apiVersion: nvidia.com/v1
    kind: ClusterPolicy
    metadata: {name: cluster-policy}
    spec:
      operator: {}
      daemonsets: {}
      driver: {enabled: false%s}
      toolkit: {enabled: false}
      devicePlugin: {}
      dcgm: {}
      dcgmExporter: {}
      gfd: {}
      nodeStatusExporter: {}
"""


@pytest.fixture(scope="module")
def kubectl(simcluster):
    exe = binary("kubectl")

    def run(*args, stdin=None, check=True):
        return simcluster.run(exe, *args, input=stdin, check=check)
    return run


def header(table):
    return re.split(r"\s{2,}", table.splitlines()[0].strip())


def test_apply_list_with_custom_resource_validates_strictly(kubectl):
    out = kubectl("apply", "-f", "-", stdin=OPERATOR_LIST % "").stdout
    assert "clusterpolicy.nvidia.com/cluster-policy created" in out
    assert "unchanged" in kubectl("apply", "-f", "-", stdin=OPERATOR_LIST % "").stdout
    res = kubectl("apply", "-f", "-", stdin=OPERATOR_LIST % ", bogus: 1", check=False)
    assert res.returncode != 0
    assert 'unknown field "spec.driver.bogus"' in res.stderr


def test_get_tables_like_the_real_server(simcluster, kubectl):
    import time
    deadline = time.time() + 20
    while True:
        pods = kubectl("get", "pods", "-n", "gpu-operator").stdout
        line = next((ln for ln in pods.splitlines() if "Init:CrashLoopBackOff" in ln), None)
        if line or time.time() > deadline:
            break
        time.sleep(0.3)
    assert line, pods
    assert header(pods) == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    restarts = re.split(r"\s{2,}", line.strip())[3]
    assert re.fullmatch(r"[1-9]\d*( \(\S+ ago\))?", restarts), line

    policies = kubectl("get", "clusterpolicies").stdout
    assert header(policies) == ["NAME", "STATUS", "AGE"]
    row = policies.splitlines()[1].split()
    # the CRD types its Age column as string: the raw creationTimestamp is shown
    assert row[0] == "cluster-policy" and row[1] in ("ready", "notReady")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", row[2])

    events = kubectl("get", "events", "-n", "gpu-operator").stdout
    assert header(events) == ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert re.search(r"\s(Normal|Warning)\s+\w+\s+(pod|deployment|replicaset|daemonset)/",
                     events), events
