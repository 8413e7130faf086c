"""What `gpucluster verify` observes, where, and which jobs it runs: all derived from the model.

The plan becomes the extra vars of the verify playbook (gpucluster/verify/verify.yml); the playbook only carries it out. Every
job is an `srun` with a bounded wait for its allocation (`--immediate`), a time limit, and one
name per run, under which the job runner cancels whatever is left at the end.
"""

from __future__ import annotations

import hashlib
import secrets
import shlex
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gpucluster.hostlists import compress, expand
from gpucluster.model.cluster import Cluster, Switch, sort_hosts
from gpucluster.model.powered import may_be_off
from gpucluster.model.spec import Owner, Partition
from gpucluster.slurm.settings import slurm_cluster_name
from gpucluster.verify.container_probe import container_plan
from gpucluster.verify.gpu_probe import GPU_STACK_PROBE, stack_hosts
from gpucluster.verify.sharing import SHARING, share_script, shares

MUNGE_KEY = "/etc/munge/munge.key"
CONFIG_DIR = "/etc/slurm"
# Where a configless slurmd keeps what slurmctld served it (a link to SlurmdSpoolDir/conf-cache).
SERVED_DIR = "/run/slurm/conf"
# slurm_common installs every rendered file and removes its optional files the inventory no longer
# renders (its slurm_common_optional_files; tests/unit/test_verify_plan.py checks the two agree).
ALWAYS_RENDERED = ("slurm.conf", "cgroup.conf", "plugstack.conf")
# Where nccl-tests' all_reduce_perf is looked for on GPU nodes, after PATH.
ALL_REDUCE_PERF_PATHS = (
    "/usr/local/bin/all_reduce_perf",
    "/opt/nccl-tests/build/all_reduce_perf",
    "/usr/local/nccl-tests/build/all_reduce_perf",
)
ALL_REDUCE_PERF = "{all_reduce_perf}"  # replaced on the controller by the path found on the nodes
JOB_PREFIX = "gpucluster-verify"
# srun waits this long for its allocation, then gives up: on an idle cluster a job starts at once,
# and a drained or busy node is reported instead of waited for.
ALLOCATION_WAIT = 20
# Time limit of the jobs (minutes) and how long the runner lets one run before stopping it.
JOB_MINUTES = 2
NCCL_MINUTES = 5
RUN_SECONDS = 60
NCCL_RUN_SECONDS = 240
REMOTE_SCRIPT = Path(__file__).with_name("remote_jobs.py")

COALLOCATION = "co-allocation"
TOPOLOGY = "topology"
GPUS = "gpu-visibility"
NCCL = "nccl"

# Each task says which job and node it is; task 0 adds the job's state and nodes as squeue sees them.
COALLOCATION_SCRIPT = (
    'echo "job=$SLURM_JOB_ID node=$SLURMD_NODENAME"; '
    'if [ "$SLURM_PROCID" = 0 ]; then '
    'squeue --noheader --jobs="$SLURM_JOB_ID" --format="state=%T nodes=%N"; fi'
)
TOPOLOGY_SCRIPT = 'echo "job=$SLURM_JOB_ID node=$SLURMD_NODENAME"'


def gpu_script(devices: list[str] | None) -> str:
    """Inside a job holding every GPU of a node: the devices Slurm gave it, and which device files
    can be opened (an open fails where cgroups hide a device or the file is gone)."""
    listed = " ".join(shlex.quote(d) for d in devices) if devices else "/dev/nvidia[0-9]*"
    return (
        'echo "job=$SLURM_JOB_ID node=$SLURMD_NODENAME"; '
        'echo "cuda=${CUDA_VISIBLE_DEVICES-}"; '
        f"for d in {listed}; do "
        'if [ -c "$d" ] && dd if="$d" of=/dev/null count=0 status=none 2>/dev/null; '
        'then echo "usable=$d"; else echo "unusable=$d"; fi; done; '
        "if command -v nvidia-smi >/dev/null 2>&1; then "
        "echo \"nvidia-smi=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')\"; fi"
    )


