#!/usr/bin/env python3
"""`make demo`: start the simulated GPU cluster, run the main job against it, stop it.

The cluster is described by tests/clusters/demo.yaml; the job is
playbooks/demo.yml with the inventory inventories/demo/. Output is the
playbook's own, followed by what the cluster now offers.
"""
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(REPO, ".venv", "bin")


def fail(msg):
    sys.stderr.write("demo: %s\n" % msg)
    sys.exit(2)


def start_cluster(cluster_file, kubeconfig):
    if not os.path.exists(os.path.join(REPO, "simcluster", "__main__.py")):
        fail("the simulated cluster (simcluster/) is not built yet; nothing to run the demo against")
    proc = subprocess.Popen([sys.executable, "-m", "simcluster", "--cluster", cluster_file,
                             "--kubeconfig", kubeconfig], cwd=REPO, stdout=subprocess.PIPE,
                            text=True)
    line = proc.stdout.readline().strip()
    if not line.startswith("ready "):
        proc.kill()
        fail("simulated cluster did not start (said %r)" % line)
    print("demo: simulated cluster %s (kubeconfig %s)" % (line.split()[1], kubeconfig))
    return proc


def main():
    cluster_file = os.path.join(REPO, "tests", "clusters", "demo.yaml")
    playbook = os.path.join(REPO, "playbooks", "demo.yml")
    inventory = os.path.join(REPO, "inventories", "demo")
    for path in (cluster_file, playbook, inventory):
        if not os.path.exists(path):
            fail("%s is missing" % os.path.relpath(path, REPO))
    workdir = tempfile.mkdtemp(prefix="gpu-platform-demo-")
    kubeconfig = os.path.join(workdir, "kubeconfig")
    proc = start_cluster(cluster_file, kubeconfig)
    env = dict(os.environ, KUBECONFIG=kubeconfig, K8S_AUTH_KUBECONFIG=kubeconfig,
               PATH=BIN + os.pathsep + os.environ.get("PATH", ""),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, "build", "collections"))
    try:
        rc = subprocess.call([os.path.join(BIN, "ansible-playbook"), "-i", inventory, playbook],
                             cwd=REPO, env=env)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    sys.exit(rc)


if __name__ == "__main__":
    main()
