"""A bytecode cache for the collection loader of ansible-core (for kit/ansible_playbook.py).

The collection loader compiles a collection's Python (the collections' packages, the module_utils
their filter and action plugins import) from its source at every import in the controller's
processes and keeps no bytecode; every worker of every playbook run imports them again (a worker
is a fork of a run that had not). `cache(directory)` keeps the code it compiles in a directory,
keyed by the file name and the source it was compiled from, and reads it back instead of
compiling: the same code object either way, and a changed source is compiled again.
"""
import hashlib
import marshal
import os


def cache(directory):
    """Have the collection loader keep the code it compiles in `directory` (made if missing); once
    per process (a playbook run, as it starts)."""
    from ansible.utils.collection_loader import _collection_finder
    loader = _collection_finder._AnsibleCollectionPkgLoaderBase
    get_code = loader.get_code
    os.makedirs(directory, exist_ok=True)

    def get_code_through_cache(self, fullname):
        if self._compiled_code:
            return self._compiled_code
        source = self.get_source(fullname)
        if not source:      # a package without code, or an empty file: nothing to compile
            return get_code(self, fullname)
        filename = self.get_filename(fullname) or "<string>"
        digest = hashlib.sha256(os.fsencode(filename) + b"\0" + (
            source if isinstance(source, bytes) else source.encode("utf-8", "surrogateescape")))
        path = os.path.join(directory, digest.hexdigest())
        try:
            with open(path, "rb") as fh:
                self._compiled_code = marshal.loads(fh.read())
        except (OSError, EOFError, ValueError, TypeError):
            code = get_code(self, fullname)
            tmp = "%s.%d" % (path, os.getpid())
            try:
                with open(tmp, "wb") as fh:
                    fh.write(marshal.dumps(code))
                os.replace(tmp, path)      # a reader sees a whole file or none
            except OSError:     # not kept: the next import compiles it again
                pass
        return self._compiled_code

    loader.get_code = get_code_through_cache
