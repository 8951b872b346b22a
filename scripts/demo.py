#!/usr/bin/env python3
"""`make demo`: the main job against the embedded simulated GPU cluster.

1. start the simulated cluster (tests/clusters/default.yaml: an H100 node whose
   host has a driver, an L40S node without one, a CPU node);
2. lay out one host root per GPU host from REAL nvidia-smi captures
   (../shared/fixtures/nvidia-smi), because the demo has no SSH hosts: the
   detection module reads them exactly as it reads a real host;
3. install the REAL GPU Operator chart v26.7.0 from its archive in ../shared, as an
   air-gapped site does (inventories/demo/group_vars/all.yml names it);
4. run playbooks/demo.yml (inventories/demo): detect -> driver plan -> operator
   install and readiness wait -> time-slicing -> MIG -> a CUDA test pod -> summary.
"""
import os
import shutil
import stat
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(REPO, ".venv", "bin")
FIXTURES = os.path.normpath(os.path.join(REPO, "..", "shared", "fixtures", "nvidia-smi"))
CLUSTER_FILE = os.path.join(REPO, "tests", "clusters", "default.yaml")
CHART = os.path.normpath(os.path.join(REPO, "..", "shared", "upstream", "gpu-operator", "charts",
                                      "gpu-operator-v26.7.0.tgz"))
KERNEL = "6.8.0-45-generic"


def fail(msg):
    sys.stderr.write("demo: %s\n" % msg)
    sys.exit(2)


def write(root, path, text, mode=0o644):
    full = os.path.join(root, path.lstrip("/"))
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as handle:
        handle.write(text)
    os.chmod(full, mode)


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def host_root_common(root):
    write(root, "/etc/os-release", 'ID=ubuntu\nVERSION_ID="22.04"\nPRETTY_NAME="Ubuntu 22.04.5 LTS"\n')
    write(root, "/usr/src/linux-headers-%s/Makefile" % KERNEL, "")
    os.makedirs(os.path.join(root, "lib", "modules", KERNEL), exist_ok=True)
    os.symlink("/usr/src/linux-headers-%s" % KERNEL, os.path.join(root, "lib", "modules", KERNEL, "build"))


def h100_with_host_driver(root):
    """H100 host with a working driver: nvidia-smi prints the real H100 capture."""
    host_root_common(root)
    capture = os.path.join(FIXTURES, "h100-80gb-hbm3_mig-enabled__590.48.01__query-gpu.csv")
    write(root, "/usr/bin/nvidia-smi", "#!/bin/sh\ncat '%s'\n" % capture, stat.S_IRWXU)
    write(root, "/proc/modules", fixture("lsmod-grep-nvidia__modules-loaded.txt"))
    write(root, "/proc/driver/nvidia/version",
          fixture("proc-driver-nvidia-version__open-kernel-module_565.57.01_ubuntu24.04.txt"))


def l40s_without_driver(root):
    """L40S host, no driver yet: only the PCI devices (vendor 10de) tell it is a GPU host."""
    host_root_common(root)
    write(root, "/proc/modules", "")
    for idx in range(4):
        dev = "/sys/bus/pci/devices/0000:%02x:00.0/" % (0x41 + idx)
        write(root, dev + "vendor", "0x10de\n")
        write(root, dev + "device", "0x26b9\n")
        write(root, dev + "class", "0x030200\n")


def start_cluster(kubeconfig):
    proc = subprocess.Popen([sys.executable, "-m", "simcluster", "--cluster", CLUSTER_FILE,
                             "--kubeconfig", kubeconfig], cwd=REPO, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline().strip()
    if not line.startswith("ready "):
        proc.kill()
        fail("simulated cluster did not start (said %r)" % line)
    print("demo: simulated cluster at %s, kubeconfig %s" % (line.split()[1], kubeconfig))
    return proc


def main():
    if not os.path.isdir(FIXTURES):
        fail("real nvidia-smi captures not found at %s (../shared next to the repo)" % FIXTURES)
    if not os.path.exists(CHART):
        fail("real GPU Operator chart not found at %s (../shared next to the repo)" % CHART)
    work = tempfile.mkdtemp(prefix="gpu-platform-demo-")
    roots = {"gpu-h100-1": h100_with_host_driver, "gpu-l40s-1": l40s_without_driver}
    for host, build in roots.items():
        build(os.path.join(work, "hosts", host))
    kubeconfig = os.path.join(work, "kubeconfig")
    proc = start_cluster(kubeconfig)
    env = dict(os.environ, KUBECONFIG=kubeconfig, K8S_AUTH_KUBECONFIG=kubeconfig,
               PATH=BIN + os.pathsep + os.environ.get("PATH", ""),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, "build", "collections"),
               ANSIBLE_PYTHON_INTERPRETER=os.path.join(BIN, "python"))
    cmd = [os.path.join(BIN, "ansible-playbook"), "-i", os.path.join(REPO, "inventories", "demo"),
           os.path.join(REPO, "playbooks", "demo.yml"),
           "-e", "demo_hosts_dir=%s demo_kernel=%s" % (os.path.join(work, "hosts"), KERNEL)] + sys.argv[1:]
    try:
        rc = subprocess.call(cmd, cwd=REPO, env=env)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(rc)


if __name__ == "__main__":
    main()
