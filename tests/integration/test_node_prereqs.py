"""Integration: run roles/node_prereqs for real against a Debian 12 root.

The root is made with debootstrap once and cached as a tarball under
~/.cache/skaffon-chroot (keyed by CHROOT_VERSION; kept between runs, built at most
once per run even with several pytest-xdist workers), unpacked once next to it,
and each test gets a writable copy (an overlay mount over the unpacked root, a
plain copy where overlays cannot be mounted), driven through the
community.general.chroot connection. An `nvidia-smi`
stand-in inside the chroot prints real captured outputs from
<repo>/../shared/fixtures/nvidia-smi/.

Build the cache by hand: PYTHONPATH=tests .venv/bin/python tests/integration/test_node_prereqs.py --build
"""
import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile

import pytest

from kit.paths import BIN as VENV_BIN, COLLECTIONS, NVIDIA_SMI as FIXTURES, REPO
from kit.playbook import ansible_playbook
from kit.roots import put

# Bump when the build recipe changes: the cache key is this string.
CHROOT_VERSION = "debian12-minbase-py3-initramfs-headers-v2"
CACHE_DIR = os.path.join(os.path.expanduser("~"), ".cache", "skaffon-chroot")
MIRROR = os.environ.get("SKAFFON_DEBIAN_MIRROR", "http://deb.debian.org/debian")
INCLUDE = "python3,python3-apt,initramfs-tools,kmod,ca-certificates"
BUILD_TIMEOUT = 900


def cache_paths():
    base = os.path.join(CACHE_DIR, CHROOT_VERSION)
    return base + ".tar", base + ".json"


def _run(cmd, env=None):
    return subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=BUILD_TIMEOUT, env=env)


def _in_chroot(root, *cmd):
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "DEBIAN_FRONTEND": "noninteractive",
           "LC_ALL": "C"}
    return _run(["chroot", root] + list(cmd), env=env)


def build_chroot(workdir):
    """debootstrap a Debian 12 root, pre-download a kernel headers package.

    The headers .debs stay in /var/cache/apt/archives so the role's real apt
    install runs without network at test time. Returns the metadata dict.
    """
    tar_path, meta_path = cache_paths()
    root = os.path.join(workdir, "rootfs")
    os.makedirs(CACHE_DIR, exist_ok=True)
    _run(["debootstrap", "--variant=minbase", "--include=" + INCLUDE, "bookworm", root, MIRROR])
    # Throwaway root: dpkg need not fsync every file (the headers install is
    # I/O bound and 3x slower with it on a busy CI machine).
    with open(os.path.join(root, "etc/dpkg/dpkg.cfg.d/skaffon-test-unsafe-io"), "w") as handle:
        handle.write("force-unsafe-io\n")
    # A kernel release the mirror has headers for (the host's own kernel may
    # be a custom one with none): newest versioned cloud-amd64 flavour.
    out = _in_chroot(root, "apt-cache", "search", "--names-only",
                     r"^linux-headers-[0-9.]+-[0-9]+-cloud-amd64$").stdout
    names = sorted(line.split()[0] for line in out.splitlines() if line.strip())
    if not names:
        raise RuntimeError("no linux-headers-*-cloud-amd64 package on %s" % MIRROR)
    release = names[-1][len("linux-headers-"):]
    _in_chroot(root, "apt-get", "install", "-y", "--download-only", "linux-headers-" + release)
    meta = {"version": CHROOT_VERSION, "headers_release": release}
    tmp = "%s.%d.tmp" % (tar_path, os.getpid())
    with tarfile.open(tmp, "w") as tar:
        tar.add(root, arcname=".")
    # metadata first: a reader that sees the tarball also sees the metadata
    with open(meta_path + ".tmp", "w") as f:
        json.dump(meta, f)
    os.replace(meta_path + ".tmp", meta_path)
    os.replace(tmp, tar_path)
    try:        # the built root is the unpacked tarball: keep it instead of unpacking again
        shutil.rmtree(unpacked_paths(tar_path)[0], ignore_errors=True)
        os.rename(root, unpacked_paths(tar_path)[0])
        _stamp(tar_path)
    except OSError:
        shutil.rmtree(root, ignore_errors=True)
    return meta


