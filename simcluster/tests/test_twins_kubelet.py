"""Kubelet twin: pod lifecycle, CUDA sample logs, image pulls."""
import pytest

from simcluster.twins.testkit import TwinCluster, pod, status_word

CUDA_IMAGE = "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0"


@pytest.fixture(params=["fake", "real"])
def cluster(request):
    with TwinCluster("default.yaml", store=request.param) as c:
        yield c


def test_plain_pod_goes_running_and_ready(cluster):
    c = cluster
    c.store.create("pods", pod("web"))
    p = c.wait(lambda: status_word(c.pod("default", "web")) == "Running" and c.pod("default", "web"))
    st = p["status"]
    assert st["phase"] == "Running" and st["podIP"] and st["hostIP"]
    assert st["containerStatuses"][0]["ready"] is True
    assert {x["type"]: x["status"] for x in st["conditions"]}["Ready"] == "True"


def test_init_containers_complete_before_the_main_container(cluster):
    c = cluster
    c.store.create("pods", pod("withinit", initContainers=[{"name": "setup", "image": "busybox:1.36"}]))
    p = c.wait(lambda: status_word(c.pod("default", "withinit")) == "Running" and c.pod("default", "withinit"))
    init = p["status"]["initContainerStatuses"][0]
    assert init["state"]["terminated"]["reason"] == "Completed"


def test_cuda_vectoradd_on_a_gpu_node_passes(cluster):
    c = cluster
    c.install_operator()
    c.wait(lambda: c.allocatable("gpu-l40s-1") == "4")
    c.store.create("pods", pod("cuda-vectoradd", image=CUDA_IMAGE, gpus=1, restartPolicy="OnFailure"))
    p = c.wait(lambda: status_word(c.pod("default", "cuda-vectoradd")) == "Completed"
               and c.pod("default", "cuda-vectoradd"))
    assert p["status"]["phase"] == "Succeeded"
    log = c.logs("default", "cuda-vectoradd", "main")
    assert log.rstrip().endswith("Test PASSED")
    assert "[Vector addition of 50000 elements]" in log


def test_cuda_sample_without_a_gpu_request_fails(cluster):
    c = cluster
    c.store.create("pods", pod("nogpu", image=CUDA_IMAGE, restartPolicy="Never"))
    p = c.wait(lambda: (c.pod("default", "nogpu").get("status") or {}).get("phase") == "Failed"
               and c.pod("default", "nogpu"))
    assert status_word(p) == "Error"
    assert "no CUDA-capable device is detected" in c.logs("default", "nogpu", "main")


def test_cuda_sample_waits_while_no_gpu_is_allocatable(cluster):
    c = cluster
    c.store.create("pods", pod("early", image=CUDA_IMAGE, gpus=1))
    c.settle()
    assert c.pod("default", "early")["status"]["phase"] == "Pending"
    c.install_operator()
    c.wait(lambda: c.pod("default", "early")["status"].get("phase") == "Succeeded", timeout=15)


@pytest.mark.parametrize("store", ["fake", "real"])
def test_air_gapped_cluster_cannot_pull_public_images(store):
    with TwinCluster("airgapped.yaml", store=store) as c:
        c.store.create("pods", pod("public", image="nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04"))
        c.store.create("pods", pod("hub", image="busybox:1.36"))
        c.store.create("pods", pod("mirror", image="registry.local:5000/library/busybox:1.36"))
        c.wait(lambda: status_word(c.pod("default", "mirror")) == "Running")
        c.wait(lambda: status_word(c.pod("default", "public")) == "ImagePullBackOff")
        c.wait(lambda: status_word(c.pod("default", "hub")) == "ImagePullBackOff")
        msg = c.pod("default", "public")["status"]["containerStatuses"][0]["state"]["waiting"]["message"]
        assert "nvcr.io" in msg and "no such host" in msg
        failed = c.wait(lambda: c.events("Failed", "public"))
        assert failed and "failed to pull and unpack image" in failed[0]["message"]


def test_err_image_pull_comes_before_the_backoff():
    with TwinCluster("airgapped.yaml", timings={"image_pull_backoff": 0.5}) as c:
        c.store.create("pods", pod("public", image="docker.io/library/busybox:1.36"))
        c.wait(lambda: status_word(c.pod("default", "public")) == "ErrImagePull")
        c.wait(lambda: status_word(c.pod("default", "public")) == "ImagePullBackOff")


