"""slurm_login on the Molecule container: gclogin01 (controller and login node) submits and runs nothing."""


def test_sshd_runs_at_boot(host):
    service = host.service("ssh")
    assert service.is_running and service.is_enabled


def test_no_slurmd_runs(host):
    assert host.run("pgrep -x slurmd").rc == 1
    assert not host.service("slurmd").is_enabled


def test_sinfo_reaches_slurmctld(host):
    result = host.run("sinfo --noheader --Node --format=%N")
    assert result.rc == 0, result.stderr
    # The login node is in no partition; the cluster's one node is.
    assert result.stdout.split() == ["gcnode-absent"]


def test_munge_key_is_private_to_munge(host):
    key = host.file("/etc/munge/munge.key")
    assert key.user == "munge" and key.group == "munge" and key.mode == 0o400
