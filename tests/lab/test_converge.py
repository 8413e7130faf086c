"""The playbook on the lab: rendered files land byte for byte, a partition change is applied by
reconfigure, it repairs a node whose slurmd died, a re-run changes nothing; slurmctld restarts
keep running jobs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gpucluster.lab import lab
from gpucluster.lab.inventory import inventory_dir
from gpucluster.lab.paths import DEFAULT_INVENTORY, REPO_ROOT, state_dir
from gpucluster.lab.playbook import PlaybookRun, run_playbook
from gpucluster.lab.shell import LabError
from gpucluster.slurm.render import configless_served

from .conftest import Lab, ran

pytestmark = pytest.mark.lab


def test_deployed_files_are_byte_identical_to_gpucluster_render(lab_cluster: Lab, tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "gpucluster.cli", "render", str(DEFAULT_INVENTORY), "--out", str(tmp_path)],
        check=True,
        cwd=REPO_ROOT,
        capture_output=True,
    )
    rendered = sorted(p.name for p in (tmp_path / "slurm").iterdir() if p.name != "accounts.yaml")
    cluster = lab_cluster.cluster
    served = set(configless_served(cluster)) & set(rendered)
    assert {"slurm.conf", "gres.conf", "cgroup.conf", "plugstack.conf", "topology.yaml"} <= served
    slurm = cluster.spec.slurm
    # The lab runs configless: the controllers hold every file; a node holds only what slurmctld
    # does not serve, and its slurmd's fetched copies are the rendered bytes; so does the login
    # node through sackd where the release has it (23.11+).
    assert slurm.configless
    sackd = set(slurm.login) if cluster.release.sackd else set()
    for host in [*slurm.controller, *slurm.login, *lab_cluster.nodes_up]:
        fetches = host in cluster.hosts or host in sackd
        for name in rendered:
            local = f"/etc/slurm/{name}"
            if fetches and name in served:
                # sackd fetches what client commands read (not gres.conf or cgroup.conf, for instance).
                path = f"/run/slurm/conf/{name}"
                if (
                    host in sackd
                    and name != "slurm.conf"
                    and lab_cluster.sh("test", "-e", path, host=host).returncode
                ):
                    path = ""
                assert lab_cluster.sh("test", "-e", local, host=host).returncode == 1, f"{host}:{local}"
            else:
                path = local
            if path:
                deployed = lab_cluster.ok("cat", path, host=host)
                assert deployed == (tmp_path / "slurm" / name).read_text(), f"{host}:{path}"


def test_munge_key_is_shared_and_private(lab_cluster: Lab) -> None:
    sums = set()
    for host in [*lab_cluster.cluster.spec.slurm.controller, *lab_cluster.nodes_up]:
        mode = lab_cluster.ok("stat", "--format=%a %U", "/etc/munge/munge.key", host=host).strip()
        assert mode == "400 munge", host
        sums.add(lab_cluster.ok("sha256sum", "/etc/munge/munge.key", host=host).split()[0])
    assert len(sums) == 1


def test_no_secret_reaches_the_output_of_building_the_lab(lab_cluster: Lab) -> None:
    """The run that makes and copies the munge key, the JWT key and the database password: none of
    them (as text or base64, whole or their first 16 characters) in `lab up`'s output or the
    playbook's log."""
    if lab_cluster.first_output is None:
        pytest.skip("the lab was up before this session: its build output is not at hand")
    slurm = lab_cluster.cluster.spec.slurm
    assert slurm.accounting and slurm.rest_api
    secrets = {
        "munge key": lab_cluster.ok("base64", "-w0", "/etc/munge/munge.key", host=slurm.controller[0]),
        "JWT key": lab_cluster.ok(
            "base64", "-w0", f"{slurm.state_dir}/jwt_hs256.key", host=slurm.controller[0]
        ),
        "database password": lab_cluster.ok(
            "sed", "-n", "s/^StoragePass=//p", "/etc/slurm/slurmdbd.conf", host=slurm.accounting.host
        ),
    }
    for what, secret in secrets.items():
        secret = secret.strip()
        assert len(secret) >= 16, what
        for form in (secret, secret[:16]):
            assert form not in lab_cluster.first_output, f"the {what} appears in the output"


def test_mariadb_is_not_on_the_network(lab_cluster: Lab) -> None:
    # On no host: neither mariadbd nor systemd's socket activation listens on TCP.
    for host in lab_cluster.cluster.inventory.hostvars:
        sockets = lab_cluster.ok("ss", "--listening", "--tcp", "--numeric", "--processes", host=host)
        assert "mariadbd" not in sockets and ":3306" not in sockets, f"{host}: {sockets}"
    accounting = lab_cluster.cluster.spec.slurm.accounting
    assert accounting
    mode = lab_cluster.ok("stat", "--format=%a %U", "/etc/slurm/slurmdbd.conf", host=accounting.host)
    assert mode.strip() == "600 slurm"


def _converge_with(changes: dict[str, str]) -> PlaybookRun:
    """Run the playbook on the lab's inventory with cluster.yml edited (the next converge() rewrites
    the lab inventory from inventories/lab, undoing the edit)."""
    target = inventory_dir(DEFAULT_INVENTORY)
    cluster_file = target / "group_vars" / "all" / "cluster.yml"
    text = (DEFAULT_INVENTORY / "group_vars" / "all" / "cluster.yml").read_text()
    for old, new in changes.items():
        assert old in text
        text = text.replace(old, new)
    cluster_file.write_text(text)
    return run_playbook(target, lambda message: None)


