"""Custom resources against the REAL upstream CRDs (../shared/upstream) and a small schema."""
import pytest

from simcluster.errors import ApiError
from simcluster.validation import schema

from kit.fake_store import CRD, FakeStore, install_crd

pytestmark = pytest.mark.needs_shared

CP = "gpu-operator/crds/nvidia.com_clusterpolicies.yaml"
ND = "gpu-operator/crds/nvidia.com_nvidiadrivers.yaml"
QUEUE = "kai-scheduler/crds/scheduling.run.ai_queues.yaml"
CQ = "kueue/crds/kueue.x-k8s.io_clusterqueues.yaml"
LQ = "kueue/crds/kueue.x-k8s.io_localqueues.yaml"
RF = "kueue/crds/kueue.x-k8s.io_resourceflavors.yaml"
REQUIRED_CP = ["daemonsets", "dcgm", "dcgmExporter", "devicePlugin", "driver", "gfd",
               "nodeStatusExporter", "operator", "toolkit"]


def cluster_policy(**spec):
    base = {k: {} for k in REQUIRED_CP}
    base.update(spec)
    return {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
            "metadata": {"name": "cluster-policy"}, "spec": base}


@pytest.fixture
def store():
    s = FakeStore(namespaces=("default", "team-a"))
    for crd in (CP, ND, QUEUE, CQ, LQ, RF):
        install_crd(s, crd)
    return s


def _fail(store, resource, obj, **kw):
    with pytest.raises(ApiError) as exc:
        store.create(resource, obj, **kw)
    return exc.value


# -- ClusterPolicy ---------------------------------------------------------------

def test_valid_cluster_policy_passes(store):
    out = store.create("clusterpolicies.nvidia.com", cluster_policy(
        driver={"enabled": False}, toolkit={"enabled": False},
        mig={"strategy": "mixed"}, migManager={"config": {"name": "custom-mig-config"}},
        devicePlugin={"config": {"name": "time-slicing-config", "default": "any"}}))
    assert out["spec"]["mig"]["strategy"] == "mixed"


def test_wrong_type_is_422_with_field_path(store):
    err = _fail(store, "clusterpolicies.nvidia.com", cluster_policy(driver={"enabled": "string"}))
    assert err.code == 422
    assert err.message == (
        'ClusterPolicy.nvidia.com "cluster-policy" is invalid: spec.driver.enabled: Invalid '
        'value: "string": spec.driver.enabled in body must be of type boolean: "string"')
    assert err.details == {"name": "cluster-policy", "group": "nvidia.com",
                           "kind": "ClusterPolicy", "causes": [{
                               "reason": "FieldValueTypeInvalid", "field": "spec.driver.enabled",
                               "message": 'Invalid value: "string": spec.driver.enabled in body '
                                          'must be of type boolean: "string"'}]}


def test_wrong_enum_lists_supported_values(store):
    err = _fail(store, "clusterpolicies.nvidia.com", cluster_policy(mig={"strategy": "x"}))
    assert err.message.endswith('spec.mig.strategy: Unsupported value: "x": supported values: '
                                '"none", "single", "mixed"')
    assert err.details["causes"][0]["reason"] == "FieldValueNotSupported"


def test_missing_required_fields(store):
    obj = cluster_policy()
    del obj["spec"]["driver"], obj["spec"]["toolkit"]
    err = _fail(store, "clusterpolicies.nvidia.com", obj)
    assert err.message == ('ClusterPolicy.nvidia.com "cluster-policy" is invalid: '
                           '[spec.driver: Required value, spec.toolkit: Required value]')


def test_unknown_field_warns_and_is_pruned_by_default(store):
    obj = cluster_policy(driver={"enabled": True, "enabeld": False})
    out, warnings = store.create_w("clusterpolicies.nvidia.com", obj)
    assert warnings == ['unknown field "spec.driver.enabeld"']
    assert out["spec"]["driver"]["enabled"] is True and "enabeld" not in out["spec"]["driver"]


def test_unknown_field_strict_is_400_strict_decoding_error(store):
    obj = cluster_policy(driver={"enabeld": False}, bogus=1)
    err = _fail(store, "clusterpolicies.nvidia.com", obj, field_validation="Strict")
    assert err.code == 400 and err.reason == "BadRequest"
    assert err.message == ('ClusterPolicy in version "v1" cannot be handled as a ClusterPolicy: '
                           'strict decoding error: unknown field "spec.bogus", '
                           'unknown field "spec.driver.enabeld"') or err.message == (
        'ClusterPolicy in version "v1" cannot be handled as a ClusterPolicy: strict decoding '
        'error: unknown field "spec.driver.enabeld", unknown field "spec.bogus"')


