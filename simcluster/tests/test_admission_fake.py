"""The contract of kit.fake_store.FakeStore, the Store the admission tests use: admit before
commit, subscribers notified after."""
import pytest

from kit.fake_store import FakeStore, pod
from simcluster.errors import ApiError


def test_fake_store_calls_admit_before_commit():
    store = FakeStore()
    with pytest.raises(ApiError):
        store.create("pods", pod(name="Bad_Name"))
    assert store.get("pods", "default", "Bad_Name") is None


def test_fake_store_notifies_subscribers_after_commit():
    store = FakeStore()
    seen = []
    store.subscribe(lambda ev, res, obj: seen.append((ev, res, obj["metadata"]["name"])))
    store.create("configmaps", {"metadata": {"name": "cm", "namespace": "default"}})
    assert ("ADDED", "configmaps", "cm") in seen
