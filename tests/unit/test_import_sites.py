"""`gpucluster import` of configurations shaped like real sites' (tests/import_sites/*, each file
saying which shape it stands for): each imports with nothing refused, places every setting of its
files, renders a cluster the target release reads exactly as it reads the site's files, and is
shorter than the slurm.conf it replaces. tests/slurm/test_import_trial.py proves each render with
real daemons of its release."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from gpucluster.slurm.parse import EVERY_LINE, SLURM_RECORDS, TOPOLOGY_RECORDS, Reader
from gpucluster.slurm.view import SiteFiles
from gpucluster.slurm_import.adopt import ImportResult, import_cluster, write_inventory

SITES_DIR = Path(__file__).resolve().parents[1] / "import_sites"


@dataclass(frozen=True)
class Site:
    version: str
    gres: tuple[tuple[str, str], ...] = ()  # (hosts, per-host gres.conf copy)
    # Settings that must be placed as this kind: (Key=Value as written, kind).
    expect: tuple[tuple[str, str], ...] = ()
    # The inventory is shorter than slurm.conf (small files whose hosts each have an address of
    # their own, or several node types, are not).
    shorter: bool = True


SITES = {
    "university": Site(
        "22.05",
        (("hg[06-07]", "hosts/hg06-gres.conf"), ("viz[1-2]", "hosts/viz-gres.conf")),
        (
            ("ControlMachine=hydra-head", "mapped"),
            ("CryptoType=crypto/munge", "mapped"),
            ("FastSchedule=1", "dropped"),
            ("SlurmctldDebug=5", "mapped"),
            ("Shared=YES", "mapped"),
            ("KillWait=30", "default"),
            ("TmpFS=/scratch/local", "extra"),
        ),
    ),
    "vendor-template": Site(
        "24.11",
        expect=(
            ("Procs=128", "dropped"),
            ("PrologFlags=Alloc,Serial,Contain", "native"),
            ("HealthCheckProgram=/usr/sbin/nhc", "extra"),
            ("Gres=gpu:7", "native"),
        ),
    ),
    "cloud-supercluster": Site(
        "26.05",
        expect=(
            ("State=CLOUD", "native"),
            ("PreemptType=preempt/partition_prio", "native"),
            ("TreeWidth=2048", "extra"),
        ),
    ),
    "cloud-autoscaling": Site(
        "24.11",
        expect=(
            ("NodeSet=train_nodes", "mapped"),
            ("SlurmctldPort=6820-6829", "native"),
            ("CPUs=192", "native"),
        ),
    ),
    "nvlink-racks": Site(
        "26.05",
        expect=(
            ("Exclusive=NODE", "native"),
            ("RealMemory=430000", "native"),
            ("AutoDetect=nvidia", "native"),
        ),
    ),
    # Issue 36: shapes of the real sites' files that the import refused or changed.
    "campus-lab": Site(
        "22.05",
        expect=(
            ("ClusterName=ml.lab.example", "native"),
            ("ControlAddr=192.168.40.1", "mapped"),
            ("SlurmUser=root", "native"),
            ("RebootProgram=/sbin/shutdown -r now", "extra"),
            ("SallocDefaultCommand=srun --gres=gpu:1 --pty $SHELL", "mapped"),
            ("selecttypeparameters=CR_Core_Memory", "native"),
            ("DefCpuPerGPU=4", "mapped"),
            ("AccountingStorageLoc=slurm_acct_db", "dropped"),
            ("DefaultStoragePort=6819", "mapped"),
            ("KillWait=30", "dropped"),
            ("NodeAddr=192.168.40.[11-16]", "native"),
            ("NodeAddr=cpu[1-2]", "default"),
            ("MaxTime=2:0:0", "native"),
            ("CgroupReleaseAgentDir=/etc/slurm/cgroup", "dropped"),
            ("TaskAffinity=no", "dropped"),
        ),
    ),
    "render-farm": Site(
        "24.11",
        expect=(
            ("SlurmctldHost=farmctl(10.20.0.2)", "native"),
            ("ClusterName=RenderFarm", "native"),
            ("SlurmctldPidFile=/var/run/slurm/slurmctld-renderfarm.pid", "mapped"),
            ("InteractiveStepOptions=--interactive --preserve-env --pty $SHELL -l", "extra"),
            ("PriorityCalcPeriod=00:05:00", "native"),
            ("NodeAddr=10.20.1.[1-4]", "native"),
            ("required /usr/lib/x86_64-linux-gnu/slurm/spank_pyxis.so runtime_path=/run/pyxis", "native"),
            ("include /etc/slurm/spank-site/*.conf", "native"),
            ("SwitchName=leaf1", "dropped"),
            ("no PartitionName says Default=YES", "native"),
            ("spare01 in no partition", "native"),
        ),
        shorter=False,
    ),
    "mixed-cards": Site(
        "22.05",
        (("card3", "hosts/card3-gres.conf"),),
        (
            ("Gres=gpu:titanx:3,gpu:gtx1080:1", "native"),
            ("Gres=gpu:titanx:2,gpu:k40:1,gpu:gtx1080:1", "native"),
            ("gres.conf of card4 (not in the input)", "assumed"),
        ),
        shorter=False,
    ),
    "fabric-islands": Site(
        "22.05",
        expect=(
            ("FastSchedule=1", "dropped"),
            ("Shared=NO", "mapped"),
            ("topology.conf names b017", "native"),
            ("login[1-2] under no leaf switch", "native"),
            ("2 root switches (ib-a, ib-b)", "native"),
            ("gres.conf of a001,b001 (not in the input)", "assumed"),
            ("AccountingStorageHost (left out: Slurm's default, localhost)", "native"),
        ),
        shorter=False,
    ),
    "lab-server-upgrade": Site(
        "24.11",
        expect=(
            ("SelectType=select/cons_res", "mapped"),
            ("MemLimitEnforce=yes", "mapped"),
            ("CacheGroups=0", "dropped"),
            ("SchedulerType=sched/builtin", "native"),
        ),
    ),
}


def site_files(name: str) -> SiteFiles:
    site = SITES[name]
    root = SITES_DIR / name
    return SiteFiles.in_directory(root / "etc", tuple((hosts, root / path) for hosts, path in site.gres))


def imported(name: str, out: Path) -> ImportResult:
    return write_inventory(import_cluster(site_files(name), SITES[name].version), out, check=True)


def test_every_site_shape_is_here() -> None:
    assert sorted(p.name for p in SITES_DIR.iterdir() if p.is_dir()) == sorted(SITES)


@pytest.mark.parametrize("name", sorted(SITES))
def test_a_site_imports_the_same_cluster_in_fewer_lines(name: str, tmp_path: Path) -> None:
    result = imported(name, tmp_path / name)
    assert result.comparison is not None
    assert result.comparison.same, "\n".join(str(d) for d in result.comparison.differences)
    assert result.counts["refused"] == 0
    if SITES[name].shorter:
        assert result.inventory_lines < result.original_lines, (result.inventory_lines, result.original_lines)
    placed = {(p.written, p.kind) for p in result.placements}
    for written, kind in SITES[name].expect:
        assert (written, kind) in placed, (written, kind, sorted(p for p in placed if p[0] == written))


@pytest.mark.parametrize("name", sorted(SITES))
def test_every_setting_of_the_files_is_placed(name: str, tmp_path: Path) -> None:
    """Nothing is dropped silently: each option of each file has a placement at its line."""
    result = import_cluster(site_files(name), SITES[name].version)
    placed = {(p.where, p.written.split("=", 1)[0].lower()) for p in result.placements}
    files = site_files(name)
    readers = [(files.slurm_conf, SLURM_RECORDS)] + [(path, EVERY_LINE) for _, path in files.gres]
    if files.cgroup is not None:
        readers.append((files.cgroup, ()))
    if files.topology is not None and files.topology.suffix == ".conf":
        readers.append((files.topology, TOPOLOGY_RECORDS))
    wheres = {p.where for p in result.placements}
    missing = []
    for path, records in readers:
        conf = Reader(records, [], {}).read(path)
        if records == EVERY_LINE:
            # gres.conf lines are placed whole (Name=gpu Type=... File=..., AutoDetect=...).
            missing += [f"{r.where}: {r.kind}={r.name}" for r in conf.records if str(r.where) not in wheres]
            continue
        # The node list of a partition, switch or node set is placed with its line.
        options = [
            *conf.settings,
            *(
                o
                for record in conf.records
                for o in record.options
                if record.kind != "NodeSet" and o.lower not in ("nodes", "switches")
            ),
        ]
        missing += [
            f"{o.where}: {o.key}={o.value}" for o in options if (str(o.where), o.key.lower()) not in placed
        ]
        # A record's own line (NodeName=..., PartitionName=..., SwitchName=...) is placed too.
        missing += [f"{r.where}: {r.kind}={r.name}" for r in conf.records if str(r.where) not in wheres]
    assert missing == [], missing
