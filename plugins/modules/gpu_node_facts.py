#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gpu_node_facts
short_description: Detect NVIDIA GPUs, driver, container toolkit and runtime setup of a node
version_added: 0.1.0
author: skaffon.gpu_platform contributors (@skaffon)
description:
  - Gathers, in one run, everything needed to decide who installs the NVIDIA driver and container
    toolkit on a Kubernetes GPU node (the host or the GPU Operator).
  - "GPUs come from C(nvidia-smi --query-gpu) (index, name, UUID, PCI bus id, memory, MIG capable,
    MIG mode current/pending); when no driver answers, NVIDIA display controllers (PCI vendor
    C(0x10de), class C(0x03xx)) are read from sysfs, so a GPU host without a driver is still a GPU host."
  - "Driver state is one of C(host) (working host driver), C(operator) (the GPU Operator's driver
    container is mounted at C(/run/nvidia/driver)), C(broken) (installed but unusable, with the
    reason, e.g. module not loaded or NVML/driver library mismatch) or C(none)."
  - Also reports loaded kernel modules (nouveau), C(/proc/driver/nvidia/version), the container toolkit
    (C(nvidia-ctk), C(nvidia-container-runtime)), whether containerd or CRI-O have an nvidia runtime and
    use it as default, the kernel release and whether its build headers are installed, and the OS.
  - Read-only. Never changes the host.
options:
  root:
    description:
      - Directory treated as the host's C(/) for every file read (C(/etc), C(/proc), C(/sys), C(/usr)).
      - Meant for tests and for inspecting a mounted image or chroot; leave the default on real hosts.
    type: path
    default: /
  nvidia_smi_path:
    description:
      - Path of C(nvidia-smi). Default is a lookup in the usual binary directories under O(root).
      - Meant for tests (a stand-in printing captured output) and unusual install locations.
    type: path
  nvidia_ctk_path:
    description: Path of C(nvidia-ctk). Default is a lookup under O(root).
    type: path
  nvidia_container_runtime_path:
    description: Path of C(nvidia-container-runtime). Default is a lookup under O(root).
    type: path
  kernel_release:
    description:
      - Kernel release whose headers are looked for. Default is the running kernel (C(uname -r)).
    type: str
  command_timeout:
    description:
      - Seconds after which a hung C(nvidia-smi) (failing GPU) is killed and reported as broken.
      - Needs the C(timeout) utility on the host; without it commands run unbounded.
    type: int
    default: 30
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.facts
attributes:
  check_mode:
    support: full
    details: Runs normally in check mode; it never changes the host.
  diff_mode:
    support: none
    details: Nothing changes, so there is no diff.
  facts:
    support: full
    details: Returns its result as facts under C(ansible_facts.gpu_node).
  platform:
    platforms: posix
notes:
  - Facts are returned under the single key C(gpu_node) (C(ansible_facts.gpu_node)).
  - Binaries are looked up under O(root) in C(/usr/bin), C(/usr/sbin), C(/usr/local/bin), C(/bin),
    C(/sbin) and C(/usr/local/nvidia/bin).
seealso:
  - plugin: skaffon.gpu_platform.driver_plan
    plugin_type: filter
"""

EXAMPLES = r"""
- name: Detect GPU driver and toolkit state
  skaffon.gpu_platform.gpu_node_facts:

- name: Show the driver state
  ansible.builtin.debug:
    msg: "{{ ansible_facts.gpu_node.driver.state }} {{ ansible_facts.gpu_node.driver.version }}"

- name: Inspect a mounted image (tests, chroots)
  skaffon.gpu_platform.gpu_node_facts:
    root: /mnt/image
    nvidia_smi_path: /opt/fake/nvidia-smi
    kernel_release: 6.8.0-45-generic
