"""resource.Quantity: parse, compare, add and print like k8s.io/apimachinery.

String() is the canonical form the API server prints in messages: 0.5 -> "500m",
1000 -> "1k", 2048Mi -> "2Gi", 1536Mi stays "1536Mi".
"""

import re
from fractions import Fraction

from simcluster.errors import ApiError

QUANTITY_RE_TEXT = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
_RE = re.compile(r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$")

_DEC = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BIN = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DEC_SUFFIX = {v: k for k, v in _DEC.items()}
_BIN_SUFFIX = {v: k for k, v in _BIN.items()}

DECIMAL_SI, BINARY_SI, DECIMAL_EXPONENT = "DecimalSI", "BinarySI", "DecimalExponent"


class QuantityError(ValueError):
    pass


class Quantity:
    """Exact value in integer nano-units (the server rounds up to nano precision)."""

    __slots__ = ("nanos", "format")

    def __init__(self, value=0, fmt=DECIMAL_SI, *, nanos=None):
        if nanos is None:
            v = Fraction(value) * 10 ** 9
            nanos = -((-v.numerator) // v.denominator)  # ceil
        self.nanos = nanos
        self.format = fmt

    @property
    def value(self):
        return Fraction(self.nanos, 10 ** 9)

    # -- parsing -----------------------------------------------------------
    @classmethod
    def parse(cls, text):
        if isinstance(text, Quantity):
            return text
        if isinstance(text, bool) or text is None:
            raise QuantityError("quantities must match the regular expression '%s'"
                                % QUANTITY_RE_TEXT)
        if isinstance(text, int):
            return cls(text)
        if isinstance(text, float):
            text = repr(text)
        text = str(text).strip()
        m = _RE.match(text)
        if not m or text in ("", "+", "-"):
            raise QuantityError("quantities must match the regular expression '%s'"
                                % QUANTITY_RE_TEXT)
        num, suffix = m.group(1), m.group(2)
        if num.count(".") > 1 or num.strip("+-") in ("", "."):
            raise QuantityError("quantities must match the regular expression '%s'"
                                % QUANTITY_RE_TEXT)
        try:
            base = Fraction(num)
        except ValueError:
            raise QuantityError("quantities must match the regular expression '%s'"
                                % QUANTITY_RE_TEXT)
        if suffix in _DEC:
            value, fmt = base * Fraction(10) ** _DEC[suffix], DECIMAL_SI
        elif suffix in _BIN:
            value, fmt = base * (2 ** _BIN[suffix]), BINARY_SI
        elif suffix[:1] in ("e", "E") and re.match(r"^[eE][-+]?[0-9]+$", suffix):
            value, fmt = base * Fraction(10) ** int(suffix[1:]), DECIMAL_EXPONENT
        else:
            raise QuantityError("unable to parse quantity's suffix")
        return cls(value, fmt)  # rounded up to nano precision

    # -- arithmetic ----------------------------------------------------------
    def __add__(self, other):
        fmt = self.format if self.nanos != 0 or other.nanos == 0 else other.format
        return Quantity(fmt=fmt, nanos=self.nanos + other.nanos)

    def __sub__(self, other):
        return Quantity(fmt=self.format, nanos=self.nanos - other.nanos)

    def __lt__(self, other):
        return self.nanos < other.nanos

    def __le__(self, other):
        return self.nanos <= other.nanos

    def __gt__(self, other):
        return self.nanos > other.nanos

    def __ge__(self, other):
        return self.nanos >= other.nanos

    def __eq__(self, other):
        return isinstance(other, Quantity) and self.nanos == other.nanos

    def __hash__(self):
        return hash(self.nanos)

    def __repr__(self):
        return "Quantity(%s)" % self

    def is_zero(self):
        return self.nanos == 0

    def milli(self):
        return Fraction(self.nanos, 10 ** 6)

    def max(self, other):
        return self if self.nanos >= other.nanos else other

    # -- printing ----------------------------------------------------------
    def __str__(self):
        v = self.value
        if v == 0:
            return "0"
        fmt = self.format
        if fmt == BINARY_SI:
            if -1024 < v < 1024 or v.denominator != 1:
                fmt = DECIMAL_SI
        if fmt == BINARY_SI:
            n = int(v)
            exp = 0
            while exp < 60 and n % 1024 == 0:
                n //= 1024
                exp += 10
            return "%d%s" % (n, _BIN_SUFFIX[exp])
        # decimal: integer mantissa, exponent a multiple of 3, at least nano.
        exp = -9
        mant = self.nanos
        while exp < 18 and mant % 1000 == 0:
            mant //= 1000
            exp += 3
        if fmt == DECIMAL_EXPONENT:
            return "%d%s" % (mant, "" if exp == 0 else "e%d" % exp)
        return "%d%s" % (mant, _DEC_SUFFIX[exp])


def parse(text):
    return Quantity.parse(text)


def bad_request(kind, version, err):
    """The decode error a real server gives for a malformed quantity (HTTP 400)."""
    return ApiError(400, "BadRequest", '%s in version "%s" cannot be handled as a %s: %s'
                    % (kind, version, kind, err))


def pretty(resources):
    """quota prettyPrint: sorted key=value joined by ','."""
    return ",".join("%s=%s" % (k, resources[k]) for k in sorted(resources))
