"""nccl-tests twin: `all_reduce_perf` under mpirun, one pod per node, as multi-node runs do it.

A kubelet hook for pods whose image repository contains `nccl-tests` (ghcr.io/coreweave/nccl-tests,
nvcr.io/.../nccl-tests, a mirrored copy) and whose command runs `all_reduce_perf`:

- The MPI launcher pattern: the pods of one benchmark are the pods of one Job (Indexed,
  completions = parallelism = node count). All run the same command; it contains `mpirun`, and
  the pod with completion index 0 (annotation batch.kubernetes.io/job-completion-index) is the
  launcher: it waits up to the timing `mpi_launch_timeout` for every other index to be Running
  (the gang; mpirun reaches them over ssh), then writes the whole output to its log and ends
  Completed (exit 0) or Error (the exit code nccl-tests or mpirun gives). The others are workers
  (sshd): Running until the launcher Succeeded, then Completed. A Pending worker has no address:
  the launcher fails with the ssh/ORTE text of Open MPI 4 (`ssh: Could not resolve hostname ...`).
  A pod running all_reduce_perf without mpirun, or outside a Job, runs alone on its own GPUs.
- GPUs: what the NVIDIA runtime gives the container (nvidia_runtime.visible, with the CUDA base
  image's NVIDIA_VISIBLE_DEVICES=all: nccl-tests images are built on nvidia/cuda). A pod that sees
  none fails as nccl-tests does (`Test CUDA failure ... 'no CUDA-capable device is detected'`).
  Each process takes `-g` GPUs (default 1); a pod runs visible // g processes (mpirun -np, when
  given, takes the first np slots in index order); ranks = processes x g.
- Arguments as nccl-tests' src/common.cu reads them (getopt_long "b:e:f:g:c:n:w:o:d:...", sizes
  with K/M/G binary suffixes, defaults 32M..32M, step 1M, float, sum, check 1, 20 iters, 5 warm-up).
- Figures (simulated, not measured): busbw of a size rises to the ring's limit, the slowest
  participant: a node's `fabric.bus_bandwidth_gbps` (times the `nccl_degraded_link` fraction)
  across nodes, its NVLink figure (`gpus.nvlink_bus_bandwidth_gbps`, default by model) within one
  node; algbw = busbw / (2(n-1)/n) (all_reduce.cu AllReduceGetBw), time = latency + size / peak
  algbw, `# Avg bus bandwidth` the mean busbw of every out-of-place and in-place result.
- Fault `nccl_wrong_results`: a participating node corrupts the reduction: #wrong > 0 in every row,
  `# Out of bounds values : N FAILED` and exit code 7 (testNumResults) when checking (-c 1); with
  -c 0 nothing is checked and the run "passes", as it would.
"""

import hashlib
import shlex

from . import nvidia_runtime
from .workloads import pod_index

MARKER = "nccl-tests"
PROGRAM = "all_reduce_perf"
TESTS_VERSION = "2.17.6"
NCCL_CODE = 22703                         # nccl-headers / nccl-library of the image (NCCL 2.27.3)
NCCL_VERSION = "2.27.3+cuda12.9"
SOCKET_FABRIC = {"name": "socket", "bus_bandwidth_gbps": 3.0}   # no fabric: NCCL's TCP sockets
EXIT_CUDA, EXIT_NOT_IMPLEMENTED, EXIT_RESULTS = 2, 5, 7             # testResult_t (common.h)
# all_reduce busbw of one node's GPUs over NVLink/NVSwitch, GB/s; PCIe-only models get PCIe's
NVLINK = {"NVIDIA-H100-80GB-HBM3": 480.0, "NVIDIA-H800-80GB-HBM3": 480.0, "NVIDIA-H200": 480.0,
          "NVIDIA-B200": 800.0, "NVIDIA-A100-SXM4-40GB": 230.0, "NVIDIA-A100-SXM4-80GB": 230.0}
PCIE_BUSBW = 20.0
WORD = {"int8": 1, "uint8": 1, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "half": 2,
        "float": 4, "double": 8, "bfloat16": 2, "f8e4m3": 1, "f8e5m2": 1}
