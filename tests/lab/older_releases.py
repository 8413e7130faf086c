"""The releases before the lab's own: the lab inventory targeting 24.11 (Debian trixie) and 22.05
(bookworm), each brought up as a user would (`gpucluster lab up <inventory>`), then: the smoke
jobs, `gpucluster lab verify` with every row passing, a REST API call with a token, a job submitted
from the login node, the state collector's GPU metrics in Prometheus as sinfo counts them (these
releases' slurmctld serves none) with GpusIdleWhileJobsPend firing; on 22.05 a node moved to
Kubernetes and back with jobs running, and the 24.11 lab upgraded in place to 26.05 with jobs
running, queued and done (issue 22); on both, a GPU shared by Slurm shards (and on 24.11 by MPS)
with the tenants' limits (issue 38); on 24.11, nodes back only through the gate (issue 40).

They run beside the session's 26.05 lab, as a lab of their own (GPUCLUSTER_LAB_PREFIX,
GPUCLUSTER_LAB_SUBNET and GPUCLUSTER_LAB_DIR): tests/lab_releases/test_older_releases.py runs this
file in a pytest process of its own with those set, so that the two labs' tests share the
machine's time instead of following each other. Run here without a prefix of its own, it would
replace the lab in .lab: it refuses.
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpucluster.lab import lab as lab_module
from gpucluster.lab import nodes
from gpucluster.lab.paths import DEFAULT_INVENTORY, podman_env
from gpucluster.layers import load_cluster

from .conftest import (
    Lab,
    OwnLab,
    inventory_for_release,
    own_lab_up,
    plain_gres,
    rows_a_lab_skips,
    run_scrubbed,
)
from .test_fleet_move import move_out_and_back
from .test_gate import drained_node_proof, gate_on, repaired_node_proof
from .test_monitoring import firing, query
from .test_rest_api import call, token
from .test_sharing import SHARED_DIR, sharing_proof

pytestmark = pytest.mark.lab

OLDER_RELEASES = ("24.11", "22.05")


@pytest.fixture(scope="module", params=OLDER_RELEASES)
def older_lab(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OwnLab]:
    release: str = request.param
    root = tmp_path_factory.mktemp(f"release-{release}")
    with own_lab_up(DEFAULT_INVENTORY, release, root, "the older releases' labs") as own:
        yield own


def _idle(lab: Lab) -> None:
    lab.cancel_all()
    lab.wait(
        lambda: all(not re.search(r"down|unknown|\*", s) for s in lab.node_states().values()),
        90,
        "every node to respond",
    )


def test_the_lab_runs_the_release_and_its_smoke_jobs_pass(older_lab: OwnLab) -> None:
    release = older_lab.lab.cluster.release.name
    assert "$ srun" in older_lab.up_output and "CUDA_VISIBLE_DEVICES=0,1" in older_lab.up_output
    for host, program in (
        ("ctl01", "slurmctld"),
        ("ctl02", "slurmdbd"),
        ("gpu01", "slurmd"),
        ("login01", "sinfo"),
    ):
        version = older_lab.lab.ok(program, "-V", host=host).split()[-1]
        assert version.startswith(f"{release}."), (host, program, version)


def test_verify_passes_every_row(older_lab: OwnLab) -> None:
    _idle(older_lab.lab)
    proc = run_scrubbed(".venv/bin/gpucluster lab verify --json", timeout=900)
    report = json.loads(proc.stdout)
    failed = [c for c in report["checks"] if c["status"] == "fail"]
    assert proc.returncode == 0 and report["ok"] and not failed, json.dumps(failed, indent=1) + proc.stderr
    skipped = {c["name"] for c in report["checks"] if c["status"] == "skipped"}
    assert skipped <= rows_a_lab_skips(), skipped


def test_the_rest_api_answers_a_token(older_lab: OwnLab) -> None:
    lab = older_lab.lab
    status, data = call(lab, "GET", "/nodes", "alice", token(lab, "alice"))
    assert status == 200, data
    assert {node["name"]: plain_gres(node["gres"]) for node in data["nodes"]} == {
        f"gpu0{i}": "gpu:h100:8" for i in range(1, 5)
    }
    status, _ = call(lab, "GET", "/nodes", "alice")
    assert status == 401


def test_a_job_submitted_on_the_login_node_runs(older_lab: OwnLab) -> None:
    lab = older_lab.lab
    _idle(lab)
    out = lab.ok("sbatch", "--parsable", "--wait", "--output=/dev/null", "--gres=gpu:h100:1", "--wrap=hostname",
                 user="alice", host="login01")  # fmt: skip
    job = out.strip().split(";")[0]
    state = lab.ok("sacct", "--noheader", "--allocations", f"--jobs={job}", "--format=State%20,User%10")
    assert state.split() == ["COMPLETED", "alice"], state


def _gpus(gres: str) -> int:
    """GPUs in a GRES string as sinfo prints it (gpu:h100:8(S:0), gpu:h100:3(IDX:0-2), gpu:4)."""
    total = 0
    for entry in plain_gres(gres).split(","):
        name, *rest = entry.split(":")
        if name == "gpu":
            total += int(rest[-1]) if rest and rest[-1].isdigit() else 1
    return total


def _job_state(lab: Lab, job: str) -> str:
    return lab.ok("squeue", "--noheader", f"--jobs={job}", "--format=%T").strip()


def _metric(lab: Lab, promql: str, label: str) -> dict[str, int]:
    return {r["metric"][label]: int(float(r["value"][1])) for r in query(lab, promql)}


def test_the_collector_serves_the_gpu_metrics_and_gpus_idle_while_jobs_pend_fires(
    older_lab: OwnLab,
) -> None:
    """Slurm before 25.11 serves no metrics: the state collector on both controllers gives the
    partition and node GPUs, and the queue, under gpucluster's names. Prometheus on login01 has them
    as sinfo counts them, with a job holding 3 of gpu01's 8 GPUs and one pending for 6 more there;
    the alert that read nothing on these releases fires (29 GPUs idle, 6 asked for).
    Bounded waits: the collector runs every 15 s, Prometheus scrapes and evaluates every 5 s, the
    lab's `for` is 10 s."""
    lab = older_lab.lab
    _idle(lab)
    held = lab.submit("--nodelist=gpu01", "--gres=gpu:h100:3", "--wrap=sleep 600", user="alice")
    try:
        lab.wait(lambda: _job_state(lab, held) == "RUNNING", 120, "the 3-GPU job to start")
        waiting = lab.submit("--nodelist=gpu01", "--gres=gpu:h100:6", "--wrap=true", user="bob")
        assert _job_state(lab, waiting) == "PENDING"

        sinfo = lab.ok("sinfo", "--all", "--noheader", "--Node",
                       "--Format=NodeList:0|,PartitionName:0|,Gres:0|,GresUsed:0")  # fmt: skip
        rows = [line.split("|") for line in sinfo.splitlines() if line.strip()]
        partitions: dict[str, list[int]] = {}
        nodes: dict[str, tuple[int, int]] = {}
        for node, partition, gres, used in rows:
            counts = partitions.setdefault(partition, [0, 0])
            counts[0] += _gpus(gres)
            counts[1] += _gpus(used)
            nodes[node] = (_gpus(gres), _gpus(used))
        model = lab.cluster

        def model_gpus(host: str) -> int:
            gpus = model.node_type(host).gpus
            return gpus.count if gpus else 0

        # As the model has them: 3 allocated, in the one partition.
        assert partitions == {
            p.name: [sum(model_gpus(h) for h in model.partitions[p.name]), 3] for p in model.spec.partitions
        }, sinfo

        def served() -> bool:
            return (
                _metric(lab, "max by (partition) (gpucluster_slurm_partition_gpus)", "partition")
                == {p: c[0] for p, c in partitions.items()}
                and _metric(lab, "max by (partition) (gpucluster_slurm_partition_gpus_alloc)", "partition")
                == {p: c[1] for p, c in partitions.items()}
                and _metric(
                    lab, "max by (partition) (gpucluster_slurm_partition_jobs_pending_gpus)", "partition"
                )
                == {p: 6 if p == "gpu" else 0 for p in partitions}
            )

        lab.wait(served, 90, "Prometheus to have the collector's partition GPUs as sinfo counts them")
        # Each controller's collector reports; node GPUs per Slurm node; slurmctld's names unused.
        assert {r["metric"]["host"] for r in query(lab, "gpucluster_slurm_partition_gpus")} == set(
            model.spec.slurm.controller
        )
        assert _metric(lab, "max by (slurm_node) (gpucluster_slurm_node_gpus)", "slurm_node") == {
            n: g for n, (g, _) in nodes.items()
        }
        assert _metric(lab, "max by (slurm_node) (gpucluster_slurm_node_gpus_alloc)", "slurm_node") == {
            n: u for n, (_, u) in nodes.items()
        }
        assert (
            _metric(lab, "max by (partition) (gpucluster_slurm_partition_jobs_pending)", "partition")["gpu"]
            == 1
        )
        assert query(lab, '{__name__=~"slurm_partition_.*|slurm_node_.*"}') == []

        idle = partitions["gpu"][0] - partitions["gpu"][1]
        expected = f"{idle} GPUs of partition gpu are idle while its jobs pend"
        seen: list[str] = []

        def fired_as_counted() -> bool:
            # Prometheus sends a firing alert's annotations again once a minute (its resend delay),
            # so Alertmanager may first hold those of an earlier evaluation (CI once saw 32 here).
            alerts = firing(lab, "GpusIdleWhileJobsPend")
            seen.extend(a["annotations"]["summary"] for a in alerts)
            return [(a["labels"]["partition"], a["annotations"]["summary"]) for a in alerts] == [
                ("gpu", expected)
            ]

        try:
            lab.wait(fired_as_counted, 180, f"GpusIdleWhileJobsPend in Alertmanager saying {expected!r}")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; it said {sorted(set(seen)) or 'nothing'}") from None
        (alert,) = firing(lab, "GpusIdleWhileJobsPend")
        print("\nfiring:", json.dumps({k: alert[k] for k in ("labels", "annotations", "startsAt")}, indent=1))
        print("summaries seen:", sorted(set(seen)))
    finally:
        lab.cancel_all()


