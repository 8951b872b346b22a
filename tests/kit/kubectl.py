"""kubectl against a simulated cluster: the one way the integration tests read and write objects."""
import json
import os
import time

from kit.paths import BIN


def kubectl(sim, *args, check=True, **kw):
    return sim.run(os.path.join(BIN, "kubectl"), *args, check=check, **kw)


def kget(sim, *args):
    """The object (or list) as JSON, or None when kubectl fails (not found)."""
    res = kubectl(sim, "get", *args, "-o", "json", check=False)
    return json.loads(res.stdout) if res.returncode == 0 else None


def apply(sim, obj, check=True):
    return kubectl(sim, "apply", "-f", "-", input=json.dumps(obj), check=check)


def wait_object(sim, predicate, *args, timeout=60):
    """kget(*args) until predicate(object) holds; the last object read (or None) when it never did."""
    deadline = time.time() + timeout
    obj = None
    while time.time() < deadline:
        obj = kget(sim, *args)
        if obj and predicate(obj):
            return obj
        time.sleep(0.5)
    return obj


def claim_pod(name, namespace, template, node=None, tolerations=()):
    """A restricted-profile vectorAdd pod whose one container uses a claim from a ResourceClaimTemplate."""
    spec = {"restartPolicy": "Never",
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
            "containers": [{"name": "main", "image": "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0",
                            "resources": {"claims": [{"name": "gpu"}]},
                            "securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True,
                                                "runAsUser": 1000, "capabilities": {"drop": ["ALL"]},
                                                "seccompProfile": {"type": "RuntimeDefault"}}}]}
    if tolerations:
        spec["tolerations"] = list(tolerations)
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def pod_started(pod):
    return pod["status"].get("phase") in ("Running", "Succeeded")


def pod_unschedulable(pod):
    return any(c.get("type") == "PodScheduled" and c.get("status") == "False"
               for c in pod["status"].get("conditions") or [])