def _slurmctld_pid(lab_cluster: Lab) -> str:
    return lab_cluster.ok("systemctl", "show", "slurmctld", "--property=ExecMainPID", "--value").strip()


def test_hosts_offering_another_release_are_refused_before_any_change(lab_cluster: Lab) -> None:
    """The lab's hosts hold Debian forky's 26.05 and no other source: an inventory that targets
    24.11 stops at the pre-flight play, naming each host, the wanted and the offered release, with
    nothing installed, written or restarted (the following converge puts the lab inventory back)."""
    hosts = [*lab_cluster.cluster.spec.slurm.controller, *lab_cluster.nodes_up]
    before = {
        host: lab_cluster.ok(
            "sha256sum",
            "/etc/slurm/plugstack.conf",
            "/etc/apt/preferences.d/gpucluster-slurm.pref",
            host=host,
        )
        for host in hosts[:2]
    }
    pid = _slurmctld_pid(lab_cluster)
    with pytest.raises(LabError, match="ansible-playbook failed"):
        _converge_with({'    version: "26.05"': '    version: "24.11"'})
    log = (state_dir() / "ansible.log").read_text()
    for host in hosts:
        assert f"{host}: its package sources offer Slurm 26.05.5-1; the inventory targets 24.11" in log, host
        assert f"{host}: runs Slurm 26.05 (" in log and "going to 24.11 is a downgrade" in log
    # Nothing after the pre-flight play ran: no Unix account, munge, file or daemon task.
    assert (
        not ran(log, "TASK [users : ")
        and not ran(log, "TASK [munge : ")
        and not ran(log, "TASK [slurm_common : Install the Slurm")
        and not ran(log, "TASK [slurm_common : Pin the Slurm packages")
    )
    assert {
        host: lab_cluster.ok(
            "sha256sum",
            "/etc/slurm/plugstack.conf",
            "/etc/apt/preferences.d/gpucluster-slurm.pref",
            host=host,
        )
        for host in hosts[:2]
    } == before
    assert _slurmctld_pid(lab_cluster) == pid


def test_partition_change_is_applied_by_reconfigure(lab_cluster: Lab) -> None:
    pid = _slurmctld_pid(lab_cluster)
    run = _converge_with({'max_time: "1-00:00:00"': 'max_time: "2-00:00:00"'})
    assert ran(run.log.read_text(), "RUNNING HANDLER [slurm_common : Reconfigure Slurm")
    assert lab_cluster.ok("sinfo", "--noheader", "--format=%P %l").split() == ["gpu*", "2-00:00:00"]
    # Not restarted by systemd; from 23.11 on, slurmctld re-executes itself on reconfigure.
    if not lab_cluster.cluster.release.reconfigure_reexec:
        assert _slurmctld_pid(lab_cluster) == pid


def test_dead_slurmd_goes_down_and_the_playbook_brings_it_back(lab_cluster: Lab) -> None:
    # Also undoes the edit of the test above: converge() rewrites the lab inventory.
    victim = lab_cluster.nodes_up[-1]
    # Stopped cleanly (SIGTERM to slurmd itself, as `kill` or `pkill` would): systemd restarts a
    # configless slurmd that fails or is killed by SIGKILL (Restart=on-failure), not this one.
    lab_cluster.ok("systemctl", "kill", "--kill-whom=main", "--signal=TERM", "slurmd", host=victim)
    lab_cluster.wait(lambda: lab_cluster.node_states()[victim].startswith("down"), 90, f"{victim} to go down")
    run = lab.converge(progress=lambda message: None)
    assert run.changed[victim] >= 1  # slurmd started again
    lab_cluster.wait(lambda: lab_cluster.node_states()[victim] == "idle", 60, f"{victim} to be idle")
    assert lab_cluster.ok("sinfo", "--noheader", "--format=%l %m").split() == ["1-00:00:00", "1024"]


# After the two tests above: the lab is back to its own inventory. (A change of the node
# definitions, applied by restarting the daemons, is tested by the fleet move.)
def test_second_run_changes_nothing(lab_cluster: Lab) -> None:
    if lab_cluster.first_changed is not None:
        assert lab_cluster.first_changed > 0
    again = lab.converge(progress=lambda message: None)
    assert again.changed and again.total_changed == 0, again.changed


def test_running_job_survives_a_slurmctld_restart(lab_cluster: Lab) -> None:
    job = lab_cluster.submit("-N1", "--wrap=sleep 300", user="carol")
    lab_cluster.wait(
        lambda: lab_cluster.ok("squeue", "--noheader", f"--jobs={job}", "--format=%T").strip() == "RUNNING",
        30,
        "the job to run",
    )
    lab_cluster.ok("systemctl", "restart", "slurmctld")
    lab_cluster.wait(lambda: "UP" in lab_cluster.sh("scontrol", "ping").stdout, 60, "slurmctld to answer")
    assert lab_cluster.ok("squeue", "--noheader", f"--jobs={job}", "--format=%T %u").split() == [
        "RUNNING",
        "carol",
    ]
