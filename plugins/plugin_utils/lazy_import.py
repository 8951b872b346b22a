# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The filter files' module_utils, imported by the first filter that calls into them.

To find one filter of a collection, ansible-core loads every file of its plugins/filter/ (a file
may define many filters; a later one may override), in each worker process that runs a task using
any of them, and its collection loader compiles each file from source (there is no bytecode cache
for collection code). With their module_utils imported at the top, every task that used one of
this collection's filters compiled the 15 filter files and the 51 module_utils files they import,
0.1 CPU-s a task. A filter file names its module_utils with `module_utils("node.labels")` instead:
loading the file imports nothing of them, and a filter call imports the one module it uses.

Only what a filter file needs when it is loaded stays a top-level import: the error translation
(plugin_utils/filter_errors.py, core/errors.py) and constants in default arguments (node/pools.py).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib

PACKAGE = "ansible_collections.skaffon.gpu_platform.plugins.module_utils."


class LazyModule(object):
    """A module of module_utils, imported when an attribute is first read."""

    def __init__(self, name):
        self.lazy_name = PACKAGE + name
        self.lazy_module = None

    def __getattr__(self, attribute):
        # called only for what the instance itself lacks: the module's names
        if attribute.startswith("lazy_"):     # a copy or unpickling before __init__ ran
            raise AttributeError(attribute)
        if self.lazy_module is None:
            self.lazy_module = importlib.import_module(self.lazy_name)
        return getattr(self.lazy_module, attribute)

    def __repr__(self):
        return "<module_utils %s, %s>" % (self.lazy_name, "imported" if self.lazy_module else "not imported yet")


def module_utils(name):
    """`name` below plugins/module_utils/ (dotted, e.g. "node.labels"), imported on first use."""
    return LazyModule(name)