@contextlib.contextmanager
def cache_lock():
    os.makedirs(CACHE_DIR, exist_ok=True)
    with open(os.path.join(CACHE_DIR, CHROOT_VERSION + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def ensure_chroot(workdir):
    """Cached image, built once even with several pytest-xdist workers; returns the unpacked
    root (read-only by convention: tests work on `writable_root` copies) and the metadata."""
    tar_path, meta_path = cache_paths()
    with cache_lock():
        if not (os.path.exists(tar_path) and os.path.exists(meta_path)):
            build_chroot(workdir)
        pristine = _unpacked(tar_path)
    with open(meta_path) as handle:
        return pristine, json.load(handle)


def unpacked_paths(tar_path):
    """(the unpacked root next to the tarball, the stamp naming the tarball it came from)."""
    root = tar_path[:-len(".tar")] + ".root"
    return root, root + ".from"


def _stamp(tar_path):
    with open(unpacked_paths(tar_path)[1], "w") as handle:
        handle.write(str(os.stat(tar_path).st_mtime_ns))


def _unpacked(tar_path):
    """The tarball unpacked once next to it (again only when the tarball changed); under the lock."""
    root, stamp = unpacked_paths(tar_path)
    if os.path.isdir(root) and os.path.exists(stamp):
        with open(stamp) as handle:
            if handle.read() == str(os.stat(tar_path).st_mtime_ns):
                return root
    shutil.rmtree(root, ignore_errors=True)
    tmp = "%s.%d.tmp" % (root, os.getpid())
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    subprocess.run(["tar", "-xf", tar_path, "-C", tmp], check=True)
    os.rename(tmp, root)
    _stamp(tar_path)
    return root


# --- fixtures ---------------------------------------------------------------------------

def _skip_reason():
    if not os.path.isdir(FIXTURES):
        return "real nvidia-smi fixtures not found at %s (../shared next to the repo)" % FIXTURES
    if os.geteuid() != 0:
        return "needs root: debootstrap and the community.general.chroot connection run as root"
    if not shutil.which("chroot"):
        return "chroot binary not found"
    tar_path, meta_path = cache_paths()
    if not (os.path.exists(tar_path) and os.path.exists(meta_path)) and not shutil.which("debootstrap"):
        return "no cached Debian 12 root in %s and debootstrap is not installed (apt-get install debootstrap)" % CACHE_DIR
    return None


@pytest.fixture(scope="session")
def chroot_image(tmp_path_factory):
    """(unpacked root, metadata) of the cached Debian 12 root; built if missing."""
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    try:
        return ensure_chroot(str(tmp_path_factory.mktemp("debootstrap")))
    except subprocess.CalledProcessError as exc:
        pytest.skip("debootstrap of Debian 12 from %s failed (mirror unreachable?): %s"
                    % (MIRROR, (exc.stderr or exc.stdout or "")[-500:]))
    except subprocess.TimeoutExpired:
        pytest.skip("debootstrap of Debian 12 from %s took over %ds (slow mirror)" % (MIRROR, BUILD_TIMEOUT))


@contextlib.contextmanager
def writable_root(pristine, dest):
    """A root at `dest` to change freely: an overlay over the unpacked `pristine` root (its
    upper layer next to `dest`), or a copy of it where no overlay can be mounted. Removed after."""
    upper, work = dest + ".upper", dest + ".work"
    for path in (dest, upper, work):
        os.makedirs(path)
    mounted = subprocess.run(["mount", "-t", "overlay", "overlay", "-o", "lowerdir=%s,upperdir=%s,workdir=%s"
                              % (pristine, upper, work), dest], capture_output=True).returncode == 0
    if not mounted:
        subprocess.run(["cp", "-a", pristine + "/.", dest], check=True)
    try:
        yield dest
    finally:
        if mounted and subprocess.run(["umount", dest], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", dest], capture_output=True)
        for path in (dest, upper, work):
            shutil.rmtree(path, ignore_errors=True)   # pytest keeps tmp dirs: a copy is 450 MB


def fake_gpu_pci(root):
    # /sys is a plain directory in the unpacked root (nothing is mounted):
    # an H100 (10de:2330, 3D controller) the way sysfs shows it.
    for name, value in (("vendor", "0x10de"), ("device", "0x2330"), ("class", "0x030200")):
        put(root, "/sys/bus/pci/devices/0000:18:00.0/" + name, value + "\n")


def nvidia_smi_stand_in(root, fixture, rc=0):
    """/usr/bin/nvidia-smi inside the root printing a real captured output."""
    with open(os.path.join(FIXTURES, fixture)) as handle:
        captured = handle.read()
    put(root, "/usr/share/skaffon-test/nvidia-smi.out", captured)
    put(root, "/usr/bin/nvidia-smi",
        "#!/bin/sh\ncat /usr/share/skaffon-test/nvidia-smi.out\nexit %d\n" % rc, 0o755)


def write_inventory(tmp, root, **hostvars):
    host = {"ansible_connection": "community.general.chroot", "ansible_host": root,
            "ansible_python_interpreter": "/usr/bin/python3", "ansible_become": False,
            "node_prereqs_label_nodes": False, "node_prereqs_apt_cache_valid_time": 10 ** 9}
    host.update(hostvars)
    inventory = {"all": {"children": {"gpu_nodes": {"hosts": {"gpu-debian": host}}}}}
    path = os.path.join(tmp, "inventory.json")
    with open(path, "w") as handle:
        json.dump(inventory, handle)
    return path


RECAP = re.compile(r"^gpu-debian\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


def playbook(inventory, *extra, check=False):
    env = dict(os.environ)
    env.update({"PATH": VENV_BIN + os.pathsep + env.get("PATH", ""), "ANSIBLE_NOCOLOR": "1",
                "ANSIBLE_FORCE_COLOR": "0", "ANSIBLE_HOST_KEY_CHECKING": "0",
                "ANSIBLE_RETRY_FILES_ENABLED": "0", "ANSIBLE_DEPRECATION_WARNINGS": "0",
                "ANSIBLE_COLLECTIONS_PATH": COLLECTIONS})
    cmd = ansible_playbook() + ["-i", inventory, os.path.join(REPO, "playbooks", "node_prereqs.yml")] + list(extra)
    if check:
        cmd.append("--check")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO, timeout=600, check=False)
    out = proc.stdout + proc.stderr
    match = RECAP.search(proc.stdout)
    assert match, out[-4000:]
    ok, changed, unreachable, failed = (int(x) for x in match.groups())
    return {"rc": proc.returncode, "out": out, "ok": ok, "changed": changed, "failed": failed,
            "unreachable": unreachable}


def dpkg_installed(root, package):
    proc = subprocess.run(["chroot", root, "dpkg-query", "-W", "-f=${Status}", package],
                          capture_output=True, text=True, check=False)
    return proc.returncode == 0 and "install ok installed" in proc.stdout


def snapshot(root):
    """What the role may change: modprobe.d, dpkg status, /usr/src."""
    state = {}
    for rel in ("etc/modprobe.d", "usr/src"):
        base = os.path.join(root, rel)
        state[rel] = sorted(os.listdir(base)) if os.path.isdir(base) else []
    with open(os.path.join(root, "var/lib/dpkg/status")) as handle:
        state["dpkg"] = handle.read()
    return state


BLACKLIST = "/etc/modprobe.d/blacklist-nouveau.conf"


# --- tests ----------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.needs_shared
def test_operator_driver_path_blacklists_nouveau_and_installs_headers(chroot_image, tmp_path):
    pristine, meta = chroot_image
    with writable_root(pristine, str(tmp_path / "root")) as root:
        _operator_driver_path(root, str(tmp_path), meta["headers_release"])


def _operator_driver_path(root, tmp, release):
    fake_gpu_pci(root)
    put(root, "/proc/modules", "nouveau 2433024 1 - Live 0x0000000000000000\n")

    # A kernel without a headers package in the repositories (like this
    # machine's own custom kernel) is refused, naming the package, before
    # anything changes.
    before = snapshot(root)
    refused = playbook(write_inventory(tmp, root, node_prereqs_kernel_release="6.0.0-0-skaffon-custom"))
    assert refused["failed"] == 1 and refused["changed"] == 0
    assert "no package linux-headers-6.0.0-0-skaffon-custom is available" in refused["out"]
    assert "precompiled" in refused["out"]
    assert snapshot(root) == before

    inventory = write_inventory(tmp, root, node_prereqs_kernel_release=release)

    # Check mode on the fresh root: reports the change, changes nothing.
    dry = playbook(inventory, check=True)
    assert dry["failed"] == 0 and dry["changed"] >= 1, dry["out"][-3000:]
    assert snapshot(root) == before

    first = playbook(inventory)
    assert first["failed"] == 0, first["out"][-4000:]
    assert first["changed"] >= 3     # blacklist, headers, initramfs handler
    assert "RUNNING HANDLER [skaffon.gpu_platform.node_prereqs : Rebuild initramfs]" in first["out"]
    with open(os.path.join(root, BLACKLIST.lstrip("/"))) as handle:
        content = handle.read()
    assert "\nblacklist nouveau\noptions nouveau modeset=0\n" in content
    assert oct(os.stat(os.path.join(root, BLACKLIST.lstrip("/"))).st_mode & 0o777) == "0o644"
    # Headers decision: installed for the requested kernel, for real, by apt.
    assert dpkg_installed(root, "linux-headers-" + release)
    assert os.path.isdir(os.path.join(root, "usr/src/linux-headers-" + release))
    # nouveau still loaded: reboot flagged, never forced.
    assert "Reboot needed on gpu-debian" in first["out"]

    second = playbook(inventory)
    assert second["failed"] == 0 and second["changed"] == 0, second["out"][-3000:]
    assert "RUNNING HANDLER" not in second["out"]

    after = snapshot(root)
    dry_again = playbook(inventory, check=True)
    assert dry_again["failed"] == 0 and dry_again["changed"] == 0
    assert snapshot(root) == after


@pytest.fixture(scope="module")
def readonly_root(chroot_image, tmp_path_factory):
    """One unpacked root for scenarios where the role must change nothing."""
    base = tmp_path_factory.mktemp("readonly")
    with writable_root(chroot_image[0], str(base / "root")) as root:
        yield root, str(base)


@pytest.mark.slow
@pytest.mark.needs_shared
def test_preinstalled_driver_is_verified_and_host_left_alone(readonly_root):
    root, tmp = readonly_root
    nvidia_smi_stand_in(root, "h100-80gb-hbm3_mig-enabled__590.48.01__query-gpu.csv")
    before = snapshot(root)
    run = playbook(write_inventory(tmp, root))
    assert run["failed"] == 0 and run["changed"] == 0, run["out"][-3000:]
    assert "Host driver 590.48.01 on gpu-debian serves 1 GPU(s)" in run["out"]
    assert "driver.enabled=False" in run["out"]        # plan: every node has a host driver
    assert "Reboot needed on no host" in run["out"]
    assert snapshot(root) == before
    assert not os.path.exists(os.path.join(root, BLACKLIST.lstrip("/")))


@pytest.mark.slow
@pytest.mark.needs_shared
def test_broken_driver_is_refused_with_reason(readonly_root):
    root, tmp = readonly_root
    nvidia_smi_stand_in(root, "nvidia-smi__error_driver-not-loaded.txt", rc=9)
    before = snapshot(root)
    run = playbook(write_inventory(tmp, root))
    assert run["failed"] == 1 and run["changed"] == 0
    assert "broken host driver on gpu-debian" in run["out"]
    assert "couldn't communicate with the NVIDIA driver" in run["out"]
    assert snapshot(root) == before


@pytest.mark.slow
@pytest.mark.needs_shared
def test_unsupported_os_is_refused(readonly_root):
    root, tmp = readonly_root
    nvidia_smi_stand_in(root, "h100-80gb-hbm3_mig-enabled__590.48.01__query-gpu.csv")
    path = os.path.join(root, "usr/lib/os-release")   # /etc/os-release links here
    with open(path) as handle:
        original = handle.read()
    try:
        put(root, "/usr/lib/os-release", 'PRETTY_NAME="Debian GNU/Linux 11 (bullseye)"\nID=debian\nVERSION_ID="11"\n')
        run = playbook(write_inventory(tmp, root))
    finally:
        put(root, "/usr/lib/os-release", original)
    assert run["failed"] == 1 and run["changed"] == 0
    assert "Debian GNU/Linux 11 (bullseye)" in run["out"]
    assert "supports only" in run["out"]


if __name__ == "__main__" and "--build" in sys.argv:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        print(ensure_chroot(d))
