"""node_prereqs tasks_from host_toolkit: the host toolkit's config.toml stops NVIDIA_VISIBLE_DEVICES granting GPUs.

The file nvidia-ctk writes (keys commented at the top, sections below): the two top-level keys are
set in place, a second run and check mode change nothing, a missing file is refused with the fix."""
import os

from kit.playbook import run_playbook

CONFIG = """#accept-nvidia-visible-devices-as-volume-mounts = false
#accept-nvidia-visible-devices-envvar-when-unprivileged = true
disable-require = false
supported-driver-capabilities = "compat32,compute,display,graphics,ngx,utility,video"

[nvidia-container-cli]
environment = []
ldconfig = "@/sbin/ldconfig.real"

[nvidia-container-runtime]
log-level = "info"
mode = "auto"
"""
PLAY = """- hosts: localhost
  gather_facts: false
  tasks:
    - name: Under test
      ansible.builtin.include_role:
        name: skaffon.gpu_platform.node_prereqs
        tasks_from: host_toolkit.yml
"""


def run(tmp_path, root, check=False):
    play = tmp_path / "play.yml"
    play.write_text(PLAY)
    return run_playbook(str(play), {"PATH": os.environ.get("PATH", "")}, check=check,
                        extra_vars={"node_prereqs_facts_root": str(root)})


def test_keys_set_at_the_top_idempotent_and_check_mode(tmp_path):
    root = tmp_path / "host"
    conf = root / "etc" / "nvidia-container-runtime" / "config.toml"
    conf.parent.mkdir(parents=True)
    conf.write_text(CONFIG)
    check = run(tmp_path, root, check=True)
    assert check.rc == 0, check
    assert conf.read_text() == CONFIG                      # check mode writes nothing
    first = run(tmp_path, root)
    assert first.rc == 0, first
    text = conf.read_text()
    head = text.split("[nvidia-container-cli]")[0]
    assert "accept-nvidia-visible-devices-envvar-when-unprivileged = false\n" in head
    assert "accept-nvidia-visible-devices-as-volume-mounts = true\n" in head
    assert "#accept" not in text and text.count("accept-nvidia") == 2
    second = run(tmp_path, root)
    assert second.rc == 0 and conf.read_text() == text
    assert first.changed() == 1 and second.changed() == 0, (first.changed_tasks(), second.changed_tasks())


def test_a_missing_config_file_is_refused_with_the_fix(tmp_path):
    res = run(tmp_path, tmp_path / "empty")
    assert res.rc != 0
    text = " ".join(res.failure_messages())
    assert "nvidia-ctk config --output=" in text and "node_prereqs_gpu_access_by_request: false" in text, text
