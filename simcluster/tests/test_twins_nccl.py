"""nccl-tests twin (simcluster/twins/nccl_tests.py): all_reduce_perf under mpirun in an Indexed Job,
one pod per node; its log is read with the collection's own parser (workload/nccl.py parse())."""
import importlib.util
import os

import pytest

from simcluster import clusterfile
from simcluster.twins import nccl_tests as nt
from simcluster.twins.testkit import REPO, TwinCluster, cluster_policy

_spec = importlib.util.spec_from_file_location(
    "nccl_parser", os.path.join(REPO, "plugins", "module_utils", "workload", "nccl.py"))
nccl = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(nccl)

CLUSTER = "nccl-4x8.yaml"
HERE = os.path.dirname(os.path.abspath(__file__))
IMAGE = "ghcr.io/coreweave/nccl-tests:12.8.1-devel-ubuntu22.04-nccl2.26.2-1-0708d2e"
ARGS = "-b 8 -e 8G -f 2 -g 1 -c 1 -n 20"
# the launcher pattern of multi-node nccl-tests Jobs: index 0 runs mpirun, the others serve ssh
SCRIPT = ('if [ "$JOB_COMPLETION_INDEX" = "0" ]; then mpirun --allow-run-as-root -np {np} -N 8 '
          '--hostfile /etc/mpi/hostfile -x NCCL_DEBUG=WARN all_reduce_perf {args}; '
          'else /usr/sbin/sshd -D -e; fi')


def job(name, nodes, gpus=8, args=ARGS, on=None, ns="default", image=IMAGE):
    c = {"name": "nccl", "image": image, "command": ["/bin/bash", "-c",
                                                     SCRIPT.format(np=nodes * 8, args=args)]}
    if gpus:
        c["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    spec = {"restartPolicy": "Never", "subdomain": name, "containers": [c]}
    if on:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": list(on)}]}]}}}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": ns},
            "spec": {"completionMode": "Indexed", "completions": nodes, "parallelism": nodes,
                     "backoffLimit": 0, "template": {"spec": spec}}}


class Nccl(TwinCluster):
    def __init__(self, **kw):
        super().__init__(os.path.join(HERE, "clusters", CLUSTER), **kw)
        if self.kind == "fake":
            # CDI (the chart's default): a container gets the GPUs the device plugin allocated, no
            # others (the real store has no ClusterPolicy CRD here: no toolkit, the allocation counts)
            self.store.create("clusterpolicies.nvidia.com", cluster_policy())
        for node in self.store.list("nodes"):
            if node["metadata"]["name"].startswith("gpu-"):
                node["status"]["allocatable"]["nvidia.com/gpu"] = "8"   # as a running device plugin reports
                node["status"]["capacity"]["nvidia.com/gpu"] = "8"
                self.store.update_status("nodes", node)

    def run(self, body):
        self.store.create("jobs.batch", body)
        name = body["metadata"]["name"]
        launcher = self.wait(lambda: next((p for p in self.pods("default", name + "-0-")
                                           if (p.get("status") or {}).get("phase") in ("Succeeded", "Failed")), None),
                             what="the launcher of %s to finish" % name)
        return launcher, self.logs("default", launcher["metadata"]["name"], "nccl")


@pytest.fixture
def cluster():
    with Nccl() as c:
        yield c
        assert c.handle.errors == []


@pytest.fixture(params=["fake", "real"])
def any_store(request):
    with Nccl(store=request.param) as c:
        yield c
        assert c.handle.errors == []


def ring(n):
    return 2.0 * (n - 1) / n


