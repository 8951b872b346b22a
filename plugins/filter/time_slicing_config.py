# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter time_slicing_config (docs in time_slicing_config.yml)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.sharing.time_slicing import (
    TimeSlicingError,
    check_trust,
    pending,
    render,
)


def time_slicing_config(spec, nodes=None, trust_label="gpu.skaffon.io/trust", mixed_trust_values=None,
                        allow_mixed_trust=False, gpu_nodes=None, check_only=False):
    """The rendered configs; with check_only, the list of input errors instead (empty when fine)."""
    try:
        rendered = render(spec)
        if nodes is not None:
            rendered.update(check_trust(rendered, nodes, trust_label, mixed_trust_values or ["mixed"],
                                        allow_mixed_trust, gpu_nodes or ()))
    except TimeSlicingError as exc:
        if check_only:
            return [str(exc)]
        raise AnsibleFilterError(str(exc))
    return [] if check_only else rendered


def time_slicing_pending(rendered, nodes, gpu_nodes=None):
    try:
        return pending(rendered, nodes or [], gpu_nodes or ())
    except (TimeSlicingError, KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("time_slicing_pending: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {"time_slicing_config": time_slicing_config, "time_slicing_pending": time_slicing_pending}
