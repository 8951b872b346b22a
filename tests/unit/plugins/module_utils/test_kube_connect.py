"""kube.connect: a client that cannot be made is one ClientError naming server, context, kubeconfig,
the cause and the option to set; never the library's repr, a token or a password."""
import json
import ssl

import pytest
import yaml
from ansible.module_utils.testing import patch_module_args
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import MaxRetryError, NameResolutionError, NewConnectionError, SSLError

from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import ApiError, ClientError
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.kube import Credentials, connect
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.module_base import (
    WAIT_ARG_SPEC,
    GpuPlatformModule,
)

SECRET = "tok-3b1e-never-shown"
NOISE = ("HTTPConnectionPool", "HTTPSConnectionPool", "Max retries", "Traceback", "object at 0x", SECRET)


def kubeconfig(tmp_path, name="kc.yaml", server="https://api.lab.example:6443", contexts=("lab",), current="lab"):
    data = {"apiVersion": "v1", "kind": "Config", "current-context": current,
            "clusters": [{"name": "lab-cluster", "cluster": {"server": server}}],
            "users": [{"name": "lab-admin", "user": {"token": SECRET}}],
            "contexts": [{"name": c, "context": {"cluster": "lab-cluster", "user": "lab-admin"}} for c in contexts]}
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return str(path)


class Module(object):
    def __init__(self, **params):
        self.params = params


def failing(exc):
    def get_api_client(module):
        raise exc
    return get_api_client


def clean(err):
    text = str(err) + json.dumps(err.to_dict())
    for noise in NOISE:
        assert noise not in text, (noise, text)
    return str(err)


def pool(host, port, scheme="https"):
    from urllib3 import HTTPConnectionPool, HTTPSConnectionPool
    return (HTTPSConnectionPool if scheme == "https" else HTTPConnectionPool)(host, port)


def test_refused_names_the_server_context_and_kubeconfig(tmp_path):
    path = kubeconfig(tmp_path, server="http://127.0.0.1:9")
    inner = NewConnectionError(None, "Failed to establish a new connection: [Errno 111] Connection refused")
    with pytest.raises(ClientError) as err:
        connect(Module(kubeconfig=path), failing(MaxRetryError(pool("127.0.0.1", 9, "http"), "/version", inner)))
    assert clean(err.value).startswith("Cannot connect to Kubernetes (server http://127.0.0.1:9, context lab, "
                                       "kubeconfig %s): connection refused" % path)
    assert err.value.to_dict()["stage"] == "connect" and isinstance(err.value, ApiError)


def test_dns_names_the_host(tmp_path):
    path = kubeconfig(tmp_path)
    inner = NameResolutionError("api.lab.example", None, OSError("[Errno -2] Name or service not known"))
    with pytest.raises(ClientError) as err:
        connect(Module(kubeconfig=path), failing(MaxRetryError(pool("api.lab.example", 6443), "/version", inner)))
    assert "the host name api.lab.example does not resolve" in clean(err.value)
    assert "fix the server of cluster lab-cluster" in str(err.value)


def test_tls_verify_says_which_cluster_needs_the_ca(tmp_path):
    path = kubeconfig(tmp_path)
    verify = ssl.SSLCertVerificationError(1, "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed")
    verify.verify_message = "self-signed certificate"
    with pytest.raises(ClientError) as err:
        connect(Module(kubeconfig=path),
                failing(MaxRetryError(pool("api.lab.example", 6443), "/version", SSLError(verify))))
    assert "TLS certificate verification failed: self-signed certificate" in clean(err.value)
    assert "certificate-authority(-data) of cluster lab-cluster" in str(err.value)


def test_401_names_the_user_not_the_token(tmp_path):
    path = kubeconfig(tmp_path)
    with pytest.raises(ClientError) as err:
        connect(Module(kubeconfig=path), failing(ApiException(status=401, reason="Unauthorized")))
    assert clean(err.value).startswith("Cannot connect to Kubernetes (server https://api.lab.example:6443, context "
                                       "lab, kubeconfig %s): HTTP 401 Unauthorized on GET /version: the API server "
                                       "refused the credentials of user lab-admin" % path)


def test_context_missing_lists_the_contexts_with_the_real_loader(tmp_path):
    path = kubeconfig(tmp_path, contexts=("lab", "staging"))
    with patch_module_args({"kubeconfig": path, "context": "prod"}):
        module = GpuPlatformModule(argument_spec=WAIT_ARG_SPEC)
        with pytest.raises(ClientError) as err:
            module.kube
    assert "context prod is not in the kubeconfig; it has: lab, staging" in clean(err.value)
    assert err.value.to_dict()["stage"] == "load" and err.value.context == "prod"


def test_not_yaml_says_where_with_the_real_loader(tmp_path):
    bad = tmp_path / "bad"
    bad.write_text("clusters: [{name: x\n  : {{\n")
    with pytest.raises(ClientError) as err:
        connect(Module(kubeconfig=str(bad)), get_api_client)
    assert "the kubeconfig file is not YAML: " in clean(err.value) and " at line " in str(err.value)


def test_missing_file_with_the_real_loader(tmp_path):
    missing = str(tmp_path / "none")
    with pytest.raises(ClientError) as err:
        connect(Module(kubeconfig=missing), get_api_client)
    assert clean(err.value) .startswith("Cannot connect to Kubernetes (kubeconfig %s): the kubeconfig file does "
                                        "not exist (fix: set the module option kubeconfig, which the roles fill "
                                        "from gpu_platform_kubeconfig or <role>_kubeconfig" % missing)


def test_no_kubeconfig_anywhere_names_the_default(tmp_path, monkeypatch):
    monkeypatch.delenv("K8S_AUTH_KUBECONFIG", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "home-kube-config"))
    with pytest.raises(ClientError) as err:
        connect(Module(), failing(Exception("Invalid kube-config file. No configuration found.")))
    assert "no kubeconfig was given and the default %s does not exist" % (tmp_path / "home-kube-config") \
        in clean(err.value)


def test_credentials_merge_as_kubernetes_does_and_hide_userinfo(tmp_path):
    first = kubeconfig(tmp_path, "a.yaml", server="https://admin:pa55@api.one:6443", contexts=("one",), current="one")
    second = kubeconfig(tmp_path, "b.yaml", server="https://api.two:6443", contexts=("two",), current="two")
    creds = Credentials({"kubeconfig": first + ":" + second}, environ={})
    assert sorted(creds.contexts) == ["one", "two"] and creds.context_name == "one"
    assert creds.server == "https://api.one:6443"     # the first file wins; no password in a message
    inline = Credentials({"kubeconfig": {"current-context": "x", "contexts": [{"name": "x", "context": {}}]}},
                         environ={})
    assert inline.kubeconfig == "(the kubeconfig option's inline mapping)" and inline.context_name == "x"
