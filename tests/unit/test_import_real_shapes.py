"""Issue 36: what real sites' published Slurm files hold, each cause the import refused or changed
reduced to a few lines of our own (tests/import_sites/SOURCES.md lists the sites). Every case
imports as Slurm reads it: the inventory validates, renders a cluster the target release reads
exactly as it reads the input (`--check`), and places the setting as the case says; a cause that
Slurm itself refuses is refused naming the input's file and line."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from gpucluster.errors import InventoryError
from gpucluster.slurm.view import SiteFiles
from gpucluster.slurm_import.adopt import ImportResult, import_cluster, write_inventory

HEAD = """ClusterName=shape
SlurmctldHost=head
SlurmUser=slurm
MailProg=/usr/bin/true
ProctrackType=proctrack/cgroup
"""
NODES = """NodeName=n[1-2] CPUs=8 RealMemory=16000
PartitionName=all Nodes=n[1-2] Default=YES
"""
GPU_NODES = """NodeName=g[1-2] Sockets=2 CoresPerSocket=4 ThreadsPerCore=2 RealMemory=64000 Gres=gpu:2
NodeName=c1 CPUs=8 RealMemory=16000
PartitionName=gpu Nodes=g[1-2] Default=YES
PartitionName=cpu Nodes=c1
"""
GRES_RANGE = "NodeName=g[1-2] Name=gpu File=/dev/nvidia[0-1]\n"


@dataclass(frozen=True)
class Case:
    conf: str
    # (Key=Value as written, kind) that must be among the placements.
    placed: tuple[tuple[str, str], ...] = ()
    files: dict[str, str] = field(default_factory=dict)  # other files beside slurm.conf
    version: str = "24.11"
    # Lines the rendered slurm.conf must hold (what Slurm then reads back).
    rendered: tuple[str, ...] = ()
    # cluster.yml must hold these (the model's setting that says what the site does).
    inventory: tuple[str, ...] = ()
    not_compared: int = 0


CASES = {
    # --- node states a site's file sets (janelia-turaga: State=IDLE and State=DRAIN lines) ----------
    "node states drain and idle": Case(
        HEAD
        + "NodeName=n1 CPUs=8 RealMemory=16000 State=DRAIN\n"
        + "NodeName=n2 CPUs=8 RealMemory=16000 State=IDLE\n"
        + "PartitionName=all Nodes=n[1-2] Default=YES\n",
        (("State=DRAIN", "native"), ("State=IDLE", "native")),
        inventory=("state: drain", "state: idle"),
    ),
    # --- values (issue: "a quoted value with spaces loses its quotes") ---------------------------
    "quoted value with a blank": Case(
        HEAD + 'RebootProgram="/sbin/shutdown -r now"\n' + NODES,
        (("RebootProgram=/sbin/shutdown -r now", "extra"),),
        rendered=('RebootProgram="/sbin/shutdown -r now"',),
    ),
    "quoted value with $ and a dash": Case(
        HEAD + 'InteractiveStepOptions="--interactive --pty --preserve-env $SHELL"\n' + NODES,
        (("InteractiveStepOptions=--interactive --pty --preserve-env $SHELL", "extra"),),
        rendered=('InteractiveStepOptions="--interactive --pty --preserve-env $SHELL"',),
    ),
    "escaped # in a value": Case(
        HEAD + "JobCompLoc=/var/log/slurm/jobs\\#1.txt\nJobCompType=jobcomp/filetxt\n" + NODES,
        (("JobCompLoc=/var/log/slurm/jobs#1.txt", "extra"),),
        rendered=("JobCompLoc=/var/log/slurm/jobs\\#1.txt",),
    ),
    "time of one-digit fields": Case(
        HEAD + NODES.replace("Default=YES", "Default=YES DefaultTime=2:0:0 MaxTime=7-0:0"),
        (("DefaultTime=2:0:0", "native"), ("MaxTime=7-0:0", "native")),
    ),
    "lower-case key, comment after a value, continued line": Case(
        HEAD + "killwait=60   # seconds\n" + NODES.replace("RealMemory=16000", "\\\n  RealMemory=16000"),
        (("killwait=60", "native"),),
    ),
    # --- addresses --------------------------------------------------------------------------------
    "NodeAddr equal to the name": Case(
        HEAD + NODES.replace("CPUs=8", "NodeAddr=n[1-2] CPUs=8"), (("NodeAddr=n[1-2]", "default"),)
    ),
    "NodeAddr of each node": Case(
        HEAD + NODES.replace("CPUs=8", "NodeAddr=10.1.0.[1-2] CPUs=8"),
        (("NodeAddr=10.1.0.[1-2]", "native"),),
        rendered=("NodeName=n[1-2] NodeAddr=10.1.0.1,10.1.0.2 CPUs=8 RealMemory=16000 State=UNKNOWN",),
    ),
    "NodeHostname": Case(
        HEAD + NODES.replace("CPUs=8", "NodeHostname=n[1-2].example.org CPUs=8"),
        (("NodeHostname=n[1-2].example.org", "native"),),
    ),
    "ControlAddr": Case(
        HEAD.replace("SlurmctldHost=head", "ControlMachine=head\nControlAddr=10.1.0.254") + NODES,
        (("ControlAddr=10.1.0.254", "mapped"),),
        version="22.05",
        rendered=("SlurmctldHost=head(10.1.0.254)",),
    ),
    "SlurmctldHost with its address": Case(
        HEAD.replace("SlurmctldHost=head", "SlurmctldHost=head(10.1.0.254)") + NODES,
        (("SlurmctldHost=head(10.1.0.254)", "native"),),
        rendered=("SlurmctldHost=head(10.1.0.254)",),
    ),
    # --- users and names ---------------------------------------------------------------------------
    "SlurmUser root": Case(
        HEAD.replace("SlurmUser=slurm", "SlurmUser=root") + NODES,
        (("SlurmUser=root", "native"),),
        rendered=("SlurmUser=root",),
    ),
    "no SlurmUser line (root)": Case(
        HEAD.replace("SlurmUser=slurm\n", "") + NODES,
        inventory=("slurm_user: root",),
        rendered=("SlurmUser=root",),
    ),
    "dotted cluster name": Case(
        HEAD.replace("ClusterName=shape", "ClusterName=hpc.example.org") + NODES,
        (("ClusterName=hpc.example.org", "native"),),
        inventory=("name: hpc-example-org", "cluster_name: hpc.example.org"),
    ),
    "cluster name in capitals": Case(
        HEAD.replace("ClusterName=shape", "ClusterName=ShapeX") + NODES, (("ClusterName=ShapeX", "native"),)
    ),
    # --- partitions ------------------------------------------------------------------------------
    "two default partitions": Case(
        HEAD + NODES + "PartitionName=long Nodes=n[1-2] Default=YES MaxTime=14-0\n",
        inventory=("several_default_partitions: true",),
    ),
    "no default partition": Case(
        HEAD + NODES.replace(" Default=YES", ""), inventory=("no_default_partition: true",)
    ),
    "a node in no partition": Case(
        HEAD + NODES.replace("Nodes=n[1-2]", "Nodes=n1"), inventory=("hosts_in_no_partition:",)
    ),
    "global per-GPU defaults": Case(
        HEAD + "GresTypes=gpu\nDefCpuPerGPU=2\nDefMemPerGPU=8000\n" + GPU_NODES,
        (("DefCpuPerGPU=2", "mapped"), ("DefMemPerGPU=8000", "mapped")),
        files={"gres.conf": GRES_RANGE},
    ),
    # --- old keys ----------------------------------------------------------------------------------
    "DefaultStorage keys": Case(
        HEAD
        + "AccountingStorageType=accounting_storage/slurmdbd\nDefaultStorageHost=dbhost\n"
        + "DefaultStoragePort=7031\nDefaultStorageUser=slurm\n"
        + NODES,
        (
            ("DefaultStorageHost=dbhost", "mapped"),
            ("DefaultStoragePort=7031", "mapped"),
            ("DefaultStorageUser=slurm", "mapped"),
        ),
        version="22.05",
        rendered=("AccountingStorageHost=dbhost", "AccountingStoragePort=7031"),
    ),
    "AccountingStorageLoc": Case(
        HEAD + "AccountingStorageType=accounting_storage/slurmdbd\nAccountingStorageHost=head\n"
        "AccountingStorageLoc=slurm_acct_db\n" + NODES,
        (("AccountingStorageLoc=slurm_acct_db", "dropped"),),
        version="22.05",
    ),
    "SallocDefaultCommand": Case(
        HEAD + 'SallocDefaultCommand="srun -n1 --pty $SHELL"\n' + NODES,
        (("SallocDefaultCommand=srun -n1 --pty $SHELL", "mapped"),),
        version="22.05",
        rendered=("LaunchParameters=use_interactive_step", 'InteractiveStepOptions="-n1 --pty $SHELL"'),
    ),
    "TaskPluginParam=Sched": Case(
        HEAD + "TaskPlugin=task/affinity\nTaskPluginParam=Sched\n" + NODES,
        (("TaskPluginParam=Sched", "dropped"),),
        version="22.05",
    ),
    "TaskPluginParam=Sched,None": Case(
        HEAD + "TaskPlugin=task/affinity\nTaskPluginParam=Sched,None\n" + NODES,
        (("TaskPluginParam=Sched,None", "mapped"),),
        version="22.05",
        rendered=("TaskPluginParam=None",),
    ),
    "cgroup.conf keys of old releases": Case(
        HEAD + NODES,
        (
            ("TaskAffinity=no", "dropped"),
            ("CgroupReleaseAgentDir=/etc/slurm/cgroup", "dropped"),
            ("AllowedDevicesFile=/etc/slurm/cgroup_allowed_devices_file.conf", "dropped"),
        ),
        files={
            "cgroup.conf": "CgroupAutomount=yes\nCgroupReleaseAgentDir=/etc/slurm/cgroup\nTaskAffinity=no\n"
            "AllowedDevicesFile=/etc/slurm/cgroup_allowed_devices_file.conf\nConstrainCores=yes\n",
            "cgroup_allowed_devices_file.conf": "/dev/null\n",
        },
        version="22.05",
    ),
    "cgroup.conf TaskAffinity=yes": Case(
        HEAD + "TaskPlugin=task/cgroup\n" + NODES,
        (("TaskAffinity=yes", "mapped"),),
        files={"cgroup.conf": "TaskAffinity=yes\n"},
        rendered=("TaskPlugin=task/cgroup,task/affinity",),
    ),
    # --- accounting --------------------------------------------------------------------------------
    "slurmdbd on the controller as localhost": Case(
        HEAD + "AccountingStorageType=accounting_storage/slurmdbd\nAccountingStorageHost=localhost\n" + NODES,
        rendered=("AccountingStorageHost=localhost",),
        inventory=("accounting: {host: head",),
    ),
    "slurmdbd without AccountingStorageHost": Case(
        HEAD + "AccountingStorageType=accounting_storage/slurmdbd\n" + NODES,
        rendered=("AccountingStorageType=accounting_storage/slurmdbd",),
        inventory=("accounting: {host: head",),
    ),
    "slurmdbd at the controller's address": Case(
        HEAD.replace("SlurmctldHost=head", "SlurmctldHost=head(10.1.0.254)")
        + "AccountingStorageType=accounting_storage/slurmdbd\nAccountingStorageHost=10.1.0.254\n"
        + NODES,
        rendered=("AccountingStorageHost=10.1.0.254",),
        inventory=("accounting: {host: head",),
    ),
    # --- GPUs ----------------------------------------------------------------------------------
    "GPUs whose gres.conf is the nodes' own": Case(
        HEAD + "GresTypes=gpu\n" + GPU_NODES, inventory=('devices: "/dev/nvidia[0-1]"',), not_compared=1
    ),
    "one gres.conf line per device": Case(
        HEAD + "GresTypes=gpu\n" + GPU_NODES,
        files={"gres.conf": "".join(f"NodeName=g[1-2] Name=gpu File=/dev/nvidia{n}\n" for n in range(2))},
    ),
    "gres.conf lines reaching CPU nodes": Case(
        HEAD + "GresTypes=gpu\n" + GPU_NODES,
        files={"gres.conf": "AutoDetect=off\nName=gpu File=/dev/nvidia[0-1]\n"},
    ),
    "untyped Gres, typed gres.conf": Case(
        HEAD + "GresTypes=gpu\n" + GPU_NODES,
        (("Type=l4", "native"),),
        files={"gres.conf": "NodeName=g[1-2] Name=gpu Type=l4 File=/dev/nvidia[0-1]\n"},
    ),
    "AutoDetect with a File= line": Case(
        HEAD + "GresTypes=gpu\n" + GPU_NODES.replace("gpu:2", "gpu:l4:2"),
        files={"gres.conf": "AutoDetect=nvidia\nNodeName=g1 Name=gpu Type=l4 File=/dev/nvidia[0-1]\n"},
    ),
    "Cores= of CPU ids beyond the cores": Case(
        HEAD + "GresTypes=gpu\n" + GPU_NODES,
        (("Cores=0-3,8-11", "dropped"),),
        files={"gres.conf": "NodeName=g[1-2] Name=gpu File=/dev/nvidia[0-1] CPUs=0-3,8-11\n"},
    ),
    # --- topology -------------------------------------------------------------------------------
    "topology.conf without TopologyPlugin": Case(
        HEAD + NODES,
        (("SwitchName=s1", "dropped"),),
        files={"topology.conf": "SwitchName=s1 Nodes=n[1-2]\n"},
    ),
    "a name no NodeName defines in a switch": Case(
        HEAD + "TopologyPlugin=topology/tree\n" + NODES,
        files={"topology.conf": "SwitchName=s1 Nodes=n[1-2],n9\n"},
        inventory=("placeholder_nodes: [n9]",),
        version="22.05",
    ),
    "nodes under no switch": Case(
        HEAD + "TopologyPlugin=topology/tree\n" + NODES,
        files={"topology.conf": "SwitchName=s1 Nodes=n1\n"},
        inventory=("outside_tree:",),
    ),
    "two roots": Case(
        HEAD + "TopologyPlugin=topology/tree\n" + NODES,
        files={"topology.conf": "SwitchName=s1 Nodes=n1\nSwitchName=s2 Nodes=n2\n"},
        inventory=("separate_trees: true",),
    ),
    # --- files beside slurm.conf -------------------------------------------------------------------
    "plugstack.conf with its include directory": Case(
        HEAD + NODES,
        (("required /usr/lib/slurm/spank_demo.so", "native"),),
        files={
            "plugstack.conf": "include /etc/slurm/plugstack.conf.d/*.conf\n",
            "plugstack.conf.d/demo.conf": "required /usr/lib/slurm/spank_demo.so\n",
        },
        rendered=(),
        inventory=("plugstack:",),
    ),
    "plugstack.conf including what the input lacks": Case(
        HEAD + NODES,
        (("include /etc/slurm/plugstack.conf.d/*.conf", "native"),),
        files={"plugstack.conf": "include /etc/slurm/plugstack.conf.d/*.conf\n"},
        not_compared=1,
    ),
    # --- what the packages need --------------------------------------------------------------------
    "the controller's pid file name": Case(
        HEAD + "SlurmctldPidFile=/var/run/slurmctld-shape.pid\n" + NODES,
        (("SlurmctldPidFile=/var/run/slurmctld-shape.pid", "mapped"),),
        rendered=("SlurmctldPidFile=/run/slurmctld/slurmctld-shape.pid",),
    ),
    "backup controller with its state under /var/lib": Case(
        HEAD.replace("SlurmctldHost=head", "SlurmctldHost=head\nSlurmctldHost=head2")
        + "StateSaveLocation=/var/lib/slurm\n"
        + NODES,
        inventory=("mount: /var/lib/slurm",),
        version="22.05",
    ),
    # --- ucr-biocluster: MemLimitEnforce=yes beside cgroup memory limits ------------------------------
    # Its successor, OverMemoryKill, and the cgroup's ConstrainRAMSpace stop slurmctld together
    # ("constrained by both TaskPlugin cgroup and JobAcctGather plugin"): the cgroup enforces it.
    "MemLimitEnforce beside the cgroup's memory limit": Case(
        HEAD + "TaskPlugin=task/cgroup\nMemLimitEnforce=yes\n" + NODES,
        (("MemLimitEnforce=yes", "dropped"),),
        files={"cgroup.conf": "ConstrainRAMSpace=yes\n"},
        version="22.05",
        inventory=("task_plugins: [cgroup]",),
    ),
    "MemLimitEnforce without the cgroup's memory limit": Case(
        HEAD + "TaskPlugin=task/affinity\nMemLimitEnforce=yes\n" + NODES,
        (("MemLimitEnforce=yes", "mapped"),),
        version="22.05",
        rendered=("JobAcctGatherParams=OverMemoryKill",),
    ),
}


def write_site(root: Path, case: Case) -> Path:
    etc = root / "etc"
    etc.mkdir(parents=True)
    (etc / "slurm.conf").write_text(case.conf)
    for name, text in case.files.items():
        (etc / name).parent.mkdir(parents=True, exist_ok=True)
        (etc / name).write_text(text)
    return etc


def imported(tmp_path: Path, case: Case) -> ImportResult:
    etc = write_site(tmp_path, case)
    return write_inventory(
        import_cluster(SiteFiles.in_directory(etc), case.version), tmp_path / "inv", check=True
    )


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_real_shape_imports_as_slurm_reads_it(name: str, tmp_path: Path) -> None:
    case = CASES[name]
    result = imported(tmp_path, case)
    assert result.comparison is not None
    assert result.comparison.same, [str(d) for d in result.comparison.differences]
    assert len(result.comparison.not_compared) == case.not_compared, result.comparison.not_compared
    placed = {(p.written, p.kind) for p in result.placements}
    for expected in case.placed:
        assert expected in placed, (expected, sorted(p for p in placed if p[0].split("=")[0] in expected[0]))
    cluster_yml = (tmp_path / "inv" / "group_vars" / "all" / "cluster.yml").read_text()
    for text in case.inventory:
        assert text in cluster_yml, cluster_yml
    if case.rendered:
        from gpucluster.layers import load_cluster
        from gpucluster.rendering import render_files

        slurm_conf = render_files(load_cluster(tmp_path / "inv"), only=["slurm"])["slurm/slurm.conf"]
        for line in case.rendered:
            assert line in slurm_conf.splitlines(), slurm_conf


REFUSED = {
    # Slurm refuses these too: 20.02 made FastSchedule=0 fatal ("has been removed"), topology/tree
    # stops slurmctld without its topology.conf, 20.11's salloc runs only srun as the interactive step.
    "FastSchedule=0": (HEAD + "FastSchedule=0\n" + NODES, {}, "slurm.conf:6", "FastSchedule"),
    "topology/tree without topology.conf": (
        HEAD + "TopologyPlugin=topology/tree\n" + NODES, {}, "slurm.conf:6", "TopologyPlugin",
    ),
    "SallocDefaultCommand not srun": (
        HEAD + 'SallocDefaultCommand="xterm -e bash"\n' + NODES, {}, "slurm.conf:6", "SallocDefaultCommand",
    ),
    "NodeAddr short of the nodes": (
        HEAD + NODES.replace("CPUs=8", "NodeAddr=10.1.0.1 CPUs=8"), {}, "slurm.conf:6", "NodeAddr",
    ),
    # slurmctld stops without a partition: `fatal: No PartitionName information available!`.
    "no partition at all": (HEAD + NODES.split("PartitionName")[0], {}, "slurm.conf", "no partition"),
    # slurmctld stops: "constrained by both TaskPlugin cgroup and JobAcctGather plugin".
    "OverMemoryKill beside the cgroup's memory limit": (
        HEAD + "TaskPlugin=task/cgroup\nJobAcctGatherParams=OverMemoryKill\n" + NODES,
        {"cgroup.conf": "ConstrainRAMSpace=yes\n"}, "slurm.conf:7", "JobAcctGatherParams",
    ),
    "a file gpucluster does not write": (
        HEAD + NODES, {"job_container.conf": "BasePath=/scratch\n"}, "job_container.conf:1", "job_container.conf",
    ),
    # slurmd would report fewer GPUs than slurm.conf gives (a global gres.conf line of two devices
    # for four-GPU nodes): slurmctld drains the nodes. Said at gres.conf's line.
    "fewer device files than GPUs": (
        HEAD + "GresTypes=gpu\n" + GPU_NODES.replace("Gres=gpu:2", "Gres=gpu:4"),
        {"gres.conf": "Name=gpu File=/dev/nvidia[0-1]\n"}, "gres.conf:1", "File",
    ),
    # The inventory made would fail validation: said at the input's line, not at a file never written.
    "pmix on packages without it": (
        HEAD + "MpiDefault=pmix\n" + NODES, {}, "slurm.conf:6", "MpiDefault",
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_what_slurm_refuses_is_refused_at_its_line(name: str, tmp_path: Path) -> None:
    conf, files, where, key = REFUSED[name]
    version = "26.05" if name.startswith("pmix") else "22.05"
    etc = write_site(tmp_path, Case(conf, files=files))
    with pytest.raises(InventoryError) as caught:
        write_inventory(import_cluster(SiteFiles.in_directory(etc), version), tmp_path / "inv", check=True)
    texts = [str(p) for p in caught.value.problems]
    assert any(f"{where}:" in t and key in t for t in texts), texts
    assert not any("group_vars" in t for t in texts), texts
    assert not (tmp_path / "inv").exists()


def test_pmix_with_the_site_packages_is_valid(tmp_path: Path) -> None:
    """cluster.slurm.packages (the site's repository, built with PMIx) lifts the refusal of
    MpiDefault=pmix on a release whose Debian packages lack it, as its message says."""
    from gpucluster.layers import load_cluster

    etc = write_site(tmp_path, Case(HEAD + "MpiDefault=pmix\n" + NODES))
    result = import_cluster(SiteFiles.in_directory(etc), "26.05")
    repository = (
        "    packages: {repository: {url: 'https://repo.example.org/slurm', suite: slurm-26.05, "
        "components: [main], key: site.asc}}\n"
    )
    inventory = tmp_path / "inv"
    (inventory / "group_vars" / "all").mkdir(parents=True)
    (inventory / "hosts.yml").write_text(result.hosts_yml)
    text = result.cluster_yml.replace('    version: "26.05"\n', '    version: "26.05"\n' + repository)
    (inventory / "group_vars" / "all" / "cluster.yml").write_text(text)
    (inventory / "site.asc").write_text("-----BEGIN PGP PUBLIC KEY BLOCK-----\n")
    assert load_cluster(inventory).spec.slurm.mpi_default == "pmix"


def test_a_node_state_slurm_advises_against_validates_with_a_warning_at_its_line(tmp_path: Path) -> None:
    """janelia-turaga's `State=IDLE` lines: kept as the site has them, said on every validation."""
    from tests.conftest import run_cli

    imported(tmp_path, CASES["node states drain and idle"])
    proc = run_cli("validate", str(tmp_path / "inv"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    cluster_file = tmp_path / "inv" / "group_vars" / "all" / "cluster.yml"
    line = next(n for n, text in enumerate(cluster_file.read_text().splitlines(), 1) if "state: idle" in text)
    assert f"{cluster_file}:{line}" in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert (
        "State=IDLE: slurmctld counts these nodes idle before their slurmd registers"
        in proc.stdout + proc.stderr
    )
