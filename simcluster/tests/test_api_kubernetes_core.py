"""kubernetes.core modules (as the collection uses them) against the simulated API."""

import json
import os
import shutil
import sys

import pytest

from simcluster.testing import VENV_BIN

pytestmark = pytest.mark.slow

PLAYBOOK = """\
- hosts: localhost
  gather_facts: false
  module_defaults:
    group/kubernetes.core.k8s:
      kubeconfig: "{{ cluster_kubeconfig }}"
  tasks:
    - kubernetes.core.k8s:
        definition: {apiVersion: v1, kind: Namespace, metadata: {name: kcore}}
    - kubernetes.core.k8s: {definition: &cm {apiVersion: v1, kind: ConfigMap,
                            metadata: {name: c, namespace: kcore}, data: {a: "1"}}}
      check_mode: true
      register: check
    - kubernetes.core.k8s_info: {kind: ConfigMap, namespace: kcore, name: c}
      register: after_check
    - kubernetes.core.k8s: {definition: *cm}
      register: first
    - kubernetes.core.k8s: {definition: *cm}
      register: second
    - kubernetes.core.k8s:
        definition: *cm
        server_side_apply: {field_manager: kcore-test}
      register: ssa
    - kubernetes.core.k8s:
        definition:
          apiVersion: apps/v1
          kind: Deployment
          metadata: {name: d, namespace: kcore}
          spec:
            selector: {matchLabels: {app: d}}
            template:
              metadata: {labels: {app: d}}
              spec: {containers: [{name: c, image: registry.local/d:1}]}
    - kubernetes.core.k8s_info: {kind: Deployment, namespace: kcore, label_selectors: []}
      register: deployments
    - kubernetes.core.k8s: {state: absent, kind: Namespace, name: kcore, wait: true}
    - kubernetes.core.k8s_info: {kind: ConfigMap, namespace: kcore}
      register: gone
    - ansible.builtin.assert:
        that:
          - check is changed
          - after_check.resources == []
          - first is changed
          - second is not changed
          - ssa.result.data.a == "1"
          - deployments.resources | map(attribute='metadata.name') | list == ['d']
          - gone.resources == []
"""


def test_kubernetes_core_modules(simcluster, tmp_path):
    exe = shutil.which("ansible-playbook", path=simcluster.env["PATH"])
    if not exe:
        pytest.skip("ansible-playbook is not installed")
    python = os.path.join(VENV_BIN, "python")
    book = tmp_path / "play.yml"
    book.write_text(PLAYBOOK)
    # the cluster in the inventory, as the collection's users give it
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(json.dumps({"all": {"hosts": {"localhost": {
        "ansible_connection": "local", "cluster_kubeconfig": simcluster.kubeconfig,
        "ansible_python_interpreter": python if os.path.exists(python) else sys.executable}}}}))
    res = simcluster.run(exe, str(book), "-i", str(inventory), check=False, timeout=300)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    # check mode used dryRun=All and server-side apply went through PATCH
    assert simcluster.stats()["by_resource"]["configmaps"].get("patch", 0) >= 1
