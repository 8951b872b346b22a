"""`ansible-playbook` as .venv/bin/ansible-playbook runs it, with one difference: the AnsiballZ
payloads live as long as the test session instead of one run.

ansible-playbook builds each module's payload (the module and its module_utils, zipped) once per
run, in a cache under the run's private temporary directory, keyed by the module's name. The
suite starts ansible-playbook some 400 times and so rebuilt the same twenty payloads thousands of
times (about a tenth of the integration suite's CPU). Within one session neither the collection
nor ansible-core changes, so a payload an earlier run built is the one this run would build. The
test kit's plugin makes the cache directory when the session starts and removes it when it ends: a
later session, which may run edited modules, never sees it. Everything else (options,
configuration, output, exit code) is ansible-playbook's own.

    python tests/kit/ansible_playbook.py <session cache directory> <ansible-playbook arguments>
"""
import os
import sys

del sys.path[0]     # this script's directory, the test kit: nothing ansible-playbook should import

from ansible.cli.playbook import main  # noqa: E402
from ansible import constants as C  # noqa: E402


def share_payload_cache(session_cache):
    # ansible's own lookup path; its lock and atomic rename already serve concurrent builders
    os.symlink(session_cache, os.path.join(C.DEFAULT_LOCAL_TMP, "ansiballz_cache"))


if __name__ == "__main__":
    share_payload_cache(sys.argv.pop(1))
    sys.exit(main())
