"""A module zygote's ansible: module_utils imported once, given to a run only if its payload holds them.

A module run imports ansible's module_utils, kubernetes.core's client and the collection's base from
its payload (the zip AnsiballZ writes and puts first on sys.path): about 0.02 of the 0.11 CPU-s such
a run costs in a zygote that holds only the third-party libraries, with the bytecode the kit's
payloads carry (kit/ansible_playbook.py; 0.1 of 0.19 CPU-s without it). A module zygote imports those
module_utils once, from the files the controller builds the payloads from, and keeps them out of
sys.modules. A run gets them only when its own payload holds the very same files: the first time the
run imports one of them, every file of its group is looked up in the payload (CRC-32 and size, read
from the zip's directory); if any is missing or differs, the run imports the whole group from its
payload as python would, so a module_util a payload lacks fails here as it fails on a host.

Groups: what importing a group's modules loaded, with the groups it was loaded beside (a group is
given only with those). A group is given whole: all its modules enter sys.modules, with `__file__`,
`__spec__` and `__loader__` of the payload, as after an import of the group's modules from it.
Differences a test could see, none of which the tests read: a held module's code names the file it
was compiled from (a traceback shows site-packages, not the payload's zip); a run has a group's
modules in sys.modules although it imported only some; the finder is first on sys.meta_path.

Packages a payload makes itself are never held (`ansible` and `ansible.module_utils`, which extend
their path with pkgutil, and the collections' empty packages): a run imports them from its payload.
"""
import copy
import importlib
import importlib.util
import os
import sys
import warnings
import zipfile
import zipimport
import zlib

# (group, modules imported, groups loaded beside it), in the order they are imported
GROUPS = (
    ("ansible", ("ansible.module_utils._internal._ansiballz._loader", "ansible.module_utils.basic"), ()),
    ("kubernetes.core", tuple("ansible_collections.kubernetes.core.plugins.module_utils." + name for name in (
        "ansiblemodule", "args_common", "k8s.client", "k8s.core", "k8s.exceptions")), ("ansible",)),
    ("kubernetes.core helm", tuple("ansible_collections.kubernetes.core.plugins.module_utils." + name for name in (
        "helm", "helm_args_common")), ("ansible", "kubernetes.core")),
    ("skaffon.gpu_platform", ("ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.module_base",),
     ("ansible", "kubernetes.core")),
)
PAYLOAD_PACKAGES = ("ansible", "ansible.module_utils", "ansible_collections")


class Group:
    def __init__(self, name, deps):
        self.name, self.deps = name, deps
        self.modules = {}       # name -> (module, path in the payload, crc32, size)
        self.meta_path = []     # finders its imports added (six's)
        self.filters = []       # warning filters its imports added
        self.given = None       # in a run: True once given, False if its payload differs
        self.specs = None       # in a run: the payload's spec of each module


