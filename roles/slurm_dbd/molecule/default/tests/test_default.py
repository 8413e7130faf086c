"""slurm_dbd on the Molecule container: slurmdbd answers sacctmgr; MariaDB stays off the network."""


def test_slurmdbd_answers_sacctmgr(host):
    result = host.run("sacctmgr --noheader --parsable2 show cluster format=cluster")
    assert result.rc == 0, result.stderr


def test_sacctmgr_can_record_a_cluster_in_the_database(host):
    # Adds a throwaway cluster and removes it: a real write to MariaDB through slurmdbd.
    assert host.run("sacctmgr -i add cluster verifyonly").rc == 0
    shown = host.check_output("sacctmgr --noheader --parsable2 show cluster format=cluster")
    assert "verifyonly" in shown.split()
    assert host.run("sacctmgr -i delete cluster verifyonly").rc == 0


def test_mariadb_has_no_tcp_listener(host):
    listeners = host.check_output("ss --listening --tcp --numeric --processes")
    assert "mariadbd" not in listeners
    assert ":6819" in listeners  # slurmdbd itself


def test_slurmdbd_conf_is_private(host):
    conf = host.file("/etc/slurm/slurmdbd.conf")
    assert conf.user == "slurm" and conf.mode == 0o600
    assert "StoragePass=" in conf.content_string
