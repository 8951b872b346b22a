"""The workload acceptance's programs: stage.py and train.py as the pods that run them behave.

A kubelet hook (like nccl_tests.py) for containers whose command runs
/opt/skaffon/acceptance/stage.py or train.py (python3 or torchrun, any image: it is the team's
production container with the scripts mounted from ConfigMap wla-scripts). It writes the JSON-lines
log contract of the scripts (one object per line, "event" and "time"), growing while the pod runs,
and ends the container with the exit code the script would give.

Time: one simulated second takes `timings.train_step` wall seconds (a training step is one
simulated second), so a 60 s window runs in 3 wall seconds with the default 0.05. Every figure
in the log (seconds, samples, "time") is simulated: "time" is the container's real start (unix
seconds) plus the simulated seconds since then.

- The script must be there: the directory is a mounted volume (a ConfigMap holding the key), else
  python3 cannot open the file (exit 2). A missing ConfigMap or Secret volume, or a claim not yet
  bound, keeps the pod ContainerCreating with the kubelet's FailedMount event.
- stage.py --dest D --source NAME=URL ...: each URL of `workload.data_sources` takes
  bytes / download_mbps (MB = 10^6 bytes) and prints `staged`; any other URL prints
  `stage-failed` "HTTP Error 404: Not Found" and exits 1; at the end `stage-done`. D must be a
  writable mounted volume (else the OSError the script would meet: [Errno 2] / [Errno 30]).
- train.py --checkpoint-dir C --checkpoint-every K --seconds W: GPUs are those the NVIDIA runtime
  gives the container (nvidia_runtime.visible; training images are CUDA images,
  NVIDIA_VISIBLE_DEVICES=all), at most torchrun's --nproc-per-node; none -> torch's
  "RuntimeError: No CUDA GPUs are available" (exit 1). In an Indexed Job the pod with completion
  index 0 is rank 0: it waits until every index runs (the rendezvous), then prints every step
  (samples = the global batch of one simulated second: samples_per_second_per_gpu of each node's
  GPU model x the GPUs each pod uses, summed over the pods), a checkpoint every K steps
  (checkpoint_bytes / checkpoint_write_mbps seconds) and `done` when W simulated seconds
  (restore included) are over (exit 0). The other pods print nothing and complete when rank 0
  succeeds. A member pod replaced during the run fails rank 0 with NCCL's remote error (exit 1),
  as torchrun without --max-restarts does; with --max-restarts N rank 0 waits for the replacement
  and starts over from the last checkpoint in the same pod (its log goes on with `resume`).
- Checkpoints are kept per volume mounted at C: per (namespace, claim name, claim uid) for a
  PersistentVolumeClaim (a new pod on the same claim resumes: `resume` from its last checkpoint,
  restore_mbps), per (node, path) for hostPath, per pod for emptyDir or no volume (a replacement
  pod starts from 0).
"""

import hashlib
import json
import math
import re
import time

from . import nvidia_runtime
from .nccl_tests import SEPARATORS, words
from .volumes import PVCS, mount_problem, mounted_volume
from .workloads import pod_index

SCRIPT_DIR = "/opt/skaffon/acceptance"
PROGRAMS = ("train.py", "stage.py")
LAUNCHERS = ("python", "python3", "torchrun")
MB = 1e6                     # the cluster file's MB/s are decimal megabytes
STEP_SECONDS = 1.0           # simulated seconds per training step
TRAIN_DEFAULTS = {"checkpoint-dir": "/checkpoints", "checkpoint-every": "10", "seconds": "60", "data": "/data"}
NO_GPU = ["Traceback (most recent call last):",
          '  File "%s/train.py", line 64, in <module>' % SCRIPT_DIR,
          "    torch.cuda.set_device(local_rank)",
          '  File "/usr/local/lib/python3.10/dist-packages/torch/cuda/__init__.py", line 399, in set_device',
          "    torch._C._cuda_setDevice(device)",
          '  File "/usr/local/lib/python3.10/dist-packages/torch/cuda/__init__.py", line 302, in _lazy_init',
          "    torch._C._cuda_init()",
          "RuntimeError: No CUDA GPUs are available"]
