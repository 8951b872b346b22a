# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Builtin types only: Ansible hands filters and modules tagged str/int subclasses and lazy
containers, which PyYAML cannot represent and which compare or hash in surprising ways."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def plain(value):
    if isinstance(value, dict) or hasattr(value, "items"):
        return dict((plain(k), plain(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    for kind in (bool, int, float, str):
        if isinstance(value, kind):
            return kind(value)
    return value
