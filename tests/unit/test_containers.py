"""cluster.slurm.containers: validated at its keys, rendered per release (oci.conf in SchedMD's
rootless crun form, plugstack include, Pyxis' entry, enroot.conf, mounts, the roles' settings), and
judged by verify's container rows."""

from __future__ import annotations

import copy
import re
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucluster.layers import load_cluster
from gpucluster.rendering import render_files
from gpucluster.slurm.containers import container_nodes, pyxis_hosts
from gpucluster.verify.checks import Status
from gpucluster.verify.container_probe import CONTAINER_PROBE, container_plan
from gpucluster.verify.containers import check_oci, check_pyxis, parse_probe
from gpucluster.verify.observed import HostSeen, Observations
from gpucluster.verify.probes import make_plan
from tests.conftest import SMALL_CLUSTER, SMALL_HOSTS, InventoryFactory, run_cli

BASE = yaml.safe_load(textwrap.dedent(SMALL_CLUSTER))
ROOTLESS = "crun --rootless=true --root=/run/user/%U/"
CONTAINER_ID = "%n.%u.%j.%s.%t"


def write(inventories: InventoryFactory, mutate: Callable[[dict[str, Any]], None]) -> Path:
    data = copy.deepcopy(BASE)
    mutate(data["cluster"])
    return inventories.make(SMALL_HOSTS, yaml.safe_dump(data, sort_keys=False))


