# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes resource quantities (k8s.io/apimachinery resource.Quantity), exactly.

The API server answers a quota `requests.memory: 512Gi` as given but `cpu: 0.5` as `500m`
and `1000` as `1k`: desired and live values are compared as numbers, never as text.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
from fractions import Fraction

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError

# The API server's own regular expression (apimachinery resource/quantity.go).
QUANTITY_PATTERN = r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
_RE = re.compile(QUANTITY_PATTERN)
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}


class QuantityError(DomainError):
    pass


def parse_quantity(value):
    """'500m' / '2Gi' / 4 / 0.5 -> Fraction (rounded up to nano units like the server)."""
    if isinstance(value, bool) or value is None:
        raise QuantityError("%r is not a quantity" % (value,))
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        value = repr(value)
    text = str(value).strip()
    match = _RE.match(text)
    if not match:
        raise QuantityError("%r is not a quantity (expected e.g. 8, 500m, 2Gi, 1.5)" % (value,))
    number, suffix = match.groups()
    try:
        base = Fraction(number)
    except ValueError:
        raise QuantityError("%r is not a quantity (expected e.g. 8, 500m, 2Gi, 1.5)" % (value,))
    if suffix in _DECIMAL:
        result = base * Fraction(10) ** _DECIMAL[suffix]
    elif suffix in _BINARY:
        result = base * 2 ** _BINARY[suffix]
    elif re.match(r"^[eE][-+]?[0-9]+$", suffix):
        result = base * Fraction(10) ** int(suffix[1:])
    else:
        raise QuantityError("%r has an unknown suffix %r (use n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei)"
                            % (value, suffix))
    nanos = result * 10 ** 9
    return Fraction(-((-nanos.numerator) // nanos.denominator), 10 ** 9)


def normalize_quantities(mapping):
    """{resource: quantity} -> {resource: Fraction} for comparison; None stays None."""
    if mapping is None:
        return None
    out = {}
    for key, value in mapping.items():
        try:
            out[key] = parse_quantity(value)
        except QuantityError:
            out[key] = str(value)
    return out