OPS = ("sum", "prod", "max", "min", "avg", "mulsum")
# the short options of src/common.cu that take a value, and the long names of the ones we read
SHORT = set("tgbeifnmwNpIKcodrzyTGCaRxDVJSMu")
LONG = {"nthreads": "t", "ngpus": "g", "minbytes": "b", "maxbytes": "e", "stepbytes": "i",
        "stepfactor": "f", "iters": "n", "agg_iters": "m", "warmup_iters": "w", "check": "c",
        "op": "o", "datatype": "d", "cudagraph": "G"}
SEPARATORS = {";", "&&", "||", "|", "&", "then", "else", "fi", "do", "done"}
BUS_IDS = (0x04, 0x05, 0x0b, 0x0c, 0x84, 0x85, 0x8b, 0x8c)   # an 8-GPU HGX board's PCI buses
DIVIDER = "-" * 74

ORTE_FAILED = """%s
ORTE was unable to reliably start one or more daemons.
This usually is caused by:

* not finding the required libraries and/or binaries on
  one or more nodes. Please check your PATH and LD_LIBRARY_PATH
  settings, or configure OMPI with --enable-orterun-prefix-by-default

* lack of authority to execute on one or more specified nodes.
  Please verify your allocation and authorities.

* the inability to write startup files into /tmp (--tmpdir/orte_tmpdir_base).
  Please check with your sys admin to determine the correct location to use.

*  compilation of the orted with dynamic libraries when static are required
  (e.g., on Cray). Please check your configure cmd line and consider using
  one of the contrib/platform definitions for your system type.

* an inability to create a connection back to mpirun due to a
  lack of common network interfaces and/or no route found between
  them. Please check network connectivity (including firewalls
  and network routing requirements).
%s
""" % (DIVIDER, DIVIDER)
MPI_NONZERO = """%s
Primary job  terminated normally, but 1 process returned
a non-zero exit code. Per user-direction, the job has been aborted.
%s
%s
mpirun detected that one or more processes exited with non-zero status, thus causing
the job to be terminated. The first process to do so was:

  Process name: [[%%d,1],%%d]
  Exit code:    %%d
%s
""" % (DIVIDER, DIVIDER, DIVIDER, DIVIDER)
SSHD_LOG = "Server listening on 0.0.0.0 port 22.\nServer listening on :: port 22.\n"


def is_nccl_tests(image):
    """True for an nccl-tests image: the image's own name (the last path part, without tag or
    digest) contains nccl-tests, wherever it is mirrored."""
    name = (image or "").split("@", 1)[0].rsplit("/", 1)[-1].split(":", 1)[0]
    return MARKER in name.lower()


def words(container):
    """The container's command line as words; `sh -c SCRIPT` is split like the shell would."""
    argv = [str(w) for w in (container.get("command") or []) + (container.get("args") or [])]
    out = []
    for word in argv:
        if any(ch in word for ch in " \n;&|"):
            try:
                lexer = shlex.shlex(word, posix=True, punctuation_chars=";&|")
                lexer.whitespace_split = True
                out += list(lexer)
            except ValueError:
                out += word.split()
        else:
            out.append(word)
    return out


def invocation(container):
    """(mpirun words, all_reduce_perf arguments) of the container's command, or None."""
    argv = words(container)
    for i, word in enumerate(argv):
        if word.rsplit("/", 1)[-1] == PROGRAM:
            start = i
            while start > 0 and argv[start - 1] not in SEPARATORS:
                start -= 1
            end = i + 1
            while end < len(argv) and argv[end] not in SEPARATORS:
                end += 1
            launcher = argv[start:i]
            return (launcher if any(w.rsplit("/", 1)[-1] in ("mpirun", "mpiexec") for w in launcher)
                    else None), argv[i + 1:end]
    return None


def mpirun_np(launcher):
    """The process count mpirun was given (-np/-n/--np/-c), or None."""
    for i, word in enumerate(launcher or []):
        if word in ("-np", "-n", "--np", "-c", "--n") and i + 1 < len(launcher) and launcher[i + 1].isdigit():
            return int(launcher[i + 1])
        if word.startswith("--np=") and word[5:].isdigit():
            return int(word[5:])
    return None