"""

RETURN = r"""
ansible_facts:
  description: Facts to add to ansible_facts.
  returned: always
  type: complex
  contains:
    gpu_node:
      description: Everything detected about the node.
      returned: always
      type: dict
      contains:
        schema:
          description: Layout version of these facts.
          type: int
          sample: 1
        gpu_host:
          description: True when the node has an NVIDIA GPU (from nvidia-smi, sysfs or a driver).
          type: bool
        gpu_count:
          description: Number of GPUs in RV(ansible_facts.gpu_node.gpus).
          type: int
        pci_gpu_count:
          description: NVIDIA display controllers seen in sysfs.
          type: int
        nvswitch_count:
          description: NVIDIA NVSwitch bridges seen in sysfs.
          type: int
        gpus:
          description:
            - One entry per GPU with C(index), C(name), C(uuid), C(pci_bus_id), C(pci_device_id),
              C(memory_mib), C(mig_capable), C(mig_mode_current), C(mig_mode_pending) (C(enabled),
              C(disabled) or null), C(driver_version) and C(source) (C(nvidia-smi) or C(pci); PCI
              entries only know the bus id and device id).
          type: list
          elements: dict
        driver:
          description:
            - "C(state) (C(host), C(operator), C(broken), C(none)), C(present), C(working), C(version),
              C(module_loaded), C(kernel_module) (parsed C(/proc/driver/nvidia/version) - C(version),
              C(flavor) open/proprietary, C(arch), C(gcc)), C(nvidia_smi) (path), C(reason_code) and
              C(reason) when broken (C(driver_not_loaded), C(driver_library_mismatch), C(no_devices),
              C(userspace_missing), C(nvidia_smi_timeout), C(nvidia_smi_failed), C(unparsable_output)),
              C(nvml_version)."
          type: dict
        nouveau_loaded:
          description: The nouveau kernel module is loaded (it blocks the NVIDIA driver).
          type: bool
        nvidia_modules:
          description: Loaded kernel modules whose name starts with nvidia.
          type: list
          elements: str
        toolkit:
          description:
            - C(state) (C(host), C(operator), C(none)), C(version), C(commit), C(nvidia_ctk),
              C(nvidia_container_runtime) (paths or null), C(config_present), C(operator_dir_present).
          type: dict
        container_runtime:
          description:
            - C(containerd) and C(crio) (null when not configured) each with C(runtimes),
              C(nvidia_runtimes), C(nvidia_runtime), C(default_runtime), C(nvidia_default),
              C(operator_managed); plus the combined C(nvidia_runtime), C(nvidia_default),
              C(operator_managed).
          type: dict
        kernel:
          description: C(release), C(headers_installed), C(headers_path), C(headers_package).
          type: dict
        os:
          description: C(id), C(version_id), C(major), C(family) (debian/redhat), C(pretty_name), C(supported).
          type: dict
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.node.facts import (
    FACTS_KEY,
    HostReader,
    gather,
)


def _runner(module, timeout):
    timeout_bin = module.get_bin_path("timeout") if timeout else None

    def run(argv):
        if timeout_bin:
            argv = [timeout_bin, str(timeout)] + list(argv)
        return module.run_command(argv, environ_update={"LC_ALL": "C", "LANG": "C"})

    return run


def main():
    module = AnsibleModule(
        argument_spec=dict(
            root=dict(type="path", default="/"),
            nvidia_smi_path=dict(type="path"),
            nvidia_ctk_path=dict(type="path"),
            nvidia_container_runtime_path=dict(type="path"),
            kernel_release=dict(type="str"),
            command_timeout=dict(type="int", default=30),
        ),
        supports_check_mode=True,
    )
    params = module.params
    if not os.path.isdir(params["root"]):
        module.fail_json(msg="root=%s is not a directory; point it at the host's / (default) "
                             "or a mounted image" % params["root"])
    for name in ("nvidia_smi_path", "nvidia_ctk_path", "nvidia_container_runtime_path"):
        path = params[name]
        if path and not os.access(path, os.X_OK):
            module.fail_json(msg="%s=%s is not an executable file; fix the path or leave it unset "
                                 "for the default lookup" % (name, path))
    facts = gather(
        HostReader(params["root"]),
        _runner(module, params["command_timeout"]),
        params["kernel_release"] or os.uname()[2],
        nvidia_smi=params["nvidia_smi_path"],
        nvidia_ctk=params["nvidia_ctk_path"],
        nvidia_container_runtime=params["nvidia_container_runtime_path"],
    )
    module.exit_json(changed=False, ansible_facts={FACTS_KEY: facts})


if __name__ == "__main__":
    main()
