"""`gpucluster plan`: what two inventories resolve to and render, compared; each change with the
policy its step uses on the target release; steps that each do something; JSON values of the model."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest

from gpucluster.changes.moves import Action
from gpucluster.changes.plan import make_plan, plan, plan_schema
from gpucluster.changes.records import Plan, required_action
from gpucluster.layers import load_cluster
from gpucluster.model.base import Update
from gpucluster.model.releases import RELEASES
from tests.conftest import INVENTORIES, InventoryFactory, run_cli


def edited(
    inventories: InventoryFactory,
    cluster_edits: dict[str, str] | None = None,
    hosts_edits: dict[str, str] | None = None,
    example: str = "lab",
    name: str = "edited",
) -> Path:
    directory = inventories.copy_example(example, name=name)
    for file, edits in (("group_vars/all/cluster.yml", cluster_edits), ("hosts.yml", hosts_edits)):
        path = directory / file
        text = path.read_text()
        for old, new in (edits or {}).items():
            assert old in text, old
            text = text.replace(old, new)
        path.write_text(text)
    return directory


def pair(
    inventories: InventoryFactory,
    cluster_edits: dict[str, str] | None = None,
    hosts_edits: dict[str, str] | None = None,
    example: str = "lab",
    version: str | None = "22.05",
) -> Plan:
    """The plan between two edited copies of an example, both pinned to `version` (the lab's
    22.05 semantics by default: node-list changes restart the daemons there)."""
    current = re.search(
        r'    version: "([0-9.]+)"', (INVENTORIES / example / "group_vars/all/cluster.yml").read_text()
    )
    both = {current.group(0): f'    version: "{version}"'} if version and current else {}
    old = load_cluster(edited(inventories, both, None, example, "old"))
    new = load_cluster(edited(inventories, {**both, **(cluster_edits or {})}, hosts_edits, example, "new"))
    return make_plan(old, new)


def by_path(result: Plan) -> dict[str, tuple[object, object, Update]]:
    return {c.path: (c.old, c.new, c.update) for c in result.changes}


def test_no_change_needs_nothing(inventories: InventoryFactory) -> None:
    lab = load_cluster(inventories.copy_example("lab"))
    assert plan(lab, lab) == []
    assert required_action([]) is None
    # The same inventory from another directory: its header's name is no change.
    other = load_cluster(inventories.copy_example("lab", name="elsewhere/copy"))
    result = make_plan(lab, other)
    assert (result.changes, result.files, result.steps) == ([], [], [])


def test_a_host_moved_between_groups_in_hosts_yml_is_seen(inventories: InventoryFactory) -> None:
    """The defect: moving gpu03 from leaf2_nodes to leaf1_nodes printed `no changes`."""
    result = pair(inventories, hosts_edits={"gpu[01:02]": "gpu[01:03]", "gpu[03:04]": "gpu04"})
    assert by_path(result) == {
        "switches.leaf1.nodes": (["gpu01", "gpu02"], ["gpu01", "gpu02", "gpu03"], Update.RECONFIGURE),
        "switches.leaf2.nodes": (["gpu03", "gpu04"], ["gpu04"], Update.RECONFIGURE),
    }
    [targets, topology] = result.files  # the lab's monitoring labels gpu03 with its new switch
    assert targets.path == "monitoring/prometheus.yml"
    assert topology.path == "slurm/topology.conf" and topology.update == Update.RECONFIGURE
    assert "+SwitchName=leaf1 Nodes=gpu[01-03]" in topology.diff
    assert set(topology.because) == {"switches.leaf1.nodes", "switches.leaf2.nodes"}
    [step, monitoring] = result.steps
    assert (step.action, step.update, step.files) == (
        Action.APPLY,
        Update.RECONFIGURE,
        ("slurm/topology.conf",),
    )
    assert monitoring.files == ("monitoring/prometheus.yml",) and monitoring.update == Update.SERVICE


def test_a_partition_shrinking_because_its_group_lost_a_host_is_listed(inventories: InventoryFactory) -> None:
    result = pair(
        inventories,
        cluster_edits={
            "{name: gpu, nodes: [gpu_nodes]": "{name: gpu, nodes: [leaf1_nodes, leaf2_nodes]",
            "gpu_quota: 16\n      gpu_limit: 32": "gpu_quota: 8\n      gpu_limit: 24",  # 24 GPUs left
        },
        hosts_edits={"gpu[03:04]": "gpu03"},
    )
    changes = by_path(result)
    assert changes["cluster.partitions.gpu.nodes"][2] == Update.RESTART  # on 22.05, with the node removed
    assert changes["cluster.partitions.gpu.nodes"][1] == ["gpu01", "gpu02", "gpu03"]
    assert changes["hosts.gpu04"] == ({"owner": "slurm", "type": "sim-h100"}, None, Update.RESTART)
    # The node leaves slurm.conf only once drained and empty.
    actions = [(s.action, s.hosts) for s in result.steps]
    assert actions[:2] == [(Action.STOP_PLACING, ("gpu04",)), (Action.WAIT_EMPTY, ("gpu04",))]
    assert 'reason="gpucluster: removed from the inventory"' in result.steps[0].text


@pytest.mark.parametrize(
    ("version", "update"),
    [("22.05", Update.RESTART), ("24.11", Update.RECONFIGURE), ("26.05", Update.RECONFIGURE)],
)
def test_a_node_added_needs_what_the_release_needs(
    inventories: InventoryFactory, version: str, update: Update
) -> None:
    result = pair(inventories, hosts_edits={"gpu[03:04]": "gpu[03:05]"}, version=version)
    assert by_path(result)["hosts.gpu05"] == (None, {"owner": "slurm", "type": "sim-h100"}, update)
    slurm = next(s for s in result.steps if s.scheduler == "slurm")
    assert slurm.update == update and "installs and starts slurmd on gpu05" in slurm.text
    assert ("scontrol reconfigure" in slurm.text) is RELEASES[version].reconfigure_node_changes
    assert result.overall == update


def test_every_change_carries_the_policy_of_its_step(inventories: InventoryFactory) -> None:
    result = pair(
        inventories,
        cluster_edits={'max_time: "1-00:00:00"': 'max_time: "2-00:00:00"', "fairshare: 60": "fairshare: 70"},
        hosts_edits={"gpu[03:04]": "gpu[03:05]"},
    )
    step_of = {path: step for step in result.steps for path in step.changes}
    assert set(step_of) == {c.path for c in result.changes}
    for change in result.changes:
        assert change.update == step_of[change.path].update, change.path
    # MaxTime alone needs a reconfigure; the step restarts for the new node (Slurm 22.05).
    max_time = next(c for c in result.changes if c.path == "cluster.partitions.gpu.max_time")
    assert (max_time.update, max_time.needs) == (Update.RESTART, Update.RECONFIGURE)
    # Nothing Slurm receives changed with fairshare (its shares are the quota): no change, no step.
    assert not any("fairshare" in c.path or "weight" in c.path for c in result.changes)


def test_steps_change_something(inventories: InventoryFactory) -> None:
    """The defect: a `lower quotas` step listing the old values and a `raise` repeating another."""
    from tests.fleet import gpu04_to_kubernetes

    old = load_cluster(inventories.copy_example("lab", name="old"))
    new_dir = inventories.copy_example("lab", name="new")
    cluster_file = new_dir / "group_vars" / "all" / "cluster.yml"
    cluster_file.write_text(gpu04_to_kubernetes(cluster_file.read_text()))
    result = make_plan(old, load_cluster(new_dir))
    quota_steps = [s for s in result.steps if s.action in (Action.LOWER_QUOTAS, Action.RAISE_QUOTAS)]
    assert [(str(s.scheduler), s.action) for s in quota_steps] == [
        ("slurm", Action.LOWER_QUOTAS),  # 16/24, 16/32 -> 12/24, 12/24: the new numbers, set once
        ("kubernetes", Action.RAISE_QUOTAS),  # nothing there to lower; raised once it holds gpu04
    ]
    for step in result.steps:
        assert step.changes or step.files or step.action in (Action.STOP_PLACING, Action.WAIT_EMPTY), step
    installed = [f for s in result.steps for f in s.files]
    assert sorted(installed) == sorted(f.path for f in result.files)  # each file installed once


def test_renaming_a_tenant_is_a_change_per_scheduler(inventories: InventoryFactory) -> None:
    result = pair(inventories, cluster_edits={"- name: research\n": "- name: science\n"}, example="superpod")
    assert {c.path: c.update for c in result.changes} == {
        "tenants.research.kubernetes": Update.KUBERNETES,
        "tenants.research.slurm": Update.ACCOUNTS,
        "tenants.science.kubernetes": Update.KUBERNETES,
        "tenants.science.slurm": Update.ACCOUNTS,
    }
    removed = next(c for c in result.changes if c.path == "tenants.research.slurm")
    assert removed.new is None and removed.old["limit"] == 640 and removed.old["users"] == ["alice", "bob"]
    assert {(str(s.scheduler), s.update) for s in result.steps} == {
        ("kubernetes", Update.KUBERNETES),
        ("slurm", Update.ACCOUNTS),
        ("cluster", Update.SERVICE),  # the monitoring targets' tenant labels
    }
    assert (
        "kubernetes/namespaces.yaml" in next(s for s in result.steps if s.update == Update.KUBERNETES).files
    )


def test_a_kubernetes_node_replaced_is_a_kubernetes_change_with_its_steps(
    inventories: InventoryFactory,
) -> None:
    result = pair(
        inventories, hosts_edits={"dgx[097:128]:": "dgx[097:127]:\n            dgx129:"}, example="superpod"
    )
    assert by_path(result)["hosts.dgx128"][2] == Update.KUBERNETES
    assert by_path(result)["hosts.dgx129"][2] == Update.KUBERNETES
    assert result.overall == Update.KUBERNETES
    texts = [s.text for s in result.steps]
    assert texts[0] == "kubectl cordon dgx128" and texts[1].startswith("kubectl drain dgx128")
    # dgx129 gets its node type's GPU driver stack (nodes/hosts.yaml names it now).
    assert texts[2].startswith(
        "playbooks/gpu_nodes.yml (gpu_driver): the node software of nodes/ on the hosts new"
    )
    # The node leaves Kubernetes in steps of their own: kubelet stopped and disabled, node deleted.
    assert [(s.action, s.text.split(" (")[0]) for s in result.steps[3:5]] == [
        (Action.STOP_DAEMON, "ssh dgx128 systemctl disable --now kubelet"),
        (Action.DELETE, "kubectl delete node dgx128"),
    ]
    assert "join dgx129 to the Kubernetes cluster first" in texts[5]
    # The last step reloads Prometheus with dgx129's node-exporter target in place of dgx128's.
    *others, monitoring = result.steps
    assert all(s.update == Update.KUBERNETES for i, s in enumerate(others) if i != 2)
    assert "monitoring/prometheus.yml" in monitoring.files and monitoring.update == Update.SERVICE


def test_a_node_type_only_kubernetes_runs_is_a_kubernetes_change(inventories: InventoryFactory) -> None:
    own_type = {
        "{group: dgx_su4, type: dgx-h100, owner: kubernetes}": "{group: dgx_su4, type: dgx-k8s, owner: kubernetes}",
        "  node_types:\n": "  node_types:\n    dgx-k8s: {sockets: 2, cores_per_socket: 56, memory_mb: 2000000,\n"
        '              gpus: {model: h100, count: 8, devices: "/dev/nvidia[0-7]"}}\n',
    }
    old = load_cluster(edited(inventories, own_type, example="superpod", name="old"))
    smaller = {**own_type, "memory_mb: 2000000,\n": "memory_mb: 1000000,\n"}
    result = make_plan(old, load_cluster(edited(inventories, smaller, example="superpod", name="new")))
    assert by_path(result) == {"cluster.node_types.dgx-k8s.memory_mb": (2000000, 1000000, Update.KUBERNETES)}
    assert all(f.path.startswith("kubernetes/") for f in result.files) and result.files


def test_json_values_are_the_models(inventories: InventoryFactory) -> None:
    result = pair(
        inventories,
        cluster_edits={"gpu_limit: 24": "gpu_limit: 28"},
        hosts_edits={"gpu[01:02]": "gpu[01:03]", "gpu[03:04]": "gpu04"},
    )
    doc = result.as_dict()
    jsonschema.validate(doc, plan_schema())
    changes = {c["path"]: c for c in doc["changes"]}
    assert changes["switches.leaf1.nodes"]["old"] == ["gpu01", "gpu02"]
    assert changes["tenants.research.slurm.limit"] == {
        "path": "tenants.research.slurm.limit",
        "old": 24,
        "new": 28,
        "update": "accounts",
        "needs": "accounts",
        "files": ["slurm/accounts.yaml"],
        "hosts": [],
        "procedure": None,
    }
    assert doc["ends_jobs"] == []
    assert doc["overall"] == {"update": "reconfigure", "means": doc["overall"]["means"]}


def test_cli_plan(inventories: InventoryFactory) -> None:
    new = edited(inventories, {"gpu_limit: 24": "gpu_limit: 28"})
    proc = run_cli("plan", "inventories/lab", str(new))
    assert proc.returncode == 0
    assert "tenants.research.slurm.limit: 24 -> 28  [accounts]" in proc.stdout
    assert "  slurm/accounts.yaml (changed) [accounts]" in proc.stdout
    assert "    -  gpu_limit: 24" in proc.stdout and "    +  gpu_limit: 28" in proc.stdout
    assert "overall: accounts" in proc.stdout
    doc = json.loads(run_cli("plan", "--json", "inventories/lab", str(new)).stdout)
    jsonschema.validate(doc, plan_schema())
    assert doc["release"] == "26.05"


def test_the_policy_texts_follow_the_release_facts() -> None:
    first = min((r for r in RELEASES.values() if r.reconfigure_node_changes), key=lambda r: r.version)
    assert f"scontrol reconfigure from Slurm {first.name} on" in Update.NODE_LIST.value
    assert "22.05" not in Update.RESTART.value


def test_a_node_type_no_host_has_is_no_change(inventories: InventoryFactory) -> None:
    spare = {
        "  node_types:\n": "  node_types:\n    spare: {sockets: 1, cores_per_socket: 4, memory_mb: 8192}\n"
    }
    assert pair(inventories, cluster_edits=spare).changes == []
