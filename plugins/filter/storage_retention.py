# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""expired_claims: the teams' claims past their retention (module_utils/storage_retention.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime

from ansible_collections.skaffon.gpu_platform.plugins.plugin_utils.lazy_import import module_utils

storage_retention = module_utils("tenants.storage_retention")


def expired_claims(claims, pods=None, now=None):
    when = datetime.datetime.now(datetime.timezone.utc) if now is None else \
        datetime.datetime.fromisoformat(str(now).replace("Z", "+00:00"))
    return storage_retention.expired_claims(claims, pods, when)


class FilterModule(object):
    def filters(self):
        return {"expired_claims": expired_claims}
