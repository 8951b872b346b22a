"""The Pod QoS class as the API server computes it (k8s.io/kubernetes pkg/apis/core/helper/qos,
ComputePodQOS): only cpu and memory count, zero quantities are ignored, so a pod that asks only for
nvidia.com/gpu is BestEffort. Set as status.qosClass on create; ResourceQuota's BestEffort scope reads it."""
from simcluster.validation.quantity import Quantity, QuantityError

QOS_RESOURCES = ("cpu", "memory")


def _positive(values):
    out = {}
    for name, text in (values or {}).items():
        if name not in QOS_RESOURCES:
            continue
        try:
            q = Quantity.parse(str(text))
        except QuantityError:
            continue              # validation refuses it; the class does not matter then
        if not q.is_zero():
            out[name] = q
    return out


def pod_qos(spec):
    requests, limits, guaranteed = {}, {}, True
    for c in list((spec or {}).get("containers") or ()) + list((spec or {}).get("initContainers") or ()):
        res = (c or {}).get("resources") or {}
        # API defaulting gives a limit without a request that request (pods twins create unadmitted too)
        for name, q in _positive(dict(res.get("limits") or {}, **(res.get("requests") or {}))).items():
            requests[name] = requests[name] + q if name in requests else q
        found = _positive(res.get("limits"))
        for name, q in found.items():
            limits[name] = limits[name] + q if name in limits else q
        if not all(r in found for r in QOS_RESOURCES):
            guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    if guaranteed and all(name in limits and limits[name] == q for name, q in requests.items()) \
            and len(requests) == len(limits):
        return "Guaranteed"
    return "Burstable"


def pod_qos_of(pod):
    """GetPodQOS: the status field when the server set it, else computed."""
    return ((pod or {}).get("status") or {}).get("qosClass") or pod_qos((pod or {}).get("spec"))