def test_unknown_field_ignore_prunes_silently(store):
    out, warnings = store.create_w("clusterpolicies.nvidia.com",
                                   cluster_policy(bogus=1), field_validation="Ignore")
    assert warnings == [] and "bogus" not in out["spec"]


def test_status_subresource_validated_against_schema(store):
    store.create("clusterpolicies.nvidia.com", cluster_policy())
    cur = store.get("clusterpolicies.nvidia.com", None, "cluster-policy")
    cur["status"] = {"state": "ready", "namespace": "gpu-operator"}
    assert store.update_status("clusterpolicies.nvidia.com", cur)["status"]["state"] == "ready"
    cur["status"] = {"state": "bogus"}
    with pytest.raises(ApiError) as exc:
        store.update_status("clusterpolicies.nvidia.com", cur)
    assert 'status.state: Unsupported value: "bogus": supported values: "ignored", "ready", ' \
           '"notReady"' in exc.value.message


# -- NVIDIADriver: defaults fill required fields -------------------------------------

def test_nvidiadriver_defaults_applied_before_required_check(store):
    out = store.create("nvidiadrivers.nvidia.com", {
        "apiVersion": "nvidia.com/v1alpha1", "kind": "NVIDIADriver",
        "metadata": {"name": "default"}, "spec": {}})
    assert out["spec"]["driverType"] == "gpu"
    assert out["spec"]["image"] == "nvcr.io/nvidia/driver"
    assert out["spec"]["default"] is False


def test_nvidiadriver_bad_enum(store):
    err = _fail(store, "nvidiadrivers.nvidia.com", {
        "apiVersion": "nvidia.com/v1alpha1", "kind": "NVIDIADriver",
        "metadata": {"name": "d"}, "spec": {"kernelModuleType": "closed"}})
    assert 'spec.kernelModuleType: Unsupported value: "closed": supported values: "auto", ' \
           '"open", "proprietary"' in err.message


# -- KAI Queue ---------------------------------------------------------------------

def test_kai_queue_valid_and_number_types(store):
    q = {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": "team-a"},
         "spec": {"parentQueue": "root", "resources": {
             "gpu": {"quota": 4, "limit": -1, "overQuotaWeight": 1.5},
             "cpu": {"quota": -1, "limit": -1}, "memory": {"quota": -1, "limit": -1}}}}
    assert store.create("queues.scheduling.run.ai", q)["spec"]["resources"]["gpu"]["quota"] == 4
    q["metadata"]["name"] = "team-b"
    q["spec"]["resources"]["gpu"]["limit"] = "unlimited"
    err = _fail(store, "queues.scheduling.run.ai", q)
    assert err.message == ('Queue.scheduling.run.ai "team-b" is invalid: '
                           'spec.resources.gpu.limit: Invalid value: "string": '
                           'spec.resources.gpu.limit in body must be of type number: "string"')


# -- Kueue -----------------------------------------------------------------------------

def cluster_queue(name="cq", **spec):
    base = {"namespaceSelector": {}, "resourceGroups": [{
        "coveredResources": ["nvidia.com/gpu"],
        "flavors": [{"name": "h100", "resources": [{"name": "nvidia.com/gpu",
                                                    "nominalQuota": 8}]}]}]}
    base.update(spec)
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": name}, "spec": base}


def test_kueue_cluster_queue_valid_with_defaults(store):
    out = store.create("clusterqueues.kueue.x-k8s.io", cluster_queue(cohortName="gpus"))
    assert out["spec"]["queueingStrategy"] == "BestEffortFIFO"
    assert out["spec"]["preemption"]["withinClusterQueue"] == "Never"


