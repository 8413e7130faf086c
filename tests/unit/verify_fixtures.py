"""A small cluster and what a healthy one of its kind shows, in Slurm 22.05's own output formats
(src/api/node_info.c and topo_info.c, sacctmgr --parsable2), for the `gpucluster verify` tests.
Each test breaks one thing of the healthy observations."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path
from typing import Any

from gpucluster.hostlists import compress
from gpucluster.layers import load_cluster
from gpucluster.model.cluster import Cluster
from gpucluster.verify.observed import Command, ControllerSeen, HostSeen, JobRun, Observations
from gpucluster.verify.probes import COALLOCATION, GPUS, NCCL, TOPOLOGY, Job, Plan, make_plan
from tests.conftest import InventoryFactory

HOSTS = """\
    all:
      children:
        controllers:
          hosts:
            ctl1:
            ctl2:
        dbd:
          hosts:
            db1:
        gpus:
          children:
            leaf_a:
              hosts:
                g[1:2]:
            leaf_b:
              hosts:
                g[3:4]:
    """

CLUSTER = """\
    cluster:
      name: small
      slurm:
        version: "22.05"
        controller: [ctl1, ctl2]
        state_save_location: /shared/slurmctld
        accounting: {host: db1}
        health: {}
      # The return-to-service gate: nodes drained `[gate] ...` are on their way back.
      gate: {}
      node_types:
        h100:
          sockets: 2
          cores_per_socket: 4
          memory_mb: 64000
          features: [ib, nvlink]
          gpus: {model: h100, count: 8, devices: "/dev/nvidia[0-7]"}
      nodes:
        - {group: gpus, type: h100}
      fabric:
        tree:
          spine: [leaf-a, leaf-b]
          leaf-a: [leaf_a]
          leaf-b: [leaf_b]
      partitions:
        - {name: gpu, nodes: [gpus], default: true}
        - {name: prod, nodes: [leaf_b], tenants: [product]}
      qos:
        - {name: normal}
        - {name: capped, max_gpus_per_user: 2, max_wall: "2-00:00:00"}
      users:
        - {name: alice, uid: 10001}
        - {name: bob, uid: 10002}
        - {name: carol, uid: 10003}
      # The homes and the controllers' shared state, mounted by the site.
      storage:
        - {name: home, mount: /home, site_managed: true, home: true}
        - {name: slurm-state, mount: /shared, site_managed: true, hosts: [ctl1, ctl2]}
      tenants:
        - {name: research, fairshare: 60, gpu_quota: 16, gpu_limit: 24, users: [alice, carol],
           qos: [normal, capped], default_qos: normal}
        - {name: product, fairshare: 40, gpu_quota: 8, gpu_limit: 16, users: [bob], qos: [normal],
           default_qos: normal}
    """

JOB_NAME = "gpucluster-verify-0123abcd"
KEY = hashlib.sha256(b"the cluster munge key").hexdigest()
UIDS = {"alice": (2001, 2001), "bob": (2002, 2002), "carol": (2003, 2003)}
VERSION = "22.05.8"


def make_cluster(inventories: InventoryFactory) -> Cluster:
    return load_cluster(inventories.make(HOSTS, CLUSTER, name="small"))


def node_line(node: str, state: str = "IDLE", reason: str | None = None, **fields: str) -> str:
    """One node of `scontrol --oneliner show node`, as 22.05.8 prints it (two spaces after OS and
    Partitions, an empty AllocTRES, Reason last)."""
    values = {
        "CPUTot": "8",
        "AvailableFeatures": "ib,nvlink",
        "ActiveFeatures": "ib,nvlink",
        "Gres": "gpu:h100:8(S:0-1)",
        "Version": VERSION,
        "RealMemory": "64000",
        "State": state,
        "Partitions": "gpu,prod" if node in ("g3", "g4") else "gpu",
        **fields,
    }
    line = (
        f"NodeName={node} Arch=x86_64 CoresPerSocket=4 CPUAlloc=0 CPUEfctv={values['CPUTot']} "
        f"CPUTot={values['CPUTot']} CPULoad=0.02 AvailableFeatures={values['AvailableFeatures']} "
        f"ActiveFeatures={values['ActiveFeatures']} Gres={values['Gres']} NodeAddr={node} "
        f"NodeHostName={node} Version={values['Version']} "
        "OS=Linux 6.1.0-18-amd64 #1 SMP PREEMPT_DYNAMIC Debian 6.1.76-1 (2024-02-01)  "
        f"RealMemory={values['RealMemory']} AllocMem=0 FreeMem=61000 Sockets=2 Boards=1 "
        f"State={values['State']} ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A "
        f"Partitions={values['Partitions']}  BootTime=2024-05-01T10:00:00 SlurmdStartTime=2024-05-01T10:01:00 "
        "LastBusyTime=2024-05-01T10:05:00 CfgTRES=cpu=8,mem=62.50G,billing=8,gres/gpu=8 AllocTRES= "
        "CapWatts=n/a CurrentWatts=0 AveWatts=0 ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s"
    )
    if reason:
        line += f" Reason={reason} [root@2024-05-01T10:10:00]"
    return line


TOPOLOGY_TEXT = (
    "SwitchName=leaf-a Level=0 LinkSpeed=1 Nodes=g[1-2]\n"
    "SwitchName=leaf-b Level=0 LinkSpeed=1 Nodes=g[3-4]\n"
    "SwitchName=spine Level=1 LinkSpeed=1 Nodes=g[1-4] Switches=leaf-a,leaf-b\n"
)

QOS_TEXT = "normal|0|||||\ncapped|0|gres/gpu=2|||2-00:00:00|\n"
# Fairshare: the tenants' Slurm quotas (gpucluster.slurm.accounts.fair_shares).
ASSOC_TEXT = (
    "root|||1||normal|\n"
    "root|root||1||normal|\n"
    "product||root|8|gres/gpu=16|normal|normal\n"
    "product|bob||1||normal|normal\n"
    "research||root|16|gres/gpu=24|capped,normal|normal\n"
    "research|alice||1||capped,normal|normal\n"
    "research|carol||1||capped,normal|normal\n"
)
USERS_TEXT = "alice|research\nbob|product\ncarol|research\nroot|root\n"

NCCL_OUTPUT = """\
# nThread 1 nGpus 1 minBytes 8 maxBytes 268435456 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
{ranks}
g1:41233:41233 [0] NCCL INFO Bootstrap : Using ibp24s0:10.0.0.1<0>
g1:41233:41233 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ibp24s0:10.0.0.1<0>
g1:41233:41233 [0] NCCL INFO Using network IB
g1:41233:41300 [0] NCCL INFO Channel 00/0 : 15[db000] -> 0[18000] [receive] via NET/IB/0
g1:41233:41300 [0] NCCL INFO Channel 00 : 0[18000] -> 1[2a000] via P2P/IPC
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           8             2     float     sum      -1    40.12    0.00    0.00      0    39.80    0.00    0.00      0
   268435456      67108864     float     sum      -1   1520.3  176.57  331.06      0   1519.8  176.63  331.18      0
