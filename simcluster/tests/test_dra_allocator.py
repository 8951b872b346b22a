"""The structured allocator (simcluster/twins/dra_allocator.py), cases ported from kubernetes
staging/src/k8s.io/dynamic-resource-allocation/structured/internal/allocatortesting/allocator_testing.go
(Kubernetes 1.34; same case names, same objects: driver-a/-b, pool-1/-2, device-1/-2, class-a/-b,
claim-0/-1, req-0/-1, node-1/-2). A case expecting `nil` results is None here; an expected error is
an AllocationError with upstream's text."""
import pytest

from simcluster.twins.dra_allocator import AllocationError, SliceIndex, allocate, allocated_devices

DRIVER_A, DRIVER_B = "driver-a", "driver-b"
POOL1, POOL2 = "pool-1", "pool-2"
DEV1, DEV2, DEV3 = "device-1", "device-2", "device-3"
CLASS_A, CLASS_B = "class-a", "class-b"
NODE1, NODE2 = "node-1", "node-2"
REQ0, REQ1 = "req-0", "req-1"


def node(name, region="region-1"):
    return {"metadata": {"name": name, "labels": {"region": region}}}


def klass(name, driver):
    return {"metadata": {"name": name}, "spec": {"selectors": [
        {"cel": {"expression": 'device.driver == "%s"' % driver}}]}}


def device(name, capacity=None, attributes=None):
    d = {"name": name}
    if capacity:
        d["capacity"] = {k: {"value": v} for k, v in capacity.items()}
    if attributes:
        d["attributes"] = attributes
    return d


def slice_(name, node_name, pool, driver, *devices, generation=1, count=1, all_nodes=False, selector=None):
    spec = {"driver": driver, "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
            "devices": list(devices) or [device(DEV1)]}
    if all_nodes:
        spec["allNodes"] = True
    elif selector:
        spec["nodeSelector"] = selector
    else:
        spec["nodeName"] = node_name
    return {"metadata": {"name": name}, "spec": spec}


def request(name, cls, count=1, *selectors, mode="ExactCount"):
    exact = {"deviceClassName": cls, "allocationMode": mode}
    if mode == "ExactCount":
        exact["count"] = count
    if selectors:
        exact["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return {"name": name, "exactly": exact}


def claim(name, *requests, constraints=None):
    spec = {"devices": {"requests": list(requests)}}
    if constraints:
        spec["devices"]["constraints"] = constraints
    return {"metadata": {"name": name}, "spec": spec}


def result(req, driver, pool, dev):
    return {"request": req, "driver": driver, "pool": pool, "device": dev}


def local(name):
    return {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [name]}]}]}


def allocation(node_name, *results):
    out = {"devices": {"results": list(results)}}
    if node_name:
        out["nodeSelector"] = local(node_name)
    return out


def run(claims, classes, slices, the_node, allocated=()):
    return allocate(claims, the_node, SliceIndex(slices), set(allocated),
                    {c["metadata"]["name"]: c for c in classes})


def test_simple():
    got = run([claim("claim-0", request(REQ0, CLASS_A))], [klass(CLASS_A, DRIVER_A)],
              [slice_("slice-1", NODE1, POOL1, DRIVER_A)], node(NODE1))
    assert got == [allocation(NODE1, result(REQ0, DRIVER_A, POOL1, DEV1))]


def test_other_node():
    got = run([claim("claim-0", request(REQ0, CLASS_A))], [klass(CLASS_A, DRIVER_A)],
              [slice_("slice-1", NODE1, POOL1, DRIVER_B), slice_("slice-2", NODE2, POOL2, DRIVER_A)],
              node(NODE2, "region-2"))
    assert got == [allocation(NODE2, result(REQ0, DRIVER_A, POOL2, DEV1))]


SMALL = 'device.capacity["driver-a"].memory.compareTo(quantity("1Gi")) >= 0'
LARGE = 'device.capacity["driver-a"].memory.compareTo(quantity("2Gi")) >= 0'


def test_small_and_large():
    got = run([claim("claim-0", request(REQ0, CLASS_A, 1, SMALL), request(REQ1, CLASS_A, 1, LARGE))],
              [klass(CLASS_A, DRIVER_A)],
              [slice_("slice-1", NODE1, POOL1, DRIVER_A, device(DEV1, {"memory": "1Gi"}),
                      device(DEV2, {"memory": "2Gi"}))], node(NODE1))
    assert got == [allocation(NODE1, result(REQ0, DRIVER_A, POOL1, DEV1), result(REQ1, DRIVER_A, POOL1, DEV2))]