# 22.05 only: 24.11 adds and removes nodes with `scontrol reconfigure`, as 26.05 does (the session's
# lab proves that path); 22.05 restarts the daemons for it, the path proven here.
def test_shards_share_one_gpu_and_a_tenants_limit_holds(older_lab: OwnLab) -> None:
    """tests/lab/test_sharing.py's proof on this release: shards on both, MPS on 24.11 (22.05 takes
    one Prolog, the health check's); then the lab's own inventory again."""
    lab = older_lab.lab
    _idle(lab)
    try:
        print("\n".join(sharing_proof(lab, mps=lab.cluster.release.several_prologs)))
    finally:
        lab.sh("touch", f"{SHARED_DIR}/release")
        lab.cancel_all()
        lab_module.converge(progress=lambda message: None)
        lab.sh("rm", "-rf", SHARED_DIR)


@pytest.mark.parametrize("older_lab", ["22.05"], indirect=True)
def test_a_node_moves_to_kubernetes_and_back(older_lab: OwnLab) -> None:
    _idle(older_lab.lab)
    move_out_and_back(older_lab.lab, older_lab.inventory)


@pytest.mark.parametrize("older_lab", ["24.11"], indirect=True)
def test_nodes_return_to_service_only_through_the_gate(older_lab: OwnLab) -> None:
    """tests/lab/test_gate.py's proof on 24.11 (issue 40): a node the health check drained, and one
    declared repaired, each back only through a passing burn-in; then the lab's own inventory."""
    _idle(older_lab.lab)
    with gate_on(older_lab.lab, older_lab.inventory) as gated:
        print("\n".join(drained_node_proof(gated)))
        _idle(older_lab.lab)
        print("\n".join(repaired_node_proof(gated)))


