from ansible_collections.skaffon.gpu_platform.plugins.module_utils import upstream


def test_quota_key_prefix_is_the_enforced_one():
    assert upstream.QUOTA_ENFORCED_PREFIX + upstream.GPU_RESOURCE == "requests.nvidia.com/gpu"


def test_ready_reasons_that_serve_no_gpu():
    assert upstream.REASON_RECONCILED not in upstream.READY_BUT_NO_GPU_REASONS
    assert set(upstream.READY_BUT_NO_GPU_REASONS) == {"NFDLabelsMissing", "NoGPUNodes"}
