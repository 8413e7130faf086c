"""munge on the Molecule container: a real credential round trip with the distributed key."""


def test_credential_round_trip(host):
    result = host.run("munge --no-input | unmunge")
    assert result.rc == 0, result.stderr
    assert "STATUS:          Success (0)" in result.stdout


def test_key_is_private_to_munge(host):
    key = host.file("/etc/munge/munge.key")
    assert key.user == "munge" and key.group == "munge" and key.mode == 0o400
    assert key.size >= 32


def test_munged_runs_at_boot(host):
    service = host.service("munge")
    assert service.is_running and service.is_enabled
