"""The lab schedules like the inventory says: nodes, GPUs, the switch tree."""

from __future__ import annotations

import re

import pytest

from gpucluster.hostlists import compress, expand

from .conftest import Lab, plain_gres

pytestmark = pytest.mark.lab


def test_every_node_is_idle_with_eight_h100(lab_cluster: Lab) -> None:
    out = lab_cluster.ok("sinfo", "--noheader", "--Node", "--format=%N %T %G")
    rows = sorted(line.split() for line in out.splitlines())
    # The power-saved nodes are off while idle (~): Slurm powers them on for a job.
    assert [[node, state, plain_gres(gres)] for node, state, gres in rows] == [
        [host, "idle" if host in lab_cluster.nodes_up else "idle~", "gpu:h100:8"]
        for host in lab_cluster.cluster.hosts
    ]
    # gres.conf binds the GPUs to their cores (Cores=), which Slurm shows as the socket.
    assert all(gres.endswith("(S:0)") for _, _, gres in rows), rows


def test_srun_on_all_nodes_prints_each_hostname(lab_cluster: Lab) -> None:
    out = lab_cluster.ok("srun", f"-N{len(lab_cluster.nodes_up)}", "hostname")
    assert sorted(out.split()) == lab_cluster.nodes_up


def test_switches_one_lands_under_the_free_leaf(lab_cluster: Lab) -> None:
    leaves = {s.name: list(s.nodes) for s in lab_cluster.cluster.switches if s.nodes}
    busy_leaf, free_leaf = sorted(leaves)
    blocker = lab_cluster.submit(
        "--exclusive",
        f"--nodelist={compress(leaves[busy_leaf])}",
        f"-N{len(leaves[busy_leaf])}",
        "--wrap=sleep 300",
    )
    lab_cluster.wait(
        lambda: (
            lab_cluster.ok("squeue", "--noheader", f"--jobs={blocker}", "--format=%T").strip() == "RUNNING"
        ),
        30,
        "the job filling the first leaf",
    )
    out = lab_cluster.ok("srun", "-N2", "--switches=1", "--immediate=30", "hostname")
    assert sorted(out.split()) == sorted(leaves[free_leaf])


def test_topology_equals_the_inventory_tree(lab_cluster: Lab) -> None:
    out = lab_cluster.ok("scontrol", "show", "topology")
    shown: dict[str, tuple[list[str], list[str]]] = {}
    for line in out.splitlines():
        fields = dict(item.split("=", 1) for item in line.split() if "=" in item)
        if "SwitchName" in fields:
            shown[fields["SwitchName"]] = (
                expand(fields["Switches"]) if fields.get("Switches") else [],
                expand(fields["Nodes"]) if fields.get("Nodes") else [],
            )
    expected = {}
    for switch in lab_cluster.cluster.switches:
        # Slurm lists, for an upper switch, every node below it.
        below = [h for h, path in lab_cluster.cluster.switch_path.items() if switch.name in path]
        expected[switch.name] = (sorted(switch.switches), sorted(below))
    assert {name: (sorted(s), sorted(n)) for name, (s, n) in shown.items()} == expected
    assert set(expected) == {"spine", "leaf1", "leaf2"}


def test_two_gpus_give_two_cuda_devices(lab_cluster: Lab) -> None:
    out = lab_cluster.ok("srun", "--gres=gpu:h100:2", "printenv", "CUDA_VISIBLE_DEVICES", user="alice")
    devices = out.strip().split(",")
    assert len(devices) == 2 and all(re.fullmatch(r"\d", d) for d in devices)


def test_more_gpus_than_a_node_has_is_refused(lab_cluster: Lab) -> None:
    proc = lab_cluster.sh("srun", "--gres=gpu:h100:9", "true", user="alice")
    assert proc.returncode != 0
    assert "Requested node configuration is not available" in proc.stderr