def parsesize(value):
    """common.cu parsesize(): a number with an optional K/M/G (binary) suffix; None when invalid."""
    text = value.strip()
    units = {"k": 1024, "m": 1024 ** 2, "g": 1024 ** 3}
    mult = 1
    if text and text[-1].lower() in units:
        mult, text = units[text[-1].lower()], text[:-1].strip()
    try:
        return int(float(text) * mult)
    except ValueError:
        return None


def _strtol(value, default):
    try:
        return int(value, 0)
    except ValueError:
        return default


def options(args):
    """all_reduce_perf's options as src/common.cu reads them (getopt_long); unknown ones ignored."""
    opts = {"g": 1, "b": 32 * 1024 ** 2, "e": 32 * 1024 ** 2, "i": 1024 ** 2, "f": 1, "n": 20,
            "m": 1, "w": 5, "c": 1, "o": "sum", "d": "float", "G": 0, "t": 1, "notes": [], "error": None}
    i = 0
    while i < len(args):
        word = args[i]
        key = value = None
        if word.startswith("--"):
            name, _, value = word[2:].partition("=")
            key = LONG.get(name)
            if not value and i + 1 < len(args):
                i += 1
                value = args[i]
        elif word.startswith("-") and len(word) > 1 and word[1] in SHORT:
            key = word[1]
            value = word[2:]
            if not value and i + 1 < len(args):
                i += 1
                value = args[i]
        i += 1
        if key is None or value is None:
            continue
        if key in ("b", "e", "i"):
            size = parsesize(value)
            if size is None:
                names = {"b": "minbytes", "e": "maxbytes", "i": "stepBytes"}
                opts["error"] = "invalid size specified for '%s'" % names[key]
                return opts
            opts[key] = size
        elif key == "o":
            if value not in OPS:
                opts["notes"].append("invalid op %s, defaulting to %s .. " % (value, "sum"))
                value = "sum"
            opts["o"] = value
        elif key == "d":
            if value not in WORD:
                opts["notes"].append("invalid type %s, defaulting to %s .. " % (value, "float"))
                value = "float"
            opts["d"] = value
        else:
            opts[key] = _strtol(value, opts[key])
    if opts["b"] > opts["e"]:
        opts["error"] = "invalid sizes for 'minbytes' and 'maxbytes': %d > %d" % (opts["b"], opts["e"])
    return opts


def sizes(opts):
    """The message sizes of the table: min..max, times the step factor or plus the step bytes."""
    out, size = [], opts["b"]
    step_factor, step_bytes = opts["f"], opts["i"]
    while size <= opts["e"] and len(out) < 64:
        out.append(size)
        nxt = size * step_factor if step_factor > 1 else size + step_bytes
        if nxt <= size:
            break
        size = nxt
    return out


def bus_factor(nranks):
    """all_reduce.cu AllReduceGetBw: busBw = algBw * 2(n-1)/n."""
    return 2.0 * (nranks - 1) / nranks


def float_str(value, width):
    """util.cu getFloatStr: the widest of %.2f, %.1f, %.0f that fits, else an exponent."""
    for fmt in ("%*.2f", "%*.1f", "%*.0f"):
        text = fmt % (width, value)
        if len(text) <= width:
            return text
    return ("%*.1e" if width >= 7 else "%*.0e") % (width, value)


def degraded_links(faults):
    """{node: fraction} from the fault (cluster-file form [{node, fraction}] or bare names)."""
    from ..clusterfile import DEGRADED_FRACTION  # local: clusterfile imports the twins lazily too
    out = {}
    for entry in faults.get("nccl_degraded_link") or []:
        if isinstance(entry, str):
            out[entry] = DEGRADED_FRACTION
        else:
            out[entry["node"]] = float(entry.get("fraction", DEGRADED_FRACTION))
    return out


def nvlink_busbw(facts):
    gpus = facts.get("gpus") or {}
    return gpus.get("nvlink_bus_bandwidth_gbps") or NVLINK.get(gpus.get("model"), PCIE_BUSBW)


