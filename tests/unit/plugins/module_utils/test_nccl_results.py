"""nccl_results: figures and failures from real nccl-tests outputs.

Fixtures: tests/unit/fixtures/nccl (real outputs, SOURCES.md says where from). Texts built here from a
fixture (launcher prefixes, a warning line added) are marked *assembled*; rows built from nccl-tests'
own printf formats (src/util.cu) are marked as such.
"""
import glob
import os

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.skaffon.gpu_platform.plugins.filter.nccl_results import FilterModule
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.workload import nccl
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.workload.nccl import parse, strip_prefix

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.normpath(os.path.join(HERE, "..", "..", "fixtures", "nccl"))
FILTER = FilterModule().filters()["nccl_results"]


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def all_fixtures():
    return sorted(os.path.basename(path) for path in glob.glob(os.path.join(FIXTURES, "*.txt")))


def half(time_us, algbw, busbw, wrong):
    return {"time_us": time_us, "algbw": algbw, "busbw": busbw, "wrong": wrong}


@pytest.mark.parametrize("name", all_fixtures())
def test_every_fixture_is_named_in_sources_and_parses(name):
    assert "`%s`" % name in fixture("SOURCES.md")
    result = parse(fixture(name))
    assert set(result) == {"ranks", "rows", "avg_busbw", "out_of_bounds", "wrong_total", "wrong_kind", "errors",
                           "warnings", "complete", "nccl_version", "tests_version"}
    # a run that did not reach its summary always says why
    assert result["complete"] or result["errors"]


# --- layouts ----------------------------------------------------------------------------------------

def test_newest_layout_behind_open_mpi_tag_output():
    result = parse(fixture("all_reduce__tests-2.18__ompi-tag-output__2-ranks.txt"))
    assert result["tests_version"] == "2.18.0"
    assert result["ranks"] == [
        {"rank": 0, "host": "lab", "device": 0, "gpu": "NVIDIA GeForce RTX 5090", "bus_id": "0000:02:00", "pid": 2994447},
        {"rank": 1, "host": "lab", "device": 0, "gpu": "NVIDIA GeForce RTX 5090", "bus_id": "0000:02:00", "pid": 2994448},
    ]
    assert len(result["rows"]) == 8
    assert result["rows"][5] == {"size": 33554432, "count": 8388608, "type": "float", "redop": "sum", "root": -1,
                                 "out_of_place": half(14977.1, 2.24, 2.24, 0), "in_place": half(14863.2, 2.26, 2.26, 0)}
    assert result["avg_busbw"] == 1.57614
    assert result["out_of_bounds"] == 0
    assert result["wrong_total"] == 0 and result["wrong_kind"] == "count"
    assert result["complete"] is True
    assert result["errors"] == [] and result["warnings"] == []


def test_multi_node_h100_two_hosts():
    result = parse(fixture("all_reduce__bdf__16-ranks-2-hosts__h100.txt"))
    assert len(result["ranks"]) == 16
    assert [rank["host"] for rank in result["ranks"]] == ["ztan-mig-235z"] * 8 + ["ztan-mig-gq73"] * 8
    assert result["ranks"][9] == {"rank": 9, "host": "ztan-mig-gq73", "device": 1, "gpu": "NVIDIA H100 80GB HBM3",
                                  "bus_id": "0000:05:00", "pid": 6734}
    assert len(result["rows"]) == 31
    assert result["rows"][-1] == {"size": 8589934592, "count": 2147483648, "type": "float", "redop": "sum", "root": -1,
                                  "out_of_place": half(47535.0, 180.71, 338.82, 0), "in_place": half(47743.0, 179.92, 337.35, 0)}
    assert result["avg_busbw"] == 70.742
    assert result["complete"] is True and result["errors"] == []


def test_ray_and_tag_output_prefixes_on_every_line():
    result = parse(fixture("all_gather__ray-and-ompi-tag-prefix__16-ranks-2-hosts.txt"))
    assert sorted({rank["host"] for rank in result["ranks"]}) == ["nc-d87e1263-head", "nc-d87e1263-worker1"]
    assert len(result["ranks"]) == 16 and result["ranks"][15]["bus_id"] == "0000:cc:00"
    assert len(result["rows"]) == 24
    assert result["rows"][22] == {"size": 4294967296, "count": 67108864, "type": "float", "redop": "none", "root": -1,
                                  "out_of_place": half(12416.0, 345.92, 324.3, 0), "in_place": half(12133.0, 354.0, 331.87, 0)}
    assert result["avg_busbw"] == 122.073
    assert result["complete"] is True and result["errors"] == []


