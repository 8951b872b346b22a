# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # The wait option of the modules that watch for a state (module_base.WAIT_ARG_SPEC).
    DOCUMENTATION = r"""
options:
  timeout:
    description:
      - Seconds to wait for the state the module waits on (see the description).
      - When it is not reached in time the module fails with diagnostics naming what is missing.
      - The wait is a watch (resourceVersion resumed, no polling); a lost connection to the API server is
        retried for a bounded time within it.
    type: int
    default: 600
"""
