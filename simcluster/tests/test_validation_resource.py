"""resource.k8s.io/v1 through the simulated API server's admission (simcluster/validation/resource.py):
defaults, the 422 messages and the 403 quota message. Cases ported from kubernetes
pkg/apis/resource/validation/validation_resourceclaim_test.go, validation_resourceclaimtemplate_test.go,
validation_deviceclass_test.go, validation_resourceslice_test.go (Kubernetes 1.34) and
pkg/quota/v1/evaluator/core/resource_claims_test.go (TestResourceClaimEvaluatorUsage)."""
import pytest

from simcluster.errors import ApiError
from simcluster.registry import Registry
from simcluster.store import Store
from simcluster.validation import quota as quota_mod

RK = "resource.k8s.io/v1"
CLAIMS, TEMPLATES = "resourceclaims.resource.k8s.io", "resourceclaimtemplates.resource.k8s.io"
SLICES, CLASSES = "resourceslices.resource.k8s.io", "deviceclasses.resource.k8s.io"


@pytest.fixture
def store():
    s = Store()
    s.create("namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}})
    return s


def claim(name="foo", requests=None, constraints=None, config=None):
    devices = {"requests": requests if requests is not None else [
        {"name": "req-0", "exactly": {"deviceClassName": "class"}}]}
    if constraints is not None:
        devices["constraints"] = constraints
    if config is not None:
        devices["config"] = config
    return {"apiVersion": RK, "kind": "ResourceClaim", "metadata": {"name": name, "namespace": "ns"},
            "spec": {"devices": devices}}


def invalid(store, resource, obj):
    with pytest.raises(ApiError) as err:
        store.create(resource, obj)
    assert err.value.code == 422, err.value.message
    return err.value.message


def test_claim_defaults_allocation_mode_and_count(store):
    got = store.create(CLAIMS, claim())
    assert got["spec"]["devices"]["requests"][0]["exactly"] == {
        "deviceClassName": "class", "allocationMode": "ExactCount", "count": 1}
    assert got["metadata"]["generation"] == 1


def test_claim_request_needs_exactly_one_kind(store):
    msg = invalid(store, CLAIMS, claim(requests=[{"name": "req-0"}]))
    assert msg == ('ResourceClaim.resource.k8s.io "foo" is invalid: spec.devices.requests[0]: Required value: '
                   'exactly one of `exactly` or `firstAvailable` is required')
    both = {"name": "req-0", "exactly": {"deviceClassName": "class"},
            "firstAvailable": [{"name": "sub-0", "deviceClassName": "class"}]}
    msg = invalid(store, CLAIMS, claim(requests=[both]))
    assert msg == ('ResourceClaim.resource.k8s.io "foo" is invalid: spec.devices.requests[0]: Invalid value: null: '
                   'exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set')


def test_claim_bad_names_counts_and_modes(store):
    msg = invalid(store, CLAIMS, claim(requests=[
        {"name": "Req_0", "exactly": {"deviceClassName": "class"}},
        {"name": "req-1", "exactly": {"deviceClassName": "", "allocationMode": "All", "count": 2}},
        {"name": "req-2", "exactly": {"deviceClassName": "class", "allocationMode": "Some"}},
        {"name": "req-2", "exactly": {"deviceClassName": "class", "count": -1}}]))
    assert 'spec.devices.requests[0].name: Invalid value: "Req_0": a lowercase RFC 1123 label must consist of' in msg
    assert "spec.devices.requests[1].exactly.deviceClassName: Required value" in msg
    assert ("spec.devices.requests[1].exactly.count: Invalid value: 2: must not be specified when allocationMode "
            "is 'All'") in msg
    assert ('spec.devices.requests[2].exactly.allocationMode: Unsupported value: "Some": supported values: '
            '"All", "ExactCount"') in msg
    assert 'spec.devices.requests[3].name: Duplicate value: "req-2"' in msg
    assert "spec.devices.requests[3].exactly.count: Invalid value: -1: must be greater than zero" in msg


def test_claim_too_many_requests(store):
    reqs = [{"name": "req-%d" % i, "exactly": {"deviceClassName": "class"}} for i in range(33)]
    msg = invalid(store, CLAIMS, claim(requests=reqs))
    assert msg.endswith("spec.devices.requests: Too many: 33: must have at most 32 items")


def test_claim_selector_must_compile(store):
    req = {"name": "req-0", "exactly": {"deviceClassName": "class", "selectors": [
        {"cel": {"expression": "device.driver =="}}, {"cel": {"expression": ""}}]}}
    msg = invalid(store, CLAIMS, claim(requests=[req]))
    assert 'spec.devices.requests[0].exactly.selectors[0].cel.expression: Invalid value: "device.driver ==": ' \
           'compilation failed' in msg
    assert "spec.devices.requests[0].exactly.selectors[1].cel.expression: Required value" in msg


def test_claim_constraints_and_config_name_their_requests(store):
    msg = invalid(store, CLAIMS, claim(constraints=[{"requests": ["req-1"], "matchAttribute": "numa"}, {}],
                                       config=[{"requests": ["req-0/x"], "opaque": {"driver": "gpu.nvidia.com"}}]))
    assert ('spec.devices.constraints[0].requests[0]: Invalid value: "req-1": must be the name of a request in the '
            "claim or the name of a request and a subrequest separated by '/'") in msg
    assert 'spec.devices.constraints[0].matchAttribute: Invalid value: "numa": must include a domain' in msg
    assert "spec.devices.constraints[1].matchAttribute: Required value" in msg
    assert 'spec.devices.config[0].requests[0]: Invalid value: "req-0/x"' in msg
    assert "spec.devices.config[0].opaque.parameters: Required value" in msg
    ok = claim("ok", constraints=[{"matchAttribute": "gpu.nvidia.com/parentUUID"}])
    store.create(CLAIMS, ok)


def test_claim_spec_is_immutable_and_status_rules(store):
    got = store.create(CLAIMS, claim())
    got["spec"]["devices"]["requests"][0]["exactly"]["count"] = 2
    with pytest.raises(ApiError) as err:
        store.update(CLAIMS, got)
    assert err.value.code == 422
    assert err.value.message == 'ResourceClaim.resource.k8s.io "foo" is invalid: spec: Invalid value: object: ' \
                                "field is immutable"
    cur = store.get(CLAIMS, "ns", "foo")
    cur["status"] = {"reservedFor": [{"resource": "pods", "name": "p", "uid": "u1"}]}
    with pytest.raises(ApiError) as err:
        store.update_status(CLAIMS, cur)
    assert "status.reservedFor: Forbidden: may not be specified when `allocated` is not set" in err.value.message
    cur["status"] = {"allocation": {"devices": {"results": [
        {"request": "req-0", "driver": "gpu.nvidia.com", "pool": "node-1", "device": "gpu-0"}]}},
        "reservedFor": [{"resource": "pods", "name": "p", "uid": "u1"}]}
    store.update_status(CLAIMS, cur)
    cur = store.get(CLAIMS, "ns", "foo")
    cur["status"]["allocation"]["devices"]["results"][0]["device"] = "gpu-1"
    with pytest.raises(ApiError) as err:
        store.update_status(CLAIMS, cur)
    assert "status.allocation: Invalid value: object: field is immutable" in err.value.message


def test_template_validates_the_inner_spec(store):
    tmpl = {"apiVersion": RK, "kind": "ResourceClaimTemplate", "metadata": {"name": "t", "namespace": "ns"},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu"}]}}}}
    msg = invalid(store, TEMPLATES, tmpl)
    assert msg == ('ResourceClaimTemplate.resource.k8s.io "t" is invalid: spec.spec.devices.requests[0]: Required '
                   'value: exactly one of `exactly` or `firstAvailable` is required')


def test_device_class_selectors(store):
    msg = invalid(store, CLASSES, {"apiVersion": RK, "kind": "DeviceClass", "metadata": {"name": "gpu.nvidia.com"},
                                   "spec": {"selectors": [{}]}})
    assert msg == 'DeviceClass.resource.k8s.io "gpu.nvidia.com" is invalid: spec.selectors[0].cel: Required value'
    store.create(CLASSES, {"apiVersion": RK, "kind": "DeviceClass", "metadata": {"name": "gpu.nvidia.com"},
                           "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com' && "
                                                                         "device.attributes['gpu.nvidia.com'].type == 'gpu'"}}]}})