def test_two_nodes_parse_to_16_ranks_on_both_hosts(any_store):
    cluster = any_store
    launcher, log = cluster.run(job("ar2", 2))
    assert launcher["status"]["phase"] == "Succeeded"
    got = nccl.parse(log)
    assert got["errors"] == [] and got["complete"]
    assert len(got["ranks"]) == 16
    assert [r["rank"] for r in got["ranks"]] == list(range(16))
    assert [r["host"] for r in got["ranks"]] == ["ar2-0"] * 8 + ["ar2-1"] * 8
    assert [r["device"] for r in got["ranks"]] == list(range(8)) * 2
    assert got["ranks"][0]["gpu"] == "NVIDIA H100 80GB HBM3" and got["ranks"][0]["bus_id"] == "0000:04:00"
    assert len(got["rows"]) == 31 and got["rows"][-1]["size"] == 8 * 1024 ** 3     # 8 B .. 8 GiB, x2
    assert got["wrong_total"] == 0 and got["out_of_bounds"] == 0
    # busbw rises with the size up to the fabric's 180 GB/s; algbw = busbw / (2(n-1)/n)
    busbw = [r["out_of_place"]["busbw"] for r in got["rows"]]
    assert busbw == sorted(busbw) and 170 < busbw[-1] <= 180
    last = got["rows"][-1]["out_of_place"]
    assert last["algbw"] == pytest.approx(last["busbw"] / ring(16), abs=0.01)
    assert last["time_us"] == pytest.approx(got["rows"][-1]["size"] / (last["algbw"] * 1e3), rel=0.01)
    mean = sum(r[h]["busbw"] for r in got["rows"] for h in ("out_of_place", "in_place")) / 62
    assert got["avg_busbw"] == pytest.approx(mean, abs=0.05)
    # the workers served ssh until the launcher was done, then completed
    worker = cluster.wait(lambda: next((p for p in cluster.pods("default", "ar2-1-")
                                        if (p.get("status") or {}).get("phase") == "Succeeded"), None))
    assert worker["spec"]["nodeName"] != launcher["spec"]["nodeName"]