BAD_ORDINAL = ["Traceback (most recent call last):",
               '  File "%s/train.py", line 64, in <module>' % SCRIPT_DIR,
               "    torch.cuda.set_device(local_rank)",
               "RuntimeError: CUDA error: invalid device ordinal",
               "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace "
               "below might be incorrect."]
REMOTE_ERROR = ["torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
                "ProcessGroupNCCL.cpp:1970, remote process exited or there was a network error, NCCL version 2.27.3",
                "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting "
                "prematurely.",
                "Last error:",
                "socketProgress: Connection closed by remote peer %s<54321>"]
CHILD_FAILED = ["torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
                "============================================================",
                "%s/train.py FAILED" % SCRIPT_DIR,
                "------------------------------------------------------------",
                "Failures:",
                "  <NO_OTHER_FAILURES>",
                "------------------------------------------------------------",
                "Root Cause (first observed failure):",
                "[0]:",
                "  rank      : 0 (local_rank: 0)",
                "  exitcode  : 1 (pid: %d)",
                "  error_file: <N/A>",
                "============================================================"]
_VAR = re.compile(r"\$(\w+)|\$\{(\w+)\}")


def line(event, **fields):
    """One log line of the contract: "event" first, "time" last."""
    obj = {"event": event}
    obj.update((k, v) for k, v in fields.items() if k != "time")
    obj["time"] = round(fields["time"], 3)
    return json.dumps(obj, separators=(",", ":"))


def expand(word, env):
    return _VAR.sub(lambda m: env.get(m.group(1) or m.group(2), m.group(0)), word)


def container_env(pod, container):
    env = {e["name"]: str(e["value"]) for e in container.get("env") or []
           if isinstance(e, dict) and e.get("name") and e.get("value") is not None}
    index = pod_index(pod)
    if index is not None:
        env.setdefault("JOB_COMPLETION_INDEX", str(index))
    return env


def invocation(container):
    """(program, launcher words, script word, argument words) of the container's command, or None."""
    argv = words(container)
    for i, word in enumerate(argv):
        base = word.rsplit("/", 1)[-1]
        if base not in PROGRAMS:
            continue
        if "/" in word and not word.endswith("acceptance/" + base):
            continue
        if "/" not in word and not (container.get("workingDir") or "").rstrip("/").endswith("acceptance"):
            continue
        start = i
        while start > 0 and argv[start - 1] not in SEPARATORS:
            start -= 1
        end = i + 1
        while end < len(argv) and argv[end] not in SEPARATORS:
            end += 1
        launcher = argv[start:i]
        names = [w.rsplit("/", 1)[-1] for w in launcher]
        if launcher and not any(n in LAUNCHERS or n.startswith("python3") for n in names):
            continue
        path = word if "/" in word else container["workingDir"].rstrip("/") + "/" + word
        return base[:-3], launcher, path, argv[i + 1:end]
    return None


def options(args, env, repeat=()):
    """--name value / --name=value into {name: value} ({name: [values]} for `repeat`)."""
    out = {k: [] for k in repeat}
    i = 0
    while i < len(args):
        word = expand(args[i], env)
        i += 1
        if not word.startswith("--"):
            continue
        name, eq, value = word[2:].partition("=")
        name = name.replace("_", "-")
        if not eq:
            if i < len(args) and not args[i].startswith("--"):
                value = expand(args[i], env)
                i += 1
            else:
                value = ""
        if name in repeat:
            out[name].append(value)
        else:
            out[name] = value
    return out


def launcher_option(launcher, env, *names):
    opts = options(launcher, env)
    for name in names:
        if opts.get(name):
            return opts[name]
    return None


def _pid(seed):
    return 100 + int(hashlib.sha256(seed.encode()).hexdigest()[:6], 16) % 30000


def loss(step):
    jitter = (int(hashlib.sha256(str(step).encode()).hexdigest()[:4], 16) / 65535.0 - 0.5) * 0.04
    return round(0.35 + 2.2 * math.exp(-step / 300.0) + jitter, 4)