def rslice(**spec):
    base = {"driver": "gpu.nvidia.com", "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
            "nodeName": "node-1", "devices": [{"name": "gpu-0", "attributes": {"type": {"string": "gpu"}},
                                               "capacity": {"memory": {"value": "80Gi"}}}]}
    base.update(spec)
    return {"apiVersion": RK, "kind": "ResourceSlice", "metadata": {"name": "node-1-gpu.nvidia.com"},
            "spec": {k: v for k, v in base.items() if v is not None}}


def test_slice_node_selection_pool_and_devices(store):
    msg = invalid(store, SLICES, rslice(nodeName=None))
    assert msg.endswith("spec: Required value: exactly one of `nodeName`, `nodeSelector`, `allNodes`, "
                        "`perDeviceNodeSelection` is required")
    msg = invalid(store, SLICES, rslice(allNodes=True))
    assert "spec: Invalid value: null: exactly one of" in msg and "but multiple fields are set" in msg
    msg = invalid(store, SLICES, rslice(pool={"name": "", "resourceSliceCount": 0}))
    assert "spec.pool.name: Required value" in msg
    assert "spec.pool.resourceSliceCount: Invalid value: 0: must be greater than zero" in msg
    dev = {"name": "gpu-0", "attributes": {"type": {"string": "gpu", "int": 1}, "bad-name": {"int": 1}}}
    msg = invalid(store, SLICES, rslice(devices=[dev, {"name": "gpu-0"}]))
    assert "spec.devices[0].attributes[type]: Invalid value: object: exactly one value must be specified" in msg
    assert 'spec.devices[0].attributes[bad-name]: Invalid value: "bad-name": a valid C identifier' in msg
    assert 'spec.devices[1].name: Duplicate value: "gpu-0"' in msg
    msg = invalid(store, SLICES, rslice(devices=[{"name": "gpu-%d" % i} for i in range(129)]))
    assert msg.endswith("spec.devices: Too many: 129: must have at most 128 items")
    got = store.create(SLICES, rslice())
    got["spec"]["nodeName"] = "node-2"
    with pytest.raises(ApiError) as err:
        store.update(SLICES, got)
    assert 'spec.nodeName: Invalid value: "node-2": field is immutable' in err.value.message


