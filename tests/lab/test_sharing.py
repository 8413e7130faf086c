"""Shared GPUs on the lab's real Slurm (issue 38): the lab's inventory with gpu03 sharing its GPU
by shards and gpu04 by MPS, applied to the live lab by playbooks/slurm.yml, then on the real
slurmctld and slurmd (the lab's GPUs are device files, /dev/nvidia0 standing for one GPU):

- two shard jobs of different tenants run on the one GPU at once, each with CUDA_VISIBLE_DEVICES=0
  and SLURM_SHARDS_ON_NODE; a job asking more shards than are left waits (Resources), with a CPU
  free; a job asking more shards than a GPU has is refused at submission (Slurm >= 23.11.1);
- a tenant's limit in shards (its GrpTRES, from gpus.slurm.units) holds: its second job waits
  with AssocGrpGRES;
- likewise MPS: two tenants' jobs on the one GPU, each with CUDA_MPS_ACTIVE_THREAD_PERCENTAGE and
  its tenant's MPS pipe directory from gpucluster-mps (Prolog and TaskProlog), their records gone
  after the Epilog; the tenant's MPS limit holds (AssocGrpGRES). The MPS control daemon itself needs an NVIDIA
  driver: the lab has none, and gpucluster-mps's log says it did not start it.

Then the lab runs its own inventory again. tests/lab/older_releases.py runs the same on 24.11 and
22.05 (shards only there: 22.05 takes one Prolog, the health check's).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpucluster.lab import lab
from gpucluster.lab.inventory import inventory_dir
from gpucluster.lab.playbook import run_playbook
from gpucluster.lab.state import LabState
from gpucluster.layers import load_cluster
from gpucluster.model.releases import release
from gpucluster.verify.checks import Status
from gpucluster.verify.collect import verify_cluster
from gpucluster.verify.sharing import SHARING

from .conftest import Lab

pytestmark = pytest.mark.lab

SHARED_DIR = "/scratch/gpucluster-sharing"
ONE_GPU = 'model: h100, count: 1, devices: "/dev/nvidia0", memory_gb: 80'
# One way of sharing at a time (Slurm runs shard jobs without CUDA_VISIBLE_DEVICES when MPS is
# configured beside them; gpucluster refuses the pair): gpu03's one GPU in 4 shards, or gpu04's one
# GPU shared by MPS (100 shares). The tenants' numbers fit the GPUs left (16 on gpu01-02); research
# may hold 3 shards, or 60 MPS shares.
NODES = "    - {group: gpu_nodes, type: sim-h100}\n"
LEAF1 = "    - {group: leaf1_nodes, type: sim-h100}\n"
SHARD_NODE = f"    - {{group: gpu03, type: sim-h100, gpus: {{{ONE_GPU}, sharing: {{shard: 4}}}}}}\n"
WHOLE_GPU03 = "    - {group: gpu03, type: sim-h100}\n"
MPS_NODE = f"    - {{group: gpu04, type: sim-h100, gpus: {{{ONE_GPU}, sharing: {{mps: 100}}}}}}\n"
WHOLE_GPU04 = "    - {group: gpu04, type: sim-h100}\n"
TENANTS = {
    "      gpu_quota: 16\n      gpu_limit: 24\n      users: [alice, carol]\n": (
        "      gpus: {slurm: {quota: 8, limit: 12, units: {UNITS}}}\n      users: [alice, carol]\n"
    ),
    "      gpu_quota: 16\n      gpu_limit: 32\n      users: [bob]\n": (
        "      gpus: {slurm: {quota: 8, limit: 16}}\n      users: [bob]\n"
    ),
}


def shared_inventory(mps: bool) -> Path:
    """The running lab's own inventory with gpu03 sharing its GPU by shards, or with `mps` gpu04
    sharing its GPU by MPS."""
    state = LabState.load()
    assert state is not None and state.inventory, "no lab is up"
    source = Path(state.inventory)
    text = (source / "group_vars" / "all" / "cluster.yml").read_text()
    assert NODES in text, NODES
    text = text.replace(NODES, LEAF1 + (WHOLE_GPU03 + MPS_NODE if mps else SHARD_NODE + WHOLE_GPU04))
    for before, after in TENANTS.items():
        assert before in text, before
        text = text.replace(before, after.replace("UNITS", "mps: 60" if mps else "shard: 3"))
    target = inventory_dir(source)
    (target / "group_vars" / "all" / "cluster.yml").write_text(text)
    return target


def job_field(lab_env: Lab, job: str, name: str) -> str:
    found = re.search(rf"\b{name}=(\S+)", lab_env.sh("scontrol", "show", "job", job).stdout)
    return found.group(1) if found else ""


def held_job(lab_env: Lab, user: str, gres: str, node: str, name: str, minutes: int = 10) -> str:
    """A job that writes its GPU environment to the shared scratch, then runs until released."""
    script = (
        f"env | grep -E '^(CUDA_|SLURM_SHARDS_ON_NODE|SLURM_JOB_ACCOUNT)' | sort > {SHARED_DIR}/{name}.env; "
        f"while [ ! -e {SHARED_DIR}/release ]; do sleep 1; done"
    )
    return lab_env.submit(
        f"--job-name={name}",
        f"--nodelist={node}",
        f"--gres={gres}",
        f"--time={minutes}",
        f"--wrap={script}",
        user=user,
    )


def environment(lab_env: Lab, name: str) -> dict[str, str]:
    text = lab_env.sh("cat", f"{SHARED_DIR}/{name}.env").stdout
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def wait_state(lab_env: Lab, job: str, state: str, reason: str | None = None, timeout: float = 90) -> None:
    def reached() -> bool:
        if job_field(lab_env, job, "JobState") != state:
            return False
        return reason is None or job_field(lab_env, job, "Reason") == reason

    lab_env.wait(reached, timeout, f"job {job} {state} {reason or ''}".strip())


def wait_env(lab_env: Lab, name: str) -> dict[str, str]:
    lab_env.wait(lambda: bool(environment(lab_env, name)), 60, f"{name}'s environment")
    return environment(lab_env, name)


def release_jobs(lab_env: Lab) -> None:
    lab_env.ok("touch", f"{SHARED_DIR}/release")
    lab_env.cancel_all()
    lab_env.ok("rm", "-f", f"{SHARED_DIR}/release")


def say(transcript: list[str], *lines: str) -> None:
    transcript.extend(lines)


def applied(lab_env: Lab, inventory: Path, node_name: str) -> str:
    """The inventory applied to the live lab by playbooks/slurm.yml; `scontrol show node` of the
    sharing node once every node responds."""
    run_playbook(inventory, lambda message: None)  # raises LabError, with the log's tail, on a failure
    lab_env.ok("install", "-d", "-m", "1777", SHARED_DIR)
    lab_env.wait(
        lambda: all(not re.search(r"down|unknown|\*", s) for s in lab_env.node_states().values()),
        90,
        "every node to respond",
    )
    node = lab_env.ok("scontrol", "show", "node", node_name)
    # Not drained by the change: slurmctld, restarted first, drains the node while its slurmd runs
    # the old files; the playbook lifts that drain once slurmd runs the new ones.
    assert "DRAIN" not in re.search(r"State=(\S+)", node).group(1), node  # type: ignore[union-attr]
    return node


def verified(inventory: Path) -> str:
    """`gpucluster verify` of the shared inventory: its gpu-sharing row runs a job per way of sharing."""
    results = verify_cluster(
        load_cluster(inventory),
        lambda playbook, extra: run_playbook(inventory, lambda message: None, playbook=playbook, extra=extra),
    )
    row = next(r for r in results if r.name == SHARING)
    assert row.status == Status.PASS, row.detail
    return f"gpucluster verify: {row.name} {row.status.value}: {row.detail}"


def sharing_proof(lab_env: Lab, mps: bool) -> list[str]:
    """Apply the shards inventory and prove shards; with `mps`, then the MPS inventory and prove
    MPS. Return what was run and seen."""
    transcript: list[str] = []
    inventory = shared_inventory(mps=False)
    node = applied(lab_env, inventory, "gpu03")
    # Slurm >= 25.05 shows the shards with their GPU's type (shard:h100:4).
    assert re.search(r"Gres=gpu:h100:1(\(S:[^)]*\))?,shard:(h100:)?4", node), node
    say(
        transcript,
        "$ scontrol show node gpu03 | grep Gres",
        *(x.strip() for x in node.splitlines() if "Gres" in x),
    )

    # Shards: 3 for alice's job, 1 for bob's: both on the one GPU. Meanwhile bob's job of 2 waits
    # for shards with a CPU free; a job of more shards than the GPU has is refused.
    first = held_job(lab_env, "alice", "shard:3", "gpu03", "shard-a")
    wait_state(lab_env, first, "RUNNING")
    waiting = held_job(lab_env, "bob", "shard:2", "gpu03", "shard-b")
    wait_state(lab_env, waiting, "PENDING", "Resources")
    # Backfill starts it beside the first: asking less time than the first has left, it cannot
    # delay the waiting job (whose planned start is the first's end). Asking as long, it would wait.
    second = held_job(lab_env, "bob", "shard:1", "gpu03", "shard-c", minutes=5)
    wait_state(lab_env, second, "RUNNING", timeout=120)
    a, c = wait_env(lab_env, "shard-a"), wait_env(lab_env, "shard-c")
    assert (a["CUDA_VISIBLE_DEVICES"], a["SLURM_SHARDS_ON_NODE"]) == ("0", "3"), a
    assert (c["CUDA_VISIBLE_DEVICES"], c["SLURM_SHARDS_ON_NODE"]) == ("0", "1"), c
    assert job_field(lab_env, waiting, "Reason") == "Resources"
    queue = lab_env.ok("squeue", "--nodelist=gpu03", "--states=all", "--format=%.6i %.8u %.9T %.12b %R")
    say(transcript, "$ squeue --format='%.6i %.8u %.9T %.12b %R'   # alice shard:3, bob shard:2, bob shard:1",
        *queue.rstrip().splitlines(),
        f"shard-a: CUDA_VISIBLE_DEVICES={a['CUDA_VISIBLE_DEVICES']} SLURM_SHARDS_ON_NODE={a['SLURM_SHARDS_ON_NODE']}",
        f"shard-c: CUDA_VISIBLE_DEVICES={c['CUDA_VISIBLE_DEVICES']} SLURM_SHARDS_ON_NODE={c['SLURM_SHARDS_ON_NODE']}")  # fmt: skip
    too_many = lab_env.sh(
        "sbatch",
        "--parsable",
        "--output=/dev/null",
        "--nodelist=gpu03",
        "--gres=shard:5",
        "--wrap=true",
        user="bob",
    )
    # More shards than the node holds at all: refused by every release (the release fact
    # sharing_gres_one_gpu_refused is about several GPUs' shards on one node).
    assert too_many.returncode != 0, too_many.stdout
    say(transcript, "$ sbatch --gres=shard:5 ...   # more than the GPU's 4", too_many.stderr.strip())
    release_jobs(lab_env)

    # research may hold 3 shards (gpus.slurm.units): carol's 2 wait beside alice's 2.
    held = held_job(lab_env, "alice", "shard:2", "gpu03", "limit-a")
    wait_state(lab_env, held, "RUNNING")
    over = held_job(lab_env, "carol", "shard:2", "gpu03", "limit-b")
    wait_state(lab_env, over, "PENDING", "AssocGrpGRES")
    limits = lab_env.ok("sacctmgr", "--noheader", "--parsable2", "show", "assoc", "where", "account=research",
                        "user=", "format=Account,GrpTRES")  # fmt: skip
    assert "gres/shard=3" in limits, limits
    say(transcript, "$ sacctmgr show assoc where account=research format=Account,GrpTRES", limits.strip(),
        f"carol's shard:2 beside alice's shard:2: {job_field(lab_env, over, 'JobState')} "
        f"({job_field(lab_env, over, 'Reason')})")  # fmt: skip
    release_jobs(lab_env)
    say(transcript, verified(inventory))
    if mps:
        inventory = shared_inventory(mps=True)
        node = applied(lab_env, inventory, "gpu04")
        assert re.search(r"Gres=gpu:h100:1(\(S:[^)]*\))?,mps:(h100:)?100", node), node
        transcript += mps_proof(lab_env)
        say(transcript, verified(inventory))
    return transcript


def mps_proof(lab_env: Lab) -> list[str]:
    transcript: list[str] = []
    first = held_job(lab_env, "bob", "mps:50", "gpu04", "mps-a")
    second = held_job(lab_env, "alice", "mps:50", "gpu04", "mps-b")
    wait_state(lab_env, first, "RUNNING")
    wait_state(lab_env, second, "RUNNING")
    a, b = wait_env(lab_env, "mps-a"), wait_env(lab_env, "mps-b")
    for env, account in ((a, "product"), (b, "research")):
        assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "50", env
        assert env["CUDA_MPS_PIPE_DIRECTORY"] == f"/run/gpucluster-mps/gpu0/tenant-{account}", env
    records = lab_env.ok("ls", "/run/gpucluster-mps/jobs", host="gpu04").split()
    assert sorted(records) == sorted([first, second]), records
    say(transcript, "$ sbatch --gres=mps:50 (bob, product) and (alice, research) on gpu04",
        *(f"{name}: CUDA_VISIBLE_DEVICES={e['CUDA_VISIBLE_DEVICES']} "
          f"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE={e['CUDA_MPS_ACTIVE_THREAD_PERCENTAGE']} "
          f"CUDA_MPS_PIPE_DIRECTORY={e['CUDA_MPS_PIPE_DIRECTORY']}" for name, e in (("mps-a", a), ("mps-b", b))))  # fmt: skip
    # research may hold 60 MPS shares: with bob's job gone, carol's 20 beside alice's 50 wait.
    lab_env.ok("scancel", first)
    over = held_job(lab_env, "carol", "mps:20", "gpu04", "mps-c")
    wait_state(lab_env, over, "PENDING", "AssocGrpGRES")
    say(transcript, "carol's mps:20 beside alice's mps:50 (research may hold 60): PENDING (AssocGrpGRES)")
    log = lab_env.ok("cat", "/run/gpucluster-mps/gpucluster-mps.log", host="gpu04")
    assert "nvidia-cuda-mps-control not found" in log, log
    say(transcript, "gpu04:/run/gpucluster-mps/gpucluster-mps.log: " + log.strip().splitlines()[-1])
    release_jobs(lab_env)
    lab_env.wait(
        lambda: lab_env.sh("ls", "/run/gpucluster-mps/jobs", host="gpu04").stdout.split() == [],
        60,
        "the Epilogs to forget the MPS jobs",
    )
    return transcript


@pytest.fixture
def shared_lab(lab_cluster: Lab) -> Iterator[Lab]:
    """The shared lab; afterwards its own inventory again (lab.converge), an empty queue."""
    yield lab_cluster
    lab_cluster.sh("touch", f"{SHARED_DIR}/release")
    lab_cluster.cancel_all()
    lab.converge(progress=lambda message: None)
    lab_cluster.sh("rm", "-rf", SHARED_DIR)


def test_shards_and_mps_share_one_gpu_and_tenant_limits_hold(shared_lab: Lab) -> None:
    mps = release(shared_lab.cluster.spec.slurm.version).several_prologs
    transcript = sharing_proof(shared_lab, mps=mps)
    print("\n".join(transcript))