@dataclass(frozen=True)
class Job:
    id: str
    kind: str
    subject: str  # the partition, leaf switch or node the job is about
    nodes: tuple[str, ...]
    argv: tuple[str, ...]
    timeout: int
    needs: tuple[str, ...] = ()  # nodes that must have all_reduce_perf

    def payload(self) -> dict[str, Any]:
        return {"id": self.id, "argv": list(self.argv), "timeout": self.timeout, "needs": list(self.needs)}


@dataclass(frozen=True)
class Skip:
    """A job that cannot be planned, and why (said in the report)."""

    kind: str
    subject: str
    reason: str


@dataclass(frozen=True)
class Plan:
    cluster: Cluster  # the bare-metal Slurm view (Cluster.owned_by)
    controller: str
    hosts: tuple[str, ...]  # every Slurm host: controllers, accounting host, nodes
    config_hosts: tuple[str, ...]  # hosts holding /etc/slurm (controllers and nodes)
    # Configless: the nodes (not controllers) whose slurmd fetches the served files, which they
    # must then hold in SERVED_DIR and not in /etc/slurm.
    fetching_hosts: tuple[str, ...]
    served_config: dict[str, str]  # served file -> sha256 of the rendered file
    user_hosts: tuple[str, ...]  # hosts where users' uid/gid matter (controllers and nodes)
    gpu_nodes: tuple[str, ...]
    users: tuple[str, ...]
    expected_config: dict[str, str | None]  # file -> sha256 of the rendered file, None: must be absent
    job_name: str
    stages: tuple[tuple[Job, ...], ...]
    skipped: tuple[Skip, ...] = field(default=())
    # Nodes that are off until Slurm powers them on (cluster.nodes[].power bmc, cloud): neither
    # observed nor given a job (a job would power them on); their power state is in the nodes row.
    power_saved: tuple[str, ...] = ()

    @property
    def jobs(self) -> list[Job]:
        return [job for stage in self.stages for job in stage]

    @property
    def accounting(self) -> bool:
        return self.cluster.spec.slurm.accounting is not None

    def playbook_vars(self, output: Path) -> dict[str, Any]:
        """The extra vars of the verify playbook."""
        return {
            "gpucluster_verify_output": str(output),
            "gpucluster_verify": {
                "cluster": slurm_cluster_name(self.cluster.spec),
                "controller": self.controller,
                "hosts": list(self.hosts),
                "config_hosts": list(self.config_hosts),
                "user_hosts": list(self.user_hosts),
                "gpu_nodes": list(self.gpu_nodes),
                "users": list(self.users),
                "munge_key": MUNGE_KEY,
                "config_dir": CONFIG_DIR,
                "config_files": list(self.expected_config),
                "fetching_hosts": list(self.fetching_hosts),
                "served_dir": SERVED_DIR,
                "served_files": list(self.served_config),
                "accounting": self.accounting,
                "all_reduce_perf_paths": list(ALL_REDUCE_PERF_PATHS),
                # The GPU node software probe, on the hosts whose node type has a stack.
                "gpu_stack_hosts": [h for h in stack_hosts(self.cluster) if h not in self.power_saved],
                "gpu_stack_probe": GPU_STACK_PROBE,
                "jobs_script": str(REMOTE_SCRIPT),
                "containers": container_plan(self.cluster, self.hosts),
                "jobs": {
                    "job_name": self.job_name,
                    "stages": [[job.payload() for job in stage] for stage in self.stages],
                },
            },
        }


def declared_users(cluster: Cluster) -> list[str]:
    return sorted({u.name for u in cluster.spec.users} | {u for t in cluster.spec.tenants for u in t.users})


def optional_files() -> list[str]:
    """The files slurm_common removes from /etc/slurm when the inventory does not render them:
    every Slurm file the renderer may install but does not always."""
    from gpucluster.slurm.render import SLURM_FILES

    return [name for name in SLURM_FILES if name not in ALWAYS_RENDERED]


