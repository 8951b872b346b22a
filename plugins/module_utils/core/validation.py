# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Kubernetes name and label rules, and the boolean spellings, in one place.

Names and labels follow k8s.io/apimachinery/pkg/util/validation: a DNS-1123 label (namespaces,
queue names; at most 63), a DNS-1123 subdomain (node names, label key prefixes; at most 253),
a label key ([prefix/]name, name at most 63 of [A-Za-z0-9-_.]) and a label value (empty or at
most 63 of [A-Za-z0-9-_.], alphanumeric at both ends). The API server refuses anything else,
so a rule written differently in two places lets an input pass one role and fail the next.

`*_problem(value)` says what is wrong and how to fix it (None when valid), for callers that
collect problems in their own frame; `*_error(variable, value)` is the whole message, naming
the variable, the value and the fix.

Booleans: a scalar role variable may arrive as a string (`-e mig_drain=no`); `to_bool` accepts
exactly the spellings Ansible's own `bool` type accepts (ansible.module_utils.parsing.convert_bool),
and every filter and module that reads such a variable parses it here. A boolean inside a
structured value (a team's images.require_digest, monitoring's service_monitor.enabled) stays a
YAML boolean, checked by type: -e never turns a nested value into a string, and a quoted one
there is a typo the role refuses.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import difflib
import re

from ansible.module_utils.parsing.convert_bool import BOOLEANS_FALSE, BOOLEANS_TRUE

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
LABEL_NAME_MAX = 63
LABEL_VALUE_MAX = 63

DNS1123_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# the name part of a label key (a "qualified name"), and a non-empty label value
LABEL_NAME_RE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")

DNS1123_LABEL_FIX = ("use at most %d lowercase letters, digits and '-', starting and ending with a letter "
                     "or digit (e.g. team-a)" % DNS1123_LABEL_MAX)
DNS1123_SUBDOMAIN_FIX = ("use at most %d lowercase letters, digits, '-' and '.', each dot-separated part "
                         "starting and ending with a letter or digit (e.g. gpu-node-1.example.com)"
                         % DNS1123_SUBDOMAIN_MAX)
LABEL_VALUE_FIX = ("use at most %d letters, digits, '-', '_' and '.', starting and ending with a letter or "
                   "digit (quote numbers in YAML: \"4711\")" % LABEL_VALUE_MAX)


class ValidationError(DomainError):
    """A name, label or boolean input the API server (or Ansible) would not accept."""


def _text(value):
    return value if isinstance(value, str) else None


def is_dns_label(value):
    text = _text(value)
    return text is not None and len(text) <= DNS1123_LABEL_MAX and bool(DNS1123_LABEL_RE.match(text))


def is_dns_subdomain(value, max_length=DNS1123_SUBDOMAIN_MAX):
    text = _text(value)
    return text is not None and len(text) <= max_length and bool(DNS1123_SUBDOMAIN_RE.match(text))


def is_label_value(value, allow_empty=True):
    text = _text(value)
    if text is None:
        return False
    if text == "":
        return allow_empty
    return len(text) <= LABEL_VALUE_MAX and bool(LABEL_NAME_RE.match(text))


def dns_label_problem(value):
    return None if is_dns_label(value) else "not a DNS-1123 label: " + DNS1123_LABEL_FIX


def dns_subdomain_problem(value, max_length=DNS1123_SUBDOMAIN_MAX):
    if is_dns_subdomain(value, max_length):
        return None
    fix = DNS1123_SUBDOMAIN_FIX if max_length == DNS1123_SUBDOMAIN_MAX else \
        DNS1123_SUBDOMAIN_FIX.replace(str(DNS1123_SUBDOMAIN_MAX), str(max_length), 1)
    return "not a DNS-1123 subdomain: " + fix


def label_key_problem(value):
    """What is wrong with a label (or taint, or qualified resource) key `[prefix/]name`, or None."""
    if not isinstance(value, str) or not value:
        return "a label key must be a non-empty string ([prefix/]name, e.g. gpu.skaffon.io/pool)"
    prefix, slash, name = value.rpartition("/")
    if slash and not is_dns_subdomain(prefix):
        return ("prefix %r must be a DNS subdomain (lower-case letters, digits, '-' and '.', at most %d): "
                "write it in lower case, e.g. gpu.skaffon.io/" % (prefix, DNS1123_SUBDOMAIN_MAX))
    if len(name) > LABEL_NAME_MAX or not LABEL_NAME_RE.match(name):
        return ("name part %r must be 1-%d characters of [A-Za-z0-9-_.], alphanumeric at both ends"
                % (name, LABEL_NAME_MAX))
    return None


def label_value_problem(value, allow_empty=True):
    return None if is_label_value(value, allow_empty) else "not a label value: " + LABEL_VALUE_FIX


def _error(variable, value, problem):
    return None if problem is None else "%s = %r: %s" % (variable, value, problem)


def dns_label_error(variable, value):
    """`variable = value: why and fix`, or None when `value` is a DNS-1123 label."""
    return _error(variable, value, dns_label_problem(value))


def dns_subdomain_error(variable, value):
    """`variable = value: why and fix`, or None when `value` is a DNS-1123 subdomain (a ConfigMap name, ...)."""
    return _error(variable, value, dns_subdomain_problem(value))


def label_key_error(variable, value):
    return _error(variable, value, label_key_problem(value))


def label_value_error(variable, value, allow_empty=True):
    return _error(variable, value, label_value_problem(value, allow_empty))


def to_bool(value):
    """True or False for Ansible's boolean spellings (True, "yes", "on", "1", 1, "y", "t", ...);
    None for anything else (None included): the caller decides whether that is a default or an error."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        key = value.strip().lower() if isinstance(value, str) else value
        if key in BOOLEANS_TRUE:
            return True
        if key in BOOLEANS_FALSE:
            return False
    return None


def as_bool(value, variable, default=None, error=ValidationError):
    """The boolean `value` of `variable`; None gives `default` (when one is given), anything that is
    not one of Ansible's boolean spellings raises `error` (a DomainError class: the caller's domain
    error, ValidationError by default) naming the variable and the fix."""
    if value is None and default is not None:
        return default
    result = to_bool(value)
    if result is None:
        raise error("%s must be true or false, got %r" % (variable, value), variable=variable)
    return result


def with_suggestions(names, known):
    """"a (did you mean b?), c": each of names with the closest of known, where one is close."""
    out = []
    for name in names:
        close = difflib.get_close_matches(name, list(known), n=1)
        out.append("%s (did you mean %s?)" % (name, close[0]) if close else name)
    return ", ".join(out)
