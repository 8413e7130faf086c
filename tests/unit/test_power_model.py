"""cluster.nodes[].power: what it renders (slurm.conf's power lines, gpucluster-power.json), what it
refuses (a serving host power-saved, a ResumeTimeout shorter than the boot, a cloud group without an
instance type or a template, the site's programs beside gpucluster's), the release's say in it, how
every other part of gpucluster treats power-saved nodes (storage, monitoring, node software), and
what `plan` says a live cluster needs for each power change."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from gpucluster.changes.steps import power_notes
from gpucluster.errors import InventoryError
from gpucluster.layers import load_cluster
from gpucluster.model.releases import RELEASES, power_command
from gpucluster.rendering import render_files
from tests.conftest import InventoryFactory

HOSTS = """\
    all:
      children:
        ctl:
          hosts:
            head:
        gpus:
          hosts:
            n[01:02]:
        saved:
          hosts:
            n[03:04]:
        aws:
          hosts:
            cloud[01:02]:
    """

CLUSTER = """\
    cluster:
      name: burst
      slurm:
        version: "{version}"
        controller: head
        {power_save}
      node_types:
        h100: {{sockets: 2, cores_per_socket: 8, memory_mb: 64000, instance_type: p5.48xlarge,
               gpus: {{model: h100, count: 8, devices: "/dev/nvidia[0-7]"}}}}
      nodes:
        - {{group: gpus, type: h100}}
        - group: saved
          type: h100
          power: {{kind: bmc, bmc: {{endpoint: "https://{{host}}-bmc.mgmt.example.com"}}}}
        - group: aws
          type: h100
          power:
            kind: cloud
            cloud: {{provider: aws, region: us-east-1, subnet: subnet-0abc, image: ami-0123,
                     capacity: capacity-block, reservation: cr-0123}}
      partitions:
        - {{name: batch, nodes: [gpus, saved], default: true}}
        - {{name: burst, nodes: [aws]}}
    """


def make(inventories: InventoryFactory, version: str = "26.05", power_save: str = "", **edits: str) -> Path:
    text = textwrap.dedent(CLUSTER.format(version=version, power_save=power_save))
    for old, new in edits.items():
        assert old in text, old
        text = text.replace(old, new)
    return inventories.make(HOSTS, text)


def problems(directory: Path) -> list[str]:
    with pytest.raises(InventoryError) as caught:
        load_cluster(directory)
    return [f"{p.path}: {p.message}" for p in caught.value.problems]


def test_gpucluster_s_programs_and_gpu_defaults_are_written(inventories: InventoryFactory) -> None:
    files = render_files(load_cluster(make(inventories)))
    conf = files["slurm/slurm.conf"]
    for line in (
        "SuspendProgram=/usr/local/sbin/gpucluster-power-suspend",
        "ResumeProgram=/usr/local/sbin/gpucluster-power-resume",
        "ResumeFailProgram=/usr/local/sbin/gpucluster-power-resume-fail",
        "SuspendTime=1800",  # half an hour idle: a GPU node takes minutes to come back
        "SuspendTimeout=120",
        "ResumeTimeout=960",  # the longest boot (a bare-metal GPU server, 900 s) and a margin
        "SuspendExcNodes=n[01-02]",  # every always-on node, never suspended
        "SchedulerParameters=requeue_on_resume_failure",
    ):
        assert line in conf.splitlines(), line
    nodes = [line for line in conf.splitlines() if line.startswith("NodeName=")]
    assert any(line.startswith("NodeName=cloud[01-02]") and line.endswith("State=CLOUD") for line in nodes), (
        nodes
    )
    assert any(line.startswith("NodeName=n[03-04]") and line.endswith("State=UNKNOWN") for line in nodes), (
        nodes
    )
    conf_json = json.loads(files["power/gpucluster-power.json"])
    assert conf_json["nodes"]["n03"] == {"group": "saved", "resume_timeout": 960}
    aws = conf_json["groups"]["aws"]["cloud"]
    assert (aws["template"], aws["instance_type"], aws["reservation"]) == (
        "burst-aws",
        "p5.48xlarge",
        "cr-0123",
    )
    assert "password" not in files["power/gpucluster-power.json"]


def test_the_release_decides_what_cloud_nodes_need(inventories: InventoryFactory) -> None:
    old = render_files(load_cluster(make(inventories, version="23.02")))["slurm/slurm.conf"].splitlines()
    assert "TreeWidth=65533" in old
    assert any(line.startswith("SlurmctldParameters=") and "cloud_reg_addrs" in line for line in old)
    assert not any(line.startswith("SchedulerParameters=") for line in old)  # 25.05's option
    new = render_files(load_cluster(make(inventories)))["slurm/slurm.conf"].splitlines()
    assert not [line for line in new if line.startswith("TreeWidth") or "cloud_reg_addrs" in line]


def test_power_commands_follow_the_release() -> None:
    assert power_command(RELEASES["26.05"], "down", "n03", "swap") == [
        "scontrol",
        "power",
        "down",
        "n03",
        "Reason=swap",
    ]
    assert power_command(RELEASES["24.11"], "down", "n03", "swap") == ["scontrol", "power", "down", "n03"]
    assert power_command(RELEASES["23.11"], "up", "n03") == [
        "scontrol",
        "update",
        "NodeName=n03",
        "State=POWER_UP",
    ]


@pytest.mark.parametrize(
    ("edits", "expected"),
    [
        (
            {
                "    - {group: gpus, type: h100}": '    - {group: gpus, type: h100}\n    - group: ctl\n      type: h100\n      power: {kind: bmc, bmc: {endpoint: "https://x"}}'
            },
            "cluster.nodes[1].power.kind: head is a Slurm controller: it must stay on",
        ),
        (
            {
                "      power: {kind: bmc, bmc: {endpoint": "      state: future\n      power: {kind: bmc, bmc: {endpoint"
            },
            "cluster.nodes[1].state: `state: future` and `power` both say how Slurm sees these hosts",
        ),
        (
            {"instance_type: p5.48xlarge,": ""},
            "cluster.node_types.h100.instance_type: cluster.nodes[2] creates aws instances",
        ),
        (
            {
                "provider: aws, region: us-east-1": "provider: azure, region: eastus, project: rg",
                "capacity: capacity-block, reservation: cr-0123": "capacity: on-demand",
            },
            "cluster.nodes[2].power.cloud.template: a azure cloud group needs a template",
        ),
    ],
)
def test_what_cannot_work_is_refused(
    inventories: InventoryFactory, edits: dict[str, str], expected: str
) -> None:
    found = problems(make(inventories, **edits))
    assert any(p.startswith(expected) for p in found), found


def test_a_resume_timeout_shorter_than_the_boot_is_refused_where_it_is_set(
    inventories: InventoryFactory,
) -> None:
    found = problems(make(inventories, power_save="power_save: {resume_timeout: 300}"))
    assert any(
        p.startswith(
            "cluster.slurm.power_save.resume_timeout: the cluster's ResumeTimeout (300 s) does not cover "
            "the boot of cluster.nodes[1] (n03: 900 s"
        )
        for p in found
    ), found
    found = problems(
        make(
            inventories, **{"{name: burst, nodes: [aws]}": "{name: burst, nodes: [aws], resume_timeout: 120}"}
        )
    )
    assert any(
        p.startswith("cluster.partitions[1].resume_timeout: partition `burst`'s ResumeTimeout (120 s)")
        for p in found
    ), found
    # A boot the inventory says is short passes with a short timeout.
    load_cluster(
        make(
            inventories,
            power_save="power_save: {resume_timeout: 300}",
            **{
                "power: {kind: bmc, bmc:": "power: {kind: bmc, boot_time: 200, bmc:",
                "        kind: cloud\n": "        kind: cloud\n        boot_time: 240\n",
            },
        )
    )


def test_the_site_s_programs_and_gpucluster_s_cannot_both_drive_slurm(inventories: InventoryFactory) -> None:
    found = problems(make(inventories, power_save="power_save: {resume_program: /opt/site/resume}"))
    assert any(
        p.startswith(
            "cluster.slurm.power_save.resume_program: cluster.nodes[1].power makes gpucluster's programs"
        )
        for p in found
    ), found


def test_cloud_instances_are_left_to_their_image(inventories: InventoryFactory) -> None:
    """No play reaches an instance made on demand: not the mounts, not the exports, not the node
    software; monitoring labels power-saved targets and keeps their silence out of
    NodeExporterMissing."""
    text = textwrap.dedent(CLUSTER.format(version="26.05", power_save=""))
    text += textwrap.indent(
        textwrap.dedent("""\
        storage:
          - {name: home, mount: /home, home: true, nfs_server: {host: head, export: /srv/home}}
        monitoring: {host: head}
        """),
        "  ",
    )
    files = render_files(load_cluster(inventories.make(HOSTS, text)))
    storage = files["hosts/storage.yaml"]
    assert "cloud01" not in storage and "n03" in storage
    assert "cloud01" not in files["hosts/nfs-exports/head.exports"]
    prometheus = files["monitoring/prometheus.yml"]
    assert "power: bmc" in prometheus and "power: cloud" in prometheus
    rules = files["monitoring/rules/gpucluster.rules.yml"]
    assert 'up{job="node", power=""} < 1' in rules
    assert "PowerSavedNodeExporterMissing" in rules and "gpucluster:gpus_powered_down" in rules
    hosts = files["monitoring/hosts.yaml"]
    assert "cloud01" not in hosts


def test_plan_says_what_each_power_change_needs(inventories: InventoryFactory) -> None:
    both = make(inventories)
    always = inventories.make(
        HOSTS,
        textwrap.dedent(CLUSTER.format(version="24.11", power_save="")).replace(
            '    - group: saved\n      type: h100\n      power: {kind: bmc, bmc: {endpoint: "https://{host}-bmc.mgmt.example.com"}}\n',
            "    - {group: saved, type: h100}\n",
        ),
        name="always",
    )
    old, new = load_cluster(always), load_cluster(make(inventories, version="24.11"))
    joining = power_notes(old, new, new.release)
    assert any(
        n.startswith("n[03-04] become power-saved: nothing happens to them until they are idle")
        for n in joining
    )
    leaving = power_notes(new, old, old.release)
    assert any(
        "n[03-04] become always on: before this, power up those Slurm keeps off (`scontrol power up n[03-04]`)"
        in n
        for n in leaving
    )
    assert not power_notes(load_cluster(both), load_cluster(both), old.release)