def test_api_served_from_1_34_only():
    assert Registry("v1.33.4").get(CLAIMS) is None
    assert Registry("v1.34.0").get(CLAIMS).api_version() == RK
    assert sorted(i.plural for i in Registry("v1.34.0").in_group_version("resource.k8s.io", "v1")) == [
        "deviceclasses", "resourceclaims", "resourceclaimtemplates", "resourceslices"]
    # GET /version follows the cluster file's kubernetes_version
    version = Registry("v1.33.4").server_version
    assert (version["major"], version["minor"], version["gitVersion"]) == ("1", "33", "v1.33.4-simcluster")
    assert Registry().server_version["gitVersion"] == "v1.35.0-simcluster"


# -- pkg/quota/v1/evaluator/core/resource_claims_test.go TestResourceClaimEvaluatorUsage ----------

def _usage(requests):
    return {k: str(v) for k, v in quota_mod.claim_usage({"spec": {"devices": {"requests": requests}}}).items()}


GPU = "gpu.deviceclass.resource.k8s.io/devices"
COUNT = "count/resourceclaims.resource.k8s.io"


def exact(cls="gpu", **kw):
    return {"name": "req-0", "exactly": dict({"deviceClassName": cls, "allocationMode": "ExactCount", "count": 1}, **kw)}


