"""`gpucluster lab verify` against the live lab: a fresh lab passes, and each injected fault (a uid
on one node, a munge key on one node, a GPU device file, a tenant deleted from slurmdbd) fails the
check it belongs to, naming the node or tenant. Every fault is undone in `finally`, and the lab is
back to passing before the next test starts (lab_cluster waits for every node to respond)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from typing import Any

import pytest

from gpucluster.accounts import desired_associations
from gpucluster.hostlists import compress
from gpucluster.lab.paths import REPO_ROOT
from gpucluster.model import Owner
from gpucluster.tools import venv_tool

from .conftest import Lab

pytestmark = pytest.mark.lab
# One verify: the observing playbook over six containers and the jobs, each job waiting at most
# 20 s for its nodes (longer only when a fault blocks them); measured well under this.
VERIFY_TIMEOUT = 600
DRIFT = ("slurm-version", "slurm-config", "users", "munge-key")


def verify() -> dict[str, dict[str, Any]]:
    """`.venv/bin/gpucluster lab verify --json`: the rows by check name (exit code checked too)."""
    proc = subprocess.run(
        [venv_tool("gpucluster"), "lab", "verify", "--json"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=VERIFY_TIMEOUT,
        check=False,
    )
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"no JSON report (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr[-4000:]}")
    checks = {row["name"]: row for row in doc["checks"]}
    failing = any(row["status"] == "fail" for row in checks.values())
    assert proc.returncode == (1 if failing else 0), proc.stderr[-2000:]
    assert doc["ok"] is not failing
    return checks


def failures(checks: dict[str, dict[str, Any]]) -> dict[str, list[str]]:
    return {name: row["names"] for name, row in checks.items() if row["status"] == "fail"}


def where(lab: Lab, node: str) -> set[str]:
    """The node, its partitions and its leaf switch: what a failure caused by the node may name."""
    cluster = lab.cluster
    partitions = {p for p, hosts in cluster.partitions.items() if node in hosts}
    leaves = {s.name for s in cluster.switches if node in s.nodes}
    return {node, *partitions, *leaves}


def test_a_fresh_lab_passes(lab_cluster: Lab) -> None:
    checks = verify()
    assert failures(checks) == {}, {n: checks[n]["detail"] for n in failures(checks)}
    # The lab has no nccl-tests: said plainly, not passed.
    assert checks["nccl"]["status"] == "skipped"
    assert "all_reduce_perf (nccl-tests) not found" in checks["nccl"]["detail"]
    assert {n for n, row in checks.items() if row["status"] == "pass"} == set(checks) - {"nccl"}
    hosts = lab_cluster.cluster.hosts
    assert checks["nodes"]["detail"].startswith(f"{len(hosts)} nodes as the inventory")
    assert checks["gpu-visibility"]["detail"].startswith(compress(hosts))


def test_a_different_uid_on_one_node_fails_only_users(lab_cluster: Lab) -> None:
    node = lab_cluster.cluster.hosts[1]
    uid = lab_cluster.ok("id", "-u", "alice", host=node).strip()
    gid = lab_cluster.ok("id", "-g", "alice", host=node).strip()
    other = str(int(uid) + 500)
    lab_cluster.ok("usermod", "--uid", other, "alice", host=node)
    try:
        checks = verify()
    finally:
        lab_cluster.ok("usermod", "--uid", uid, "alice", host=node)
    assert failures(checks) == {"users": [node]}, checks
    assert (
        checks["users"]["detail"] == f"{node}: alice is uid {other} gid {gid}, elsewhere uid {uid} gid {gid}"
    )


def test_a_different_munge_key_on_one_node_fails_the_munge_check(lab_cluster: Lab) -> None:
    node = lab_cluster.cluster.hosts[2]
    key = "/etc/munge/munge.key"
    saved = "/root/munge.key.gpucluster-verify-test"
    lab_cluster.ok("cp", "-p", key, saved, host=node)
    try:
        # A new random key with what munged requires of it (owner munge, mode 0400).
        lab_cluster.ok(
            "sh",
            "-c",
            f"set -e; umask 0277; dd if=/dev/urandom of={key}.new bs=1024 count=1 status=none; "
            f"chown munge:munge {key}.new; mv {key}.new {key}",
            host=node,
        )
        lab_cluster.ok("systemctl", "restart", "munge", host=node)
        checks = verify()
    finally:
        lab_cluster.ok("mv", saved, key, host=node)  # cp -p kept owner and mode
        lab_cluster.ok("systemctl", "restart", "munge", host=node)
        # slurmd may have been marked down meanwhile: a restart registers it at once.
        lab_cluster.ok("systemctl", "restart", "slurmd", host=node)
        lab_cluster.wait(
            lambda: lab_cluster.node_states().get(node) == "idle", 120, f"{node} to be idle again"
        )
    slurm = lab_cluster.cluster.spec.slurm
    accounting = [slurm.accounting.host] if slurm.accounting else []
    others = {*slurm.controller, *accounting, *lab_cluster.cluster.hosts} - {node}
    assert checks["munge-key"]["status"] == "fail" and checks["munge-key"]["names"] == [node], checks
    assert checks["munge-key"]["detail"] == f"{node}: munge key differs from the one of {compress(others)}"
    assert "sha" not in checks["munge-key"]["detail"]
    # Nothing else drifted, and slurmdbd is untouched.
    for name in ("slurm-version", "slurm-config", "users", "accounts"):
        assert checks[name]["status"] == "pass", checks[name]
    # Legitimately affected: slurmctld and the node's slurmd no longer understand each other, so the
    # node may show as not responding and jobs that need it fail. Each such row names the node, or
    # the partition or leaf switch of the job that needed it.
    for name, names in failures(checks).items():
        if name != "munge-key":
            assert name in ("nodes", "co-allocation", "gpu-visibility", "topology", "cleanup"), checks[name]
            assert set(names) & where(lab_cluster, node), checks[name]


def test_a_missing_gpu_device_fails_gpu_visibility(lab_cluster: Lab) -> None:
    node = lab_cluster.cluster.hosts[1]
    device = "/dev/nvidia3"
    # Moved aside in the same tmpfs rather than deleted: `mv` back restores the very node the lab
    # made (`--device /dev/null:/dev/nvidia3`); recreating it would need CAP_MKNOD, which podman
    # does not give. Not matched by /dev/nvidia* while aside.
    aside = "/dev/.gpucluster-verify-nvidia3"
    lab_cluster.ok("mv", device, aside, host=node)
    try:
        checks = verify()
    finally:
        lab_cluster.ok("mv", aside, device, host=node)
        # The lab's health check drains a node that lost a GPU and resumes it once the GPU is back.
        lab_cluster.wait(
            lambda: lab_cluster.node_states().get(node) == "idle", 120, f"{node} to be idle again"
        )
    gpus = checks["gpu-visibility"]
    assert gpus["status"] == "fail" and gpus["names"] == [node], checks
    assert gpus["detail"].startswith(f"{node}: ")
    for name in (*DRIFT, "accounts"):
        assert checks[name]["status"] == "pass", checks[name]
    # The health check (every 10 s in the lab) drains the node for its lost GPU: if it did before
    # verify looked, `nodes` fails with that reason and jobs needing the node fail, each naming it.
    for name, names in failures(checks).items():
        assert name in ("gpu-visibility", "nodes", "co-allocation", "topology", "cleanup"), checks[name]
        assert set(names) & where(lab_cluster, node), checks[name]
    if "nodes" in failures(checks):
        assert failures(checks)["nodes"] == [node]


def slurm_associations() -> Any:
    """The slurm_accounts role's module, for its own reading and planning of sacctmgr changes."""
    path = REPO_ROOT / "roles" / "slurm_accounts" / "library" / "slurm_associations.py"
    spec = importlib.util.spec_from_file_location("slurm_associations", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


def reconcile_accounts(lab: Lab) -> list[list[str]]:
    """What the slurm_accounts role does (read sacctmgr, plan, run), with the role's own code."""
    role = slurm_associations()
    name = lab.cluster.spec.name

    def show(*args: str) -> str:
        return lab.ok("sacctmgr", "-nP", "show", *args)

    current = role.current_state(
        name,
        show("cluster", "format=cluster"),
        show("qos", "format=" + ",".join(role.QOS_FIELDS)),
        show("assoc", "where", f"cluster={name}", "format=" + ",".join(role.ASSOC_FIELDS)),
        show("user", "format=" + ",".join(role.USER_FIELDS)),
    )
    commands: list[list[str]] = role.plan(desired_associations(lab.cluster.owned_by(Owner.SLURM)), current)
    for words in commands:
        lab.ok("sacctmgr", "-i", *words)
    return commands


def test_a_tenant_removed_by_hand_fails_only_accounts(lab_cluster: Lab) -> None:
    tenants = lab_cluster.cluster.spec.tenants
    # A tenant whose users belong to no other tenant: deleting its account takes their only
    # association with it, which sacctmgr allows (it refuses to take a default account otherwise).
    tenant = next(
        t
        for t in tenants
        if not any(u in other.users for other in tenants if other is not t for u in t.users)
    )
    name = lab_cluster.cluster.spec.name
    lab_cluster.ok("sacctmgr", "-i", "delete", "account", "where", f"name={tenant.name}", f"cluster={name}")
    try:
        checks = verify()
    finally:
        restored = reconcile_accounts(lab_cluster)
    assert restored and reconcile_accounts(lab_cluster) == []
    assert list(failures(checks)) == ["accounts"], checks
    accounts = checks["accounts"]
    assert tenant.name in accounts["names"]
    assert f"tenant {tenant.name}: no account in slurmdbd" in accounts["detail"]
    for user in tenant.users:
        assert f"tenant {tenant.name}: user {user} is not associated with it" in accounts["detail"]
