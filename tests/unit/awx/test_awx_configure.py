"""playbooks/awx_configure.yml: every awx.awx task's arguments pass that module's own argument spec.

There is no AWX here, so the modules never run: each module's argument_spec is captured
from its main() and the task's arguments (Jinja expressions replaced by a value of the
option's type) are validated with ansible-core's ArgumentSpecValidator, as the module
would validate them at run time. The playbook itself gets a real --syntax-check.
"""

import importlib
import os
import subprocess
import sys

import pytest
import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
TASKS = os.path.join(REPO, "roles", "awx_configure", "tasks", "main.yml")
DEFAULTS = os.path.join(REPO, "roles", "awx_configure", "defaults", "main.yml")
DUMMY = {"str": "x", "bool": True, "int": 1, "list": ["x"], "dict": {}, "raw": "x", "path": "/x", "float": 1.0}


class Captured(Exception):
    def __init__(self, spec):
        super().__init__("captured")
        self.spec = spec


def module_spec(fqcn):
    """The complete argument spec (auth options included) the module validates against."""
    name = fqcn.split(".")[-1]
    mod = importlib.import_module("ansible_collections.awx.awx.plugins.modules.%s" % name)
    base = mod.ControllerAPIModule

    class Capture(base):
        def __init__(self, argument_spec=None, **kwargs):
            full = dict(base.AUTH_ARGSPEC) if hasattr(base, "AUTH_ARGSPEC") else {}
            full.update(argument_spec or {})
            raise Captured(full)

    mod.ControllerAPIModule = Capture
    try:
        mod.main()
    except Captured as cap:
        return cap.spec
    finally:
        mod.ControllerAPIModule = base
    raise AssertionError("%s did not build a ControllerAPIModule" % fqcn)


def concrete(value, option):
    """Replace a Jinja expression by a value of the option's declared type."""
    if isinstance(value, str) and "{{" in value:
        return DUMMY[option.get("type", "str")]
    if isinstance(value, dict) and option.get("type") == "dict":
        return {k: ("x" if isinstance(v, str) and "{{" in v else v) for k, v in value.items()}
    return value


def awx_tasks():
    with open(TASKS) as handle:
        tasks = yaml.safe_load(handle)
    out = []
    for task in tasks:
        for key, args in task.items():
            if key.startswith("awx.awx."):
                out.append((task["name"], key, args))
    return out


def validate(fqcn, args):
    spec = module_spec(fqcn)
    params = {k: concrete(v, spec.get(k, {})) for k, v in args.items()}
    return ArgumentSpecValidator(spec).validate(params)


@pytest.mark.parametrize("name,fqcn,args", awx_tasks(), ids=[t[0] for t in awx_tasks()])
def test_task_arguments_pass_the_module_argument_spec(name, fqcn, args):
    result = validate(fqcn, args)
    assert not result.error_messages, "%s (%s): %s" % (name, fqcn, result.error_messages)


def test_every_object_kind_is_configured():
    kinds = {task[1] for task in awx_tasks()}
    assert {"awx.awx.organization", "awx.awx.execution_environment", "awx.awx.project", "awx.awx.inventory",
            "awx.awx.inventory_source", "awx.awx.credential", "awx.awx.job_template", "awx.awx.role"} <= kinds


def test_a_wrong_option_is_caught():
    fqcn, args = next(t[1:] for t in awx_tasks() if t[1] == "awx.awx.job_template")
    broken = dict(args, survey="quota.json", verbosity=9)
    messages = " ".join(validate(fqcn, broken).error_messages)
    assert "survey" in messages and "verbosity" in messages


def test_job_templates_name_existing_playbooks_and_surveys():
    with open(DEFAULTS) as handle:
        defaults = yaml.safe_load(handle)
    for jt in defaults["awx_configure_job_templates"]:
        assert os.path.exists(os.path.join(REPO, jt["playbook"])), jt
        if "survey" in jt:
            assert os.path.exists(os.path.join(REPO, "awx", jt["survey"])), jt


def test_playbook_syntax():
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, "build", "collections"))
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "--syntax-check",
                           "-i", "localhost,", os.path.join(REPO, "playbooks", "awx_configure.yml")],
                          capture_output=True, text=True, env=env, cwd=REPO, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