def test_error_column_layout_two_hosts_with_nccl_info_inside_the_table():
    result = parse(fixture("all_reduce__error-column__2-hosts__nccl-2.11.txt"))
    assert [(rank["rank"], rank["host"], rank["pid"]) for rank in result["ranks"]] == [
        (0, "ip-10-0-139-244", 1465), (1, "ip-10-0-142-242", 46)]
    assert result["ranks"][0]["gpu"] == "NVIDIA A10G" and result["ranks"][0]["bus_id"] == "0x00"
    assert result["nccl_version"] == "2.11.4+cuda11.4"
    assert len(result["rows"]) == 25
    # no root column in this layout; "error" is the largest deviation, not a count
    assert result["rows"][20] == {"size": 8388608, "count": 2097152, "type": "float", "redop": "sum", "root": None,
                                  "out_of_place": half(12668.0, 0.66, 0.66, 0.0), "in_place": half(11719.0, 0.72, 0.72, 0.0)}
    assert result["wrong_kind"] == "deviation" and result["wrong_total"] is None
    assert result["avg_busbw"] == 0.300212
    assert result["complete"] is True and result["errors"] == []


def test_slurm_label_prefix_rccl_tests():
    result = parse(fixture("all_reduce__slurm-label__rccl-tests.txt"))
    assert len(result["rows"]) == 17
    assert result["rows"][0]["size"] == 65536 and result["rows"][0]["out_of_place"] == half(78.91, 0.83, 1.61, 0)
    assert result["avg_busbw"] == 43.7269
    assert result["complete"] is True and result["errors"] == []


def test_check_0_gives_no_wrong_counts():
    result = parse(fixture("all_reduce__check-0__wrong-n-a__kubectl-logs.txt"))
    assert result["ranks"] == []
    assert len(result["rows"]) == 14
    assert result["rows"][10]["in_place"] == half(38777.0, 27.69, 51.92, None)
    assert all(row["out_of_place"]["wrong"] is None and row["in_place"]["wrong"] is None for row in result["rows"])
    assert result["wrong_total"] is None
    assert result["avg_busbw"] == 49.6371
    assert result["complete"] is True and result["errors"] == []


def test_root_column_without_redop_and_harmless_warns_of_a_cut_log():
    result = parse(fixture("broadcast__root-without-redop__check-0__excerpt.txt"))
    assert result["rows"] == [{"size": 8, "count": 2, "type": "float", "redop": None, "root": 0,
                               "out_of_place": half(45.82, 0.0, 0.0, None), "in_place": half(38.17, 0.0, 0.0, None)}]
    assert result["nccl_version"] == "2.9.6+cuda11.2"
    assert result["complete"] is False
    # the log stops after one row, so the WARN lines are reported with the cut
    assert result["errors"] == [
        "NCCL WARN (line 7): v100-gpu-1:14926:14926 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1] [seen 2 times]",
        "the table ends after 1 rows without the '# Avg bus bandwidth' summary (the run stopped or the log is cut); last row (line 15): "
        "8             2   float       0    45.82    0.00    0.00    N/A    38.17    0.00    0.00    N/A",
    ]


def test_2017_layout_rank_lines_and_failure():
    result = parse(fixture("all_reduce__2017-layout__nccl-failure.txt"))
    assert len(result["ranks"]) == 8
    assert result["ranks"][7] == {"rank": 7, "host": "node03", "device": 7, "gpu": "Tesla P100-PCIE-16GB", "bus_id": "0x00", "pid": None}
    assert result["rows"] == [] and result["complete"] is False
    assert result["errors"] == ["NCCL failure (line 15): NCCL failure all_reduce.cu:95 'unhandled cuda error'",
                                "no result rows: the test printed no table"]


def test_2017_layout_time_is_milliseconds():
    # row built from the 2017 printf formats ("%12li  %12li  %6s  %6s" and "  %7.3f  %5.2f  %5.2f  %7.0le") under the real header
    header = fixture("all_reduce__2017-layout__nccl-failure.txt").splitlines()[13]
    row = "%12li  %12li  %6s  %6s" % (8, 2, "float", "sum") + ("  %7.3f  %5.2f  %5.2f  %7.0e" % (0.025, 0.0, 0.0, 0.0)) * 2
    result = parse(header + "\n" + row + "\n Out of bounds values : 0 OK\n Avg bus bandwidth    : 0.5 \n")
    assert result["rows"][0]["out_of_place"] == half(25.0, 0.0, 0.0, 0.0)
    assert result["wrong_kind"] == "deviation"
    assert result["avg_busbw"] == 0.5 and result["out_of_bounds"] == 0 and result["complete"] is True


