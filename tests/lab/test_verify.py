"""`gpucluster lab verify` against the live lab: a fresh lab passes, and each injected fault (a uid
on one node, a munge key on another, a GPU device file on a third, a tenant deleted from slurmdbd)
fails the check it belongs to, naming the node or tenant. Every fault is undone on the way out, and
the lab is back to passing before the next test starts (lab_cluster waits for every node to respond)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import pytest

from gpucluster.hostlists import compress
from gpucluster.lab.paths import REPO_ROOT
from gpucluster.model.spec import Owner
from gpucluster.slurm.accounts import desired_associations
from gpucluster.tools import venv_tool

from .conftest import Lab, rows_a_lab_skips

pytestmark = pytest.mark.lab
# One verify: the observing playbook over seven containers and the jobs, each job waiting at most
# 20 s for its nodes (longer only when a fault blocks them); measured well under this.
VERIFY_TIMEOUT = 600
GPU_DEVICE = "/dev/nvidia3"
GPU_ASIDE = "/dev/.gpucluster-verify-nvidia3"


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
    skipped = rows_a_lab_skips()
    assert all(checks[name]["status"] == "skipped" for name in skipped), {n: checks[n] for n in skipped}
    assert {n for n, row in checks.items() if row["status"] == "pass"} == set(checks) - skipped
    hosts = lab_cluster.cluster.hosts
    assert checks["nodes"]["detail"].startswith(f"{len(hosts)} nodes as the inventory")
    # Verify powers no node on: its jobs run on the nodes that are up; the others' power is said.
    assert checks["gpu-visibility"]["detail"].startswith(compress(lab_cluster.nodes_up))
    saved = [h for h in hosts if h not in lab_cluster.nodes_up]
    if saved:
        assert "; power-saved: " + ", ".join(f"{h} powered down" for h in saved) in checks["nodes"]["detail"]
    else:
        assert "power-saved" not in checks["nodes"]["detail"]


def test_each_fault_fails_its_own_check_naming_its_node_or_tenant(lab_cluster: Lab) -> None:
    """Four faults at once, each where no other is (one verify run instead of four): alice's uid
    on one node, the munge key on another, a GPU device file on a third, a tenant deleted from
    slurmdbd. Each fails its own row with exactly its node or tenant; what they legitimately
    disturb (jobs that needed a node whose munge key or GPU is wrong) names that node."""
    hosts = lab_cluster.nodes_up
    uid_node, gpu_node, munge_node = hosts[0], hosts[1], hosts[2]
    tenants = lab_cluster.cluster.spec.tenants
    # A tenant whose users belong to no other tenant: deleting its account takes their only
    # association with it, which sacctmgr allows (it refuses to take a default account otherwise).
    tenant = next(
        t
        for t in tenants
        if not any(u in other.users for other in tenants if other is not t for u in t.users)
    )
    with ExitStack() as undo:
        uid = lab_cluster.ok("id", "-u", "alice", host=uid_node).strip()
        gid = lab_cluster.ok("id", "-g", "alice", host=uid_node).strip()
        other_uid = str(int(uid) + 500)
        lab_cluster.ok("usermod", "--uid", other_uid, "alice", host=uid_node)
        undo.callback(lab_cluster.ok, "usermod", "--uid", uid, "alice", host=uid_node)

        undo.callback(wait_idle, lab_cluster, gpu_node)
        # Moved aside in the same tmpfs rather than deleted: `mv` back restores the very node the
        # lab made (`--device /dev/null:/dev/nvidia3`); recreating it would need CAP_MKNOD, which
        # podman does not give. Not matched by /dev/nvidia* while aside. The lab's health check
        # drains the node for it, and resumes it once the device is back.
        lab_cluster.ok("mv", GPU_DEVICE, GPU_ASIDE, host=gpu_node)
        undo.callback(lab_cluster.ok, "mv", GPU_ASIDE, GPU_DEVICE, host=gpu_node)

        undo.enter_context(other_munge_key(lab_cluster, munge_node))

        name = lab_cluster.cluster.spec.name
        lab_cluster.ok(
            "sacctmgr", "-i", "delete", "account", "where", f"name={tenant.name}", f"cluster={name}"
        )
        undo.callback(reconcile_accounts, lab_cluster)

        checks = verify()
    assert reconcile_accounts(lab_cluster) == []  # the accounts are back as rendered

    failing = failures(checks)
    assert failing.get("users") == [uid_node], checks
    assert (
        checks["users"]["detail"]
        == f"{uid_node}: alice is uid {other_uid} gid {gid}, elsewhere uid {uid} gid {gid}"
    )

    slurm = lab_cluster.cluster.spec.slurm
    accounting = [slurm.accounting.host] if slurm.accounting else []
    others = {*slurm.controller, *accounting, *hosts} - {munge_node}
    assert failing.get("munge-key") == [munge_node], checks
    assert (
        checks["munge-key"]["detail"] == f"{munge_node}: munge key differs from the one of {compress(others)}"
    )
    assert "sha" not in checks["munge-key"]["detail"]

    # The munge node's slurmd no longer understands slurmctld, so its GPU job may fail too.
    assert gpu_node in failing.get("gpu-visibility", []), checks
    assert set(failing["gpu-visibility"]) <= {gpu_node, munge_node}, checks
    assert f"{gpu_node}: " in checks["gpu-visibility"]["detail"]

    accounts = checks["accounts"]
    assert failing.get("accounts") and tenant.name in accounts["names"], checks
    assert f"tenant {tenant.name}: no account in slurmdbd" in accounts["detail"]
    for user in tenant.users:
        assert f"tenant {tenant.name}: user {user} is not associated with it" in accounts["detail"]

    for row in ("slurm-version", "slurm-config"):
        assert checks[row]["status"] == "pass", checks[row]
    disturbed = where(lab_cluster, gpu_node) | where(lab_cluster, munge_node)
    for row, names in failing.items():
        if row not in ("users", "munge-key", "gpu-visibility", "accounts"):
            assert row in ("nodes", "co-allocation", "topology", "cleanup"), checks[row]
            assert set(names) & disturbed, checks[row]
            if row == "nodes":
                assert set(names) <= {gpu_node, munge_node}, checks[row]


def wait_idle(lab: Lab, node: str) -> None:
    lab.wait(lambda: lab.node_states().get(node) == "idle", 120, f"{node} to be idle again")


@contextmanager
def other_munge_key(lab: Lab, node: str) -> Iterator[None]:
    """A new random key on the node (what munged requires of it: owner munge, mode 0400); the
    original key, munged and slurmd are back on exit, and the node idle."""
    key = "/etc/munge/munge.key"
    saved = "/root/munge.key.gpucluster-verify-test"
    lab.ok("cp", "-p", key, saved, host=node)
    try:
        lab.ok(
            "sh",
            "-c",
            f"set -e; umask 0277; dd if=/dev/urandom of={key}.new bs=1024 count=1 status=none; "
            f"chown munge:munge {key}.new; mv {key}.new {key}",
            host=node,
        )
        lab.ok("systemctl", "restart", "munge", host=node)
        yield
    finally:
        lab.ok("mv", saved, key, host=node)  # cp -p kept owner and mode
        lab.ok("systemctl", "restart", "munge", host=node)
        # slurmd may have been marked down meanwhile: a restart registers it at once.
        lab.ok("systemctl", "restart", "slurmd", host=node)
        wait_idle(lab, node)


def slurm_associations() -> Any:
    """The slurm_accounts role's module, for its own reading and planning of sacctmgr changes."""
    path = REPO_ROOT / "plugins" / "modules" / "slurm_associations.py"
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