def test_small_and_large_backtrack_requests():
    # the large device listed first is taken for the small request; that choice must be undone
    got = run([claim("claim-0", request(REQ0, CLASS_A, 1, SMALL), request(REQ1, CLASS_A, 1, LARGE))],
              [klass(CLASS_A, DRIVER_A)],
              [slice_("slice-1", NODE1, POOL1, DRIVER_A, device(DEV2, {"memory": "2Gi"}),
                      device(DEV1, {"memory": "1Gi"}))], node(NODE1))
    assert got == [allocation(NODE1, result(REQ0, DRIVER_A, POOL1, DEV1), result(REQ1, DRIVER_A, POOL1, DEV2))]


def test_small_and_large_backtrack_claims():
    got = run([claim("claim-0", request(REQ0, CLASS_A, 1, SMALL)), claim("claim-1", request(REQ1, CLASS_A, 1, LARGE))],
              [klass(CLASS_A, DRIVER_A)],
              [slice_("slice-1", NODE1, POOL1, DRIVER_A, device(DEV2, {"memory": "2Gi"}),
                      device(DEV1, {"memory": "1Gi"}))], node(NODE1))
    assert got == [allocation(NODE1, result(REQ0, DRIVER_A, POOL1, DEV1)),
                   allocation(NODE1, result(REQ1, DRIVER_A, POOL1, DEV2))]


def test_devices_split_across_different_slices():
    got = run([claim("claim-0", request(REQ0, CLASS_A, 2))], [klass(CLASS_A, DRIVER_A)],
              [slice_("slice-1", NODE1, POOL1, DRIVER_A), slice_("slice-2", NODE1, POOL2, DRIVER_A)], node(NODE1))
    assert got == [allocation(NODE1, result(REQ0, DRIVER_A, POOL1, DEV1), result(REQ0, DRIVER_A, POOL2, DEV1))]


def test_obsolete_slice():
    # generation 2 of the pool has one of its two slices: the pool is being updated, nothing is allocated
    got = run([claim("claim-0", request(REQ0, CLASS_A))], [klass(CLASS_A, DRIVER_A)],
              [slice_("slice-1-obsolete", NODE1, POOL1, DRIVER_A, device(DEV1), count=2),
               slice_("slice-1-obsolete", NODE1, POOL1, DRIVER_A, device(DEV2), count=2, generation=2)], node(NODE1))
    assert got is None


def test_no_slices():
    assert run([claim("claim-0", request(REQ0, CLASS_A))], [klass(CLASS_A, DRIVER_A)], [], node(NODE1)) is None


def test_not_enough_suitable_devices():
    got = run([claim("claim-0", request(REQ0, CLASS_A), request(REQ1, CLASS_A))], [klass(CLASS_A, DRIVER_A)],
              [slice_("slice-1", NODE1, POOL1, DRIVER_A)], node(NODE1))
    assert got is None


def test_no_classes_and_unknown_class():
    with pytest.raises(AllocationError, match="could not retrieve device class class-a"):
        run([claim("claim-0", request(REQ0, CLASS_A))], [], [slice_("slice-1", NODE1, POOL1, DRIVER_A)], node(NODE1))
    with pytest.raises(AllocationError, match="could not retrieve device class unknown-class"):
        run([claim("claim-0", request(REQ0, "unknown-class"))], [klass(CLASS_A, DRIVER_A)],
            [slice_("slice-1", NODE1, POOL1, DRIVER_A)], node(NODE1))


def test_empty_class():
    with pytest.raises(AllocationError) as err:
        run([claim("claim-0", request(REQ0, ""))], [klass(CLASS_A, DRIVER_A)],
            [slice_("slice-1", NODE1, POOL1, DRIVER_A)], node(NODE1))
    assert str(err.value) == "claim claim-0, request req-0: missing device class name (unsupported request type?)"


def test_all_devices_single_and_many():
    got = run([claim("claim-0", request(REQ0, CLASS_A, mode="All"))], [klass(CLASS_A, DRIVER_A)],
              [slice_("slice-1", NODE1, POOL1, DRIVER_A)], node(NODE1))
    assert got == [allocation(NODE1, result(REQ0, DRIVER_A, POOL1, DEV1))]
    got = run([claim("claim-0", request(REQ0, CLASS_A, mode="All"))], [klass(CLASS_A, DRIVER_A)],
              [slice_("slice-1", NODE1, POOL1, DRIVER_A), slice_("slice-1", NODE1, POOL2, DRIVER_A)], node(NODE1))
    assert got == [allocation(NODE1, result(REQ0, DRIVER_A, POOL1, DEV1), result(REQ0, DRIVER_A, POOL2, DEV1))]


def test_all_devices_of_the_incomplete_pool():
    with pytest.raises(AllocationError) as err:
        run([claim("claim-0", request(REQ0, CLASS_A, mode="All"))], [klass(CLASS_A, DRIVER_A)],
            [slice_("slice-1", NODE1, POOL1, DRIVER_A, count=2)], node(NODE1))
    assert str(err.value) == ("claim claim-0, request req-0: asks for all devices, but resource pool driver-a/pool-1 "
                              "is currently being updated")