def test_per_iteration_columns_and_timestamp():
    # rows built from nccl-tests' current printf formats (writeBenchmarkLinePreamble, writeBenchmarkLineBody,
    # writePerIterReport, writeTimestamp); no public log with -I 1 was found
    preamble = "%12li  %12li  %8s  %6s  %6s" % (1048576, 262144, "float", "sum", "%6i" % -1)
    body = "  %7s  %6s  %6s  %6g" % ("4366.46", "0.24", "0.24", 0.0)
    per_iter = "  %7s  %7s  %7s  %7s" % ("4360.10", "4390.55", "4388.02", "0.21")
    stamp = "%21s" % "2026-03-11 12:00:00"
    result = parse(preamble + body + per_iter + body + per_iter + stamp + "\n# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 0.24 \n")
    row = result["rows"][0]
    assert row["timestamp"] == "2026-03-11 12:00:00"
    assert row["out_of_place"]["iterations"] == {"min_us": 4360.1, "max_us": 4390.55, "p99_us": 4388.02, "cv_pct": 0.21}
    assert row["in_place"]["time_us"] == 4366.46 and row["in_place"]["wrong"] == 0
    result = parse(preamble + body + body + stamp + "\n")
    assert result["rows"][0]["timestamp"] == "2026-03-11 12:00:00" and "iterations" not in result["rows"][0]["in_place"]


# --- failures ---------------------------------------------------------------------------------------

def test_wrong_results_two_hosts():
    result = parse(fixture("all_reduce__wrong-results__2-hosts__oob-108.txt"))
    assert [rank["host"] for rank in result["ranks"]] == ["worker1", "worker2"]
    assert len(result["rows"]) == 27
    assert result["rows"][0]["out_of_place"] == half(21.33, 0.0, 0.0, 4)
    # %g: the count as printed
    assert result["rows"][-1]["in_place"] == half(73092.0, 7.35, 7.35, 268435000)
    assert result["rows"][18]["out_of_place"]["wrong"] == 1048580
    assert result["wrong_total"] == 1073741424
    assert result["out_of_bounds"] == 108
    assert result["avg_busbw"] == 3.02663
    assert result["complete"] is True
    assert result["errors"] == [
        "wrong results in 27 of 27 rows, 1073741424 wrong elements in all; first (line 10): "
        "8             2     float     sum      -1    21.33    0.00    0.00      4    20.55    0.00    0.00      4",
        "out of bounds values (line 37): # Out of bounds values : 108 FAILED",
    ]


def test_nccl_warn_and_failure_without_rows_multi_node():
    result = parse(fixture("all_reduce__nccl-warn__16-ranks-2-hosts__no-rows.txt"))
    assert len(result["ranks"]) == 16
    assert {rank["host"] for rank in result["ranks"]} == {"h100-2", "h100-4"}
    assert result["ranks"][12]["bus_id"] == "0003:00:01" and result["ranks"][12]["pid"] == 739790
    assert result["nccl_version"] == "2.18.3+cuda12.2"
    assert result["rows"] == [] and result["complete"] is False and result["avg_busbw"] is None
    assert result["errors"] == [
        "NCCL WARN (line 84): h100-4:739790:739878 [4] misc/socket.cc:397 NCCL WARN Net : connecting to address  with family 33621 "
        "is neither AF_INET(2) nor AF_INET6(10) [seen 8 times]",
        "NCCL failure (line 103): h100-4: Test NCCL failure common.cu:1057 'internal error / ' [seen 8 times]",
        "MPI abort (line 174): Primary job  terminated normally, but 1 process returned",
        "no result rows: the test printed no table",
    ]


def test_nccl_warn_without_any_table():
    result = parse(fixture("all_reduce__nccl-warn__gpu-bind__no-table.txt"))
    assert result["ranks"] == [] and result["rows"] == []
    assert result["errors"] == [
        "NCCL WARN (line 2): my-node:7039:7435 [0] misc/nvmlwrap.cc:183 NCCL WARN nvmlDeviceGetHandleByPciBusId() failed: Not Found [seen 4 times]",
        "NCCL failure (line 24): my-node: Test NCCL failure common.cu:1126 'unhandled system error (run with NCCL_DEBUG=INFO for details) / ' "
        "[seen 4 times]",
        "no result rows: the test printed no table",
    ]


