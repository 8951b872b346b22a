"""Host roots laid out on this machine for the read-only node detection (and the chroot tests)."""
import os


def put(root, path, text, mode=0o644):
    """Write `text` to `path` inside `root` (parents made), with `mode`; returns the full path."""
    full = os.path.join(root, path.lstrip("/"))
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as handle:
        handle.write(text)
    os.chmod(full, mode)
    return full