def expected_config(cluster: Cluster) -> dict[str, str | None]:
    """sha256 of each file slurm_common installs, rendered as `gpucluster render` does."""
    from gpucluster.rendering import render_files

    rendered = {
        path.removeprefix("slurm/"): text
        for path, text in render_files(cluster, only=["slurm"]).items()
        if path.startswith("slurm/") and path != "slurm/accounts.yaml"
    }
    known = [*ALWAYS_RENDERED, *optional_files()]
    names = [*known, *sorted(set(rendered) - set(known))]
    return {
        name: hashlib.sha256(rendered[name].encode()).hexdigest() if name in rendered else None
        for name in names
    }


def served_config(cluster: Cluster, expected: dict[str, str | None]) -> dict[str, str]:
    """The rendered files a configless slurmd fetches from slurmctld (none when not configless)."""
    from gpucluster.slurm.render import configless_served

    if not cluster.spec.slurm.configless:
        return {}
    return {name: digest for name in configless_served(cluster) if (digest := expected.get(name)) is not None}


def _tenant_submitter(cluster: Cluster, partition: Partition) -> tuple[str | None, str | None] | str:
    """(user, account) the jobs of a partition run as: root (with root's own association, which
    `sacctmgr add cluster` creates) unless the partition admits only some tenants (AllowAccounts);
    then the first user of the first of them that has users. A string says why there is none."""
    if not partition.tenants:
        return None, None
    tenants = cluster.tenants_by_name
    for name in partition.tenants:
        tenant = tenants.get(name)
        if tenant is not None and tenant.users:
            return tenant.users[0], name
    return f"partition {partition.name} admits only {', '.join(partition.tenants)}, which have no users"


def srun(
    job_name: str,
    partition: str,
    submitter: tuple[str | None, str | None],
    minutes: int,
    *args: str,
) -> tuple[str, ...]:
    user, account = submitter
    prefix = ("runuser", "-u", user, "--") if user else ()
    return (
        *prefix,
        "srun",
        f"--job-name={job_name}",
        f"--partition={partition}",
        *((f"--account={account}",) if account else ()),
        f"--time={minutes}",
        f"--immediate={ALLOCATION_WAIT}",
        "--chdir=/tmp",
        *args,
    )


Submitter = tuple[str | None, str | None]  # (user, account) a partition's jobs run as


class _Partitions:
    """The partitions of the view that verify's jobs may use (those with nodes), with who submits
    to each (a string: why no one can). (Not a dataclass: generating its methods costs about a
    millisecond at import.)"""

    def __init__(self, view: Cluster, partitions: list[Partition]) -> None:
        self.view = view
        self.partitions = [p for p in partitions if view.partitions.get(p.name)]
        self.submitters: dict[str, Submitter | str] = {
            p.name: _tenant_submitter(view, p) for p in self.partitions
        }

    def home(self, members: list[str]) -> tuple[Partition, Submitter] | str:
        """The first partition (default first) holding all of `members` that has a submitter."""
        ordered = sorted(self.partitions, key=lambda p: not p.default)
        holding = [p for p in ordered if set(members) <= set(self.view.partitions[p.name])]
        if not holding:
            return f"no partition holds all of {compress(members)}"
        for p in holding:
            who = self.submitters[p.name]
            if not isinstance(who, str):
                return p, who
        reason = self.submitters[holding[0].name]
        assert isinstance(reason, str)
        return reason