@pytest.mark.parametrize("line,kind", [
    ("Test CUDA failure common.cu:730 'unknown error'", "CUDA failure"),                             # NVIDIA/nccl-tests#66
    ("Test CUDA failure common.cu:986 'invalid device ordinal'", "CUDA failure"),                    # NVIDIA/nccl-tests#300
    ("c2211f46f318: Test NCCL failure common.cu:1005 'unhandled CUDA error'", "NCCL failure"),        # NVIDIA/nccl-tests#280
    ("NCCL failure common.cu:908 'unhandled cuda error'.", "NCCL failure"),                          # NVIDIA/nccl-tests#6 (2018)
])
def test_single_failure_lines_users_report(line, kind):
    # real lines quoted in the issues named; each is the whole output the user showed
    assert parse(line + "\n")["errors"] == ["%s (line 1): %s" % (kind, line), "no result rows: the test printed no table"]


def test_failure_right_after_the_header():
    result = parse(fixture("all_reduce__header-then-nccl-failure__2-gpus.txt"))
    assert [rank["device"] for rank in result["ranks"]] == [0, 1]
    assert result["rows"] == []
    assert result["errors"] == [
        "NCCL failure (line 10): GENOA-06: Test NCCL failure common.cu:392 'unhandled cuda error (run with NCCL_DEBUG=INFO for details) / '",
        "no result rows: the test printed no table",
    ]


def test_truncated_table():
    result = parse(fixture("all_reduce__truncated__failure-after-rows__excerpt.txt"))
    assert len(result["rows"]) == 5
    assert result["rows"][4]["size"] == 17179869184 and result["rows"][4]["in_place"] == half(93420.0, 183.9, 367.44, 0)
    assert result["avg_busbw"] is None and result["complete"] is False
    assert result["errors"] == [
        "NCCL failure (line 7): HCA-128: Test NCCL failure common.cu:1204 'unhandled cuda error (run with NCCL_DEBUG=INFO for details) / ' "
        "[seen 4 times]",
        "the table ends after 5 rows without the '# Avg bus bandwidth' summary (the run stopped or the log is cut); last row (line 6): "
        "17179869184    4294967296     float     sum      -1    93457  183.83  367.29      0    93420  183.90  367.44      0",
    ]


def test_cut_log_with_only_relay_lines_still_fails():
    # *assembled*: the truncated fixture without its "Test NCCL failure" lines
    text = "\n".join(line for line in fixture("all_reduce__truncated__failure-after-rows__excerpt.txt").splitlines()
                     if "Test NCCL failure" not in line)
    assert parse(text)["errors"][0] == "test failure (line 7): .. HCA-128 pid 757466: Test failure common.cu:915 [seen 4 times]"


def test_avg_busbw_0_single_gpu():
    result = parse(fixture("all_reduce__error-column__1-gpu__avg-busbw-0.txt"))
    assert len(result["ranks"]) == 1 and len(result["rows"]) == 25
    assert result["rows"][20]["in_place"] == half(0.58, 14586.35, 0.0, 0.0)
    assert result["avg_busbw"] == 0
    assert result["complete"] is True
    assert result["errors"] == ["average bus bandwidth is 0 (one rank: no data crosses a link) (line 35): # Avg bus bandwidth    : 0"]


def test_avg_busbw_0_build_without_mpi():
    result = parse(fixture("all_reduce__not-mpi-build__rows-only__avg-busbw-0.txt"))
    assert result["ranks"] == [] and len(result["rows"]) == 24
    assert result["rows"][23] == {"size": 2147483648, "count": 536870912, "type": "float", "redop": "sum", "root": -1,
                                  "out_of_place": half(8645.7, 248.39, 0.0, 0), "in_place": half(0.31, 7017920.42, 0.0, 0)}
    assert result["avg_busbw"] == 0
    assert result["errors"] == ["average bus bandwidth is 0 (every process ran alone: nccl-tests built without MPI=1?) (line 27): "
                                "# Avg bus bandwidth    : 0"]


def test_same_rank_from_two_processes():
    result = parse(fixture("all_reduce__not-mpi-build__rank-0-twice__excerpt.txt"))
    assert [(rank["rank"], rank["host"]) for rank in result["ranks"]] == [(0, "ip-172-31-20-228"), (0, "ip-172-31-22-230")]
    assert result["errors"] == [
        "rank 0 printed by 2 processes (ip-172-31-20-228, ip-172-31-22-230): each ran alone, nccl-tests built without MPI=1?",
        "no result rows: the test printed no table",
    ]


