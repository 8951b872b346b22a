# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter time_slicing_config (docs in time_slicing_config.yml)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError
from ansible_collections.skaffon.gpu_platform.plugins.plugin_utils.filter_errors import (
    domain_errors,
    domain_filter,
    problems,
)
from ansible_collections.skaffon.gpu_platform.plugins.plugin_utils.lazy_import import module_utils

time_slicing = module_utils("sharing.time_slicing")


@domain_errors()
def time_slicing_config(spec, nodes=None, trust_label="gpu.skaffon.io/trust", mixed_trust_values=None,
                        allow_mixed_trust=False, gpu_nodes=None, check_only=False, mig_strategy=None):
    """The rendered configs; with check_only, the list of input errors instead (empty when fine)."""
    def rendered(spec, nodes, mixed_trust_values, gpu_nodes):
        out = time_slicing.render(spec)
        if nodes is not None:
            out.update(time_slicing.check_trust(out, nodes, trust_label, mixed_trust_values or ["mixed"],
                                                allow_mixed_trust, gpu_nodes or (), mig_strategy))
        return out
    # only what the rules read of each Node is made plain data (a registered Node list is large)
    try:
        view = None if nodes is None else time_slicing.node_view(nodes, trust_label)
    except DomainError as exc:
        if check_only:
            return [exc.msg]
        raise
    args = (spec, view, mixed_trust_values, gpu_nodes)
    return problems(rendered, *args) if check_only else domain_filter()(rendered)(*args)


@domain_errors("time_slicing_pending")
def time_slicing_pending(rendered, nodes, gpu_nodes=None):
    return _pending(rendered, time_slicing.node_view(nodes), gpu_nodes)


@domain_filter("time_slicing_pending")
def _pending(rendered, nodes, gpu_nodes=None):
    try:
        return time_slicing.pending(rendered, nodes or [], gpu_nodes or ())
    except (KeyError, TypeError, ValueError) as exc:   # not the output of time_slicing_config
        raise DomainError(str(exc))


class FilterModule(object):
    def filters(self):
        return {"time_slicing_config": time_slicing_config, "time_slicing_pending": time_slicing_pending}