def test_the_first_pull_fails_before_any_back_off_however_late_the_kubelet_looks():
    """A kubelet pass that comes after the back-off delay (a loaded machine; here a zero delay)
    still shows ErrImagePull and records the Failed event first, as the real first pull does."""
    with TwinCluster("airgapped.yaml", timings={"image_pull_backoff": 0.0}) as c:
        words = []
        c.store.subscribe(lambda ev, res, obj: words.append(status_word(obj)) if res == "pods" else None)
        c.store.create("pods", pod("public", image="docker.io/library/busybox:1.36"))
        c.wait(lambda: status_word(c.pod("default", "public")) == "ImagePullBackOff")
        assert "ErrImagePull" in words
        assert words.index("ErrImagePull") < words.index("ImagePullBackOff")
        failed = c.wait(lambda: c.events("Failed", "public"))
        assert "failed to pull and unpack image" in failed[0]["message"]


def test_behaviour_annotation_makes_a_container_crash(cluster):
    c = cluster
    p = pod("crashy")
    p["metadata"]["annotations"] = {"simcluster.skaffon.io/behaviour": "crash"}
    c.store.create("pods", p)
    got = c.wait(lambda: status_word(c.pod("default", "crashy")) == "CrashLoopBackOff"
                 and c.pod("default", "crashy"))
    cs = got["status"]["containerStatuses"][0]
    assert cs["restartCount"] >= 1 and cs["lastState"]["terminated"]["exitCode"] == 1


def test_logs_go_away_with_the_pod(cluster):
    c = cluster
    c.store.create("pods", pod("gone", image=CUDA_IMAGE, restartPolicy="Never"))
    c.wait(lambda: c.logs("default", "gone", "main"))
    c.store.delete("pods", "default", "gone")
    c.store.create("pods", pod("other"))
    c.wait(lambda: c.logs("default", "gone", "main") is None)


def test_pod_bound_by_hand_beyond_the_node_gpus_is_rejected_by_the_kubelet(cluster):
    c = cluster
    c.store.create("pods", pod("pinned", gpus=1, nodeName="gpu-l40s-1"))
    got = c.wait(lambda: (c.pod("default", "pinned").get("status") or {}).get("phase") == "Failed"
                 and c.pod("default", "pinned"))
    assert status_word(got) == "OutOfnvidia.com/gpu"
    assert got["status"]["message"].startswith(
        "Pod was rejected: Node didn't have enough resource: nvidia.com/gpu, requested: 1")


def test_pod_ips_are_never_shared_by_two_live_pods():
    """host-local IPAM per node: 253 addresses, held until the pod is gone, round-robin."""
    from simcluster.twins.pod_ips import PodIPs
    ips = PodIPs()
    live = {}
    for i in range(1000):                      # churn: 4 pods stay, every other one goes
        uid = "u%d" % i
        live[uid] = ips.ip(uid, "gpu-1", 1, list)
        assert live[uid] is not None
        if i % 5:
            ips.release(uid)
            del live[uid]
    assert len(set(live.values())) == len(live) == 200
    assert all(ip.startswith("10.244.1.") for ip in live.values())
    assert ips.ip("u0", "gpu-1", 1, list) == live["u0"]          # stable for the pod's life
    full = PodIPs()
    got = {full.ip("p%d" % i, "n", 0, list) for i in range(253)}
    assert len(got) == 253 and "10.244.0.1" not in got and "10.244.0.255" not in got
    assert full.ip("one-more", "n", 0, list) is None             # the range is full
    full.release("p7")
    assert full.ip("one-more", "n", 0, list) == "10.244.0.9"


def test_pod_ips_skip_what_existing_pods_show_and_scale_to_1000_nodes():
    import time as _time
    from simcluster.twins.pod_ips import PodIPs
    before = [{"metadata": {"uid": "old%d" % i}, "status": {"podIP": "10.244.3.%d" % i}} for i in range(2, 12)]
    ips = PodIPs()
    assert ips.ip("new", "gpu-3", 3, lambda: before) == "10.244.3.12"   # a restarted simulator
    start = _time.process_time()          # CPU time: other processes' load does not count
    got = {ips.ip("p%d" % i, "node-%d" % (i % 1000), 1 + i % 1000, list) for i in range(7000)}
    assert len(got) == 7000
    assert "10.247.232.2" in got                                    # node 1000 has its own /24
    assert _time.process_time() - start < 2.0