@pytest.mark.parametrize("reverse", [False, True], ids=["all-devices-plus-another", "all-devices-plus-another-reversed"])
def test_all_devices_plus_another(reverse):
    claims = [claim("claim-0", request(REQ0, CLASS_A, mode="All")), claim("claim-1", request(REQ0, CLASS_B))]
    if reverse:
        claims.reverse()
    got = run(claims, [klass(CLASS_A, DRIVER_A), klass(CLASS_B, DRIVER_B)],
              [slice_("slice-1", NODE1, POOL1, DRIVER_A), slice_("slice-1", NODE1, POOL1, DRIVER_B)], node(NODE1))
    want = [allocation(NODE1, result(REQ0, DRIVER_A, POOL1, DEV1)), allocation(NODE1, result(REQ0, DRIVER_B, POOL1, DEV1))]
    assert got == (want[::-1] if reverse else want)


def test_already_allocated_devices_are_skipped():
    got = run([claim("claim-0", request(REQ0, CLASS_A))], [klass(CLASS_A, DRIVER_A)],
              [slice_("slice-1", NODE1, POOL1, DRIVER_A, device(DEV1), device(DEV2))], node(NODE1),
              allocated=[(DRIVER_A, POOL1, DEV1)])
    assert got == [allocation(NODE1, result(REQ0, DRIVER_A, POOL1, DEV2))]
    assert allocated_devices([{"status": {"allocation": got[0]}}]) == {(DRIVER_A, POOL1, DEV2)}


ATTRS = {"driverVersion": {"version": "1.0.0"}, "numa": {"int": 1}, "stringAttribute": {"string": "stringAttributeValue"},
         "boolAttribute": {"bool": True}}


@pytest.mark.parametrize("attribute", ["driver-a/driverVersion", "driver-a/numa", "driver-a/stringAttribute",
                                       "driver-a/boolAttribute"])
def test_with_constraint(attribute):
    got = run([claim("claim-0", request(REQ0, CLASS_A), request(REQ1, CLASS_A),
                     constraints=[{"matchAttribute": attribute}])], [klass(CLASS_A, DRIVER_A)],
              [slice_("slice-1", NODE1, POOL1, DRIVER_A, device(DEV1, None, ATTRS), device(DEV2, None, ATTRS))],
              node(NODE1))
    assert got == [allocation(NODE1, result(REQ0, DRIVER_A, POOL1, DEV1), result(REQ1, DRIVER_A, POOL1, DEV2))]


def test_with_constraint_non_existent_attribute():
    got = run([claim("claim-0", request(REQ0, CLASS_A), constraints=[{"matchAttribute": "driver-a/nonExistentAttribute"}])],
              [klass(CLASS_A, DRIVER_A)], [slice_("slice-1", NODE1, POOL1, DRIVER_A)], node(NODE1))
    assert got is None


def test_with_constraint_not_matching_int_attribute():
    got = run([claim("claim-0", request(REQ0, CLASS_A, 2), constraints=[{"matchAttribute": "driver-a/numa"}])],
              [klass(CLASS_A, DRIVER_A)],
              [slice_("slice-1", NODE1, POOL1, DRIVER_A, device(DEV1, None, {"numa": {"int": 1}}),
                      device(DEV2, None, {"numa": {"int": 2}}))], node(NODE1))
    assert got is None


def test_with_constraint_not_matching_int_attribute_all_devices():
    with pytest.raises(AllocationError) as err:
        run([claim("claim-0", request(REQ0, CLASS_A, mode="All"), constraints=[{"matchAttribute": "driver-a/numa"}])],
            [klass(CLASS_A, DRIVER_A)],
            [slice_("slice-1", NODE1, POOL1, DRIVER_A, device(DEV1, None, {"numa": {"int": 1}}),
                    device(DEV2, None, {"numa": {"int": 2}}))], node(NODE1))
    assert "cannot add device driver-a/pool-1/device-2 because a claim constraint would not be satisfied" in str(err.value)


def test_network_attached_device_by_node_selector_and_all_nodes():
    sel = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "region", "operator": "In", "values": ["region-1"]}]}]}
    slices = [slice_("slice-1", None, POOL1, DRIVER_A, selector=sel)]
    got = run([claim("claim-0", request(REQ0, CLASS_A))], [klass(CLASS_A, DRIVER_A)], slices, node(NODE1))
    assert got == [{"devices": {"results": [result(REQ0, DRIVER_A, POOL1, DEV1)]}, "nodeSelector": sel}]
    assert run([claim("claim-0", request(REQ0, CLASS_A))], [klass(CLASS_A, DRIVER_A)], slices,
               node(NODE2, "region-2")) is None
    got = run([claim("claim-0", request(REQ0, CLASS_A))], [klass(CLASS_A, DRIVER_A)],
              [slice_("slice-1", None, POOL1, DRIVER_A, all_nodes=True)], node(NODE2, "region-2"))
    assert got == [{"devices": {"results": [result(REQ0, DRIVER_A, POOL1, DEV1)]}}]


