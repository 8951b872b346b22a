"""Kubelet twin: runs bound pods (in status only) and writes their logs.

For each bound, unfinished pod it decides an outcome (other twins may decide
first through hooks: operand pods wait for drivers, validators crash on
injected faults, ...) and renders the pod status the way a kubelet reports
it, so `kubectl get pods` shows the real STATUS words: ContainerCreating,
Init:0/4, Init:CrashLoopBackOff, CrashLoopBackOff, ErrImagePull,
ImagePullBackOff, Running, Completed, Error.

Outcome dicts (hooks return one, or None to let the next decide):
  {"kind": "run", "ready": True}       running (ready or not)
  {"kind": "complete", "exit": 0}       terminated -> Succeeded / Failed
  {"kind": "init_wait", "done": k}      init containers 0..k-1 done, k running
  {"kind": "init_crash", "index": k}    init container k in CrashLoopBackOff
  {"kind": "crash", "container": name}  that container in CrashLoopBackOff
  {"kind": "creating", "retry": s}      still ContainerCreating, ask again in s seconds
  {"kind": "rejected", "reason": r, "message": m}  refused by the kubelet's admission -> Failed
  each may carry "logs": {container: text} and "delay": seconds after bind before it applies.
"""

import hashlib
import time

from .. import netpol
from . import nvidia_runtime
from .pod_ips import PodIPs
from .util import (clone, gpu_requests, now_iso, parse_quantity, pod_active, set_condition,
                   write_status)

RESUMED_AGE = 3600.0     # seconds a pod found Running at start is taken to have run
BEHAVIOUR_ANNOTATION = "simcluster.skaffon.io/behaviour"
CUDA_MARKERS = ("cuda-sample", "vectoradd", "vector-add")

VECTORADD_LOG = """[Vector addition of 50000 elements]
Copy input data from the host memory to the CUDA device
CUDA kernel launch with 196 blocks of 256 threads
Copy output data from the CUDA device to the host memory
Test PASSED
"""
VECTORADD_NO_GPU_LOG = """[Vector addition of 50000 elements]
Failed to allocate device vector A (error code no CUDA-capable device is detected)!
"""


def pod_ready_flag(status):
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in status.get("conditions") or [])


def registry_host(image):
    first, _, rest = image.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return first
    return "docker.io"


def is_cuda_sample(image):
    low = (image or "").lower()
    return any(m in low for m in CUDA_MARKERS)


