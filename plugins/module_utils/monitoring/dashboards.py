# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Grafana dashboards per node and per team (namespace) on the DCGM metrics and our recording
rules, as ConfigMaps for the Grafana sidecar (settings from module_utils.monitoring)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import upstream as U


def _panel(pid, title, exprs, x, y, unit="short", kind="timeseries", w=12, h=8):
    return {"id": pid, "type": kind, "title": title, "datasource": {"type": "prometheus", "uid": "${datasource}"},
            "gridPos": {"x": x, "y": y, "w": w, "h": h},
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
            "targets": [{"refId": chr(65 + i), "expr": e, "legendFormat": legend,
                         "datasource": {"type": "prometheus", "uid": "${datasource}"}}
                        for i, (e, legend) in enumerate(exprs)]}


def _query_var(name, query, label):
    return {"name": name, "label": label, "type": "query", "refresh": 2, "includeAll": True,
            "multi": True, "allValue": ".*", "datasource": {"type": "prometheus", "uid": "${datasource}"},
            "definition": query, "query": {"query": query, "refId": "var"}, "sort": 1}


def _dashboard(uid, title, variables, panels):
    return {"uid": uid, "title": title, "tags": ["gpu", "dcgm", "skaffon"], "schemaVersion": 39,
            "editable": False, "refresh": "30s", "time": {"from": "now-6h", "to": "now"},
            "templating": {"list": [{"name": "datasource", "type": "datasource", "query": "prometheus",
                                     "label": "Data source"}] + variables},
            "panels": panels}


def node_dashboard(s):
    sel = "node=~\"$node\""
    legend = "{{node}} GPU {{gpu}}"
    panels = [
        _panel(1, "GPU utilisation", [("DCGM_FI_DEV_GPU_UTIL{%s}" % sel, legend)], 0, 0, "percent"),
        _panel(2, "Framebuffer memory used", [("DCGM_FI_DEV_FB_USED{%s} * 1048576" % sel, legend)],
               12, 0, "bytes"),
        _panel(3, "GPU temperature", [("DCGM_FI_DEV_GPU_TEMP{%s}" % sel, legend)], 0, 8, "celsius"),
        _panel(4, "Power draw", [("DCGM_FI_DEV_POWER_USAGE{%s}" % sel, legend)], 12, 8, "watt"),
        _panel(5, "Last Xid per GPU", [("DCGM_FI_DEV_XID_ERRORS{%s}" % sel, legend)], 0, 16,
               kind="stat", w=8),
        _panel(6, "Allocated / total GPUs",
               [("node:dcgm_gpu_allocated:count{%s}" % sel, "{{node}} allocated"),
                ("node:dcgm_gpu:count{%s}" % sel, "{{node}} total")], 8, 16, w=8),
        _panel(7, "ECC errors (volatile, total)",
               [("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL{%s}" % sel, legend + " single-bit"),
                ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{%s}" % sel, legend + " double-bit")], 16, 16, w=8),
        _panel(8, "SM clock", [("DCGM_FI_DEV_SM_CLOCK{%s} * 1000000" % sel, legend)], 0, 24, "hertz"),
        _panel(9, "Exporter up", [("up{job=\"%s\",%s}" % (s["exporter_job"], sel), "{{node}}")], 12, 24,
               kind="stat"),
    ]
    return _dashboard("skaffon-gpu-nodes", "GPU nodes",
                      [_query_var("node", "label_values(DCGM_FI_DEV_GPU_TEMP, node)", "Node")], panels)


def team_dashboard(s):
    sel = "namespace=~\"$namespace\""
    panels = [
        _panel(1, "Allocated GPUs per team", [("namespace:dcgm_gpu_allocated:count{%s}" % sel, "{{namespace}}")],
               0, 0),
        _panel(2, "Average utilisation of allocated GPUs",
               [("namespace:dcgm_gpu_utilization:avg{%s}" % sel, "{{namespace}}")], 12, 0, "percent"),
        _panel(3, "Idle allocated GPUs", [("namespace:dcgm_gpu_idle:count{%s}" % sel, "{{namespace}}")],
               0, 8),
        _panel(4, "GPU memory used", [("namespace:dcgm_fb_used_bytes:sum{%s}" % sel, "{{namespace}}")],
               12, 8, "bytes"),
        _panel(5, "Utilisation per pod",
               [("DCGM_FI_DEV_GPU_UTIL{%s,pod!=\"\"}" % sel, "{{namespace}}/{{pod}} GPU {{gpu}}")],
               0, 16, "percent", w=24),
        _panel(6, "Power drawn per team", [("namespace:dcgm_power_usage_watts:sum{%s}" % sel, "{{namespace}}")],
               0, 24, "watt"),
    ]
    return _dashboard("skaffon-gpu-teams", "GPU usage per team",
                      [_query_var("namespace", "label_values(DCGM_FI_DEV_GPU_UTIL{namespace!=\"\"}, namespace)",
                                  "Team (namespace)")], panels)


def configmaps(s):
    """ConfigMaps the Grafana sidecar loads (one dashboard JSON each), for validated settings s."""
    out = []
    for name, board in (("skaffon-gpu-nodes", node_dashboard(s)), ("skaffon-gpu-teams", team_dashboard(s))):
        meta = {"name": name, "namespace": s["namespace"],
                "labels": dict(s["dashboard_label"], **{U.LABEL_PART_OF: U.PART_OF_VALUE})}
        if s["dashboard_folder"]:
            meta["annotations"] = {s["dashboard_folder_annotation"]: s["dashboard_folder"]}
        out.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
                    "data": {name + ".json": json.dumps(board, indent=1, sort_keys=True)}})
    return out


def queries(configmap):
    """(dashboard title, panel title, expr) of every panel target of a dashboard ConfigMap."""
    out = []
    for text in configmap["data"].values():
        board = json.loads(text)
        for panel in board["panels"]:
            for target in panel.get("targets", []):
                out.append((board["title"], panel["title"], target["expr"]))
    return out
