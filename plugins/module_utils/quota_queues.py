# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The queue side of a quota change, per backend (KAI Queue, Kueue ClusterQueue).

An adapter answers differs(team, resource, value) and plan(team, resource, old, new, raising)
-> [(description, do, undo)], in the order they must be applied when raising (parents
first); quota_change reverses the order when lowering.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def adapter(backend, kube):
    if backend in (None, "none"):
        return None
    raise NotImplementedError(backend)
