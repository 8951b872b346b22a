"""Built-in kinds: Pod resources (extended resources!), workloads, ResourceQuota spec,
LimitRange, NetworkPolicy, PodDisruptionBudget, and resource.Quantity printing."""
import pytest

from simcluster.errors import ApiError
from simcluster.validation.quantity import Quantity, QuantityError

from kit.fake_store import FakeStore, gpu_pod, pod


def _fail(store, resource, obj):
    with pytest.raises(ApiError) as exc:
        store.create(resource, obj)
    return exc.value


# -- Quantity ------------------------------------------------------------------------

@pytest.mark.parametrize("text,canonical", [
    ("0.5", "500m"), ("1000", "1k"), ("2048Mi", "2Gi"), ("1536Mi", "1536Mi"), ("1.5", "1500m"),
    (2, "2"), (0.25, "250m"), ("100m", "100m"), ("1e3", "1e3"), ("512", "512"), ("0", "0"),
    ("1Ki", "1Ki"), ("1000Mi", "1000Mi"), ("1.5Gi", "1536Mi"), ("100n", "100n")])
def test_quantity_canonical_form(text, canonical):
    assert str(Quantity.parse(text)) == canonical


def test_quantity_rejects_garbage():
    for bad in ("one", "1.2.3", "1Q", ""):
        with pytest.raises(QuantityError):
            Quantity.parse(bad)


def test_quantity_compare_and_add():
    assert Quantity.parse("1") == Quantity.parse("1000m")
    assert Quantity.parse("1Gi") > Quantity.parse("1G")
    assert str(Quantity.parse("1Gi") + Quantity.parse("512Mi")) == "1536Mi"


# -- Pods ------------------------------------------------------------------------------

def test_gpu_request_must_equal_limit():
    err = _fail(FakeStore(), "pods", gpu_pod("x", 2, request=1))
    assert err.code == 422
    assert err.message == ('Pod "x" is invalid: spec.containers[0].resources.requests: Invalid '
                           'value: "1": must be equal to nvidia.com/gpu limit of 2')


def test_gpu_request_without_limit():
    p = pod("x", containers=[{"name": "c", "image": "cuda", "resources": {
        "requests": {"nvidia.com/gpu": 1}}}])
    err = _fail(FakeStore(), "pods", p)
    assert err.message == ('Pod "x" is invalid: spec.containers[0].resources.limits: Required '
                           'value: Limit must be set for non overcommitable resources')


def test_gpu_limit_only_gets_request_defaulted():
    out = FakeStore().create("pods", gpu_pod("x", 2))
    assert out["spec"]["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": "2"},
                                                         "requests": {"nvidia.com/gpu": "2"}}


def test_quantities_are_stored_canonical():
    p = pod("x", containers=[{"name": "c", "image": "i", "resources": {
        "limits": {"cpu": 0.5, "memory": "1024Mi"}}}])
    out = FakeStore().create("pods", p)
    assert out["spec"]["containers"][0]["resources"]["limits"] == {"cpu": "500m",
                                                                   "memory": "1Gi"}


def test_fractional_gpu_rejected_on_limit_and_request():
    err = _fail(FakeStore(), "pods", gpu_pod("half", "0.5"))
    assert err.message == (
        'Pod "half" is invalid: [spec.containers[0].resources.limits[nvidia.com/gpu]: Invalid '
        'value: "500m": must be an integer, spec.containers[0].resources.requests[nvidia.com/gpu]'
        ': Invalid value: "500m": must be an integer]')


def test_cpu_request_above_limit():
    p = pod("x", containers=[{"name": "c", "image": "i", "resources": {
        "requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}])
    err = _fail(FakeStore(), "pods", p)
    assert err.message.endswith('spec.containers[0].resources.requests: Invalid value: "2": '
                                'must be less than or equal to cpu limit of 1')


def test_cpu_request_below_limit_is_fine():
    FakeStore().create("pods", pod("x", containers=[{"name": "c", "image": "i", "resources": {
        "requests": {"cpu": "500m"}, "limits": {"cpu": "1"}}}]))


def test_unknown_unqualified_resource_name():
    p = pod("x", containers=[{"name": "c", "image": "i", "resources": {"limits": {"gpu": 1}}}])
    err = _fail(FakeStore(), "pods", p)
    assert 'spec.containers[0].resources.limits[gpu]: Invalid value: "gpu": must be a ' \
           'standard resource for containers' in err.message


def test_container_name_and_image_required_and_unique():
    p = pod("x", containers=[{"name": "c"}, {"name": "c", "image": "i"}, {"image": "i"}])
    err = _fail(FakeStore(), "pods", p)
    assert err.message == ('Pod "x" is invalid: [spec.containers[0].image: Required value, '
                           'spec.containers[1].name: Duplicate value: "c", '
                           'spec.containers[2].name: Required value]')


def test_containers_required():
    err = _fail(FakeStore(), "pods", pod("x", containers=[]))
    assert err.message == 'Pod "x" is invalid: spec.containers: Required value'


def test_malformed_quantity_is_400():
    p = pod("x", containers=[{"name": "c", "image": "i", "resources": {
        "limits": {"memory": "lots"}}}])
    err = _fail(FakeStore(), "pods", p)
    assert err.code == 400
    assert err.message == ('Pod in version "v1" cannot be handled as a Pod: quantities must '
                           "match the regular expression "
                           "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")


def test_volume_mount_must_name_a_volume():
    p = pod("x", containers=[{"name": "c", "image": "i",
                              "volumeMounts": [{"name": "data", "mountPath": "/d"}]}])
    err = _fail(FakeStore(), "pods", p)
    assert err.message.endswith('spec.containers[0].volumeMounts[0].name: Not found: "data"')


# -- Workloads -------------------------------------------------------------------------

def deployment(name="d", labels=None, selector=None, containers=None):
    labels = {"app": "x"} if labels is None else labels
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "x"} if selector is None else selector},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": containers or [
                                      {"name": "c", "image": "i"}]}}}}


