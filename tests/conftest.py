"""Test-wide setup: make this checkout importable as skaffon.gpu_platform.

The repo root is the collection root, so tests reach it through a symlink
farm build/collections/ansible_collections/skaffon/gpu_platform -> repo root;
playbooks in tests find it with ANSIBLE_COLLECTIONS_PATH=<that farm>.
"""
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.normpath(os.path.join(REPO, "..", "shared"))
COLLECTIONS = os.path.join(REPO, "build", "collections")


def _link_collection():
    ns_dir = os.path.join(COLLECTIONS, "ansible_collections", "skaffon")
    link = os.path.join(ns_dir, "gpu_platform")
    os.makedirs(ns_dir, exist_ok=True)
    if not os.path.islink(link):
        tmp = "%s.%d" % (link, os.getpid())
        os.symlink(REPO, tmp)
        os.replace(tmp, link)


_link_collection()
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)
os.environ.setdefault("ANSIBLE_COLLECTIONS_PATH", COLLECTIONS)
