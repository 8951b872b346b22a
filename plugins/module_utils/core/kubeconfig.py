# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kubeconfig option's conventions and the errors about the file itself, without the client.

The action plugins (plugin_utils/kubeconfig_action.py) find and decrypt a kubeconfig on the
controller, in the worker process of each task, and report a missing or undecryptable file in the
modules' words. They import this, not core/kube.py: that one imports the kubernetes client, which
cost every task of a Kubernetes module of this collection 0.18 CPU-s on the controller for nothing.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import ClientError

SET_KUBECONFIG = "the module option kubeconfig, which the roles fill from gpu_platform_kubeconfig or <role>_kubeconfig"
SET_CONTEXT = "the module option context, which the roles fill from gpu_platform_context or <role>_context"
SET_CREDENTIALS = ("the module options kubeconfig / context, which the roles fill from gpu_platform_kubeconfig / "
                   "gpu_platform_context or <role>_kubeconfig / <role>_context")
PATH_SEPARATOR = ";" if os.name == "nt" else ":"   # kubernetes' ENV_KUBECONFIG_PATH_SEPARATOR


def short(text):
    """A library's error text for a message: one line, without urllib3's object reprs, at most 300 characters."""
    text = " ".join(str(text).split())
    # drop urllib3's object reprs: "<urllib3.connection.HTTPConnection object at 0x..>: "
    while "<" in text and ">: " in text:
        start = text.index("<")
        end = text.index(">: ", start) + 3
        text = text[:start] + text[end:]
    return text[:300]


def missing_kubeconfig(path):
    """The action plugins' error for a kubeconfig found nowhere on the controller (the module's own words)."""
    return ClientError("the kubeconfig file does not exist (looked for on the controller; a relative path also "
                       "in the role's and the play's files/)",
                       "fix: set %s, to the cluster's kubeconfig file" % SET_KUBECONFIG, kubeconfig=path,
                       stage="load")


def undecryptable_kubeconfig(path, why):
    return ClientError("the kubeconfig file cannot be decrypted: %s" % short(why),
                       "a vault-encrypted kubeconfig needs the vault password: --ask-vault-pass, "
                       "--vault-password-file or ANSIBLE_VAULT_PASSWORD_FILE", kubeconfig=path, stage="load")