def fabric_busbw(facts, faults):
    fabric = facts.get("fabric") or SOCKET_FABRIC
    return fabric["bus_bandwidth_gbps"] * degraded_links(faults).get(facts["name"], 1.0)


def ring_busbw(nodes, faults):
    """The ring's limit: NVLink within one node, else the slowest node's fabric (or NVLink)."""
    if len(nodes) == 1:
        return nvlink_busbw(nodes[0])
    return min(min(fabric_busbw(f, faults), nvlink_busbw(f)) for f in nodes)


def _pid(seed):
    return 1000 + int(hashlib.sha256(seed.encode()).hexdigest()[:6], 16) % 60000


def hostname(pod):
    """What gethostname() returns in the pod: spec.hostname, else the pod name (63 chars)."""
    return (pod["spec"].get("hostname") or pod["metadata"]["name"])[:63]


def gpu_name(facts):
    return ((facts.get("gpus") or {}).get("model") or "NVIDIA GPU").replace("-", " ")


def table(procs, opts, peak, wrong):
    """The rows and the average of the run; procs = [(pod, facts, [device numbers])] in rank order."""
    nranks = sum(len(devs) for _p, _f, devs in procs)
    nnodes = len({f["name"] for _p, f, _d in procs})
    factor = bus_factor(nranks)
    latency = (6.0 + 0.5 * nranks) if nnodes == 1 else (12.0 + 1.5 * nranks)
    peak_alg = peak / factor if factor else peak
    word = WORD[opts["d"]]
    lines, total, count_bw, oob = [], 0.0, 0, 0
    for size in sizes(opts):
        count = size // word
        nbytes = count * word
        row = "%12li  %12li  %8s  %6s  %6s" % (nbytes, count, opts["d"], opts["o"], "%6i" % -1)
        for skew in (1.0, 1.002):   # in-place a little slower, never above the limit
            time_us = (latency + nbytes / (peak_alg * 1e3)) * skew
            algbw = nbytes / (time_us * 1e3)
            busbw = algbw * factor
            total += busbw
            count_bw += 1
            if opts["c"]:
                bad = count * nranks if wrong and count else 0
                oob += len(procs) if bad else 0
                row += "  %7s  %6s  %6s  %6g" % (float_str(time_us, 7), float_str(algbw, 6),
                                                 float_str(busbw, 6), bad)
            else:
                row += "  %7s  %6s  %6s    N/A" % (float_str(time_us, 7), float_str(algbw, 6),
                                                 float_str(busbw, 6))
        lines.append(row)
    return lines, (total / count_bw if count_bw else 0.0), oob


def header(opts):
    step = opts["f"] if opts["f"] > 1 else opts["i"]
    return ["# nccl-tests version %s nccl-headers=%d nccl-library=%d" % (TESTS_VERSION, NCCL_CODE, NCCL_CODE),
            "# Collective test starting: %s" % PROGRAM,
            "# nThread %d nGpus %d minBytes %d maxBytes %d step: %d(%s) warmup iters: %d iters: %d "
            "agg iters: %d validation: %d graph: %d unalign: %d"
            % (opts["t"], opts["g"], opts["b"], opts["e"], step, "factor" if opts["f"] > 1 else "bytes",
               opts["w"], opts["n"], opts["m"], opts["c"], opts["G"], 0),
            "#", "# Using devices"]


def table_header():
    return ["#",
            "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          "
            % ("", "", "", "", ""),
            "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %s"
            % ("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time",
               "algbw", "busbw", "#wrong", ""),
            "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %s"
            % ("(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
               "(GB/s)", "", "")]


def rank_lines(procs):
    out, rank = [], 0
    for pod, facts, devs in procs:
        pid = _pid(pod["metadata"]["uid"] + str(devs[0]))
        for dev in devs:
            bus = BUS_IDS[dev] if dev < len(BUS_IDS) else 0x10 + dev
            out.append("#  Rank %2d Group %2d Pid %6d on %10s device %2d [%04x:%02x:%02x] %s"
                       % (rank, 0, pid, hostname(pod), dev, 0, bus, 0, gpu_name(facts)))
            rank += 1
    return out