def test_avg_busbw_below_nccl_tests_min_bw():
    # *assembled*: the real 16-rank table with the FAILED mark nccl-tests adds below NCCL_TESTS_MIN_BW
    text = fixture("all_reduce__bdf__16-ranks-2-hosts__h100.txt").replace("# Avg bus bandwidth    : 70.742 ", "# Avg bus bandwidth    : 70.742 FAILED")
    result = parse(text)
    assert result["avg_busbw"] == 70.742
    assert result["errors"] == ["average bus bandwidth below NCCL_TESTS_MIN_BW (line 56): # Avg bus bandwidth    : 70.742 FAILED"]


def test_warn_lines_of_a_clean_run_are_warnings():
    # *assembled*: the real harmless WARN line of NVIDIA/nccl-tests#82 in front of a real clean run
    warn = fixture("broadcast__root-without-redop__check-0__excerpt.txt").splitlines()[6]
    result = parse(warn + "\n" + fixture("all_reduce__bdf__16-ranks-2-hosts__h100.txt"))
    assert result["errors"] == []
    assert result["warnings"] == ["NCCL WARN (line 1): " + warn]


# --- launcher and log-reader prefixes -------------------------------------------------------------

@pytest.mark.parametrize("prefix", [
    "[pod/nccl-allreduce-launcher-x7k2p/mpi-launcher] ",          # kubectl logs --prefix
    "2026-03-11T12:00:00.123456789Z ",                            # kubectl logs --timestamps
    "2026-03-11T12:00:00.123456789Z [1,0]<stdout>:",               # both, Open MPI 4 tag
    "[1,0]<stdout>: ",                                             # Open MPI 5 / PRRTE tag
    "[0] ",                                                        # MPICH -prepend-rank
    "12: ",                                                        # srun --label, two digits
    "ztan-mig-235z: ",                                             # pdsh
    "Thu Aug 27 01:33:12 2020[1,0]<stdout>:",                      # Open MPI --timestamp-output
])
def test_prefixed_lines_read_like_plain_ones(prefix):
    # *assembled*: every line of a real run behind a prefix the tools print
    plain = fixture("all_reduce__bdf__16-ranks-2-hosts__h100.txt")
    prefixed = "".join(prefix + line + "\n" for line in plain.splitlines())
    assert parse(prefixed) == parse(plain)


def test_prefix_stripping_keeps_nccl_and_nccl_tests_host_heads():
    assert strip_prefix("h100-4:739790:739878 [4] misc/socket.cc:397 NCCL WARN Net") == "h100-4:739790:739878 [4] misc/socket.cc:397 NCCL WARN Net"
    assert strip_prefix("HCA-128: Test NCCL failure common.cu:1204 'x'") == "HCA-128: Test NCCL failure common.cu:1204 'x'"
    assert strip_prefix("benchmark: all_reduce_perf, mask: 0x0, run 1/1") == "benchmark: all_reduce_perf, mask: 0x0, run 1/1"
    assert strip_prefix("(head, rank=0, pid=3808) [1,0]<stdout>:#  Rank  0") == "#  Rank  0"


def test_windows_line_ends():
    plain = fixture("all_reduce__tests-2.18__ompi-tag-output__2-ranks.txt")
    assert parse(plain.replace("\n", "\r\n")) == parse(plain)


def test_empty_text():
    result = parse("")
    assert result["rows"] == [] and result["complete"] is False
    assert result["errors"] == ["no result rows: the test printed no table"]


# --- the filter --------------------------------------------------------------------------------------

def test_filter_returns_the_figures():
    assert FILTER(fixture("all_reduce__bdf__16-ranks-2-hosts__h100.txt"))["avg_busbw"] == 70.742


@pytest.mark.parametrize("value", [None, 42, ["# Avg bus bandwidth : 1"], {"stdout": "x"}, b"# Avg bus bandwidth : 1"])
def test_filter_refuses_what_is_not_text(value):
    with pytest.raises(AnsibleFilterError) as err:
        FILTER(value)
    assert repr(value) in str(err.value)
    assert "log of an nccl-tests run as one string" in str(err.value)


def test_parse_refuses_what_is_not_text():
    with pytest.raises(TypeError, match="log text of an nccl-tests run"):
        nccl.parse(None)
