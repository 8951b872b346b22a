"""mig_pools / mig_whole_pool_batches: the same answers as the Jinja program they replace (roles/mig)."""
import json
import os
import subprocess

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.skaffon.gpu_platform.plugins.filter.mig_rollout import (
    FilterModule,
    mig_pools,
    mig_whole_pool_batches,
)

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
HOSTVARS = {
    "h1": {"mig_profile": "all-1g.10gb", "group_names": ["gpus", "mig_h100"]},
    "h2": {"mig_profile": "all-1g.10gb", "group_names": ["mig_h100"]},
    "h3": {"mig_profile": "all-balanced", "mig_pool": "special", "group_names": ["mig_a100"]},
    "h4": {"mig_profile": "", "group_names": ["mig_h100"]},
    "h5": {"mig_profile": "all-disabled", "group_names": []},
}
HOSTS = ["h1", "h2", "h3", "h4", "h5"]


def test_pools_from_mig_pool_group_prefix_or_ungrouped():
    assert mig_pools(HOSTS, HOSTVARS, "mig_") == {"h1": "mig_h100", "h2": "mig_h100", "h3": "special",
                                                  "h5": "ungrouped"}


@pytest.mark.parametrize("size,expected", [
    (1, ["batch 3 holds all 1 node(s) of pool special (h3)", "batch 5 holds all 1 node(s) of pool ungrouped (h5)"]),
    (2, ["batch 1 holds all 2 node(s) of pool mig_h100 (h1, h2)", "batch 2 holds all 1 node(s) of pool special (h3)",
         "batch 3 holds all 1 node(s) of pool ungrouped (h5)"]),
    ("3", ["batch 1 holds all 2 node(s) of pool mig_h100 (h1, h2)", "batch 1 holds all 1 node(s) of pool special (h3)",
           "batch 2 holds all 1 node(s) of pool ungrouped (h5)"]),
])
def test_whole_pool_batches(size, expected):
    assert mig_whole_pool_batches(mig_pools(HOSTS, HOSTVARS, "mig_"), HOSTS, size) == expected


@pytest.mark.parametrize("size", [0, -1, "x", None, True])
def test_batch_size_must_be_a_whole_number(size):
    with pytest.raises(AnsibleFilterError, match="mig_batch_size must be a whole number of nodes >= 1"):
        mig_whole_pool_batches({}, HOSTS, size)


def test_same_result_as_the_role_jinja_through_real_hostvars(tmp_path):
    """Runs the former Jinja of roles/mig/tasks/main.yml and the filters in one play (real hostvars)."""
    inv = tmp_path / "hosts.yml"
    inv.write_text(json.dumps({"all": {"children": {
        "mig_h100": {"hosts": {"h1": {"mig_profile": "all-1g.10gb"}, "h2": {"mig_profile": "all-1g.10gb"},
                               "h4": {"mig_profile": ""}}},
        "mig_a100": {"hosts": {"h3": {"mig_profile": "all-balanced", "mig_pool": "special"}}},
        "other": {"hosts": {"h5": {"mig_profile": "all-disabled"}}}},
        "vars": {"ansible_connection": "local", "mig_batch_size": 2}}}))
    play = tmp_path / "play.yml"
    play.write_text("""
- hosts: all
  gather_facts: false
  tasks:
    - run_once: true
      ansible.builtin.set_fact:
        jinja_pools: >-
          {%- set ns = namespace(pools={}) -%}
          {%- for host in ansible_play_hosts_all if hostvars[host].mig_profile | default('', true) | length > 0 -%}
          {%- set groups_of = hostvars[host].group_names | select('match', '^mig_') | list -%}
          {%- set ns.pools = ns.pools | combine({host: hostvars[host].mig_pool | default(none)
                or (groups_of | first | default('ungrouped'))}) -%}
          {%- endfor -%}
          {{ ns.pools }}
        filter_pools: "{{ ansible_play_hosts_all | skaffon.gpu_platform.mig_pools(hostvars, 'mig_') }}"
    - run_once: true
      ansible.builtin.set_fact:
        jinja_bad: >-
          {%- set ns = namespace(bad=[]) -%}
          {%- set hosts = ansible_play_hosts_all -%}
          {%- set pools = jinja_pools.values() | unique | list -%}
          {%- for start in range(0, hosts | length, mig_batch_size | int) -%}
          {%- set batch = hosts[start:start + mig_batch_size | int] -%}
          {%- for pool in pools -%}
          {%- set members = jinja_pools | dict2items | selectattr('value', 'equalto', pool) | map(attribute='key')
                | list -%}
          {%- if members | difference(batch) | length == 0 -%}
          {%- set ns.bad = ns.bad + ['batch %d holds all %d node(s) of pool %s (%s)' % (start // mig_batch_size | int + 1,
                members | length, pool, members | join(', '))] -%}
          {%- endif -%}
          {%- endfor -%}
          {%- endfor -%}
          {{ ns.bad }}
        filter_bad: "{{ filter_pools | skaffon.gpu_platform.mig_whole_pool_batches(ansible_play_hosts_all, mig_batch_size) }}"
    - run_once: true
      ansible.builtin.debug:
        msg: "{{ {'pools': [jinja_pools, filter_pools], 'bad': [jinja_bad, filter_bad]} | to_json }}"
""")
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_CALLBACK_RESULT_FORMAT="json",
               ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, "build", "collections"))
    proc = subprocess.run([os.path.join(REPO, ".venv", "bin", "ansible-playbook"), "-i", str(inv), str(play)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(proc.stdout[proc.stdout.index("{"):])
    msg = data["plays"][0]["tasks"][2]["hosts"]
    out = json.loads(next(iter(msg.values()))["msg"])
    assert out["pools"][0] == out["pools"][1] and out["bad"][0] == out["bad"][1]
    assert out["bad"][1][0] == "batch 1 holds all 2 node(s) of pool mig_h100 (h1, h2)"


def test_registered():
    assert set(FilterModule().filters()) == {"mig_pools", "mig_whole_pool_batches"}