def test_four_nodes_give_32_ranks(cluster):
    launcher, log = cluster.run(job("ar4", 4, args="-b 1M -e 1G -f 4"))
    got = nccl.parse(log)
    assert got["errors"] == [], got["errors"]
    assert len(got["ranks"]) == 32
    assert sorted({r["host"] for r in got["ranks"]}) == ["ar4-0", "ar4-1", "ar4-2", "ar4-3"]
    assert [r["size"] for r in got["rows"]] == [1024 ** 2 * 4 ** k for k in range(6)]
    assert [r["count"] for r in got["rows"]] == [r["size"] // 4 for r in got["rows"]]
    assert {(r["type"], r["redop"], r["root"]) for r in got["rows"]} == {("float", "sum", -1)}
    assert 0 < got["avg_busbw"] < 180
    assert got["nccl_version"] is None                  # NCCL_DEBUG=WARN: no INFO lines
    body = job("info", 2, args="-b 1M -e 1M")
    cmd = body["spec"]["template"]["spec"]["containers"][0]["command"]
    cmd[2] = cmd[2].replace("-x NCCL_DEBUG=WARN", "-x NCCL_DEBUG=INFO")     # mpirun passes it to every rank
    _l, log = cluster.run(body)
    assert nccl.parse(log)["nccl_version"] == nt.NCCL_VERSION and nccl.parse(log)["errors"] == []
    assert len({p["spec"]["nodeName"] for p in cluster.pods("default", "ar4-")}) == 4


def test_a_degraded_link_lowers_the_ring_and_a_pairwise_run_without_it_is_normal():
    with Nccl(faults={"nccl_degraded_link": [{"node": "gpu-3", "fraction": 0.25}]}) as c:
        _l, healthy = c.run(job("pair", 2, on=["gpu-1", "gpu-2"]))
        _l, all4 = c.run(job("all4", 4))
        _l, with_it = c.run(job("pair3", 2, on=["gpu-1", "gpu-3"]))
        good, slow, bad = nccl.parse(healthy), nccl.parse(all4), nccl.parse(with_it)
        # the whole ring runs at the slow node's 45 GB/s; nothing in the output names it
        assert slow["rows"][-1]["out_of_place"]["busbw"] <= 45 < good["rows"][-1]["out_of_place"]["busbw"]
        assert slow["avg_busbw"] < good["avg_busbw"] / 2
        assert bad["rows"][-1]["out_of_place"]["busbw"] <= 45
        assert good["errors"] == slow["errors"] == bad["errors"] == []
        assert c.handle.errors == []


def test_wrong_results_fail_the_check_with_exit_code_7():
    with Nccl(faults={"nccl_wrong_results": ["gpu-2"]}) as c:
        launcher, log = c.run(job("bad", 2, args="-b 8 -e 1M -f 2 -c 1"))
        got = nccl.parse(log)
        state = launcher["status"]["containerStatuses"][0]["state"]["terminated"]
        assert launcher["status"]["phase"] == "Failed" and state["exitCode"] == 7
        assert all(r["out_of_place"]["wrong"] > 0 for r in got["rows"])
        assert got["rows"][0]["out_of_place"]["wrong"] == 2 * 16        # count x ranks
        assert got["out_of_bounds"] == len(got["rows"]) * 2 * 16        # per process and half
        assert "# Out of bounds values : %d FAILED" % got["out_of_bounds"] in log
        assert any(e.startswith("out of bounds values") for e in got["errors"])
        assert any(e.startswith("MPI abort") for e in got["errors"])
        # -c 0 checks nothing: the same corruption goes unnoticed
        launcher, log = c.run(job("unchecked", 2, args="-b 8 -e 1M -f 2 -c 0"))
        got = nccl.parse(log)
        assert launcher["status"]["phase"] == "Succeeded" and got["errors"] == []
        assert got["wrong_total"] is None and got["out_of_bounds"] == 0


def test_a_worker_that_cannot_be_scheduled_makes_the_launcher_fail(cluster):
    # five nodes' worth of pods on four GPU nodes: index 4 stays Pending
    launcher, log = cluster.run(job("big", 5))
    assert launcher["status"]["phase"] == "Failed"
    assert "ssh: Could not resolve hostname big-4.big: Name or service not known" in log
    assert "ORTE was unable to reliably start one or more daemons." in log
    # backoffLimit 0: the Job fails and its controller removes the rest (the Pending worker too)
    failed = cluster.wait(lambda: [c for c in (cluster.store.get("jobs.batch", "default", "big").get("status") or {})
                                   .get("conditions") or [] if c["type"] == "Failed"])
    assert failed[0]["reason"] == "BackoffLimitExceeded"
    assert nccl.parse(log)["rows"] == []


def test_a_pod_without_a_gpu_request_sees_no_gpu(cluster):
    launcher, log = cluster.run(job("nogpu", 2, gpus=0))
    assert launcher["status"]["phase"] == "Failed"
    assert launcher["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 2
    assert "nogpu-0: Test CUDA failure util.cu:674 'no CUDA-capable device is detected'" in log
    kinds = nccl.parse(log)["errors"]
    assert kinds[0].startswith("CUDA failure") and any(k.startswith("MPI abort") for k in kinds)


def test_one_node_runs_over_nvlink_and_one_gpu_moves_nothing(cluster):
    body = job("solo", 1, args="-b 1G -e 8G -f 2")
    _l, log = cluster.run(body)
    got = nccl.parse(log)
    assert len(got["ranks"]) == 8 and 400 < got["rows"][-1]["out_of_place"]["busbw"] <= 480
    body = job("one", 1, gpus=1, args="-b 1M -e 4M -f 2")
    body["spec"]["template"]["spec"]["containers"][0]["command"][2] = "all_reduce_perf -b 1M -e 4M -f 2 -g 1"
    _l, log = cluster.run(body)
    got = nccl.parse(log)
    assert len(got["ranks"]) == 1 and got["avg_busbw"] == 0     # nccl-tests: no link crossed
    assert any("one rank" in e for e in got["errors"])


def test_more_gpus_per_process_than_the_pod_sees(cluster):
    body = job("g16", 1, args="-b 8 -e 8 -g 16")
    body["spec"]["template"]["spec"]["containers"][0]["command"][2] = "all_reduce_perf -b 8 -e 8 -g 16"
    launcher, log = cluster.run(body)
    assert "Invalid number of GPUs: 16 requested but only 8 were found." in log
    assert launcher["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 5


# -- pure functions, from nccl-tests' own code ---------------------------------------------------
def test_bus_factor_and_number_formats_of_nccl_tests():
    # all_reduce.cu AllReduceGetBw: 2(n-1)/n; the 16-rank fixture's last row 180.71 -> 338.82
    assert nt.bus_factor(16) * 180.71 == pytest.approx(338.83, abs=0.01)
    assert nt.bus_factor(1) == 0 and nt.bus_factor(2) == 1
    # util.cu getFloatStr: the first of %.2f, %.1f, %.0f that fits the column
    assert nt.float_str(12646.24, 7) == "12646.2" and nt.float_str(135.8, 7) == " 135.80"
    assert nt.float_str(123456.7, 7) == " 123457" and nt.float_str(14586.35, 6) == " 14586"
    assert nt.float_str(0.004, 6) == "  0.00" and nt.float_str(1234567.0, 6) == " 1e+06"
    assert nt.parsesize("8G") == 8 * 1024 ** 3 and nt.parsesize("1m") == 1024 ** 2 and nt.parsesize("x") is None
    assert nt.sizes(nt.options(["-b", "8", "-e", "128", "-f", "2"])) == [8, 16, 32, 64, 128]
    assert nt.sizes(nt.options(["-b8", "-e", "3M", "-i", "1M", "-b", "1M"])) == [k * 1024 ** 2 for k in (1, 2, 3)]
    assert nt.options(["--minbytes=2G", "--maxbytes", "1G"])["error"] == \
        "invalid sizes for 'minbytes' and 'maxbytes': 2147483648 > 1073741824"
    assert nt.options(["-d", "fp32"])["notes"] == ["invalid type fp32, defaulting to float .. "]


@pytest.mark.parametrize("image,match", [
    ("ghcr.io/coreweave/nccl-tests:12.8.1-devel-ubuntu22.04-nccl2.26.2-1-0708d2e", True),
    ("nvcr.io/nvidia/k8s/nccl-tests:2.19", True),
    ("registry.local:5000/mirror/nccl-tests@sha256:abcd", True),
    ("registry.local:5000/nccl-tests-mirror/busybox:1.36", False),   # the path, not the image's name
    ("registry.local:5000/nccl-tests", True),
    ("nvcr.io/nvidia/pytorch:24.05-py3", False),
])
def test_the_image_is_matched_on_its_repository(image, match):
    assert nt.is_nccl_tests(image) is match


def test_cluster_file_fabric_and_faults_are_validated():
    base = {"nodes": [{"name": "a", "gpus": {"model": "NVIDIA-H100-80GB-HBM3", "count": 8},
                       "fabric": {"name": "ib-ndr", "bus_bandwidth_gbps": 180}}, "b"]}
    spec = clusterfile.validate(dict(base, faults={"nccl_degraded_link": ["a", {"node": "b", "fraction": 0.5}],
                                                   "nccl_wrong_results": ["b"]}))
    assert spec["nodes"][0]["fabric"] == {"name": "ib-ndr", "bus_bandwidth_gbps": 180.0}
    assert spec["nodes"][1]["fabric"] is None
    assert spec["faults"]["nccl_degraded_link"] == [{"node": "a", "fraction": 0.25}, {"node": "b", "fraction": 0.5}]
    bad = [({"nodes": [{"name": "a", "fabric": {"bus_bandwidth_gbps": 0}}]},
            "nodes[0].fabric.bus_bandwidth_gbps: must be a number of GB/s > 0"),
           ({"nodes": [{"name": "a", "fabric": {"name": "ib", "gbps": 1}}]}, "nodes[0].fabric: must be a mapping"),
           (dict(base, faults={"nccl_degraded_link": ["c"]}), "faults.nccl_degraded_link[0]: node 'c' is not in nodes"),
           (dict(base, faults={"nccl_degraded_link": [{"node": "a", "fraction": 1.5}]}),
            "faults.nccl_degraded_link[0].fraction: must be a number between 0 and 1"),
           (dict(base, faults={"nccl_wrong_results": ["c"]}), "faults.nccl_wrong_results: node 'c' is not in nodes")]
    for data, message in bad:
        with pytest.raises(clusterfile.ClusterFileError) as err:
            clusterfile.validate(data)
        assert str(err.value).startswith(message), str(err.value)


def test_the_job_of_the_cluster_file_doc_runs_as_documented(cluster):
    """The Job in docs/simcluster-clusterfile.md is the contract for the workload acceptance."""
    import re
    import yaml
    with open(os.path.join(REPO, "docs", "simcluster-clusterfile.md"), encoding="utf-8") as fh:
        doc = fh.read()
    block = re.search(r"```yaml\n(apiVersion: batch/v1\nkind: Job\n.*?)```", doc, re.S).group(1)
    body = yaml.safe_load(block)
    cluster.namespace("team-a")
    cluster.store.create("jobs.batch", body)
    launcher = cluster.wait(lambda: next((p for p in cluster.pods("team-a", "nccl-ar-0-")
                                          if (p.get("status") or {}).get("phase") in ("Succeeded", "Failed")), None))
    assert launcher["status"]["phase"] == "Succeeded"
    got = nccl.parse(cluster.logs("team-a", launcher["metadata"]["name"], "nccl"))
    assert got["errors"] == [] and len(got["ranks"]) == 32 and len(got["rows"]) == 31
    assert sorted({r["host"] for r in got["ranks"]}) == ["nccl-ar-%d" % i for i in range(4)]
    done = cluster.wait(lambda: (cluster.store.get("jobs.batch", "team-a", "nccl-ar").get("status") or {})
                        .get("succeeded") == 4, what="every index completed")
    assert done


def test_through_a_teams_kueue_queue():
    """The acceptance's path: the Job waits suspended in the team's queue, Kueue admits it on the
    flavor's nodes, then the launcher runs over every admitted index."""
    from simcluster.tests.test_twins_kueue import API, CQ, POOL, TOL, cluster_queue
    from simcluster.twins.testkit import deployment
    with Nccl() as c:
        for name in ("kueue-system", "team-a"):
            c.namespace(name, {"kubernetes.io/metadata.name": name})
        for node in ("gpu-1", "gpu-2"):
            c.label(node, POOL)
        c.store.create("deployments.apps", deployment("kueue-controller-manager", "kueue-system",
                                                      image="registry.k8s.io/kueue/kueue:v0.19.2"))
        c.wait(lambda: (c.store.get("deployments.apps", "kueue-system", "kueue-controller-manager")
                        .get("status") or {}).get("readyReplicas"), what="kueue running")
        c.store.create("resourceflavors.kueue.x-k8s.io", {
            "apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": "h100"},
            "spec": {"nodeLabels": dict(POOL), "tolerations": [dict(TOL)]}})
        c.store.create(CQ, cluster_queue("team-a", 16))
        c.store.create("localqueues.kueue.x-k8s.io", {
            "apiVersion": API, "kind": "LocalQueue", "metadata": {"name": "team-a", "namespace": "team-a"},
            "spec": {"clusterQueue": "team-a"}})
        body = job("q2", 2, ns="team-a")
        body["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "team-a"}
        c.store.create("jobs.batch", body)
        launcher = c.wait(lambda: next((p for p in c.pods("team-a", "q2-0-")
                                        if (p.get("status") or {}).get("phase") in ("Succeeded", "Failed")), None))
        got = nccl.parse(c.logs("team-a", launcher["metadata"]["name"], "nccl"))
        assert got["errors"] == [] and len(got["ranks"]) == 16
        assert {p["spec"]["nodeName"] for p in c.pods("team-a", "q2-")} == {"gpu-1", "gpu-2"}
        assert c.handle.errors == []
