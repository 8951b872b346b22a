"""The controllers' status write."""

from simcluster.errors import ApiError


def write_status(store, resource, obj, status):
    """Replace obj's status through the status subresource (no resourceVersion precondition:
    the controller owns the status); an object deleted meanwhile is let go."""
    obj["status"] = status
    obj.get("metadata", {}).pop("resourceVersion", None)
    try:
        store.update_status(resource, obj)
    except ApiError:
        pass