def make_plan(cluster: Cluster, job_name: str | None = None) -> Plan:
    """The plan for the bare-metal Slurm part of `cluster` (the other owners' hosts are not Slurm's)."""
    view = cluster.owned_by(Owner.SLURM)
    slurm = cluster.spec.slurm
    name = job_name or f"{JOB_PREFIX}-{secrets.token_hex(4)}"
    controllers = list(slurm.controller)
    saved = [h for h in view.hosts if may_be_off(view, h)]
    on = powered_view(view, set(saved))
    nodes = on.hosts
    dbd = [slurm.accounting.host] if slurm.accounting else []
    hosts = list(dict.fromkeys([*controllers, *dbd, *nodes]))
    with_config = list(dict.fromkeys([*controllers, *nodes]))
    gpu_nodes = [h for h in nodes if view.node_type(h).gpus]
    usable = _Partitions(on, cluster.spec.partitions)
    skipped: list[Skip] = []
    coallocation = _coallocation_jobs(usable, name, skipped)
    topology = _topology_jobs(usable, name, skipped)
    mig_nodes = [h for h in gpu_nodes if (g := view.node_type(h).gpus) and g.sharing and g.sharing.mig]
    gpus = _gpu_jobs(usable, name, [h for h in gpu_nodes if h not in mig_nodes], skipped)
    skipped += [Skip(GPUS, h, "MIG instances, not whole GPUs: see gpu-sharing") for h in mig_nodes]
    sharing = _sharing_jobs(usable, name, skipped)
    nccl = _nccl_job(on, name, usable.partitions, usable.submitters)
    if isinstance(nccl, Skip):
        skipped.append(nccl)
    stages: list[tuple[Job, ...]] = [
        (job,) for job in coallocation
    ]  # partitions may share nodes: one at a time
    stages += [tuple(jobs) for jobs in (topology, gpus) if jobs]  # leaves and nodes do not overlap
    if sharing:
        stages.append(tuple(sharing))  # one job per node and way of sharing, after the whole-GPU ones
    if isinstance(nccl, Job):
        stages.append((nccl,))
    expected = expected_config(cluster)
    return Plan(
        cluster=view,
        controller=controllers[0],
        hosts=tuple(hosts),
        config_hosts=tuple(with_config),
        fetching_hosts=tuple(h for h in nodes if h not in controllers) if slurm.configless else (),
        served_config=served_config(cluster, expected),
        user_hosts=tuple(with_config),
        gpu_nodes=tuple(gpu_nodes),
        users=tuple(declared_users(cluster)),
        expected_config=expected,
        job_name=name,
        stages=tuple(stages),
        skipped=tuple(skipped),
        power_saved=tuple(saved),
    )


def powered_view(view: Cluster, off: set[str]) -> Cluster:
    """`view` without the power-saved nodes: what verify's jobs may run on without powering any on."""
    if not off:
        return view
    return replace(
        view,
        node_type_of={h: t for h, t in view.node_type_of.items() if h not in off},
        hosts_by_type={
            t: kept for t, hs in view.hosts_by_type.items() if (kept := [h for h in hs if h not in off])
        },
        partitions={
            p: kept for p, hs in view.partitions.items() if (kept := [h for h in hs if h not in off])
        },
        switches=[
            Switch(s.name, s.switches, tuple(h for h in s.nodes if h not in off)) for s in view.switches
        ],
    )


def _coallocation_jobs(usable: _Partitions, name: str, skipped: list[Skip]) -> list[Job]:
    """One job over every node of each partition (a partition no one may submit to: skipped)."""
    jobs: list[Job] = []
    for p in usable.partitions:
        members = usable.view.partitions[p.name]
        who = usable.submitters[p.name]
        if isinstance(who, str):
            skipped.append(Skip(COALLOCATION, p.name, who))
            continue
        argv = srun(
            name, p.name, who, JOB_MINUTES,
            f"--nodes={len(members)}", f"--nodelist={compress(members)}", "--ntasks-per-node=1",
            "sh", "-c", COALLOCATION_SCRIPT,
        )  # fmt: skip
        jobs.append(
            Job(f"{COALLOCATION}/{p.name}", COALLOCATION, p.name, tuple(members), argv, _seconds(RUN_SECONDS))
        )
    return jobs


def _topology_jobs(usable: _Partitions, name: str, skipped: list[Skip]) -> list[Job]:
    """One job over the nodes of each leaf switch, asking Slurm for one switch (--switches=1)."""
    jobs: list[Job] = []
    for switch in usable.view.switches:
        if not switch.nodes:
            continue
        members = sort_hosts(switch.nodes)
        where = usable.home(members)
        if isinstance(where, str):
            skipped.append(Skip(TOPOLOGY, switch.name, where))
            continue
        part, who = where
        argv = srun(
            name, part.name, who, JOB_MINUTES,
            f"--nodes={len(members)}", f"--nodelist={compress(members)}", "--switches=1",
            "--ntasks-per-node=1", "sh", "-c", TOPOLOGY_SCRIPT,
        )  # fmt: skip
        jobs.append(
            Job(
                f"{TOPOLOGY}/{switch.name}",
                TOPOLOGY,
                switch.name,
                tuple(members),
                argv,
                _seconds(RUN_SECONDS),
            )
        )
    return jobs