class NcclTests:
    """The kubelet hook (pod_hook) for nccl-tests pods; see the module docstring."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.results = {}        # launcher pod uid -> the outcome of its run (decided once)

    # -- which pods ------------------------------------------------------------------------
    @staticmethod
    def _container(pod):
        for c in pod["spec"].get("containers") or []:
            if is_nccl_tests(c.get("image")) and invocation(c) is not None:
                return c
        return None

    def _job(self, pod):
        for ref in pod["metadata"].get("ownerReferences") or []:
            if ref.get("kind") == "Job":
                return self.ctx.get_cached("jobs.batch", ref["name"], pod["metadata"]["namespace"])
        return None

    def _members(self, job, pod):
        """{index: the live pod with it} of the Job, and the number of indexes it runs at once."""
        spec = job["spec"]
        size = spec.get("parallelism") if spec.get("parallelism") is not None else 1
        if spec.get("completions") is not None:
            size = min(size, spec["completions"])
        members = {}
        for other in self.ctx.list("pods", pod["metadata"]["namespace"]):
            if not any(r.get("uid") == job["metadata"]["uid"] for r in other["metadata"].get("ownerReferences") or []):
                continue
            index = pod_index(other)
            if index is None or other["metadata"].get("deletionTimestamp"):
                continue
            if (other.get("status") or {}).get("phase") == "Failed" and index in members:
                continue
            members[index] = other
        return members, size

    # -- the hook ------------------------------------------------------------------------
    def pod_hook(self, pod, elapsed):
        container = self._container(pod)
        if container is None:
            return None
        launcher, args = invocation(container)
        job = self._job(pod)
        index = pod_index(pod)
        if launcher is None or job is None or index is None:
            return self._run(pod, container, [pod], launcher, args)
        members, size = self._members(job, pod)
        if index != 0:
            return self._worker(members.get(0), container["name"])
        return self._launch(pod, container, elapsed, members, size, launcher, args)

    def _worker(self, launcher, name):
        if launcher is not None and (launcher.get("status") or {}).get("phase") == "Succeeded":
            return {"kind": "complete", "exit": 0, "logs": {name: SSHD_LOG}}
        # sshd until mpirun is done with it (a failed launcher's retry finds it still there)
        return {"kind": "run", "ready": True, "retry": 0.1, "logs": {name: SSHD_LOG}}

    def _launch(self, pod, container, elapsed, members, size, launcher, args):
        t = self.ctx.timings
        uid = pod["metadata"]["uid"]
        missing = [i for i in range(1, size)
                   if (members.get(i) or {}).get("status", {}).get("phase") != "Running"]
        if missing and uid not in self.results:
            if elapsed < t["pod_start"] + t["mpi_launch_timeout"]:
                return {"kind": "run", "ready": True, "retry": 0.05}
            job = pod["metadata"]["ownerReferences"][0]["name"]
            sub = pod["spec"].get("subdomain")
            lines = []
            for i in missing:
                host = hostname(members[i]) if i in members else "%s-%d" % (job, i)
                lines.append("ssh: Could not resolve hostname %s: Name or service not known"
                             % ("%s.%s" % (host, sub) if sub else host))
            return {"kind": "complete", "exit": 1, "logs": {container["name"]: "\n".join(lines) + "\n" + ORTE_FAILED}}
        if uid not in self.results:
            if len(self.results) > 256:      # forget the launchers that are gone
                live = {p["metadata"]["uid"] for p in self.ctx.list("pods")}
                self.results = {k: v for k, v in self.results.items() if k in live}
            pods = [pod] + [members[i] for i in range(1, size)]
            out = self._run(pod, container, pods, launcher, args)
            out["delay"] = max(0.0, elapsed - t["pod_start"]) + t["job_run"]
            self.results[uid] = out
        return self.results[uid]

    def _run(self, pod, container, pods, launcher, args):
        """The outcome of all_reduce_perf over `pods` (the launcher's own first)."""
        opts = options(args)
        name = container["name"]
        done = {"kind": "complete", "delay": self.ctx.timings["job_run"]}
        if opts["error"]:
            return dict(done, exit=255, logs={name: opts["error"] + "\n"})
        policy = nvidia_runtime.policy_of(self.ctx)
        env = {nvidia_runtime.VISIBLE: "all", "NVIDIA_DRIVER_CAPABILITIES": "compute,utility"}
        procs, text = [], list(opts["notes"])
        g = max(1, opts["g"])
        for member in pods:
            facts = self.ctx.facts.get(member["spec"].get("nodeName")) or {}
            c = self._container(member) or container
            seen = nvidia_runtime.visible(facts, policy, member, c, env)[0]
            if not seen:
                host = hostname(member)
                text = header(opts) + [
                    "%s: Test CUDA failure util.cu:674 'no CUDA-capable device is detected'" % host,
                    " .. %s pid %d: Test failure common.cu:1454" % (host, _pid(member["metadata"]["uid"]))]
                return self._failed(done, name, text, launcher, EXIT_CUDA, len(procs))
            for p in range(max(1, seen // g)):
                procs.append((member, facts, list(range(p * g, p * g + g)), seen))
        np = mpirun_np(launcher)
        if np is not None and np <= len(procs):
            procs = procs[:np]
        elif np is not None:
            # more processes than GPU slots: mpirun puts the rest on the last host, whose next
            # local ranks ask for devices it does not have
            member, facts, devs, seen = procs[-1]
            procs += [(member, facts, list(range(devs[-1] + 1 + j * g, devs[-1] + 1 + (j + 1) * g)), seen)
                      for j in range(np - len(procs))]
        for k, (member, facts, devs, seen) in enumerate(procs):
            if devs[-1] >= seen:
                host = hostname(member)
                text = header(opts) + [
                    "Invalid number of GPUs: %d requested but only %d were found." % (devs[-1] + 1, seen),
                    "Please check the number of processes and GPUs per process.",
                    " .. %s pid %d: Test failure common.cu:1454" % (host, _pid(member["metadata"]["uid"]))]
                return self._failed(done, name, text, launcher, EXIT_NOT_IMPLEMENTED, k)
        procs = [(m, f, d) for m, f, d, _s in procs]
        nodes = list({f["name"]: f for _m, f, _d in procs}.values())
        faults = self.ctx.faults
        wrong = any(f["name"] in (faults.get("nccl_wrong_results") or []) for f in nodes)
        rows, avg, oob = table(procs, opts, ring_busbw(nodes, faults), wrong)
        text += header(opts) + rank_lines(procs) + self._nccl_info(pod, container, launcher) + table_header() + rows
        text += ["# %-20s : %d %s" % ("Out of bounds values", oob, "FAILED" if oob else "OK"),
                 "# %-20s : %g " % ("Avg bus bandwidth", avg), "#",
                 "# Collective test concluded: %s" % PROGRAM, ""]
        if oob:
            # run() returns testNumResults; main()'s TESTCHECK relays it
            text[-1] = " .. %s pid %d: Test failure common.cu:1454" % (hostname(pod),
                                                                       _pid(pod["metadata"]["uid"] + "0"))
            return self._failed(done, name, text, launcher, EXIT_RESULTS, 0)
        return dict(done, exit=0, logs={name: "\n".join(text)})

    @staticmethod
    def _nccl_info(pod, container, launcher):
        """NCCL_DEBUG=INFO (pod env or mpirun -x): rank 0's version line, the only INFO line kept."""
        env = {e.get("name"): str(e.get("value")) for e in container.get("env") or [] if isinstance(e, dict)}
        debug = env.get("NCCL_DEBUG", "")
        for i, word in enumerate(launcher or []):
            if word == "-x" and i + 1 < len(launcher) and launcher[i + 1].startswith("NCCL_DEBUG="):
                debug = launcher[i + 1].split("=", 1)[1]
        if debug.upper() not in ("INFO", "TRACE"):
            return []
        pid = _pid(pod["metadata"]["uid"] + "0")
        return ["%s:%d:%d [0] NCCL INFO NCCL version %s" % (hostname(pod), pid, pid, NCCL_VERSION)]

    def _failed(self, done, name, text, launcher, code, rank):
        log = "\n".join(text) + "\n"
        if launcher is not None:
            log += MPI_NONZERO % (_pid(name) % 60000, rank, code)
        return dict(done, exit=code, logs={name: log})
