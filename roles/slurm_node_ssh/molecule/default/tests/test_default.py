"""slurm_node_ssh on a container running no Slurm: pam_slurm_adopt finds no job for anyone, so
alice is refused and only the admin (ops) gets in; the PAM stack is in the order that makes it so."""

import pytest

SSH = "ssh -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"


def test_sshd_runs_at_boot(host):
    service = host.service("ssh")
    assert service.is_running and service.is_enabled


def test_a_user_without_a_job_is_refused_by_pam_slurm_adopt(host):
    result = host.run(f"su - alice -c '{SSH} alice@localhost true'")
    assert result.rc == 255
    assert "Access denied by pam_slurm_adopt: you have no active jobs on this node" in result.stderr, (
        result.stderr
    )


def test_an_admin_gets_in_without_a_job(host):
    result = host.run(f"su - ops -c '{SSH} ops@localhost id -un'")
    assert result.rc == 0, result.stderr
    assert result.stdout.strip() == "ops"


def account_and_session_lines(host):
    lines = host.file("/etc/pam.d/sshd").content_string.splitlines()
    return [line.split() for line in lines if line.strip() and not line.startswith("#")]


def test_pam_slurm_adopt_closes_the_account_stack_with_deny_on_failure(host):
    account = [words for words in account_and_session_lines(host) if words[0] == "account"]
    assert account[-2][1:3] == ["sufficient", "pam_access.so"]
    assert account[-1][1:3] == ["required", "pam_slurm_adopt.so"]
    assert {"action_adopt_failure=deny", "action_generic_failure=deny"} <= set(account[-1])


@pytest.mark.parametrize("stack", ["/etc/pam.d/sshd", "/etc/pam.d/common-session-noninteractive"])
def test_no_pam_systemd_in_sshd_sessions(host, stack):
    # pam_systemd would move an adopted session out of the job's cgroup.
    lines = host.file(stack).content_string.splitlines()
    assert not [line for line in lines if "pam_systemd" in line and not line.lstrip().startswith("#")]


def test_the_sshd_session_stack_is_the_non_interactive_one(host):
    includes = [words for words in account_and_session_lines(host) if words[0] == "@include"]
    assert ["@include", "common-session-noninteractive"] in includes
    assert ["@include", "common-session"] not in includes


def test_root_and_the_admin_are_listed_for_pam_access(host):
    lines = host.file("/etc/security/access-slurm-node-ssh.conf").content_string.splitlines()
    rules = [line for line in lines if line and not line.startswith("#")]
    assert rules == ["+ : root ops : ALL", "- : ALL : ALL"]


def test_known_hosts_holds_this_hosts_key(host):
    key = host.file("/etc/ssh/ssh_host_ed25519_key.pub").content_string.split()[:2]
    assert f"gcnodessh01 {' '.join(key)}" in host.file("/etc/ssh/ssh_known_hosts").content_string