def test_prioritized_list_takes_the_first_subrequest_that_fits():
    req = {"name": REQ0, "firstAvailable": [
        {"name": "large", "deviceClassName": CLASS_A, "allocationMode": "ExactCount", "count": 1, "selectors": [
            {"cel": {"expression": LARGE}}]},
        {"name": "small", "deviceClassName": CLASS_A, "allocationMode": "ExactCount", "count": 1}]}
    got = run([claim("claim-0", req)], [klass(CLASS_A, DRIVER_A)],
              [slice_("slice-1", NODE1, POOL1, DRIVER_A, device(DEV1, {"memory": "1Gi"}))], node(NODE1))
    assert got == [allocation(NODE1, result("req-0/small", DRIVER_A, POOL1, DEV1))]


def test_cel_runtime_error_is_an_error_not_a_mismatch():
    with pytest.raises(AllocationError, match="CEL runtime error"):
        run([claim("claim-0", request(REQ0, CLASS_A, 1, 'device.attributes["driver-a"].missing == "x"'))],
            [klass(CLASS_A, DRIVER_A)], [slice_("slice-1", NODE1, POOL1, DRIVER_A)], node(NODE1))


def test_unqualified_attributes_belong_to_the_driver_domain_and_versions_compare_as_semver():
    dev = device(DEV1, {"memory": "80Gi"}, {"productName": {"string": "H100"}, "driverVersion": {"version": "550.54.15"}})
    sel = ('device.attributes["driver-a"].productName == "H100" && '
           'device.attributes["driver-a"].driverVersion.isGreaterThan(semver("535.0.0")) && '
           'device.attributes["other.example.com"].size() == 0')
    got = run([claim("claim-0", request(REQ0, CLASS_A, 1, sel))], [klass(CLASS_A, DRIVER_A)],
              [slice_("slice-1", NODE1, POOL1, DRIVER_A, dev)], node(NODE1))
    assert got == [allocation(NODE1, result(REQ0, DRIVER_A, POOL1, DEV1))]


def test_a_thousand_nodes_are_indexed_once():
    slices = [slice_("s-%d" % i, "node-%d" % i, "node-%d" % i, DRIVER_A, *[device("gpu-%d" % j) for j in range(8)])
              for i in range(1000)]
    index = SliceIndex(slices)
    assert len(index.by_node) == 1000
    got = allocate([claim("claim-0", request(REQ0, CLASS_A, 8))], node("node-999"), index, set(),
                   {CLASS_A: klass(CLASS_A, DRIVER_A)})
    assert [r["device"] for r in got[0]["devices"]["results"]] == ["gpu-%d" % j for j in range(8)]


@pytest.mark.parametrize("expr", [
    "device.driver == 'driver-a' && device.attributes['driver-a'].type == 'gpu'",
    "device.driver == 'driver-b' && device.attributes['driver-a'].type == 'gpu'",
    "device.attributes['driver-a'].index == 1 && device.attributes['driver-a'].healthy == true",
    "device.attributes['driver-a'].profile == '1g.10gb'",
    "device.driver == 'driver-b' && device.attributes['driver-a'].profile == '1g.10gb'",
])
def test_fast_selectors_agree_with_cel(expr):
    from simcluster.twins import dra_allocator as alloc
    dev = alloc.Device(DRIVER_A, POOL1, device(DEV1, None, {"type": {"string": "gpu"}, "index": {"int": 1},
                                                            "healthy": {"bool": True}}))
    assert alloc._fast(expr) is not None
    fast = alloc._evaluate(expr, dev)
    alloc._fast.cache_clear()
    slow_expr = "(" + expr + ") || false"       # another shape: evaluated by cel-python
    assert alloc._fast(slow_expr) is None
    assert alloc._evaluate(slow_expr, dev) == fast


def test_admin_access_uses_a_device_in_use_without_taking_it():
    admin = {"name": REQ0, "exactly": {"deviceClassName": CLASS_A, "allocationMode": "ExactCount", "count": 1,
                                       "adminAccess": True}}
    got = run([claim("claim-0", admin)], [klass(CLASS_A, DRIVER_A)], [slice_("slice-1", NODE1, POOL1, DRIVER_A)],
              node(NODE1), allocated=[(DRIVER_A, POOL1, DEV1)])
    assert got == [allocation(NODE1, dict(result(REQ0, DRIVER_A, POOL1, DEV1), adminAccess=True))]
    assert allocated_devices([{"status": {"allocation": got[0]}}]) == set()