def test_kueue_cluster_queue_pattern_and_int_or_string(store):
    obj = cluster_queue(cohortName="Bad_Cohort")
    obj["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "8 GPUs"
    err = _fail(store, "clusterqueues.kueue.x-k8s.io", obj)
    assert "spec.cohortName: Invalid value: \"Bad_Cohort\": spec.cohortName in body should " \
           "match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'" \
           in err.message
    assert "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: Invalid value: " \
           "\"8 GPUs\": spec.resourceGroups[0].flavors[0].resources[0].nominalQuota in body " \
           "should match" in err.message


def test_kueue_v1beta1_cohort_field_is_unknown_in_v1beta2(store):
    out, warnings = store.create_w("clusterqueues.kueue.x-k8s.io",
                                   cluster_queue(cohort="gpus"))
    assert warnings == ['unknown field "spec.cohort"']
    assert "cohort" not in out["spec"]


def test_kueue_too_many_items(store):
    obj = cluster_queue()
    obj["spec"]["resourceGroups"] = obj["spec"]["resourceGroups"] * 17
    err = _fail(store, "clusterqueues.kueue.x-k8s.io", obj)
    assert "spec.resourceGroups: Too many: 17: must have at most 16 items" in err.message


def test_kueue_local_queue_and_resource_flavor(store):
    store.create("localqueues.kueue.x-k8s.io", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
        "metadata": {"name": "lq", "namespace": "team-a"}, "spec": {"clusterQueue": "cq"}})
    store.create("resourceflavors.kueue.x-k8s.io", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
        "metadata": {"name": "h100"}, "spec": {"nodeLabels": {
            "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}})
    err = _fail(store, "resourceflavors.kueue.x-k8s.io", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
        "metadata": {"name": "bad"}, "spec": {"nodeLabels": ["a"]}})
    assert 'spec.nodeLabels: Invalid value: "array": spec.nodeLabels in body must be of type ' \
           'object: "array"' in err.message


def test_cr_in_missing_namespace_is_404(store):
    err = _fail(store, "localqueues.kueue.x-k8s.io", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
        "metadata": {"name": "lq", "namespace": "nope"}, "spec": {"clusterQueue": "cq"}})
    assert (err.code, err.message) == (404, 'namespaces "nope" not found')


def test_cr_name_must_be_subdomain(store):
    err = _fail(store, "queues.scheduling.run.ai", {
        "apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": "Team_A"},
        "spec": {}})
    assert err.message.startswith('Queue.scheduling.run.ai "Team_A" is invalid: metadata.name: '
                                  'Invalid value: "Team_A": a lowercase RFC 1123 subdomain')


def test_update_ratchets_unchanged_invalid_values(store):
    store.create("clusterpolicies.nvidia.com", cluster_policy())
    # Simulate an object stored before a stricter CRD: written without admission.
    bad = store.get("clusterpolicies.nvidia.com", None, "cluster-policy")
    bad["spec"]["mig"] = {"strategy": "legacy"}
    store.update("clusterpolicies.nvidia.com", bad, admit=False)
    bad["spec"]["driver"] = {"enabled": False}
    store.update("clusterpolicies.nvidia.com", bad)  # unchanged invalid value tolerated
    bad["spec"]["mig"] = {"strategy": "other"}
    with pytest.raises(ApiError):
        store.update("clusterpolicies.nvidia.com", bad)


def test_crd_update_recompiles_schema(store):
    crd = store.get(CRD, None, "queues.scheduling.run.ai")
    props = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    props["properties"]["priority"]["maximum"] = 10
    store.update(CRD, crd)
    err = _fail(store, "queues.scheduling.run.ai", {
        "apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": "q"},
        "spec": {"priority": 11}})
    assert "spec.priority: Invalid value: 11: spec.priority in body should be less than or " \
           "equal to 10" in err.message


# -- the schema engine on a small schema -------------------------------------------

SMALL = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object", "required": ["name"],
            "properties": {
                "name": {"type": "string", "minLength": 2, "maxLength": 5},
                "count": {"type": "integer", "minimum": 1, "maximum": 3,
                          "exclusiveMaximum": True, "default": 1},
                "ratio": {"type": "number", "minimum": 0, "exclusiveMinimum": True},
                "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                         "x-kubernetes-list-type": "set"},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "maybe": {"type": "string", "nullable": True},
                "never": {"type": "string", "default": "d"},
                "port": {"x-kubernetes-int-or-string": True},
                "when": {"type": "string", "format": "date-time"},
                "tmpl": {"type": "object", "x-kubernetes-embedded-resource": True,
                         "x-kubernetes-preserve-unknown-fields": True},
            },
        },
    },
}


def _run(obj):
    root = schema.compile_schema(SMALL)
    unknown = schema.prune(obj, root)
    schema.apply_defaults(obj, root)
    return unknown, [str(e) for e in schema.validate(obj, root)]


