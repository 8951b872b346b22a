"""Subresources with their own verbs: scale, log, eviction and binding.

Each takes the ResourceContext (simcluster/verbs.py) of the request; status and finalize are
plain updates of the object and stay there.
"""

from .controllers import disruption
from .errors import ApiError, bad_request
from .patch import json_patch, merge_patch
from .request import PATCH_TYPES, decode_body


def _scale_of(obj):
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    sel = spec.get("selector")
    if isinstance(sel, dict):
        from .selectors import selector_from_label_selector
        sel = selector_from_label_selector(sel)
    meta = obj["metadata"]
    return {"kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion",
                                               "creationTimestamp") if k in meta},
            "spec": {"replicas": spec.get("replicas", 0)},
            "status": {"replicas": status.get("replicas", 0), "selector": sel or ""}}

def scale(ctx):
    m = ctx.req.method
    if m == "GET":
        ctx.check_verb("get")
        obj = ctx.store.get(ctx.info.key, ctx.namespace, ctx.name)
        if obj is None:
            raise ctx.not_found()
        return ctx.h.send_json(200, _scale_of(obj), ctx.req)
    if m not in ("PUT", "PATCH"):
        raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on "
                       "the requested resource")
    ctx.check_verb("update" if m == "PUT" else "patch")
    body = decode_body(ctx.req)
    opts = ctx.write_options()

    def fn(cur):
        scale = _scale_of(cur)
        if m == "PUT":
            new_scale = body
        else:
            kind = PATCH_TYPES.get(ctx.req.content_type)
            new_scale = json_patch(scale, body) if kind == "json" else \
                merge_patch(scale, body)
        replicas = (new_scale.get("spec") or {}).get("replicas")
        cur.setdefault("spec", {})["replicas"] = replicas
        return cur

    updated = ctx.store.patch(ctx.info.key, ctx.namespace, ctx.name, fn, **opts)
    ctx.h.send_json(200, _scale_of(updated), ctx.req)

def log(ctx):
    pod = ctx.store.get("pods", ctx.namespace, ctx.name)
    if pod is None:
        raise ctx.not_found()
    spec = pod.get("spec") or {}
    names = [c.get("name") for c in spec.get("containers") or []]
    inits = [c.get("name") for c in spec.get("initContainers") or []]
    container = ctx.req.q("container")
    if not container:
        if len(names) != 1:
            msg = "a container name must be specified for pod %s, choose one of: [%s]" % (
                ctx.name, " ".join(names))
            if inits:
                msg += " or one of the init containers: [%s]" % " ".join(inits)
            raise bad_request(msg)
        container = names[0]
    elif container not in names and container not in inits:
        raise bad_request("container %s is not valid for pod %s" % (container, ctx.name))
    text = ctx.store.pod_logs.get((ctx.namespace, ctx.name, container))
    if text is None:
        phase = (pod.get("status") or {}).get("phase", "Pending")
        if phase == "Pending":
            raise bad_request('container "%s" in pod "%s" is waiting to start: '
                              'ContainerCreating' % (container, ctx.name))
        text = ""
    tail = ctx.req.q("tailLines")
    if tail:
        lines = text.splitlines(True)
        text = "".join(lines[-int(tail):]) if int(tail) > 0 else ""
    ctx.h.send(200, text.encode(), "text/plain", ctx.req)

def eviction(ctx):
    body = decode_body(ctx.req)
    if ctx.store.get("pods", ctx.namespace, ctx.name) is None:
        raise ctx.not_found()
    disruption.evict(ctx.store, ctx.namespace, ctx.name, body)
    ctx.h.send_json(201, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                          "status": "Success", "code": 201}, ctx.req)

def binding(ctx):
    body = decode_body(ctx.req)
    target = ((body or {}).get("target") or {}).get("name")
    if not target:
        raise bad_request("target.name: Required value")
    ctx.store.bind(ctx.namespace, ctx.name, target, admit=True, warnings=ctx.req.warnings)
    ctx.h.send_json(201, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                          "status": "Success", "code": 201}, ctx.req)
