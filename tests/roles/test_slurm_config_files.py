"""slurm_config_files decides reconfigure vs restart the way each Slurm release needs: node-list
changes restart the daemons before 24.11 and take `scontrol reconfigure` from 24.11 on."""

from __future__ import annotations

import yaml
from jinja2 import Template

from .conftest import ROLES, load_module

config = load_module("slurm_config_files")
DEFAULTS = yaml.safe_load((ROLES / "slurm_common" / "defaults" / "main.yml").read_text())


def role_regex(reconfigure_node_changes: bool) -> str:
    """The role's default, as Ansible templates it for a release."""
    return Template(DEFAULTS["slurm_common_restart_keys_regex"]).render(
        slurm_common_release={"reconfigure_node_changes": reconfigure_node_changes},
        slurm_common_restart_keys=DEFAULTS["slurm_common_restart_keys"],
    )


REGEX = role_regex(False)  # 22.05

BASE = "ClusterName=lab\nSlurmctldHost=ctl01\nNodeName=gpu[01-04] CPUs=2 Gres=gpu:h100:8\nPartitionName=gpu Nodes=gpu[01-04] MaxTime=1-00:00:00\nSlurmdTimeout=300\n"


def decide(before: dict[str, str | None], after: dict[str, str | None]) -> tuple[list[str], bool, bool]:
    return config.decide(before, after, REGEX, ["gres.conf", "cgroup.conf"])


def test_first_install_needs_neither() -> None:
    assert decide({"slurm.conf": None}, {"slurm.conf": BASE}) == (["slurm.conf"], False, False)


def test_same_content_changes_nothing() -> None:
    assert decide({"slurm.conf": BASE}, {"slurm.conf": BASE}) == ([], False, False)


def test_timeout_change_is_a_reconfigure() -> None:
    after = BASE.replace("SlurmdTimeout=300", "SlurmdTimeout=20")
    assert decide({"slurm.conf": BASE}, {"slurm.conf": after}) == (["slurm.conf"], False, True)


def test_partition_time_change_is_a_reconfigure() -> None:
    after = BASE.replace("MaxTime=1-00:00:00", "MaxTime=2-00:00:00")
    assert decide({"slurm.conf": BASE}, {"slurm.conf": after})[1:] == (False, True)


def test_node_list_change_is_a_restart_before_24_11_and_a_reconfigure_after() -> None:
    after = BASE.replace("gpu[01-04]", "gpu[01-05]")
    assert decide({"slurm.conf": BASE}, {"slurm.conf": after})[1:] == (True, False)
    newer = config.decide(
        {"slurm.conf": BASE}, {"slurm.conf": after}, role_regex(True), ["gres.conf", "cgroup.conf"]
    )
    assert newer[1:] == (False, True)


def test_plugin_change_is_a_restart() -> None:
    after = BASE + "ProctrackType=proctrack/cgroup\n"
    before = BASE + "ProctrackType=proctrack/linuxproc\n"
    assert decide({"slurm.conf": before}, {"slurm.conf": after})[1:] == (True, False)


def test_topology_change_is_a_reconfigure_and_gres_change_a_restart() -> None:
    before = {"slurm.conf": BASE, "topology.conf": "SwitchName=a Nodes=gpu[01-04]\n", "gres.conf": "x\n"}
    assert decide(before, {**before, "topology.conf": "SwitchName=b Nodes=gpu[01-04]\n"})[1:] == (False, True)
    assert decide(before, {**before, "gres.conf": "y\n"})[1:] == (True, False)


def test_a_file_no_longer_rendered_is_removed() -> None:
    before = {"slurm.conf": BASE, "topology.conf": "SwitchName=a Nodes=gpu[01-04]\n"}
    assert decide(before, {"slurm.conf": BASE, "topology.conf": None}) == (["topology.conf"], False, True)


def test_partition_membership_change_is_a_reconfigure() -> None:
    after = BASE.replace("PartitionName=gpu Nodes=gpu[01-04]", "PartitionName=gpu Nodes=gpu[01-03]")
    assert decide({"slurm.conf": BASE}, {"slurm.conf": after})[1:] == (False, True)


def test_restart_regex_reads_the_role_default() -> None:
    assert config.restart_lines(BASE, REGEX) == [
        "SlurmctldHost=ctl01",
        "NodeName=gpu[01-04] CPUs=2 Gres=gpu:h100:8",
    ]


def test_switching_configless_is_a_restart() -> None:
    """slurmctld sets up configless serving only when it starts (configless_setup, 22.05)."""
    after = BASE + "SlurmctldParameters=enable_configless\n"
    assert decide({"slurm.conf": BASE}, {"slurm.conf": after})[1:] == (True, False)
    assert decide({"slurm.conf": after}, {"slurm.conf": BASE})[1:] == (True, False)


def test_a_configless_node_decides_nothing_from_its_own_files() -> None:
    """It holds no slurm.conf: the controllers' files, which its slurmd runs, decide."""
    before = {"healthcheck.conf": "[sim]\nnodes = gpu01\n"}
    after = {"healthcheck.conf": "[sim]\nnodes = gpu01 gpu02\n"}
    assert decide(before, after) == (["healthcheck.conf"], False, False)


def test_jwt_for_the_rest_api_is_a_restart() -> None:
    # slurmctld loads its auth plugins and the JWT key only when it starts.
    after = BASE + "AuthAltTypes=auth/jwt\nAuthAltParameters=jwt_key=/shared/slurmctld/jwt_hs256.key\n"
    assert decide({"slurm.conf": BASE}, {"slurm.conf": after})[1:] == (True, False)