class PayloadImports:
    """The held groups, and the meta path finder that gives them to a run."""

    def __init__(self, groups=GROUPS):
        self.groups = {}
        self.owner = {}         # module name -> its group
        self.declared = groups
        self.log = []

    # -- in the zygote ----------------------------------------------------------------------------

    def preload(self):
        spec = importlib.util.find_spec("ansible")      # finds it without importing it
        if spec is None:
            return
        site = os.path.dirname(spec.submodule_search_locations[0])
        roots = collection_roots(site)
        for name, modules, deps in self.declared:
            try:
                self.load(Group(name, deps), modules, site, roots)
            except Exception as exc:     # not held: its runs import it from their payloads
                self.log.append("%s: %s: %s" % (name, type(exc).__name__, exc))
        sys.meta_path.insert(0, self)

    def load(self, group, modules, site, roots):
        missing = [dep for dep in group.deps if dep not in self.groups]
        if missing:
            raise ImportError("needs %s" % ", ".join(missing))
        deps = [self.groups[dep] for dep in closure(self.groups, group.deps)]
        beside = {name for dep in deps for name in dep.modules}
        before, meta_path, filters = set(sys.modules), list(sys.meta_path), list(warnings.filters)
        for dep in deps:
            for name, held in dep.modules.items():
                sys.modules[name] = held[0]
            sys.meta_path.extend(dep.meta_path)
        with_deps = list(sys.meta_path)
        stubs = payload_packages(site, roots)
        try:
            for name in modules:
                importlib.import_module(name)
        finally:
            # the libraries they import stay, as the zygote's own imports do: a payload does not bring them
            added = [name for name in sys.modules if name not in before and name.split(".")[0] in PAYLOAD_PACKAGES]
            loaded = {name: sys.modules.pop(name) for name in added}
            for name in stubs:
                sys.modules.pop(name, None)
            group.meta_path = [entry for entry in sys.meta_path if entry not in with_deps]
            group.filters = [entry for entry in warnings.filters if entry not in filters]
            sys.meta_path[:], warnings.filters[:] = meta_path, filters
        for name, module in loaded.items():
            if name in beside or name in stubs:
                continue
            held = held_file(name, module, roots)
            if held is None:
                continue        # a package the payload makes, or a module another one registered (six's)
            if name in self.owner:
                raise ImportError("%s is already held by %s" % (name, self.owner[name].name))
            group.modules[name] = (module,) + held
        for name in group.modules:
            self.owner[name] = group
        self.groups[group.name] = group

    # -- in a run ---------------------------------------------------------------------------------

    def find_spec(self, name, path=None, target=None):
        group = self.owner.get(name)
        if group is None or not self.give(group, name):
            return None
        module, spec = group.modules[name][0], group.specs[name]
        given = copy.copy(spec)
        given.loader = Given(module, spec)
        return given

    def give(self, group, requested=None):
        """Whether the run has the group (and the groups beside it): given now if its payload holds
        the same files. All its modules but `requested` enter sys.modules; that one the import
        system is importing."""
        if group.given is None:
            group.given = False
            if all(self.give(self.groups[dep]) for dep in group.deps):
                group.specs = self.payload_specs(group)
                if group.specs is not None:
                    self.enter(group, requested)
                    group.given = True
        return group.given

    def payload_specs(self, group):
        """{name: the spec python finds in the payload} if the payload holds each file as held."""
        archive = payload_archive()
        if archive is None:
            return None
        try:
            with zipfile.ZipFile(archive) as payload:
                for _module, path, crc, size in group.modules.values():
                    info = payload.getinfo(path)
                    if (info.CRC, info.file_size) != (crc, size):
                        return None
        except (OSError, KeyError, zipfile.BadZipFile):
            return None
        specs = {}
        for name, (_module, path, _crc, _size) in group.modules.items():
            package = name.rpartition(".")[0].replace(".", "/")
            spec = zipimport.zipimporter(os.path.join(archive, package)).find_spec(name)
            source = os.path.join(archive, path)
            # the source, or the bytecode the kit's payloads carry beside it (kit/ansible_playbook.py)
            if spec is None or spec.origin not in (source, source + "c"):
                return None
            specs[name] = spec
        return specs

    def enter(self, group, requested):
        """The group's modules into sys.modules as an import from the payload leaves them."""
        for name in sorted(group.modules, key=lambda module_name: module_name.count(".")):
            module, spec = group.modules[name][0], group.specs[name]
            module.__spec__, module.__loader__, module.__file__ = spec, spec.loader, spec.origin
            module.__dict__.pop("__cached__", None)     # a module from a zip has none
            if spec.submodule_search_locations is not None:
                module.__path__ = spec.submodule_search_locations
            if name == requested:
                continue
            parent, _dot, child = name.rpartition(".")
            if parent in group.modules or self.owner.get(parent) is not None and self.owner[parent].given:
                package = self.owner[parent].modules[parent][0]
            else:
                package = sys.modules.get(parent) or importlib.import_module(parent)   # one the payload makes
            sys.modules[name] = module
            setattr(package, child, module)
        sys.meta_path.extend(group.meta_path)
        for entry in reversed(group.filters):
            warnings.filters.insert(0, entry)


class Given:
    """The loader of a held module given to a run: the module as it is, its spec the payload's."""

    def __init__(self, module, spec):
        self.module, self.spec = module, spec

    def create_module(self, _spec):
        return self.module

    def exec_module(self, module):
        module.__spec__, module.__loader__ = self.spec, self.spec.loader


def closure(groups, names):
    seen = []
    for name in names:
        for dep in closure(groups, groups[name].deps) + [name]:
            if dep not in seen:
                seen.append(dep)
    return seen


def collection_roots(site):
    """Where ansible finds collections for these runs, in its order: ANSIBLE_COLLECTIONS_PATH, then
    site-packages (which also holds ansible's own module_utils)."""
    configured = os.environ.get("ANSIBLE_COLLECTIONS_PATH") or os.environ.get("ANSIBLE_COLLECTIONS_PATHS") or ""
    return [path for path in configured.split(os.pathsep) if path] + [site]


def payload_packages(site, roots):
    """The packages a payload makes (not held): set up so that the held modules import from the files
    the controller builds payloads from. `ansible` names its file: module_utils read it at import."""
    made = {}
    for name, locations in (("ansible", [os.path.join(site, "ansible")]),
                            ("ansible.module_utils", [os.path.join(site, "ansible", "module_utils")]),
                            ("ansible_collections", [os.path.join(root, "ansible_collections") for root in roots])):
        module = type(sys)(name)
        module.__path__, module.__package__ = [path for path in locations if os.path.isdir(path)], name
        module.__file__ = os.path.join(locations[0], "__init__.py")
        made[name] = sys.modules[name] = module
    sys.modules["ansible"].module_utils = made["ansible.module_utils"]
    return made


def held_file(name, module, roots):
    """(path in a payload, crc32, size) of a module imported from its own file under `roots`, else None."""
    origin = getattr(module, "__file__", None)
    if not origin or name in PAYLOAD_PACKAGES:
        return None
    path = name.replace(".", "/") + ("/__init__.py" if os.path.basename(origin) == "__init__.py" else ".py")
    if not any(origin == os.path.join(root, path) for root in roots):
        return None
    with open(origin, "rb") as fh:
        data = fh.read()
    return path, zlib.crc32(data), len(data)


def payload_archive():
    """The zip the run's `ansible` package came from (AnsiballZ's payload), or None."""
    package = sys.modules.get("ansible")
    loader = getattr(getattr(package, "__spec__", None), "loader", None)
    return getattr(loader, "archive", None) if isinstance(loader, zipimport.zipimporter) else None