def containers(version: str = "22.05", **settings: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(cluster: dict[str, Any]) -> None:
        cluster["slurm"]["version"] = version
        cluster["slurm"]["containers"] = settings

    return mutate


def test_no_section_renders_nothing_of_containers(inventories: InventoryFactory) -> None:
    files = render_files(load_cluster(write(inventories, lambda c: None)))
    assert "slurm/oci.conf" not in files
    assert not [path for path in files if path.startswith("containers/")]
    assert "\ninclude " not in files["slurm/plugstack.conf"]


@pytest.mark.parametrize("version", ["24.11", "26.05"])
def test_oci_conf_is_the_rootless_crun_form(inventories: InventoryFactory, version: str) -> None:
    files = render_files(load_cluster(write(inventories, containers(version, oci=True))))
    lines = [line for line in files["slurm/oci.conf"].splitlines() if not line.startswith("#")]
    assert lines == [
        'EnvExclude="^(SLURM_CONF|SLURM_CONF_SERVER)="',
        'RunTimeEnvExclude="^(SLURM_CONF|SLURM_CONF_SERVER)="',
        f'RunTimeQuery="{ROOTLESS} state {CONTAINER_ID}"',
        f'RunTimeKill="{ROOTLESS} kill -a {CONTAINER_ID}"',
        f'RunTimeDelete="{ROOTLESS} delete --force {CONTAINER_ID}"',
        f'RunTimeRun="{ROOTLESS} run --bundle %b {CONTAINER_ID}"',
    ]
    # OCI alone: no SPANK plugin, no Pyxis files.
    assert "\ninclude " not in files["slurm/plugstack.conf"]
    assert "containers/pyxis.conf" not in files


def test_22_05_oci_conf_has_no_env_exclude(inventories: InventoryFactory) -> None:
    files = render_files(load_cluster(write(inventories, containers("22.05", oci=True))))
    assert "EnvExclude" not in files["slurm/oci.conf"]
    assert f"run --bundle %b {CONTAINER_ID}" in files["slurm/oci.conf"]


def test_pyxis_renders_its_entry_enroot_conf_mounts_and_the_roles_settings(
    inventories: InventoryFactory,
) -> None:
    cluster = load_cluster(
        write(
            inventories,
            containers(
                "26.05",
                pyxis={
                    "sources": "/srv/mirror/containers",
                    "writable": True,
                    "remap_root": True,
                    "mounts": ["/scratch:/scratch", "/datasets:/data:ro+rprivate"],
                },
            ),
        )
    )
    files = render_files(cluster)
    # Pyxis is named in plugstack.conf itself (no include slurmctld would have to read).
    plugstack = files["slurm/plugstack.conf"].splitlines()
    assert "optional spank_pyxis.so" in plugstack and not any(
        line.startswith("include") for line in plugstack
    )
    assert "containers/pyxis.conf" not in files
    enroot = files["containers/enroot.conf"]
    assert re.search(r"^ENROOT_RUNTIME_PATH +/run/enroot/user-\$\(id -u\)$", enroot, re.MULTILINE)
    assert re.search(r"^ENROOT_ROOTFS_WRITABLE +yes$", enroot, re.MULTILINE)
    assert re.search(r"^ENROOT_REMAP_ROOT +yes$", enroot, re.MULTILINE)
    mounts = [line for line in files["containers/mounts.fstab"].splitlines() if not line.startswith("#")]
    assert mounts == [
        "/scratch /scratch none x-create=dir,rbind,nosuid 0 -1",
        "/datasets /data none x-create=dir,rbind,nosuid,ro,rprivate 0 -1",
    ]
    settings = yaml.safe_load(files["containers/settings.yaml"])
    assert settings["oci"] is False and settings["users"] == []
    pyxis = settings["pyxis"]
    assert pyxis["sources_dir"] == "/srv/mirror/containers"
    assert pyxis["archives"]["enroot"] == {
        "version": "4.1.2",
        "file": "enroot-4.1.2.tar.gz",
        "url": "/srv/mirror/containers/enroot-4.1.2.tar.gz",
        "sha256": "817e8d551135e6f3fc311d1ee57b03fb4d30325acba732f8dea43069ca11f8d3",
    }
    assert pyxis["plugin_subdir"] == "slurm-wlm"
    # srun loads the plugin where it runs: the controller too, not only the nodes.
    assert pyxis["hosts"] == [*container_nodes(cluster), "head"]


def test_without_sources_the_archives_are_upstreams(inventories: InventoryFactory) -> None:
    files = render_files(load_cluster(write(inventories, containers(pyxis={}))))
    archives = yaml.safe_load(files["containers/settings.yaml"])["pyxis"]["archives"]
    assert archives["pyxis"]["url"] == "https://github.com/NVIDIA/pyxis/archive/refs/tags/v0.24.0.tar.gz"
    assert (
        archives["makeself"]["url"]
        == "https://github.com/megastep/makeself/archive/refs/tags/release-2.4.5.tar.gz"
    )
    assert yaml.safe_load(files["containers/settings.yaml"])["pyxis"]["sources_dir"] is None


def test_node_types_limit_the_container_nodes(inventories: InventoryFactory) -> None:
    def mutate(cluster: dict[str, Any]) -> None:
        cluster["node_types"]["cpu"] = {"sockets": 1, "cores_per_socket": 4, "memory_mb": 8000}
        cluster["nodes"] = [{"group": "rack1", "type": "h100"}, {"group": "rack2", "type": "cpu"}]
        cluster["tenants"] = [{"name": "team-a", "fairshare": 50, "users": ["alice", "bob"]}]
        cluster["slurm"]["containers"] = {"oci": True, "pyxis": {}, "node_types": ["h100"]}

    cluster = load_cluster(write(inventories, mutate))
    nodes = container_nodes(cluster)
    assert nodes and all(cluster.node_type_of[h] == "h100" for h in nodes)
    assert set(pyxis_hosts(cluster)) == {*nodes, "head"}


CASES: list[tuple[str, Callable[[dict[str, Any]], None], str, str]] = [
    ("nothing on", containers(), "cluster.slurm.containers", "neither `oci: true` nor `pyxis`"),
    ("unknown node type", containers(oci=True, node_types=["a100"]), "cluster.slurm.containers.node_types[0]", "`a100` is not a node type"),
    ("bad checksum", containers(pyxis={"pyxis_sha256": "abc"}), "cluster.slurm.containers.pyxis.pyxis_sha256", "should match pattern"),
    ("bad mount", containers(pyxis={"mounts": ["scratch:/scratch"]}), "cluster.slurm.containers.pyxis.mounts", "SRC:DST[:FLAGS]"),
    ("bad sources", containers(pyxis={"sources": "mirror"}), "cluster.slurm.containers.pyxis.sources", "should match pattern"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "mutate", "path", "message"), CASES, ids=[c[0] for c in CASES])
def test_bad_container_settings_are_reported_at_their_key(
    inventories: InventoryFactory,
    name: str,
    mutate: Callable[[dict[str, Any]], None],
    path: str,
    message: str,
) -> None:
    directory = write(inventories, mutate)
    proc = run_cli("validate", str(directory))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    pattern = rf"^{re.escape(str(directory))}/group_vars/all/cluster\.yml:\d+: {re.escape(path)}: .*{re.escape(message)}"
    assert re.search(pattern, proc.stderr, re.MULTILINE), proc.stderr


def seen_with(plan_hosts: list[str], probe: dict[str, str]) -> Observations:
    hosts = {h: HostSeen(containers=probe.get(h, "")) for h in plan_hosts}
    return Observations(hosts=hosts, controller=None)


def test_verify_rows_judge_crun_pyxis_and_enroots_version(inventories: InventoryFactory) -> None:
    cluster = load_cluster(write(inventories, containers(oci=True, pyxis={})))
    plan = make_plan(cluster)
    probed = container_plan(plan.cluster, plan.hosts)
    assert probed["probe"] == CONTAINER_PROBE and "head" in probed["hosts"]
    good = "crun=1.21\nenroot=4.1.2\npyxis=yes\n"
    hosts = list(probed["hosts"])
    seen = seen_with(hosts, dict.fromkeys(hosts, good))
    assert check_oci(plan, seen).status == Status.PASS
    assert check_pyxis(plan, seen).status == Status.PASS

    node = container_nodes(plan.cluster)[0]
    seen = seen_with(hosts, {**dict.fromkeys(hosts, good), node: "crun=\nenroot=4.1.1\npyxis=no\n"})
    oci, pyxis = check_oci(plan, seen), check_pyxis(plan, seen)
    assert oci.status == Status.FAIL and oci.names == (node,) and "no crun" in oci.detail
    assert pyxis.status == Status.FAIL and pyxis.names == (node,)
    assert (
        "lists no --container-image" in pyxis.detail
        and "enroot 4.1.1, the inventory pins 4.1.2" in pyxis.detail
    )


def test_probe_lines_parse() -> None:
    assert parse_probe("crun=1.28\nenroot=\npyxis=no\nnoise") == {"crun": "1.28", "enroot": "", "pyxis": "no"}