# --- the upgrade: 24.11 -> 26.05 on the 24.11 lab, with jobs running (issue 22) ------------------------

UPGRADE_TO = "26.05"
REPO_IN_NODES = "/srv/gpucluster-slurm-repo"
# A job that runs until slurmd on each of its nodes reports the new release, then a little longer:
# it is running while every daemon it depends on is replaced (bounded: it fails after an hour).
# The jobs that run through the upgrade wait for a mark the test leaves on the nodes once every
# daemon runs the new release; Slurm's own commands inside a job started by the old slurmd are not
# the subject here (its configless cache may move between releases).
UPGRADED_MARK = "/run/gpucluster-upgraded"
WAIT_FOR_UPGRADE = (
    f"for i in $(seq 720); do [ -e {UPGRADED_MARK} ] && {{ sleep 20; exit 0; }}; sleep 5; done; exit 1"
)


def _accounting(lab: Lab) -> dict[str, str]:
    """Associations, QOS and fair-share shares as sacctmgr and sshare print them."""
    return {
        "associations": lab.ok("sacctmgr", "--noheader", "--parsable2", "show", "associations",
                               "format=Cluster,Account,User,Share,QOS,DefaultQOS,GrpTRES,MaxTRES"),
        "qos": lab.ok("sacctmgr", "--noheader", "--parsable2", "show", "qos", "format=Name,Priority,MaxTRESPerUser,GrpTRES"),
        "shares": lab.ok("sshare", "--noheader", "--parsable2", "--all", "--format=Account,User,RawShares"),
    }  # fmt: skip