def test_small_schema_messages():
    obj = {"spec": {"name": "toolong", "count": 3, "ratio": 0, "tags": ["a", "a"],
                    "labels": {"x": 1}, "port": 1.5, "when": "yesterday",
                    "tmpl": {"kind": "Pod"}}}
    unknown, errs = _run(obj)
    assert unknown == []
    assert errs == [
        "spec.name: Too long: may not be more than 5 bytes",
        "spec.count: Invalid value: 3: spec.count in body should be less than 3",
        "spec.ratio: Invalid value: 0: spec.ratio in body should be greater than 0",
        'spec.tags[1]: Duplicate value: "a"',
        'spec.labels.x: Invalid value: "integer": spec.labels.x in body must be of type string: '
        '"integer"',
        'spec.port: Invalid value: "number": spec.port in body must be of type integer,string: '
        '"number"',
        'spec.when: Invalid value: "yesterday": spec.when in body must be of type date-time: '
        '"yesterday"',
        "spec.tmpl.apiVersion: Required value: must not be empty",
    ]


def test_small_schema_nulls_defaults_and_preserve():
    obj = {"spec": {"name": "ok", "never": None, "maybe": None, "free": {"any": {"x": 1}},
                    "extra": True, "tags": []}}
    unknown, errs = _run(obj)
    assert unknown == ["spec.extra"]
    assert obj["spec"]["never"] == "d"          # null pruned, then defaulted
    assert obj["spec"]["maybe"] is None         # nullable keeps null
    assert obj["spec"]["count"] == 1            # default
    assert obj["spec"]["free"] == {"any": {"x": 1}}
    assert errs == ["spec.tags: Invalid value: 0: spec.tags in body should have at least 1 items"]


def test_small_schema_required_and_min_length():
    unknown, errs = _run({"spec": {"port": "http"}})
    assert errs == ["spec.name: Required value"]
    unknown, errs = _run({"spec": {"name": "a"}})
    assert errs == ['spec.name: Invalid value: "a": spec.name in body should be at least 2 '
                    'chars long']


def test_compiled_schema_is_cached_per_crd(store):
    from simcluster import admission
    st = admission.attach(store)
    store.create("clusterpolicies.nvidia.com", cluster_policy())
    first = st.crds["clusterpolicies.nvidia.com"]
    store.update("clusterpolicies.nvidia.com",
                 store.get("clusterpolicies.nvidia.com", None, "cluster-policy"))
    assert st.crds["clusterpolicies.nvidia.com"] is first


# -- CEL rules of the real CRDs (evaluated by cel-python, see test_validation_cel.py) ---------

def test_cel_immutability_rule_on_localqueue(store):
    lq = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
          "metadata": {"name": "lq", "namespace": "team-a"}, "spec": {"clusterQueue": "cq"}}
    store.create("localqueues.kueue.x-k8s.io", lq)
    cur = store.get("localqueues.kueue.x-k8s.io", "team-a", "lq")
    cur["spec"]["clusterQueue"] = "other"
    with pytest.raises(ApiError) as exc:
        store.update("localqueues.kueue.x-k8s.io", cur)
    assert exc.value.message == ('LocalQueue.kueue.x-k8s.io "lq" is invalid: spec.clusterQueue: '
                                 'Invalid value: "string": field is immutable')


def test_cel_borrowing_limit_needs_cohort(store):
    obj = cluster_queue()
    obj["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["borrowingLimit"] = 2
    err = _fail(store, "clusterqueues.kueue.x-k8s.io", obj)
    assert err.message == ('ClusterQueue.kueue.x-k8s.io "cq" is invalid: spec: Invalid value: '
                           '"object": borrowingLimit must be nil when cohort is empty')
    obj["spec"]["cohortName"] = "gpus"
    store.create("clusterqueues.kueue.x-k8s.io", obj)


def test_cel_flavors_must_cover_all_resources(store):
    obj = cluster_queue()
    obj["spec"]["resourceGroups"][0]["coveredResources"].append("cpu")
    err = _fail(store, "clusterqueues.kueue.x-k8s.io", obj)
    assert err.message.endswith('spec.resourceGroups[0]: Invalid value: "object": flavors must '
                                'have the same number of resources as the coveredResources')


def test_any_cel_rule_is_evaluated_and_unparsable_ones_are_skipped():
    from simcluster.validation import cel
    (transition, fn, msg), = cel.compile_rules([{"rule": "self.size() > 1", "message": "x"}])
    assert (transition, fn(["a"], cel.MISSING), fn(["a", "b"], cel.MISSING)) == (False, "", None)
    assert cel.compile_rules([{"rule": "self.size( >", "message": "x"}]) == []
