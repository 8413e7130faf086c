"""slurm_controller on the Molecule container: slurmctld answers and serves the rendered partition."""


def test_slurmctld_answers_ping(host):
    assert "is UP" in host.check_output("scontrol ping")


def test_partition_from_the_inventory_is_up(host):
    assert host.check_output("sinfo --noheader --format='%P %a'").split() == ["gpu*", "up"]


def test_running_config_is_the_rendered_cluster(host):
    config = host.check_output("scontrol show config")
    assert "ClusterName             = mol" in config
    assert "ProctrackType           = proctrack/linuxproc" in config


def test_slurmctld_runs_at_boot(host):
    service = host.service("slurmctld")
    assert service.is_running and service.is_enabled
