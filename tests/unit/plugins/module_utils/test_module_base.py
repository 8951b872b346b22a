"""GpuPlatformModule.execute: every known failure ends in fail_json with a message, never a traceback."""
import json

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import ApiError, DomainError
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.module_base import (
    OPERATOR_ARG_SPEC,
    WAIT_ARG_SPEC,
    GpuPlatformModule,
)


def execute(capsys, body, **args):
    with patch_module_args(args):
        module = GpuPlatformModule(argument_spec=dict(WAIT_ARG_SPEC, **OPERATOR_ARG_SPEC), supports_check_mode=True)
        with pytest.raises(SystemExit):
            module.execute(body)
    return json.loads(capsys.readouterr().out)


def test_result_is_returned_and_shared_options_are_parsed(capsys):
    out = execute(capsys, lambda m: dict(changed=False, timeout=m.params["timeout"], ns=m.params["operator_namespace"]),
                  operator_namespace="ops")
    assert out["timeout"] == 600 and out["ns"] == "ops" and not out.get("failed")


def test_domain_error_keeps_its_details(capsys):
    def body(module):
        raise DomainError("mig_batch_size must be >= 1, got 0: set it to the nodes per batch", changed=True, nodes=[])
    out = execute(capsys, body)
    assert out["failed"] and out["msg"].startswith("mig_batch_size must be >= 1")
    assert out["changed"] is True and out["nodes"] == []


def test_api_error_is_a_message_and_a_structured_copy(capsys):
    def body(module):
        raise ApiError("PATCH", "Node", "gpu-1", status=403, reason="Forbidden", message="no", hint="RBAC")
    out = execute(capsys, body)
    assert out["failed"] and out["msg"] == "PATCH Node gpu-1: HTTP 403 Forbidden: no (RBAC)"
    assert out["api_error"]["status"] == 403 and out["api_error"]["verb"] == "PATCH"