# Out of bounds values : {wrong} {verdict}
# Avg bus bandwidth    : 98.4521
#
"""


def nccl_output(hosts: list[str], gpus: int = 8, wrong: int = 0, mpi: bool = True) -> str:
    """all_reduce_perf's output; without MPI each process is its own rank 0."""
    lines = []
    for index, host in enumerate(hosts):
        for device in range(gpus):
            rank = index * gpus + device if mpi else device
            lines.append(
                f"#  Rank {rank:2d} Group  0 Pid  {41233 + rank} on {host:>7} device  {device} "
                "[0x18] NVIDIA H100 80GB HBM3"
            )
    return NCCL_OUTPUT.format(ranks="\n".join(lines), wrong=wrong, verdict="OK" if not wrong else "FAILED")


def job_output(job: Job, job_id: int = 57) -> str:
    """What the plan's job scripts print when everything is as it should be."""
    lines = [f"job={job_id} node={node}" for node in job.nodes]
    if job.kind == COALLOCATION:
        lines.insert(1, f"state=RUNNING nodes={compress(job.nodes)}")
    if job.kind == GPUS:
        lines.append("cuda=0,1,2,3,4,5,6,7")
        lines += [f"usable=/dev/nvidia{i}" for i in range(8)]
    return "\n".join(lines) + "\n"


def healthy_jobs(plan: Plan) -> dict[str, JobRun]:
    runs = {}
    for number, job in enumerate(plan.jobs):
        if job.kind == NCCL:
            runs[job.id] = JobRun(skipped=f"all_reduce_perf (nccl-tests) not found on {', '.join(job.nodes)}")
        else:
            runs[job.id] = JobRun(rc=0, stdout=job_output(job, 57 + number), seconds=1.2)
    assert {j.kind for j in plan.jobs} >= {COALLOCATION, TOPOLOGY, GPUS}
    return runs


def healthy(plan: Plan) -> Observations:
    """Everything as the inventory says; nccl-tests not installed."""
    hosts = {}
    config = {name: digest for name, digest in plan.expected_config.items()}
    for host in plan.hosts:
        daemon = "slurmctld" if host in ("ctl1", "ctl2") else "slurmdbd" if host == "db1" else "slurmd"
        hosts[host] = HostSeen(
            versions=f"{daemon} slurm-wlm {VERSION}\n",
            munge_key=KEY,
            config=dict(config) if host in plan.config_hosts else {},
            passwd="".join(f"{u}:x:{uid}:{gid}::/home/{u}:/bin/sh\n" for u, (uid, gid) in UIDS.items())
            if host in plan.user_hosts
            else None,
        )
    nodes = "\n".join(node_line(n) for n in plan.cluster.hosts) + "\n"
    controller = ControllerSeen(
        host=plan.controller,
        nodes=Command(0, nodes),
        topology=Command(0, TOPOLOGY_TEXT),
        qos=Command(0, QOS_TEXT),
        assoc=Command(0, ASSOC_TEXT),
        users=Command(0, USERS_TEXT),
        jobs=healthy_jobs(plan),
        cleanup="no job left",
    )
    return Observations(hosts, controller)


def with_host(seen: Observations, host: str, **changes: Any) -> Observations:
    return replace(seen, hosts={**seen.hosts, host: replace(seen.hosts[host], **changes)})


def with_controller(seen: Observations, **changes: Any) -> Observations:
    assert seen.controller is not None
    return replace(seen, controller=replace(seen.controller, **changes))


def with_job(seen: Observations, job_id: str, run: JobRun) -> Observations:
    assert seen.controller is not None and seen.controller.jobs is not None
    return with_controller(seen, jobs={**seen.controller.jobs, job_id: run})


def small_plan(inventories: InventoryFactory) -> Plan:
    return make_plan(make_cluster(inventories), job_name=JOB_NAME)


def module_path() -> Path:
    return Path(__file__).resolve().parents[2] / "plugins" / "modules" / "slurm_associations.py"
