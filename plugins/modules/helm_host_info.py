#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: helm_host_info
short_description: Find the helm binary, the kubeconfig and a chart archive on the host that runs Helm
version_added: 0.3.0
author: skaffon.gpu_platform contributors (@skaffon)
description:
  - Reads, on the host that runs Helm, what the C(kubernetes.core) Helm modules would be given, so that a role
    can refuse a missing binary, kubeconfig, context or chart archive with a message naming its variable,
    before anything is written.
  - Finds the helm binary (a path, or a name looked up in E(PATH)); says whether the kubeconfig exists and
    which context names it has (nothing else of it is returned, it holds credentials); reads the
    C(Chart.yaml) of a chart archive (C(.tgz), as C(helm package) writes it, or a chart directory).
  - One module run for what took four (C(stat) twice, C(command -v helm), C(helm show chart)).
  - Changes nothing; the cluster is not contacted.
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Reads only; runs in check mode as in a normal run.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  binary_path:
    description:
      - The helm binary, as the C(kubernetes.core) Helm modules take it; a name without C(/) is looked up in
        E(PATH).
    type: str
    default: helm
  kubeconfig:
    description:
      - A kubeconfig file the Helm run will use. Reported whether it exists and, when it parses, its context
        names.
    type: path
  context:
    description:
      - A context the Helm run will use; RV(kubeconfig.has_context) says whether O(kubeconfig) has it.
    type: str
  chart_path:
    description:
      - A chart archive (or chart directory) on this host whose C(Chart.yaml) is read.
    type: path
"""

EXAMPLES = r"""
- name: Find helm, the kubeconfig and the chart archive on the control host
  skaffon.gpu_platform.helm_host_info:
    binary_path: /usr/local/bin/helm
    kubeconfig: /etc/gpu-platform/kubeconfig
    chart_path: /srv/charts/gpu-operator-v26.7.0.tgz
  register: helm_host

- name: Refuse a chart archive of another version
  ansible.builtin.assert:
    that: helm_host.chart.metadata.version == 'v26.7.0'
"""

RETURN = r"""
binary:
  description: The helm binary's absolute path; null when it is not an executable on this host.
  returned: always
  type: str
  sample: /usr/local/bin/helm
kubeconfig:
  description: The kubeconfig file; null when O(kubeconfig) is not given.
  returned: always
  type: dict
  contains:
    path: {description: O(kubeconfig)., type: str}
    exists: {description: Whether the file exists., type: bool}
    contexts: {description: Its context names; null when it is missing or not a kubeconfig., type: list, elements: str}
    has_context:
      description: Whether it has O(context); null when O(context) is not given or the contexts are unknown.
      type: bool
chart:
  description: The chart archive; null when O(chart_path) is not given.
  returned: always
  type: dict
  contains:
    path: {description: O(chart_path)., type: str}
    exists: {description: Whether the archive (or directory) exists., type: bool}
    metadata:
      description: Its C(Chart.yaml) (name, version, appVersion, ...); null when it does not exist.
      type: dict
      sample: {name: gpu-operator, version: v26.7.0, appVersion: v26.7.0}
"""

import os
import tarfile

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError, execute
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.plain import plain


def find_binary(name):
    """`command -v`: a path must be an executable file; a bare name is looked up in PATH."""
    candidates = [name] if os.sep in name else [
        os.path.join(directory or ".", name) for directory in os.environ.get("PATH", "").split(os.pathsep)]
    for path in candidates:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return os.path.abspath(path)
    return None


def _yaml(text, what):
    import yaml   # a dependency of ansible-core and of the kubernetes client, imported where it is used
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise DomainError("%s is not YAML: %s" % (what, getattr(exc, "problem", None) or exc))


def kubeconfig_facts(path, context):
    facts = {"path": path, "exists": os.path.isfile(path), "contexts": None, "has_context": None}
    if facts["exists"]:
        try:
            with open(path) as handle:
                data = _yaml(handle.read(), "kubeconfig %s" % path)
        except (IOError, OSError, DomainError):
            data = None     # unreadable or not YAML: helm says why; this only names contexts
        if isinstance(data, dict):
            facts["contexts"] = [c.get("name") for c in data.get("contexts") or [] if isinstance(c, dict)]
    if context is not None and facts["contexts"] is not None:
        facts["has_context"] = context in facts["contexts"]
    return facts


def chart_metadata(path):
    """Chart.yaml of a chart directory or of an archive: `<chart>/Chart.yaml` at its top (helm package)."""
    if os.path.isdir(path):
        with open(os.path.join(path, "Chart.yaml")) as handle:
            text = handle.read()
    else:
        try:
            with tarfile.open(path, "r:*") as archive:
                # helm package writes Chart.yaml first: the loop ends there, not at the archive's end
                member = next((m for m in archive
                               if m.isfile() and m.name.count("/") == 1 and m.name.endswith("/Chart.yaml")), None)
                if member is None:
                    raise DomainError("chart archive %s has no <chart>/Chart.yaml at its top: it is not a chart "
                                      "archive as `helm package` writes it" % path)
                text = archive.extractfile(member).read().decode("utf-8")
        except (tarfile.TarError, IOError, OSError) as exc:
            raise DomainError("chart archive %s cannot be read (%s): give a chart archive that `helm package` "
                              "wrote" % (path, exc))
    data = _yaml(text, "Chart.yaml of %s" % path)
    if not isinstance(data, dict) or not data.get("name") or not data.get("version"):
        raise DomainError("Chart.yaml of %s has no name and version: it is not a Helm chart" % path)
    return plain(data)


def run(module):
    params = module.params
    result = {"changed": False, "binary": find_binary(params["binary_path"]), "kubeconfig": None, "chart": None}
    if params["kubeconfig"]:
        result["kubeconfig"] = kubeconfig_facts(params["kubeconfig"], params["context"])
    if params["chart_path"]:
        path = params["chart_path"]
        exists = os.path.exists(path)
        result["chart"] = {"path": path, "exists": exists, "metadata": chart_metadata(path) if exists else None}
    return result


def main():
    module = AnsibleModule(argument_spec=dict(
        binary_path=dict(type="str", default="helm"), kubeconfig=dict(type="path"), context=dict(type="str"),
        chart_path=dict(type="path")), supports_check_mode=True)
    execute(module, run)


if __name__ == "__main__":
    main()
