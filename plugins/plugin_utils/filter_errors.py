# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where a filter turns the collection's domain errors into Ansible's: the one place.

Every input error of module_utils is a DomainError (core/errors.py) whose message names the
variable, the value and the fix. A filter wrapped in `domain_filter` raises it as
AnsibleFilterError with that message (Ansible shows it as the task's failure, no traceback);
`problems` gives the messages as a list instead, for the roles' check_only validation tasks.
The modules have their own one place: GpuPlatformModule.execute.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import functools

from ansible.errors import AnsibleFilterError

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError


def domain_filter(prefix=None):
    """Decorator: DomainError -> AnsibleFilterError("<prefix>: <message>")."""
    def wrap(fn):
        @functools.wraps(fn)
        def filter_fn(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except DomainError as exc:
                raise AnsibleFilterError("%s: %s" % (prefix, exc.msg) if prefix else exc.msg)
        return filter_fn
    return wrap


def problems(fn, *args, **kwargs):
    """[] when fn(*args, **kwargs) accepts its input, else [the DomainError's message]."""
    try:
        fn(*args, **kwargs)
    except DomainError as exc:
        return [exc.msg]
    return []