def _gpu_jobs(usable: _Partitions, name: str, gpu_nodes: list[str], skipped: list[Skip]) -> list[Job]:
    """One job per GPU node, given all its GPUs: the devices Slurm gave it and those it can open."""
    jobs: list[Job] = []
    for node in gpu_nodes:
        spec = usable.view.node_type(node).gpus
        assert spec is not None
        where = usable.home([node])
        if isinstance(where, str):
            skipped.append(Skip(GPUS, node, where))
            continue
        part, who = where
        devices = expand(spec.devices) if spec.devices else None
        argv = srun(
            name, part.name, who, JOB_MINUTES,
            "--nodes=1", f"--nodelist={node}", "--ntasks=1", f"--gres=gpu:{spec.count}",
            "sh", "-c", gpu_script(devices),
        )  # fmt: skip
        jobs.append(Job(f"{GPUS}/{node}", GPUS, node, (node,), argv, _seconds(RUN_SECONDS)))
    return jobs


def _sharing_jobs(usable: _Partitions, name: str, skipped: list[Skip]) -> list[Job]:
    """On one node of each kind of shared GPUs, a job asking for one share (verify/sharing.py):
    a node shares its GPUs one way in Slurm, so the stage's jobs are on different nodes."""
    jobs: list[Job] = []
    for share in shares(usable.view):
        where = usable.home([share.node])
        if isinstance(where, str):
            skipped.append(Skip(SHARING, share.node, where))
            continue
        part, who = where
        argv = srun(
            name, part.name, who, JOB_MINUTES,
            "--nodes=1", f"--nodelist={share.node}", "--ntasks=1", f"--gres={share.gres}",
            "sh", "-c", share_script(share.profile),
        )  # fmt: skip
        jobs.append(Job(share.job_id, SHARING, share.node, (share.node,), argv, _seconds(RUN_SECONDS)))
    return jobs


def _seconds(run: int) -> int:
    """How long the runner lets a job's srun live: its allocation wait, then its run."""
    return ALLOCATION_WAIT + run


def _nccl_job(
    view: Cluster,
    job_name: str,
    partitions: list[Partition],
    submitters: dict[str, tuple[str | None, str | None] | str],
) -> Job | Skip:
    """An all-reduce over the first two nodes of one node type in the first partition that has
    two; every GPU of both nodes, one rank per GPU (nccl-tests built with MPI, launched by PMIx)."""
    if not any(view.node_type(h).gpus for h in view.hosts):
        return Skip(NCCL, "-", "no GPU nodes in the inventory")
    for p in sorted(partitions, key=lambda p: not p.default):
        who = submitters[p.name]
        if isinstance(who, str):
            continue
        by_type: dict[str, list[str]] = {}
        for host in view.partitions[p.name]:
            if view.node_type(host).gpus:
                by_type.setdefault(view.node_type_of[host], []).append(host)
        pair = next((hosts[:2] for hosts in by_type.values() if len(hosts) >= 2), None)
        if pair is None:
            continue
        spec = view.node_type(pair[0]).gpus
        assert spec is not None
        argv = srun(
            job_name, p.name, who, NCCL_MINUTES,
            "--nodes=2", f"--nodelist={','.join(pair)}", f"--ntasks-per-node={spec.count}",
            f"--gres=gpu:{spec.count}", "--mpi=pmix",
            "env", "NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=INIT,NET",
            ALL_REDUCE_PERF, "-b", "8", "-e", "256M", "-f", "2", "-g", "1",
        )  # fmt: skip
        return Job(NCCL, NCCL, p.name, tuple(pair), argv, _seconds(NCCL_RUN_SECONDS), needs=tuple(pair))
    return Skip(NCCL, "-", "no partition has two GPU nodes of one node type that its jobs may use")
