"""workload/report.py and its filters: the workload acceptance report and junit.xml."""
import xml.etree.ElementTree as ET

from ansible_collections.skaffon.gpu_platform.plugins.filter.workload_acceptance_report import FilterModule
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import results
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.workload import report

FILTERS = FilterModule().filters()
RESULTS = [
    {"id": "queued-job", "title": "Training job admitted through the team's queue", "status": "PASS",
     "summary": "admitted after 2.5 s by KAI queue team-vision", "evidence": ["pod wla-train-0 on gpu-h100-1"],
     "figures": {"queue_wait_seconds": 2.5, "admission": "Scheduled"}, "seconds": 3.04},
    {"id": "nccl-allreduce", "title": "All-reduce bus bandwidth across the nodes (nccl-tests)", "status": "FAIL",
     "summary": "avg busbw 45.2 GB/s below 0.8 x 180 GB/s: slow node gpu-h100-1 | pairs", "evidence": [],
     "figures": {"avg_busbw_gbps": 45.2, "expected_busbw_gbps": 180.0, "busbw_by_size": {"8G": 45.0}},
     "seconds": 10.0},
    {"id": "cost-baseline", "title": "Cost per accepted unit against the baseline", "status": "SKIP",
     "summary": "needs training-window, which failed", "evidence": [], "figures": {}, "seconds": 0},
]
META = {"team": "team-vision", "pool": "pool_h100_nvlink_training", "cluster": "example", "date": "2026-12-02 08:00 UTC",
        "queue_backend": "kai", "kubernetes_version": "v1.35.0-simcluster", "simulated": True}


def test_markdown_header_banner_table_and_sections():
    text = FILTERS["workload_acceptance_markdown"](RESULTS, META)
    assert text.startswith("# Workload acceptance: team-vision on pool_h100_nvlink_training\n")
    assert "**Figures from a simulated cluster.**" in text and "v1.35.0-simcluster" in text
    assert "| Queue backend | kai |" in text
    assert "Result: 1 passed, 1 failed, 1 skipped of 3 steps." in text
    assert "| 2 | `nccl-allreduce` All-reduce bus bandwidth across the nodes (nccl-tests) | **FAIL** | " \
           "avg busbw 45.2 GB/s below 0.8 x 180 GB/s: slow node gpu-h100-1 \\| pairs | 10.0 |" in text
    assert "## 1. Training job admitted through the team's queue (`queued-job`): PASS" in text
    assert "| queue_wait_seconds | 2.5 |" in text and "| expected_busbw_gbps | 180 |" in text
    assert '| busbw_by_size | {"8G": 45.0} |' in text
    assert "- pod wla-train-0 on gpu-h100-1" in text and "- (no evidence recorded)" in text
    assert text == FILTERS["workload_acceptance_markdown"](RESULTS, META)   # deterministic


def test_markdown_without_simulation_has_no_banner():
    text = report.markdown(RESULTS, dict(META, simulated=False, kubernetes_version="v1.31.4"))
    assert "simulated" not in text
    assert FILTERS["workload_acceptance_markdown"]([], None).startswith("# Workload acceptance\n")


def test_junit_cases_properties_and_outcomes():
    root = ET.fromstring(FILTERS["workload_acceptance_junit"](RESULTS, META))
    assert root.get("tests") == "3" and root.get("failures") == "1" and root.get("skipped") == "1"
    suite = root.find("testsuite")
    assert suite.get("name") == "workload acceptance example team-vision pool_h100_nvlink_training"
    props = dict((p.get("name"), p.get("value")) for p in suite.find("properties"))
    assert props["simulated"] == "true" and props["team"] == "team-vision"
    cases = dict((c.get("name"), c) for c in suite.findall("testcase"))
    assert list(cases) == ["queued-job", "nccl-allreduce", "cost-baseline"]
    assert cases["nccl-allreduce"].find("failure").get("message").startswith("avg busbw 45.2")
    assert cases["cost-baseline"].find("skipped").get("message") == "needs training-window, which failed"
    figures = dict((p.get("name"), p.get("value")) for p in cases["queued-job"].find("properties"))
    assert figures == {"admission": "Scheduled", "queue_wait_seconds": "2.5"}


def test_figure_formatting():
    assert [results.figure(v) for v in (1.0, 0.12345, 3, True, None, -0.0001, "x")] == \
        ["1", "0.123", "3", "yes", "-", "0", "x"]
