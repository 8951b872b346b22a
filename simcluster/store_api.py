"""The contract between the API server core, admission and the cluster twins.

`resource` is always the "plural.group" key ("pods", "nodes", "daemonsets.apps",
"clusterpolicies.nvidia.com"); `namespace` is None for cluster-scoped objects.
Objects are plain dicts as the API returns them; every read returns a deep copy.
"""

from typing import Callable, Optional, Protocol


class Store(Protocol):
    def get(self, resource: str, namespace: Optional[str], name: str) -> Optional[dict]:
        """The object, or None."""

    def list(self, resource: str, namespace: Optional[str] = None,
             label_selector: Optional[str] = None) -> list:
        """Objects of that resource, in one namespace or all (namespace=None)."""

    def create(self, resource: str, obj: dict, *, admit: bool = True) -> dict:
        """Create: defaults, validation, admission (unless admit=False), then commit.

        Raises simcluster.errors.ApiError (409 AlreadyExists, 422 Invalid, 403 ...)."""

    def update(self, resource: str, obj: dict, *, admit: bool = True) -> dict:
        """Replace the main resource (status is kept). resourceVersion, if set, must match (409)."""

    def update_status(self, resource: str, obj: dict) -> dict:
        """Replace only .status (the status subresource)."""

    def merge_patch(self, resource: str, namespace: Optional[str], name: str, patch: dict,
                    *, subresource: Optional[str] = None) -> dict:
        """RFC 7386 merge patch, e.g. to set or remove (None) node labels."""

    def bind(self, namespace: str, name: str, node: str) -> dict:
        """The pods/binding subresource: spec.nodeName and PodScheduled=True in one write
        (409 when the pod is already assigned, 404 when it is gone)."""

    def delete(self, resource: str, namespace: Optional[str], name: str) -> None:
        """Delete (a namespace deletes everything in it). Missing -> ApiError 404."""

    def subscribe(self, callback: Callable[[str, str, dict], None]) -> None:
        """callback(event_type, resource, obj) after every committed change.

        event_type is ADDED, MODIFIED or DELETED. It runs in the writer's thread
        without the store lock held: keep it short (queue work, do not block).
        """

    def record_event(self, namespace: str, involved: dict, reason: str, message: str,
                     type_: str = "Normal") -> None:
        """Create a core/v1 Event about `involved` (a full object)."""