class Kubelet:
    def __init__(self, ctx):
        self.ctx = ctx
        # fn(pod, elapsed) -> outcome or None; agnhost `connect` probes follow NetworkPolicy
        self.hooks = [netpol.probe_hook(ctx)]
        self.bound_at = {}       # pod uid -> monotonic time the kubelet first saw it bound
        self.started = {}        # pod uid -> iso time containers started
        self.ips = PodIPs()      # host-local IPAM per node: an address is held until the pod is gone
        self._node_index = {}    # node name -> its number in the cluster file (its pod CIDR)
        self.admitted = set()    # pod uids that passed the kubelet's admission
        self.pull_failed = {}    # pod uid -> monotonic time its first image pull failed
        self.uids = {}           # (namespace, name) -> uid of the pod the kubelet runs
        self._marks = {}         # (namespace, name) -> (node, phase, ready) last queued for
        self._policy_gen = None  # the ClusterPolicy generation the pods were last queued for

    # -- helpers for other twins ---------------------------------------------------
    def elapsed(self, pod):
        t = self.bound_at.get(pod["metadata"]["uid"])
        return time.monotonic() - t if t is not None else 0.0

    def set_log(self, pod, container, text):
        logs = getattr(self.ctx.store, "pod_logs", None)
        if logs is not None:
            key = (pod["metadata"]["namespace"], pod["metadata"]["name"], container)
            if logs.get(key) != text:
                logs[key] = text

    # -- keyed controller (see runtime.py): one key per pod, (namespace, name) ----------
    @property
    def watches(self):
        # a pod's outcome hangs on its node (labels, allocatable) and on the other pods
        # of that node (operand readiness gates, kubelet admission), so an event on a
        # pod or a node queues every pod of the node
        return {"pods": self._pod_keys, "nodes": self._node_keys,
                "clusterpolicies.nvidia.com": self._policy_keys}

    def _policy_keys(self, etype, policy):
        # every pod, but only when the spec changed (not on the operator's status writes)
        gen = (etype, policy["metadata"].get("uid"), policy["metadata"].get("generation"))
        if etype == "MODIFIED" and self._policy_gen == gen:
            return []
        self._policy_gen = gen
        return self.resync()

    def _pod_keys(self, etype, pod):
        key = (pod["metadata"].get("namespace"), pod["metadata"]["name"])
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            return [key]
        # siblings care only when the pod comes, goes or changes phase or readiness
        st = pod.get("status") or {}
        mark = None if etype == "DELETED" else (node, st.get("phase"), pod_ready_flag(st))
        if self._marks.get(key) == mark:
            return [key]
        if mark is None:
            self._marks.pop(key, None)
        else:
            self._marks[key] = mark
        return [key] + [(p["metadata"]["namespace"], p["metadata"]["name"])
                        for p in self.ctx.pods_on(node)]

    def _node_keys(self, etype, node):
        return [(p["metadata"]["namespace"], p["metadata"]["name"])
                for p in self.ctx.pods_on(node["metadata"]["name"])]

    def resync(self):
        return [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in self.ctx.list("pods")]

    def _again(self, pod, delay):
        """Look at this pod again in `delay` seconds (a per-pod timer)."""
        self.ctx.runtime.after(delay, (pod["metadata"]["namespace"], pod["metadata"]["name"]),
                               self)

    def reconcile_key(self, key):
        pod = self.ctx.get_cached("pods", key[1], key[0])
        uid = self.uids.get(key)
        if uid is not None and (pod is None or pod["metadata"]["uid"] != uid):
            self._forget(key, uid)
        if pod is None:
            return
        uid = pod["metadata"]["uid"]
        node = pod["spec"].get("nodeName")
        if not node or node not in self.ctx.facts:
            return
        phase = (pod.get("status") or {}).get("phase")
        if phase in ("Succeeded", "Failed"):
            return
        self.uids[key] = uid
        now = time.monotonic()
        if uid not in self.bound_at:
            self.bound_at[uid] = now
            started = (pod.get("status") or {}).get("startTime")
            if started and phase == "Running":
                # running before the twins (re)started (--state): the node kept running it
                self.bound_at[uid] = now - RESUMED_AGE
                self.started.setdefault(uid, started)
        self._run(pod, now - self.bound_at[uid])

    def _forget(self, key, uid):
        self.uids.pop(key, None)
        self.ips.release(uid)
        self.pull_failed.pop(uid, None)
        self.bound_at.pop(uid, None)
        self.started.pop(uid, None)
        self.admitted.discard(uid)
        logs = getattr(self.ctx.store, "pod_logs", None)
        if logs:
            for lkey in [k for k in logs if (k[0], k[1]) == key]:
                logs.pop(lkey, None)

    def reconcile(self):
        """A full pass over every pod (the keyed loop does this piecewise)."""
        keys = self.resync()
        for key in keys:
            self.reconcile_key(key)
        live = set(keys)
        for key, uid in list(self.uids.items()):
            if key not in live:
                self._forget(key, uid)

    def _outcome(self, pod, elapsed):
        for hook in self.hooks:
            out = hook(pod, elapsed)
            if out is not None:
                return out
        return self.default_outcome(pod)

    def default_outcome(self, pod):
        spec = pod["spec"]
        ann = (pod["metadata"].get("annotations") or {}).get(BEHAVIOUR_ANNOTATION)
        job_delay = self.ctx.timings["job_run"]
        if ann == "run":
            return {"kind": "run", "ready": True}
        if ann == "complete":
            return {"kind": "complete", "exit": 0, "delay": job_delay}
        if ann == "fail":
            return {"kind": "complete", "exit": 1, "delay": job_delay}
        if ann == "crash":
            return {"kind": "crash", "container": spec["containers"][0]["name"],
                    "logs": {spec["containers"][0]["name"]: "Error: simulated crash\n"}}
        if ann == "not-ready":
            return {"kind": "run", "ready": False}
        # agnhost pause (and netexec) serve until the pod is deleted, whatever the restart policy
        first = (spec.get("containers") or [{}])[0]
        if "agnhost" in (first.get("image") or "") and ((first.get("args") or [""])[0] in ("pause", "netexec")):
            return {"kind": "run", "ready": True}
        cuda = [c for c in spec.get("containers") or [] if is_cuda_sample(c.get("image"))]
        if cuda:
            name = cuda[0]["name"]
            # what the NVIDIA runtime puts into the container, not what the pod asked for:
            # NVIDIA_VISIBLE_DEVICES=all without a request gets GPUs where the toolkit honours it
            seen, _want, _why = nvidia_runtime.pod_sees(self.ctx, pod, cuda[0])
            if seen:
                return {"kind": "complete", "exit": 0, "delay": job_delay,
                        "logs": {name: VECTORADD_LOG}}
            return {"kind": "complete", "exit": 1, "delay": job_delay,
                    "logs": {name: VECTORADD_NO_GPU_LOG}}
        if spec.get("restartPolicy") in ("Never", "OnFailure"):
            return {"kind": "complete", "exit": 0, "delay": job_delay}
        return {"kind": "run", "ready": True}

    def _admit(self, pod):
        """The kubelet's own resource check (pods bound without the scheduler, or after
        the node's allocatable shrank): extended resources and pods only, like its
        predicate admission handler."""
        node = pod["spec"]["nodeName"]
        alloc = ((self.ctx.get_cached("nodes", node) or {}).get("status") or {}).get("allocatable") or {}
        used = {}
        for other in self.ctx.pods_on(node):
            if other["metadata"]["uid"] not in self.admitted:
                continue
            if not pod_active(other):
                continue
            for k, v in gpu_requests(other["spec"]).items():
                used[k] = used.get(k, 0) + v
        for res, want in sorted(gpu_requests(pod["spec"]).items()):
            try:
                cap = parse_quantity(alloc.get(res, 0))
            except ValueError:
                cap = 0
            if used.get(res, 0) + want > cap:
                return {"kind": "rejected", "reason": "OutOf" + res,
                        "message": "Pod was rejected: Node didn't have enough resource: %s, "
                                   "requested: %d, used: %d, capacity: %d"
                                   % (res, want, used.get(res, 0), cap)}
        return None

    def _pull_failure(self, image):
        fails = self.ctx.faults.get("image_pull_fail") or []
        if any(f == image or (f and f in image) for f in fails):
            return True
        regs = self.ctx.spec.get("registries")
        return regs is not None and registry_host(image) not in regs

    def _run(self, pod, elapsed):
        t = self.ctx.timings
        uid = pod["metadata"]["uid"]
        if elapsed < t["pod_start"]:
            self._again(pod, t["pod_start"] - elapsed + 0.001)
            return self._write(pod, self._render(pod, {"kind": "creating"}))
        bad = [c for c in (pod["spec"].get("initContainers") or []) + pod["spec"]["containers"]
               if self._pull_failure(c.get("image") or "")]
        if bad:
            # The first pull fails (ErrImagePull, the Failed event) before any back-off: back-off
            # counts from that attempt, not from the pod's start, however late this pass runs.
            first = self.pull_failed.get(uid)
            since = 0.0 if first is None else time.monotonic() - first
            backoff = first is not None and since >= t["image_pull_backoff"]
            if not backoff:
                self._again(pod, t["image_pull_backoff"] - since + 0.001)
            written = self._write(pod, self._render(pod, {"kind": "pull", "container": bad[0]["name"],
                                                          "image": bad[0].get("image"),
                                                          "backoff": backoff}))
            if first is None and written is not None:
                self.pull_failed[uid] = time.monotonic()
            return written
        if uid not in self.admitted:
            refused = self._admit(pod)
            if refused is not None:
                return self._write(pod, self._render(pod, refused))
            self.admitted.add(uid)
        out = self._outcome(pod, elapsed)
        delay = out.get("delay", 0.0)
        if out.get("retry") or out["kind"] == "creating":
            self._again(pod, out.get("retry") or 0.1)
        if out["kind"] == "complete" and elapsed < t["pod_start"] + delay:
            self._again(pod, t["pod_start"] + delay - elapsed + 0.001)
            out = {"kind": "run", "ready": True, "logs": {}}
        elif out["kind"] in ("crash", "init_crash"):
            since = elapsed - t["pod_start"]
            restarts = min(5, 1 + int(since / max(t["crash_backoff"], 0.05)))
            if restarts < 5:
                self._again(pod, max(t["crash_backoff"], 0.05))
            out = dict(out, restarts=restarts)
        if out["kind"] != "creating":
            self.started.setdefault(uid, now_iso())
        for cname, text in (out.get("logs") or {}).items():
            self.set_log(pod, cname, text)
        return self._write(pod, self._render(pod, out))

    def _write(self, pod, status):
        result = write_status(self.ctx.store, "pods", pod, status)
        if result is not pod and result is not None:
            self._events(pod, status)
        return result

    def _events(self, pod, status):
        for cs in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
            waiting = (cs.get("state") or {}).get("waiting") or {}
            reason = waiting.get("reason")
            if reason == "ErrImagePull":
                self.ctx.event_once(pod, "Failed", waiting.get("message", ""), "Warning")
            elif reason == "ImagePullBackOff":
                self.ctx.event_once(pod, "BackOff", 'Back-off pulling image "%s"' % cs["image"],
                                    "Normal")
            elif reason == "CrashLoopBackOff":
                self.ctx.event_once(pod, "BackOff", "Back-off restarting failed container %s in pod %s"
                                    % (cs["name"], pod["metadata"]["name"]), "Warning")
            elif (cs.get("state") or {}).get("running"):
                self.ctx.event_once(pod, "Started", "Started container %s" % cs["name"],
                                    key="started-" + cs["name"])

    # -- status rendering --------------------------------------------------------------
    def _cid(self, pod, name):
        return "containerd://" + hashlib.sha256(
            (pod["metadata"]["uid"] + name).encode()).hexdigest()

    def _render(self, pod, out):
        spec = pod["spec"]
        kind = out["kind"]
        uid = pod["metadata"]["uid"]
        started = self.started.get(uid) or now_iso()
        inits = spec.get("initContainers") or []
        mains = spec.get("containers") or []

        def base(c):
            return {"name": c["name"], "image": c.get("image", ""), "imageID": "",
                    "restartCount": 0, "ready": False, "started": False, "lastState": {}}

        def running(c, ready=True):
            s = base(c)
            s.update({"containerID": self._cid(pod, c["name"]), "ready": ready, "started": True,
                      "state": {"running": {"startedAt": started}}})
            s["imageID"] = c.get("image", "")
            return s

        def waiting(c, reason, message=None):
            s = base(c)
            s["state"] = {"waiting": {"reason": reason}}
            if message:
                s["state"]["waiting"]["message"] = message
            return s

        def terminated(c, code=0):
            s = base(c)
            s.update({"containerID": self._cid(pod, c["name"]), "imageID": c.get("image", ""),
                      "state": {"terminated": {"exitCode": code,
                                               "reason": "Completed" if code == 0 else "Error",
                                               "startedAt": started, "finishedAt": now_iso()}}})
            return s

        def crashing(c, restarts):
            s = waiting(c, "CrashLoopBackOff", "back-off 10s restarting failed container=%s pod=%s_%s(%s)"
                        % (c["name"], pod["metadata"]["name"], pod["metadata"]["namespace"], uid))
            s.update({"containerID": self._cid(pod, c["name"]), "imageID": c.get("image", ""),
                      "restartCount": restarts,
                      "lastState": {"terminated": {"exitCode": 1, "reason": "Error",
                                                   "startedAt": started, "finishedAt": started}}})
            return s

        init_st, main_st = [], []
        phase = "Pending"
        if kind == "rejected":
            status = clone(pod.get("status") or {})
            for key in ("containerStatuses", "initContainerStatuses", "podIP", "podIPs"):
                status.pop(key, None)          # no container was ever created
            status.update({"phase": "Failed", "reason": out["reason"], "message": out["message"],
                           "hostIP": self._node_ip(spec["nodeName"])})
            status.setdefault("startTime", now_iso())
            return status
        if kind == "creating":
            init_st = [waiting(c, "PodInitializing") for c in inits]
            reason = "PodInitializing" if inits else "ContainerCreating"
            main_st = [waiting(c, reason) for c in mains]
        elif kind == "pull":
            msg = self._pull_message(out["image"])
            reason = "ImagePullBackOff" if out["backoff"] else "ErrImagePull"
            text = ('Back-off pulling image "%s": ErrImagePull: %s' % (out["image"], msg)
                    if out["backoff"] else msg)
            init_names = [c["name"] for c in inits]
            if out["container"] in init_names:
                idx = init_names.index(out["container"])
                init_st = [terminated(c) if i < idx else
                           waiting(c, reason, text) if i == idx else waiting(c, "PodInitializing")
                           for i, c in enumerate(inits)]
                main_st = [waiting(c, "PodInitializing") for c in mains]
            else:
                init_st = [terminated(c) for c in inits]
                main_st = [waiting(c, reason, text) if c["name"] == out["container"]
                           else waiting(c, "ContainerCreating") for c in mains]
        elif kind == "init_wait":
            k = out.get("done", 0)
            init_st = [terminated(c) if i < k else running(c, False) if i == k
                       else waiting(c, "PodInitializing") for i, c in enumerate(inits)]
            main_st = [waiting(c, "PodInitializing") for c in mains]
        elif kind == "init_crash":
            k = out.get("index", 0)
            init_st = [terminated(c) if i < k else crashing(c, out.get("restarts", 1)) if i == k
                       else waiting(c, "PodInitializing") for i, c in enumerate(inits)]
            main_st = [waiting(c, "PodInitializing") for c in mains]
        elif kind == "crash":
            phase = "Running"
            init_st = [terminated(c) for c in inits]
            main_st = [crashing(c, out.get("restarts", 1)) if c["name"] == out["container"]
                       else running(c) for c in mains]
        elif kind == "run":
            phase = "Running"
            init_st = [terminated(c) for c in inits]
            main_st = [running(c, out.get("ready", True)) for c in mains]
        elif kind == "complete":
            code = out.get("exit", 0)
            phase = "Succeeded" if code == 0 else "Failed"
            init_st = [terminated(c) for c in inits]
            main_st = [terminated(c, code) for c in mains]

        status = clone(pod.get("status") or {})
        status["phase"] = phase
        node_ip = self._node_ip(spec["nodeName"])
        status["hostIP"] = node_ip
        status["hostIPs"] = [{"ip": node_ip}]
        if kind != "creating" and kind != "pull":
            ip = node_ip if spec.get("hostNetwork") else self._pod_ip(pod)
            if ip is not None:               # None: the node's pod CIDR is full
                status["podIP"] = ip
                status["podIPs"] = [{"ip": ip}]
        status.setdefault("startTime", now_iso())
        if init_st:
            status["initContainerStatuses"] = init_st
        status["containerStatuses"] = main_st
        conds = list(status.get("conditions") or [])
        init_done = all("terminated" in s["state"] and s["state"]["terminated"]["exitCode"] == 0
                        for s in init_st)
        unready = [s["name"] for s in main_st if not s["ready"]]
        if phase in ("Succeeded", "Failed"):
            set_condition(conds, "PodReadyToStartContainers", "False")
            set_condition(conds, "Initialized", "True", "PodCompleted" if inits else None)
            set_condition(conds, "Ready", "False", "PodCompleted")
            set_condition(conds, "ContainersReady", "False", "PodCompleted")
        else:
            set_condition(conds, "PodReadyToStartContainers",
                          "False" if kind in ("creating",) else "True")
            if init_done:
                set_condition(conds, "Initialized", "True")
            else:
                pending = [s["name"] for s in init_st if "terminated" not in s["state"]]
                set_condition(conds, "Initialized", "False", "ContainersNotInitialized",
                              "containers with incomplete status: [%s]" % " ".join(pending))
            if unready:
                msg = "containers with unready status: [%s]" % " ".join(unready)
                set_condition(conds, "Ready", "False", "ContainersNotReady", msg)
                set_condition(conds, "ContainersReady", "False", "ContainersNotReady", msg)
            else:
                set_condition(conds, "Ready", "True")
                set_condition(conds, "ContainersReady", "True")
        set_condition(conds, "PodScheduled", "True")
        order = ["PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"]
        status["conditions"] = sorted(conds, key=lambda c: order.index(c["type"])
                                      if c["type"] in order else 99)
        return status

    def _pull_message(self, image):
        host = registry_host(image)
        ref = image if "/" in image else "docker.io/library/" + image
        return ('failed to pull and unpack image "%s": failed to resolve reference "%s": '
                'failed to do request: Head "https://%s/v2/": dial tcp: lookup %s: no such host'
                % (ref, ref, host if host != "docker.io" else "registry-1.docker.io",
                   host if host != "docker.io" else "registry-1.docker.io"))

    def _node_ip(self, node):
        names = list(self.ctx.facts)
        return "10.0.0.%d" % (11 + names.index(node)) if node in names else "10.0.0.1"

    def _pod_ip(self, pod):
        node = pod["spec"]["nodeName"]
        if node not in self._node_index:
            self._node_index = {name: i + 1 for i, name in enumerate(self.ctx.facts)}
        return self.ips.ip(pod["metadata"]["uid"], node, self._node_index.get(node, 0),
                           lambda: self.ctx.pods_on(node))