def _probe(lab: Lab, stop: threading.Event, refused: list[float], tries: list[float]) -> None:
    """Submit a tiny job from the login node every few seconds; note when one is refused."""
    while not stop.is_set():
        started = time.monotonic()
        proc = lab.sh("timeout", "20", "sbatch", "--parsable", "--output=/dev/null", "--time=1", "--wrap=true",
                      user="bob", host="login01", timeout=40)  # fmt: skip
        tries.append(started)
        if proc.returncode != 0:
            refused.append(started)
        stop.wait(3)


def _refused_seconds(refused: list[float], tries: list[float]) -> float:
    """Seconds from a refused probe to the next accepted one, summed."""
    total, since = 0.0, None
    for at in sorted(tries):
        if at in refused:
            since = at if since is None else since
        elif since is not None:
            total, since = total + (at - since), None
    return total + ((tries[-1] - since) if since is not None and tries else 0.0)


@pytest.mark.parametrize("older_lab", ["24.11"], indirect=True)
def test_the_lab_upgrades_to_26_05_and_no_job_is_lost(older_lab: OwnLab) -> None:
    """The 24.11 lab upgraded in place by playbooks/slurm-upgrade.yml, jobs running, queued and done.
    Expected duration: 8-15 min (the repository cached; the trial and seven hosts' apt runs)."""
    from gpucluster.lab.inventory import write_inventory
    from gpucluster.lab.lab import lab_hosts
    from gpucluster.lab.paths import REPO_ROOT
    from gpucluster.lab.playbook import run_playbook
    from gpucluster.lab.upgrade_repo import ensure_repo, suite_name

    lab = older_lab.lab
    _idle(lab)
    repo = ensure_repo("24.11", UPGRADE_TO)
    # The nodes reach no mirror: the image's Debian source is set aside (apt would fail on it), and
    # the repository is copied where the inventory's packaging points.
    for host in lab_hosts(lab.cluster):
        container = nodes.container_name(host)
        subprocess.run(["podman", "exec", container, "sh", "-c",
                        f"rm -rf {REPO_IN_NODES}; if [ -f /etc/apt/sources.list ]; then "
                        "mv /etc/apt/sources.list /etc/apt/sources.list.unreachable; fi"],
                       env=podman_env(), check=True)  # fmt: skip
        subprocess.run(
            ["podman", "cp", str(repo), f"{container}:{REPO_IN_NODES}"], env=podman_env(), check=True
        )
    # History: jobs that ended before the upgrade.
    done = [
        lab.submit("--wait", "--gres=gpu:h100:1", "--wrap=hostname", user=user) for user in ("alice", "bob")
    ]
    long_job = lab.submit("-N2", "--gres=gpu:h100:2", f"--wrap={WAIT_FOR_UPGRADE}", user="alice")
    array = lab.submit("--array=1-3", "--gres=gpu:h100:1", f"--wrap={WAIT_FOR_UPGRADE}", user="bob")
    pending = lab.submit(
        f"--dependency=afterok:{long_job}", "--gres=gpu:h100:1", "--wrap=hostname", user="carol"
    )
    lab.wait(lambda: lab.ok("squeue", "--noheader", f"--jobs={long_job}", "--format=%T").strip() == "RUNNING",
             120, "the long job to start")  # fmt: skip
    before = _accounting(lab)

    cluster_file = older_lab.inventory / "group_vars" / "all" / "cluster.yml"
    text = cluster_file.read_text()
    cluster_file.write_text(text.replace(
        '    version: "24.11"\n',
        f'    version: "{UPGRADE_TO}"\n    packages:\n      repository:\n        url: "file://{REPO_IN_NODES}"\n'
        f"        suite: {suite_name(UPGRADE_TO)}\n        key: {repo / 'key.asc'}\n",
    ))  # fmt: skip
    upgraded = load_cluster(older_lab.inventory)
    plan = subprocess.run([str(REPO_ROOT / ".venv/bin/gpucluster"), "plan", "--json", str(inventory_for_release(DEFAULT_INVENTORY, "24.11", Path(tempfile.mkdtemp()))), str(older_lab.inventory)],
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert plan.returncode == 0, plan.stderr
    assert [s["name"] for s in json.loads(plan.stdout)["upgrade"]["steps"]][:2] == ["prove", "pre-checks"]

    stop, refused, tries = threading.Event(), [], []
    prober = threading.Thread(target=_probe, args=(lab, stop, refused, tries), daemon=True)
    prober.start()
    started = time.monotonic()
    try:
        run = run_playbook(write_inventory(older_lab.inventory, upgraded), print,
                           REPO_ROOT / "playbooks" / "slurm-upgrade.yml")  # fmt: skip
    finally:
        stop.set()
        prober.join(60)
    took = time.monotonic() - started
    print(f"upgrade 24.11 -> {UPGRADE_TO}: {took:.0f} s (playbook {run.seconds:.0f} s); submissions refused "
          f"for {_refused_seconds(refused, tries):.0f} s ({len(refused)} of {len(tries)} probes)")  # fmt: skip
    lab.cluster = upgraded

    # Every daemon reports the new release.
    for host, program in (
        ("ctl01", "slurmctld"),
        ("ctl02", "slurmdbd"),
        ("gpu01", "slurmd"),
        ("login01", "sinfo"),
    ):
        assert lab.ok(program, "-V", host=host).split()[-1].startswith(f"{UPGRADE_TO}."), (host, program)
    assert {v[:5] for v in lab.ok("sinfo", "--noheader", "--Node", "--format=%v").split()} == {UPGRADE_TO}

    # The running jobs completed normally, the pending one started after the upgrade.
    for host in lab_hosts(upgraded):
        if host.startswith("gpu"):
            subprocess.run(["podman", "exec", nodes.container_name(host), "touch", UPGRADED_MARK],
                           env=podman_env(), check=True)  # fmt: skip
    jobs = [long_job, *(f"{array}_{i}" for i in (1, 2, 3)), pending]
    try:
        lab.wait(lambda: lab.ok("squeue", "--noheader", "--user=alice,bob,carol").strip() == "", 300,
                 "the jobs of before the upgrade to end")  # fmt: skip
    except AssertionError as exc:
        shown = lab.sh("scontrol", "show", "job").stdout
        raise AssertionError(f"{exc}\n{shown}") from None
    for job in jobs:
        shown = lab.sh("scontrol", "show", "job", job).stdout  # gone once older than MinJobAge
        assert not shown or ("JobState=COMPLETED" in shown and "Restarts=0" in shown), shown
        # Every record of the job, requeues included: one, completed.
        records = lab.ok("sacct", "--noheader", "--parsable2", "--duplicates", f"--jobs={job}", "--allocations",
                         "--format=State,ExitCode").split()  # fmt: skip
        assert records == ["COMPLETED|0:0"], (job, records)
    rows = {
        line.split("|")[0]: line.split("|")
        for line in lab.ok("sacct", "--noheader", "--parsable2", "--allocations", "--starttime=now-1day",
                           "--format=JobID,User,Account,State,ExitCode,AllocTRES,Start").splitlines()
    }  # fmt: skip
    print("sacct after the upgrade (JobID|User|Account|State|ExitCode|AllocTRES|Start):")
    for job in [*done, *jobs]:
        print("  " + "|".join(rows[job]))
        _, user, account, state, code, tres, _ = rows[job]
        assert (state, code) == ("COMPLETED", "0:0") and user and account and "gres/gpu=" in tres, rows[job]
    assert rows[pending][6] > time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - took - 60))
    assert _accounting(lab) == before

    proc = run_scrubbed(".venv/bin/gpucluster lab verify --json", timeout=900)
    report = json.loads(proc.stdout)
    failed = [c for c in report["checks"] if c["status"] == "fail"]
    assert proc.returncode == 0 and report["ok"] and not failed, json.dumps(failed, indent=1) + proc.stderr