def test_deployment_template_validated_like_a_pod():
    d = deployment(containers=[{"name": "c", "image": "cuda", "resources": {
        "limits": {"nvidia.com/gpu": 2}, "requests": {"nvidia.com/gpu": 1}}}])
    err = _fail(FakeStore(), "deployments.apps", d)
    assert err.message == ('Deployment.apps "d" is invalid: spec.template.spec.containers[0].'
                           'resources.requests: Invalid value: "1": must be equal to '
                           'nvidia.com/gpu limit of 2')


def test_deployment_selector_must_match_template():
    err = _fail(FakeStore(), "deployments.apps", deployment(labels={"app": "y"}))
    assert err.message == ('Deployment.apps "d" is invalid: spec.template.metadata.labels: '
                           'Invalid value: map[string]string{"app":"y"}: `selector` does not '
                           'match template `labels`')


def test_job_template_restart_policy():
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j",
                                                                 "namespace": "default"},
           "spec": {"template": {"spec": {"restartPolicy": "Always",
                                          "containers": [{"name": "c", "image": "i"}]}}}}
    err = _fail(FakeStore(), "jobs.batch", job)
    assert err.message == ('Job.batch "j" is invalid: spec.template.spec.restartPolicy: '
                           'Unsupported value: "Always": supported values: "OnFailure", "Never"')


# -- ResourceQuota spec ----------------------------------------------------------------------

def quota(name="q", hard=None, ns="default"):
    return {"apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": {"name": name, "namespace": ns}, "spec": {"hard": hard or {}}}


def test_quota_accepts_limits_and_bare_extended_keys_silently():
    out = FakeStore().create("resourcequotas", quota(hard={
        "requests.nvidia.com/gpu": 8, "limits.nvidia.com/gpu": 8, "nvidia.com/gpu": 8,
        "count/deployments.apps": 3, "pods": 10, "requests.cpu": "4"}))
    assert "limits.nvidia.com/gpu" in out["spec"]["hard"]


def test_quota_rejects_non_standard_unqualified_key():
    err = _fail(FakeStore(), "resourcequotas", quota(hard={"gpu": 1}))
    assert err.message == ('ResourceQuota "q" is invalid: spec.hard[gpu]: Invalid value: '
                           '"gpu": must be a standard resource for quota')


def test_quota_extended_resource_must_be_integer():
    err = _fail(FakeStore(), "resourcequotas", quota(hard={"nvidia.com/gpu": "1.5"}))
    assert 'spec.hard[nvidia.com/gpu]: Invalid value: "1500m": must be an integer' in err.message


# -- LimitRange -------------------------------------------------------------------------------

def test_limit_range_defaults_and_ordering_checks():
    store = FakeStore()
    out = store.create("limitranges", {"kind": "LimitRange", "metadata": {
        "name": "lr", "namespace": "default"}, "spec": {"limits": [
            {"type": "Container", "max": {"cpu": "2"}, "min": {"memory": "64Mi"}}]}})
    item = out["spec"]["limits"][0]
    assert item["default"] == {"cpu": "2"}
    assert item["defaultRequest"] == {"cpu": "2", "memory": "64Mi"}
    err = _fail(store, "limitranges", {"kind": "LimitRange", "metadata": {
        "name": "lr2", "namespace": "default"}, "spec": {"limits": [
            {"type": "Container", "max": {"cpu": "1"}, "default": {"cpu": "2"}}]}})
    assert 'spec.limits[0].default[cpu]: Invalid value: "2": default value 2 is greater than ' \
           'max value 1' in err.message


# -- NetworkPolicy and PDB -------------------------------------------------------------------------

