"""docs/runbooks: the four runbooks exist and name only playbooks and variables that exist."""

import glob
import os
import re

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUNBOOKS = os.path.join(REPO, "docs", "runbooks")
REQUIRED = ("node-failure", "driver-problem", "full-queue", "quota-increase")
PREFIXES = ("gpu_operator_", "tenants_", "quota_", "mig_", "node_prereqs_", "acceptance_", "queues_",
            "monitoring_", "images_", "gitops_", "usage_report_")
PLAYBOOK_RE = re.compile(r"playbooks/([a-z_]+)\.yml")
FQCN_PLAYBOOK_RE = re.compile(r"skaffon\.gpu_platform\.([a-z_]+)")
VARIABLE_RE = re.compile(r"\b((?:%s)[a-z0-9_]+)\b" % "|".join(PREFIXES))


def known_variables():
    names = set()
    for path in glob.glob(os.path.join(REPO, "roles", "*", "defaults", "main.yml")) + \
            glob.glob(os.path.join(REPO, "roles", "*", "meta", "argument_specs.yml")) + \
            glob.glob(os.path.join(REPO, "playbooks", "*.yml")) + \
            glob.glob(os.path.join(REPO, "roles", "*", "tasks", "*.yml")):
        with open(path) as handle:
            names.update(VARIABLE_RE.findall(handle.read()))
    return names


def runbooks():
    return sorted(glob.glob(os.path.join(RUNBOOKS, "*.md")))


def test_the_four_runbooks_exist():
    present = set(os.path.splitext(os.path.basename(p))[0] for p in runbooks())
    missing = [name for name in REQUIRED if name not in present]
    assert not missing, missing


@pytest.mark.parametrize("path", runbooks(), ids=os.path.basename)
def test_runbook_references_exist(path):
    with open(path) as handle:
        text = handle.read()
    playbooks = set(PLAYBOOK_RE.findall(text)) | set(m for m in FQCN_PLAYBOOK_RE.findall(text)
                                                     if not os.path.exists(os.path.join(REPO, "plugins", "modules",
                                                                                        m + ".py")))
    for name in sorted(playbooks):
        assert os.path.exists(os.path.join(REPO, "playbooks", name + ".yml")), "%s names playbook %s" % (path, name)
    variables = known_variables()
    unknown = sorted(v for v in set(VARIABLE_RE.findall(text)) if v not in variables)
    assert not unknown, "%s names variables no role or playbook has: %s" % (path, unknown)
    for link in re.findall(r"\]\(([^)#]+\.md)", text):
        assert os.path.exists(os.path.join(os.path.dirname(path), link)), "%s links %s" % (path, link)