class AcceptancePrograms:
    """The kubelet hook (pod_hook); see the module docstring."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.runs = {}           # pod uid -> the run of its program (decided when it starts)
        self.checkpoints = {}    # storage key -> {"step", "path", "bytes", "time"}
        self.mounted = set()     # pod uids whose volumes are mounted
        self.loaded = set()      # pod uids whose python3 found the script

    # -- helpers ----------------------------------------------------------------------------
    @property
    def scale(self):
        """Wall seconds per simulated second."""
        return max(0.001, float(self.ctx.timings.get("train_step", 0.05)))

    @property
    def workload(self):
        from ..clusterfile import _workload   # the defaults when the spec comes without the section
        return self.ctx.spec.get("workload") or _workload(None)

    @staticmethod
    def _container(pod):
        for c in pod["spec"].get("containers") or []:
            inv = invocation(c)
            if inv is not None:
                return c, inv
        return None, None

    def _job(self, pod):
        for ref in pod["metadata"].get("ownerReferences") or []:
            if ref.get("kind") == "Job":
                return self.ctx.get_cached("jobs.batch", ref["name"], pod["metadata"]["namespace"])
        return None

    def _members(self, pod):
        """{index: live pod} of the pod's Indexed Job and its size; ({0: pod}, 1) for a lone pod."""
        job = self._job(pod)
        index = pod_index(pod)
        if job is None or index is None:
            return {0: pod}, 1
        spec = job["spec"]
        size = spec.get("parallelism") if spec.get("parallelism") is not None else 1
        if spec.get("completions") is not None:
            size = min(size, spec["completions"])
        members = {}
        for other in self.ctx.by_index("pods", "owner", job["metadata"]["uid"]):
            i = pod_index(other)
            if i is None or other["metadata"].get("deletionTimestamp"):
                continue
            if (other.get("status") or {}).get("phase") in ("Failed",) and i in members:
                continue
            members[i] = other
        return members, max(1, size)

    def _script_missing(self, pod, path):
        """The error python3 prints when the script is not in the container, or None."""
        vol, mount = mounted_volume(pod, self._container(pod)[0], path)
        missing = "python3: can't open file '%s': [Errno 2] No such file or directory" % path
        if vol is None or vol.get("emptyDir") is not None:
            return missing
        cm = vol.get("configMap")
        if cm is not None:
            obj = self.ctx.get_cached("configmaps", cm.get("name"), pod["metadata"]["namespace"]) or {}
            rel = path[len((mount.get("mountPath") or "").rstrip("/")) + 1:]
            if mount.get("subPath"):
                return None if mount["subPath"] in (obj.get("data") or {}) else missing
            if cm.get("items"):
                keys = {it.get("path"): it.get("key") for it in cm["items"]}
                return None if keys.get(rel) in (obj.get("data") or {}) else missing
            return None if rel in (obj.get("data") or {}) or rel in (obj.get("binaryData") or {}) else missing
        return None

    def _storage_key(self, pod, container, path):
        vol, mount = mounted_volume(pod, container, path)
        ns = pod["metadata"]["namespace"]
        if vol is not None:
            # the directory inside the volume: its subPath and the rest of the path below the mount
            where = ((mount.get("subPath") or "").strip("/"),
                     path[len((mount.get("mountPath") or "").rstrip("/")):].strip("/"))
        if vol is not None and vol.get("persistentVolumeClaim"):
            name = vol["persistentVolumeClaim"].get("claimName")
            pvc = self.ctx.get_cached(PVCS, name, ns) or {"metadata": {}}
            return ("pvc", ns, name, pvc["metadata"].get("uid")) + where, mount
        if vol is not None and vol.get("hostPath"):
            return ("host", pod["spec"].get("nodeName"), vol["hostPath"].get("path")) + where, mount
        return ("pod", pod["metadata"]["uid"]), mount

    # -- the hook -----------------------------------------------------------------------------
    def pod_hook(self, pod, elapsed):
        container, inv = self._container(pod)
        if container is None:
            return None
        uid = pod["metadata"]["uid"]
        if uid not in self.mounted:
            # the volume manager mounts once, before the containers start
            problem = mount_problem(self.ctx, pod)
            if problem is not None:
                reason, message = problem
                if message:
                    self.ctx.event_once(pod, reason, message, "Warning")
                return {"kind": "creating", "retry": 0.2}
            self.mounted.add(uid)
        program, launcher, path, args = inv
        if uid not in self.runs and len(self.runs) > 512:
            live = {p["metadata"]["uid"] for p in self.ctx.list("pods")}
            self.runs = {k: v for k, v in self.runs.items() if k in live}
            self.mounted &= live
            self.loaded &= live
        if uid not in self.loaded:
            # python3 reads the script once at start; a ConfigMap changed later does not matter
            missing = self._script_missing(pod, path)
            if missing:
                return {"kind": "complete", "exit": 2 if "torchrun" not in " ".join(launcher) else 1,
                        "logs": {container["name"]: missing + "\n"}}
            self.loaded.add(uid)
        if program == "stage":
            return self._stage(pod, container, args)
        return self._train(pod, container, launcher, args)

    # -- stage.py -------------------------------------------------------------------------------
    def _stage(self, pod, container, args):
        uid = pod["metadata"]["uid"]
        name = container["name"]
        run = self.runs.get(uid)
        if run is None:
            env = container_env(pod, container)
            opts = options(args, env, repeat=("source",))
            run = self.runs[uid] = {"t0": time.monotonic(), "unix": time.time(), "lines": [], "done": None,
                                    "plan": self._stage_plan(pod, container, opts)}
        sim = (time.monotonic() - run["t0"]) / self.scale
        lines = [text for at, text, _code in run["plan"] if at <= sim]
        end = run["plan"][-1]
        if end[0] <= sim:
            return {"kind": "complete", "exit": end[2], "logs": {name: "\n".join(lines) + "\n"}}
        nxt = min(at for at, _t, _c in run["plan"] if at > sim)
        return {"kind": "run", "ready": True, "retry": max(0.01, (nxt - sim) * self.scale + 0.001),
                "logs": {name: "\n".join(lines) + ("\n" if lines else "")}}

    def _stage_plan(self, pod, container, opts):
        """[(simulated second, log line, exit code at the end)] of the whole run."""
        w = self.workload
        t0 = time.time()
        dest = opts.get("dest") or ""
        plan, cursor, total = [], 0.0, 0
        vol, mount = mounted_volume(pod, container, dest) if dest else (None, None)
        write_error = None
        if not dest:
            plan.append((0.0, "usage: stage.py [-h] --dest DEST --source NAME=URL [--source NAME=URL ...]\n"
                         "stage.py: error: the following arguments are required: --dest", 2))
            return plan
        if vol is None:
            write_error = "[Errno 2] No such file or directory: '%s/%%s'" % dest.rstrip("/")
        elif mount.get("readOnly") or any(vol.get(k) is not None for k in ("configMap", "secret", "downwardAPI",
                                                                          "projected")):
            write_error = "[Errno 30] Read-only file system: '%s/%%s'" % dest.rstrip("/")
        for source in opts.get("source") or []:
            src_name, _, url = source.partition("=")
            if not url:
                src_name, url = source.rsplit("/", 1)[-1] or "data", source
            known = w["data_sources"].get(url)
            error = None
            if write_error:
                error = write_error % src_name
            elif not re.match(r"^https?://", url):
                error = ("<urlopen error unknown url type: %s>" % url.split(":", 1)[0] if "://" in url
                         else "unknown url type: %r" % url)
            elif known is None:
                error = "HTTP Error 404: Not Found"
            if error:
                cursor += 0.05
                plan.append((cursor, line("stage-failed", name=src_name, url=url, error=error, time=t0 + cursor), 1))
                return plan
            seconds = known["bytes"] / (w["download_mbps"] * MB)
            cursor += seconds
            total += known["bytes"]
            plan.append((cursor, line("staged", name=src_name, url=url, bytes=known["bytes"],
                                      seconds=round(seconds, 3), time=t0 + cursor), 0))
        plan.append((cursor, line("stage-done", bytes=total, seconds=round(cursor, 3), time=t0 + cursor), 0))
        return plan

    # -- train.py -------------------------------------------------------------------------------
    def _gpus(self, member, launcher, env):
        c, _inv = self._container(member)
        facts = self.ctx.facts.get(member["spec"].get("nodeName")) or {}
        seen = nvidia_runtime.visible(facts, nvidia_runtime.policy_of(self.ctx), member, c or {},
                                      {nvidia_runtime.VISIBLE: "all",
                                       "NVIDIA_DRIVER_CAPABILITIES": "compute,utility"})[0]
        nproc = launcher_option(launcher, env, "nproc-per-node", "nproc_per_node")
        if nproc and nproc.isdigit():
            return seen, int(nproc), facts
        return seen, seen, facts

    def _rate(self, facts):
        rates = self.workload["training"]["samples_per_second_per_gpu"]
        model = (facts.get("gpus") or {}).get("model")
        return rates.get(model, rates.get("default", 100.0))

    def _train(self, pod, container, launcher, args):
        uid = pod["metadata"]["uid"]
        name = container["name"]
        env = container_env(pod, container)
        torchrun = any(w.rsplit("/", 1)[-1] == "torchrun" for w in launcher)
        run = self.runs.get(uid)
        if run is None:
            seen, nproc, _facts = self._gpus(pod, launcher, env)
            fail = NO_GPU if not seen else BAD_ORDINAL if nproc > seen else None
            if fail:
                text = list(fail)
                if torchrun:
                    text += [l.replace("%d", str(_pid(uid))) for l in CHILD_FAILED]
                return {"kind": "complete", "exit": 1, "logs": {name: "\n".join(text) + "\n"}}
            members, size = self._members(pod)
            index = pod_index(pod) if size > 1 else 0
            if index:
                return self._worker(members.get(0), name)
            waiting = [i for i in range(size) if i != index
                       and ((members.get(i) or {}).get("status") or {}).get("phase") != "Running"]
            if waiting:
                return {"kind": "run", "ready": True, "retry": 0.05, "logs": {name: ""}}
            run = self._start(pod, container, launcher, args, env, members, size)
            restarts = launcher_option(launcher, env, "max-restarts")
            run["restarts"] = int(restarts) if restarts and restarts.isdigit() else 0
            self.runs[uid] = run
        if run.get("outcome") is not None:
            return run["outcome"]
        if run.get("rejoin"):
            return self._rejoin(pod, container, launcher, args, env, run, name)
        return self._progress(pod, run, name)

    def _rejoin(self, pod, container, launcher, args, env, run, name):
        """torchrun --max-restarts: the agent restarts the worker group once every index is back
        (a new rendezvous); the new processes load the last checkpoint, in the same pod and log."""
        members, size = self._members(pod)
        text = "\n".join(run["lines"]) + "\n"
        if any(((members.get(i) or {}).get("status") or {}).get("phase") != "Running"
               for i in range(size) if i != 0):
            return {"kind": "run", "ready": True, "retry": 0.05, "logs": {name: text}}
        fresh = self._start(pod, container, launcher, args, env, members, size)
        fresh["lines"] = run["lines"] + fresh["lines"]
        fresh["restarts"] = run["restarts"] - 1
        self.runs[pod["metadata"]["uid"]] = fresh
        return self._progress(pod, fresh, name)

    def _worker(self, rank0, name):
        phase = ((rank0 or {}).get("status") or {}).get("phase")
        if phase == "Succeeded":
            return {"kind": "complete", "exit": 0, "logs": {name: ""}}
        return {"kind": "run", "ready": True, "retry": 0.1, "logs": {name: ""}}

    def _start(self, pod, container, launcher, args, env, members, size):
        opts = dict(TRAIN_DEFAULTS)
        opts.update(options(args, env))
        training = self.workload["training"]
        ckpt_dir = (opts.get("checkpoint-dir") or TRAIN_DEFAULTS["checkpoint-dir"]).rstrip("/") or "/"
        try:
            every = max(1, int(opts.get("checkpoint-every")))
        except (TypeError, ValueError):
            every = int(TRAIN_DEFAULTS["checkpoint-every"])
        try:
            window = max(0.0, float(opts.get("seconds")))
        except (TypeError, ValueError):
            window = float(TRAIN_DEFAULTS["seconds"])
        key, mount = self._storage_key(pod, container, ckpt_dir)
        samples = 0
        for i in range(size):
            member = members.get(i) or pod
            seen, nproc, facts = self._gpus(member, launcher, container_env(member, container))
            samples += self._rate(facts) * min(seen, nproc) * STEP_SECONDS
        saved = self.checkpoints.get(key)
        unix = time.time()
        run = {"t0": time.monotonic(), "unix": unix, "key": key, "dir": ckpt_dir, "every": every,
               "window": window, "samples": int(round(samples)), "read_only": bool((mount or {}).get("readOnly")),
               "members": {i: (members.get(i) or pod)["metadata"]["uid"] for i in range(size)},
               "cursor": 0.0, "lines": [], "samples_total": 0, "finished": False}
        if saved:
            load = training["checkpoint_bytes"] / (training["restore_mbps"] * MB)
            run["step"] = saved["step"]
            run["cursor"] = load
            run["lines"].append(line("resume", step=saved["step"], path=saved["path"], seconds=round(load, 3),
                                     time=unix + load))
        else:
            run["step"] = 0
            run["lines"].append(line("start", step=0, reason="no checkpoint in %s" % ckpt_dir, time=unix))
        return run

    def _progress(self, pod, run, name):
        sim = (time.monotonic() - run["t0"]) / self.scale
        training = self.workload["training"]
        write = training["checkpoint_bytes"] / (training["checkpoint_write_mbps"] * MB)
        lost = self._lost_member(pod, run)
        while not run["finished"]:
            if run["cursor"] >= run["window"]:
                run["lines"].append(line("done", step=run["step"], samples_total=run["samples_total"],
                                         seconds=round(run["cursor"], 3), time=run["unix"] + run["cursor"]))
                run["finished"] = True
                break
            if run["cursor"] + STEP_SECONDS > sim:
                break
            step = run["step"] + 1
            pending_ckpt = step % run["every"] == 0
            if pending_ckpt and run["cursor"] + STEP_SECONDS + write > sim:
                break                    # the step and its checkpoint appear together
            run["cursor"] += STEP_SECONDS
            run["step"] = step
            run["samples_total"] += run["samples"]
            run["lines"].append(line("step", step=step, samples=run["samples"], loss=loss(step),
                                     time=run["unix"] + run["cursor"]))
            if pending_ckpt:
                path = "%s/checkpoint-%d.pt" % (run["dir"].rstrip("/"), step)
                if run["read_only"]:
                    return self._fail(run, name, ["Traceback (most recent call last):",
                                                  "OSError: [Errno 30] Read-only file system: '%s'" % path])
                run["cursor"] += write
                run["lines"].append(line("checkpoint", step=step, path=path, bytes=training["checkpoint_bytes"],
                                         seconds=round(write, 3), time=run["unix"] + run["cursor"]))
                self.checkpoints[run["key"]] = {"step": step, "path": path, "bytes": training["checkpoint_bytes"],
                                                "time": run["unix"] + run["cursor"]}
        text = "\n".join(run["lines"]) + "\n"
        if run["finished"]:
            run["outcome"] = {"kind": "complete", "exit": 0, "logs": {name: text}}
            return run["outcome"]
        if lost is not None:
            if run.get("restarts", 0) > 0:
                run["rejoin"] = True
                return {"kind": "run", "ready": True, "retry": 0.05, "logs": {name: text}}
            return self._fail(run, name, [l % lost if "%s" in l else l for l in REMOTE_ERROR])
        return {"kind": "run", "ready": True, "retry": max(0.01, self.scale), "logs": {name: text}}

    def _lost_member(self, pod, run):
        """The host name of a member pod that left the gang since the rendezvous, or None."""
        if len(run["members"]) < 2:
            return None
        members, _size = self._members(pod)
        for i, uid in run["members"].items():
            if i == 0:
                continue
            m = members.get(i)
            if m is None or m["metadata"]["uid"] != uid or (m.get("status") or {}).get("phase") != "Running":
                return (m or {}).get("spec", {}).get("hostname") or "index-%d" % i
        return None

    @staticmethod
    def _fail(run, name, error):
        run["finished"] = True
        run["outcome"] = {"kind": "complete", "exit": 1, "logs": {name: "\n".join(run["lines"] + error) + "\n"}}
        return run["outcome"]


__all__ = ["AcceptancePrograms", "invocation", "options"]