def test_network_policy_default_deny_is_valid_and_bad_type_is_not():
    store = FakeStore()
    np = {"kind": "NetworkPolicy", "metadata": {"name": "deny", "namespace": "default"},
          "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}}
    store.create("networkpolicies.networking.k8s.io", np)
    np["metadata"]["name"] = "bad"
    np["spec"]["policyTypes"] = ["ingress"]
    np["spec"]["egress"] = [{"to": [{"ipBlock": {"cidr": "10.0.0.0/33"}}]}]
    err = _fail(store, "networkpolicies.networking.k8s.io", np)
    assert err.message == (
        'NetworkPolicy.networking.k8s.io "bad" is invalid: [spec.policyTypes[0]: Unsupported '
        'value: "ingress": supported values: "Ingress", "Egress", spec.egress[0].to[0].ipBlock.'
        'cidr: Invalid value: "10.0.0.0/33": must be a valid CIDR value, (e.g. 10.9.8.0/24 or '
        '2001:db8::/64)]')


def test_pdb_min_and_max_exclusive():
    err = _fail(FakeStore(), "poddisruptionbudgets.policy", {
        "kind": "PodDisruptionBudget", "metadata": {"name": "b", "namespace": "default"},
        "spec": {"minAvailable": 1, "maxUnavailable": 1, "selector": {}}})
    assert "minAvailable and maxUnavailable cannot be both set" in err.message


def test_cheap_kinds_pass_untouched():
    store = FakeStore()
    cm = {"kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"},
          "data": {"k": "v"}}
    assert store.create("configmaps", cm)["data"] == {"k": "v"}


# -- unknown fields of built-in kinds (kubernetes-validate 1.35 definitions) -------------------

def test_builtin_unknown_field_warns_and_is_dropped():
    from simcluster.validation import builtin_fields
    if not builtin_fields.available():
        pytest.skip("kubernetes-validate schemas not installed")
    d = deployment()
    d["spec"]["replicass"] = 3
    d["spec"]["template"]["spec"]["containers"][0]["imagee"] = "x"
    out, warnings = FakeStore().create_w("deployments.apps", d)
    # Reported in document order, like the server's decoder.
    assert warnings == ['unknown field "spec.template.spec.containers[0].imagee"',
                        'unknown field "spec.replicass"']
    assert "replicass" not in out["spec"]


def test_builtin_unknown_field_strict_is_400():
    from simcluster.validation import builtin_fields
    if not builtin_fields.available():
        pytest.skip("kubernetes-validate schemas not installed")
    d = deployment()
    d["spec"]["replicass"] = 3
    with pytest.raises(ApiError) as exc:
        FakeStore().create("deployments.apps", d, field_validation="Strict")
    assert (exc.value.code, exc.value.message) == (
        400, 'Deployment in version "v1" cannot be handled as a Deployment: strict decoding '
             'error: unknown field "spec.replicass"')


def test_builtin_maps_and_metadata_are_not_pruned():
    p = pod("x", nodeSelector={"nvidia.com/gpu.present": "true"})
    p["metadata"]["labels"] = {"a": "b"}
    p["metadata"]["annotations"] = {"x/y": "z"}
    out, warnings = FakeStore().create_w("pods", p)
    assert warnings == []
    assert out["spec"]["nodeSelector"] == {"nvidia.com/gpu.present": "true"}


# -- updates -------------------------------------------------------------------------------------

def test_pod_spec_is_immutable_except_image_and_binding():
    store = FakeStore()
    store.create("pods", gpu_pod("p", 1))
    cur = store.get("pods", "default", "p")
    cur["spec"]["containers"][0]["image"] = "cuda:2"
    cur["spec"]["nodeName"] = "gpu-1"                      # what pods/binding does
    cur["spec"]["tolerations"] = [{"key": "k", "operator": "Exists"}]
    store.update("pods", cur)
    cur = store.get("pods", "default", "p")
    cur["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = 2
    with pytest.raises(ApiError) as exc:
        store.update("pods", cur)
    assert exc.value.message.startswith(
        'Pod "p" is invalid: spec: Forbidden: pod updates may not change fields other than '
        '`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`')


def test_deployment_selector_is_immutable():
    store = FakeStore()
    store.create("deployments.apps", deployment())
    cur = store.get("deployments.apps", "default", "d")
    cur["spec"]["selector"] = {"matchLabels": {"app": "x", "tier": "gpu"}}
    cur["spec"]["template"]["metadata"]["labels"]["tier"] = "gpu"
    with pytest.raises(ApiError) as exc:
        store.update("deployments.apps", cur)
    assert exc.value.message == (
        'Deployment.apps "d" is invalid: spec.selector: Invalid value: v1.LabelSelector{'
        'MatchLabels:map[string]string{"app":"x", "tier":"gpu"}, '
        'MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable')


def test_statefulset_spec_mostly_immutable():
    store = FakeStore()
    sts = deployment()
    sts["kind"] = "StatefulSet"
    sts["spec"]["serviceName"] = "s"
    store.create("statefulsets.apps", sts)
    cur = store.get("statefulsets.apps", "default", "d")
    cur["spec"]["replicas"] = 3
    store.update("statefulsets.apps", cur)
    cur["spec"]["serviceName"] = "other"
    with pytest.raises(ApiError) as exc:
        store.update("statefulsets.apps", cur)
    assert "spec: Forbidden: updates to statefulset spec for fields other than 'replicas'" \
        in exc.value.message