@pytest.mark.parametrize("requests,want", [
    ([exact()], {COUNT: "1", GPU: "1"}),                                                   # simple
    ([exact()] * 5, {COUNT: "1", GPU: "5"}),                                               # many-requests
    ([exact(count=5)], {COUNT: "1", GPU: "5"}),                                            # count
    ([exact(allocationMode="All", count=None)], {COUNT: "1", GPU: "32"}),                  # all
    ([exact(allocationMode="future-mode")], {COUNT: "1", GPU: "0"}),                       # unknown-count-mode
    ([exact(adminAccess=True)], {COUNT: "1", GPU: "1"}),                                   # admin
    ([{"name": "req-0", "firstAvailable": [                                                # prioritized-list-multiple-subrequests
        {"name": "subreq-0", "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 2},
        {"name": "subreq-1", "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}]}],
     {COUNT: "1", GPU: "2"}),
    ([{"name": "req-0", "firstAvailable": [                                                # ...-different-device-classes
        {"name": "subreq-0", "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1},
        {"name": "subreq-1", "deviceClassName": "tpu", "allocationMode": "All"}]}],
     {COUNT: "1", GPU: "1", "tpu.deviceclass.resource.k8s.io/devices": "32"}),
], ids=["simple", "many-requests", "count", "all", "unknown-count-mode", "admin", "prioritized-list-multiple-subrequests",
        "prioritized-list-multiple-subrequests-different-device-classes"])
def test_claim_quota_usage(requests, want):
    assert _usage(requests) == want


def test_claim_quota_matching_resources():
    assert quota_mod.is_claim_key(COUNT) and quota_mod.is_claim_key(GPU)
    for key in ("resourceclaims", "storage", "ephemeral-storage", "bronze.deviceclass.resource.k8s.io/storage",
                "gpu.storage.k8s.io/requests.storage"):
        assert not quota_mod.is_claim_key(key)


def test_pod_resource_claims_and_container_claims(store):
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"},
           "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": "a", "resourceClaimTemplateName": "t"},
                                       {"name": "gpu"}],
                    "containers": [{"name": "c", "image": "busybox",
                                    "resources": {"claims": [{"name": "gpu"}, {"name": "gpu"}, {"name": "tpu"}]}}]}}
    with pytest.raises(ApiError) as err:
        store.create("pods", pod)
    msg = err.value.message
    assert ("spec.resourceClaims[0]: Invalid value: object: at most one of `resourceClaimName` or "
            "`resourceClaimTemplateName` may be specified") in msg
    assert 'spec.resourceClaims[1].name: Duplicate value: "gpu"' in msg
    assert ("spec.resourceClaims[1]: Invalid value: object: must specify one of: `resourceClaimName`, "
            "`resourceClaimTemplateName`") in msg
    assert 'spec.containers[0].resources.claims[1]: Duplicate value: "gpu"' in msg
    assert ('spec.containers[0].resources.claims[2].name: Not found: "tpu": must be one of the names in '
            'pod.spec.resourceClaims: gpu') in msg


def test_admin_access_needs_the_namespace_label(store):
    req = [{"name": "req-0", "exactly": {"deviceClassName": "class", "adminAccess": True}}]
    msg = invalid(store, CLAIMS, claim(requests=req))
    assert msg == ('ResourceClaim.resource.k8s.io "foo" is invalid: spec.devices.requests[0].adminAccess: Forbidden: '
                   'admin access to devices requires the `resource.kubernetes.io/admin-access: true` label on the '
                   'containing namespace')
    store.create("namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": "admin", "labels": {"resource.kubernetes.io/admin-access": "true"}}})
    ok = claim(requests=req)
    ok["metadata"]["namespace"] = "admin"
    store.create(CLAIMS, ok)
