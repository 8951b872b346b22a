"""`ansible-playbook` as .venv/bin/ansible-playbook runs it, with two differences: the AnsiballZ
payloads live as long as the test session instead of one run, and carry their bytecode. A zygote
(kit/zygote.py) also reads once, before it forks its runs, what every run reads the same way (warm()).

ansible-playbook builds each module's payload (the module and its module_utils, zipped) once per
run, in a cache under the run's private temporary directory, keyed by the module's name. The
suite starts ansible-playbook some 400 times and so rebuilt the same twenty payloads thousands of
times (about a tenth of the integration suite's CPU). Within one session neither the collection
nor ansible-core changes, so a payload an earlier run built is the one this run would build. The
test kit's plugin makes the cache directory when the session starts and removes it when it ends: a
later session, which may run edited modules, never sees it.

A module process imports its module_utils from the payload, a zip of sources: zipimport compiles
every imported file on every run (ansible.module_utils.basic and its helpers, kubernetes.core's
and our module_utils: a sixth of a Kubernetes module run's CPU) and cannot write a cache. The payloads this
session builds get each source's bytecode beside it, as a checked hash-based pyc: zipimport uses it
only while it matches the source next to it, and otherwise compiles as before. The collection
loader, which compiles the collections' Python at every import in the controller's processes, gets
a bytecode cache too (kit/collection_bytecode.py). Everything else (options, configuration,
output, exit code) is ansible-playbook's own.

    python tests/kit/ansible_playbook.py <session cache directory> <ansible-playbook arguments>
"""
import base64
import dataclasses
import importlib.util
import io
import marshal
import os
import sys
import zipfile

try:
    from . import collection_bytecode   # imported as kit.ansible_playbook (the unit tests)
except ImportError:
    import collection_bytecode          # the script, or a zygote's import: the kit's directory on sys.path

if __name__ == "__main__":
    del sys.path[0]     # this script's directory, the test kit: nothing ansible-playbook should import

from ansible.cli.playbook import main  # noqa: E402
from ansible import constants as C  # noqa: E402
from ansible.executor import module_common  # noqa: E402

CHECKED_HASH_PYC = (0b11).to_bytes(4, "little")    # PEP 552: hash-based, checked against the source
PAYLOAD_PREFIX = "<ansiballz payload>/"   # a traceback's file names; keeps ansible's /ansible_collections/ match


def share_payload_cache(session_cache):
    # ansible's own lookup path; its lock and atomic rename already serve concurrent builders
    os.symlink(session_cache, os.path.join(C.DEFAULT_LOCAL_TMP, "ansiballz_cache"))
    collection_bytecode.cache(os.path.join(os.path.dirname(session_cache), "collection-bytecode"))


def with_bytecode(zip_data):
    """The base64 payload `zip_data` with a .pyc beside each .py (where zipimport looks first)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(base64.b64decode(zip_data))) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            source = src.read(info)
            dst.writestr(info, source)
            if info.filename.endswith(".py"):
                # named as in the payload; at run time the payload is a random temporary path
                code = compile(source, PAYLOAD_PREFIX + info.filename, "exec", dont_inherit=True)
                pyc = zipfile.ZipInfo(info.filename + "c", info.date_time)
                pyc.compress_type = info.compress_type
                dst.writestr(pyc, importlib.util.MAGIC_NUMBER + CHECKED_HASH_PYC +
                             importlib.util.source_hash(source) + marshal.dumps(code))
    return base64.b64encode(out.getvalue())


def cache_bytecode():
    dump = module_common._CachedModule.dump

    def dump_with_bytecode(self, path):
        # what this run builds it uses as built; the runs after it load the cached file
        dump(dataclasses.replace(self, zip_data=with_bytecode(self.zip_data)), path)

    module_common._CachedModule.dump = dump_with_bytecode


def memoize_collection_meta():
    """The collection loader parses a collection's meta/runtime.yml as it imports the collection's
    package, through a function ansible lets tools replace with a caching one (its content_id
    argument is there for that). Keyed by the content as well as the collection: the same bytes give
    the same routing."""
    from ansible.utils.collection_loader import _collection_finder
    parse, parsed = _collection_finder._meta_yml_to_dict, {}

    def meta_yml_to_dict(yaml_string_data, content_id):
        key = (content_id, yaml_string_data)
        if key not in parsed:
            parsed[key] = parse(yaml_string_data, content_id)
        return parsed[key]

    _collection_finder._meta_yml_to_dict = meta_yml_to_dict
    return meta_yml_to_dict


def warm():
    """What every run reads the same way, for a zygote to read once before it forks the runs (each
    run gets a copy of it; the zygote has the runs' environment and working directory, which is
    all ansible's configuration reads): ansible.builtin's routing table (the 370 KB runtime.yml
    the collection loader parses in every run) and the configuration definitions of ansible-core's
    connection, shell, become and callback plugins (the playbook executor and the callback setup
    load every one of them in every run, parsing each plugin's DOCUMENTATION; a run then finds
    them defined). A run's own process: about 0.25 -> 0.12 CPU-s on a short play."""
    import ansible
    from ansible.plugins.loader import become_loader, callback_loader, connection_loader, shell_loader
    with open(os.path.join(os.path.dirname(ansible.__file__), "config", "ansible_builtin_runtime.yml"), "rb") as fh:
        memoize_collection_meta()(fh.read(), ("ansible.builtin", "runtime.yml"))
    for loader in (connection_loader, shell_loader, become_loader, callback_loader):
        list(loader.all(class_only=True))


if __name__ == "__main__":
    share_payload_cache(sys.argv.pop(1))
    cache_bytecode()
    sys.exit(main())
