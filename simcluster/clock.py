"""The simulator's one wall clock, in the time formats of the Kubernetes API."""

import datetime


def utcnow():
    return datetime.datetime.now(datetime.timezone.utc)


def now():
    """metav1.Time: RFC 3339 in seconds (timestamps of objects, conditions, managedFields)."""
    return utcnow().strftime("%Y-%m-%dT%H:%M:%SZ")


def now_micro():
    """metav1.MicroTime: RFC 3339 in microseconds (audit stage timestamps)."""
    return utcnow().strftime("%Y-%m-%dT%H:%M:%S.%fZ")
