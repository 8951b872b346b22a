# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A stand-in for kubernetes' DynamicClient under a real core.kube.Kube, for the waits' watch loops:
every LIST of the one resource answers the next of `lists` (the last one again once they run out),
and a Clock whose sleep moves time instead of waiting."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class FakeList(object):
    def __init__(self, items, rv):
        self.data = {"items": items, "metadata": {"resourceVersion": rv}}

    def to_dict(self):
        return self.data


class FakeResource(object):
    def __init__(self, lists):
        self.lists = list(lists)
        self.calls = []

    def get(self, **params):
        self.calls.append(params)
        return self.lists.pop(0) if len(self.lists) > 1 else self.lists[0]


class FakeDynamic(object):
    def __init__(self, resource):
        self.resources = self
        self.resource = resource
        self.client = self
        self.configuration = None

    def get(self, **_kw):
        return self.resource


class Clock(object):
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds
