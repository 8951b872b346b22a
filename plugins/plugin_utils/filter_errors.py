# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where a filter turns the collection's domain errors into Ansible's: the one place.

Every input error of module_utils is a DomainError (core/errors.py) whose message names the
variable, the value and the fix. A filter wrapped in `domain_filter` raises it as
AnsibleFilterError with that message (Ansible shows it as the task's failure, no traceback);
`problems` gives the messages as a list instead, for the roles' check_only validation tasks.
The modules have their own one place: GpuPlatformModule.execute.

Both hand the domain code plain data (`plain`): ansible-core 2.19 passes a filter lazy containers, and
a deep copy of one copies its templar with every variable of the play too (seconds per call on a
site's inventory), while the domain code deep-copies its inputs before it merges defaults.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import functools

from ansible.errors import AnsibleFilterError

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError


def plain(value):
    """`value` with every dict a dict, every list a list and every tuple a tuple (the lazy ones are
    subclasses; their values rendered), so copying it copies data only. Other mappings stay as they
    are: `hostvars` is one, and rendering every variable of every host would cost more than it saves."""
    if isinstance(value, dict):
        return dict((key, plain(item)) for key, item in value.items())
    if isinstance(value, list):
        return [plain(item) for item in value]
    if isinstance(value, tuple):
        return tuple(plain(item) for item in value)
    return value


def domain_errors(prefix=None):
    """Decorator: DomainError -> AnsibleFilterError("<prefix>: <message>"); the arguments as given (for a
    filter that picks the little it reads out of large input before making anything plain)."""
    def wrap(fn):
        @functools.wraps(fn)
        def filter_fn(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except DomainError as exc:
                raise AnsibleFilterError("%s: %s" % (prefix, exc.msg) if prefix else exc.msg)
        return filter_fn
    return wrap


def domain_filter(prefix=None):
    """Decorator: the arguments as plain data; DomainError -> AnsibleFilterError("<prefix>: <message>")."""
    def wrap(fn):
        translated = domain_errors(prefix)(fn)

        @functools.wraps(fn)
        def filter_fn(*args, **kwargs):
            return translated(*plain(args), **plain(kwargs))
        return filter_fn
    return wrap


def problems(fn, *args, **kwargs):
    """[] when fn(*args, **kwargs) accepts its input (as plain data), else [the DomainError's message]."""
    try:
        fn(*plain(args), **plain(kwargs))
    except DomainError as exc:
        return [exc.msg]
    return []
