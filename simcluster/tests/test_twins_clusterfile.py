"""Cluster file loading and validation (simcluster.clusterfile)."""
import glob
import os

import pytest

from simcluster import clusterfile
from simcluster.clusterfile import ClusterFileError, validate

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLUSTERS = sorted(glob.glob(os.path.join(REPO, "tests", "clusters", "*.yaml")))


@pytest.mark.parametrize("path", CLUSTERS, ids=os.path.basename)
def test_every_example_cluster_file_loads(path):
    spec = clusterfile.load(path)
    assert spec["nodes"], "a cluster needs nodes"
    for crd in spec["crds"]:
        assert os.path.isabs(crd), "crd paths are resolved against the file's folder"
    assert set(spec["timings"]) == set(clusterfile.DEFAULT_TIMINGS)


def test_default_cluster_is_two_gpu_nodes_and_one_cpu_node():
    spec = clusterfile.load(os.path.join(REPO, "tests", "clusters", "default.yaml"))
    gpu = [n for n in spec["nodes"] if n["gpus"]]
    assert len(spec["nodes"]) == 3 and len(gpu) == 2
    h100 = next(n for n in gpu if n["gpus"]["model"] == "NVIDIA-H100-80GB-HBM3")
    l40s = next(n for n in gpu if n["gpus"]["model"] == "NVIDIA-L40S")
    assert h100["gpus"]["mig_capable"] and h100["host_driver"]
    assert not l40s["gpus"]["mig_capable"] and l40s["host_driver"] is None
    assert spec["crds"][0].endswith(os.path.join("shared", "upstream", "gpu-operator", "crds",
                                                 "nvidia.com_clusterpolicies.yaml"))


def test_defaults_are_fast_and_overridable():
    spec = validate({"nodes": ["n1"], "timings": {"pod_start": 0.5}})
    assert spec["timings"]["pod_start"] == 0.5
    assert all(v <= 0.5 for v in spec["timings"].values())
    node = spec["nodes"][0]
    assert node["gpus"] is None and node["host_driver"] is None
    assert node["cpu"] == "32" and node["pods"] == 110


def test_relative_paths_resolve_against_the_file_folder(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("crds: [crds/x.yaml]\nmig_parted_config: mig.yaml\nnodes: [{name: a}]\n")
    spec = clusterfile.load(str(f))
    assert spec["crds"] == [str(tmp_path / "crds" / "x.yaml")]
    assert spec["mig_parted_config"] == str(tmp_path / "mig.yaml")


@pytest.mark.parametrize("data,field", [
    ({}, "nodes"),
    ({"nodes": []}, "nodes"),
    ({"nodes": [{"name": "Bad_Name"}]}, "nodes[0].name"),
    ({"nodes": [{"name": "a"}, {"name": "a"}]}, "nodes[1].name"),
    ({"nodes": [{"name": "a", "gpus": {"count": 1}}]}, "nodes[0].gpus.model"),
    ({"nodes": [{"name": "a", "gpus": {"model": "NVIDIA-L40S", "count": 0}}]}, "nodes[0].gpus.count"),
    ({"nodes": [{"name": "a", "gpus": {"model": "NVIDIA-L40S", "mig_capable": True}}]},
     "nodes[0].gpus.mig_capable"),
    ({"nodes": [{"name": "a", "host_driver": "latest"}]}, "nodes[0].host_driver"),
    ({"nodes": [{"name": "a", "host_toolkit": True}]}, "nodes[0].host_toolkit"),
    ({"nodes": [{"name": "a", "taints": [{"key": "k", "effect": "Sometimes"}]}]}, "nodes[0].taints[0]"),
    ({"nodes": [{"name": "a", "colour": "red"}]}, "nodes[0]"),
    ({"nodes": ["a"], "faults": {"operator_validator_crashloop": ["b"]}},
     "faults.operator_validator_crashloop"),
    ({"nodes": ["a"], "faults": {"explode": True}}, "faults.explode"),
    ({"nodes": ["a"], "timings": {"pod_start": -1}}, "timings.pod_start"),
    ({"nodes": ["a"], "timings": {"warp": 1}}, "timings.warp"),
    ({"nodes": ["a"], "nfd": "maybe"}, "nfd"),
    ({"nodes": ["a"], "registries": "registry.local"}, "registries"),
    ({"nodes": ["a"], "extra": 1}, "unknown key"),
])
def test_mistakes_name_the_field(data, field):
    with pytest.raises(ClusterFileError) as err:
        validate(data)
    assert field in str(err.value)
