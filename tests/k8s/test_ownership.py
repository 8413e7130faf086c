"""Every GPU node has exactly one scheduler (issue 9), read from the RENDERED FILES of every example
inventory with a `kubernetes:` section, not from the model:

- a host is named either in slurm/slurm.conf (bare-metal slurmd) or in kubernetes/nodes.yaml
  (kubelet), never both, and every inventory host is in one of them;
- a node labelled slurm-on-kubernetes is selected by exactly one Slurm NodeSet, by no Kueue flavor,
  is tainted for NodeSet pods only and sits in a KAI node pool no scheduler serves;
- a node labelled kubernetes is selected by no NodeSet and by the Kueue flavor of its node type;
- the GPU quotas of Kueue (ClusterQueues and Cohorts) fit the GPUs of the nodes their flavors select,
  KAI's fit the GPUs of the nodes KAI sees, and each NodeSet's replicas equal its nodes.

The model supplies only what no rendered file says: how many GPUs a node type has.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from gpucluster.hostlists import expand
from gpucluster.k8s.names import (
    KAI_NODE_POOL_LABEL,
    KAI_UNSERVED_POOL,
    NODE_TYPE_LABEL,
    NODESET_LABEL,
    OWNER_LABEL,
    OWNER_TAINT_EFFECT,
    OWNER_TAINT_KEY,
)
from gpucluster.layers import load_cluster
from gpucluster.model.cluster import Cluster
from gpucluster.rendering import render_files
from tests.k8s.conftest import (
    REPO,
    cluster_of,
    object_paths,
    rendered,
    variant_inventory,
    without_slurm_pod_quotas,
)
from tests.k8s.crd import catalogue

Obj = dict[str, Any]
GPU = "nvidia.com/gpu"
KUBERNETES = "kubernetes"
SLURM_PODS = "slurm-on-kubernetes"
KAI_VALUES = "kai-scheduler/v0.17.0/charts/kai-scheduler/values.yaml"
KAI_GROUP = "scheduling.run.ai"
VOLCANO_GROUP = "scheduling.volcano.sh"


@dataclass
class NodeSet:
    name: str
    selector: dict[str, str]
    replicas: int
    tolerations: list[Obj]


@dataclass
class Rendered:
    """What the rendered files say about ownership."""

    slurm_hosts: set[str]
    nodes: dict[str, Obj]
    nodesets: list[NodeSet]
    flavors: dict[str, dict[str, str]]
    values: dict[str, Obj] = field(default_factory=dict)
    objects: list[Obj] = field(default_factory=list)

    def kinds(self, kind: str, group: str | None = None) -> list[Obj]:
        """Objects of a kind (of an API group: KAI and Volcano both have a Queue)."""
        return [
            o
            for o in self.objects
            if o["kind"] == kind and (group is None or o["apiVersion"].startswith(f"{group}/"))
        ]


def _docs(text: str) -> list[Obj]:
    return [d for d in yaml.safe_load_all(text) if d is not None]


def _slurm_conf_hosts(text: str) -> set[str]:
    hosts: set[str] = set()
    for line in text.splitlines():
        match = re.match(r"^NodeName=(\S+)", line)
        if match and match.group(1) != "DEFAULT":
            hosts.update(expand(match.group(1)))
    return hosts


def _selector_of_terms(affinity: Obj) -> dict[str, str]:
    (term,) = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    selector = {}
    for expression in term["matchExpressions"]:
        assert expression["operator"] == "In" and len(expression["values"]) == 1, expression
        selector[expression["key"]] = expression["values"][0]
    return selector


def _nodesets(values: dict[str, Obj]) -> list[NodeSet]:
    """Slinky's NodeSets (`slurm` chart) or Soperator's (`nodesets` chart, with the node filters
    of `slurm-cluster`, which must select the same nodes)."""
    found = []
    for name, entry in (values.get("slurm", {}).get("nodesets") or {}).items():
        pod = entry.get("podSpec", {})
        found.append(
            NodeSet(name, pod.get("nodeSelector", {}), entry["replicas"], pod.get("tolerations", []))
        )
    filters = {f["name"]: f for f in values.get("slurm-cluster", {}).get("k8sNodeFilters", [])}
    for entry in values.get("nodesets", {}).get("nodesets", []):
        nodeset = NodeSet(
            entry["name"], entry["nodeSelector"], entry["replicas"], entry.get("tolerations", [])
        )
        node_filter = filters[entry["name"]]
        assert _selector_of_terms(node_filter["affinity"]) == nodeset.selector
        assert node_filter["tolerations"] == nodeset.tolerations
        found.append(nodeset)
    return found


def read(files: dict[str, str]) -> Rendered:
    slurm_conf = files.get("slurm/slurm.conf")
    releases = yaml.safe_load(files["helm/releases.yaml"])["releases"]
    values = {r["name"]: yaml.safe_load(files[r["values_file"]]) or {} for r in releases}
    objects = [doc for path in sorted(object_paths(files)) for doc in _docs(files[path])]
    nodes = {n["metadata"]["name"]: n for n in objects if n["kind"] == "Node"}
    flavors = {
        f["metadata"]["name"]: f["spec"]["nodeLabels"] for f in objects if f["kind"] == "ResourceFlavor"
    }
    return Rendered(
        slurm_hosts=_slurm_conf_hosts(slurm_conf) if slurm_conf else set(),
        nodes=nodes,
        nodesets=_nodesets(values),
        flavors=flavors,
        values=values,
        objects=objects,
    )


def labels_of(node: Obj) -> dict[str, str]:
    labels: dict[str, str] = node["metadata"].get("labels", {})
    return labels


def selects(selector: dict[str, str], node: Obj) -> bool:
    return bool(selector) and selector.items() <= labels_of(node).items()


def tolerates(tolerations: list[Obj], taint: Obj) -> bool:
    """Kubernetes' rule: same key (or an empty key with Exists), value equal unless Exists, effect
    equal unless the toleration leaves it empty."""
    for toleration in tolerations:
        operator = toleration.get("operator", "Equal")
        key_ok = toleration.get("key", "") == taint["key"] or (
            not toleration.get("key") and operator == "Exists"
        )
        value_ok = operator == "Exists" or toleration.get("value", "") == taint.get("value", "")
        effect_ok = not toleration.get("effect") or toleration["effect"] == taint["effect"]
        if key_ok and value_ok and effect_ok:
            return True
    return False


OWNER_TAINT = {"key": OWNER_TAINT_KEY, "value": SLURM_PODS, "effect": OWNER_TAINT_EFFECT}


def gpus_of(cluster: Cluster, node: Obj) -> int:
    gpus = cluster.spec.node_types[labels_of(node)[NODE_TYPE_LABEL]].gpus
    return gpus.count if gpus else 0


def advertised(cluster: Cluster, files: Rendered, node: Obj) -> dict[str, int]:
    """Extended resource -> how many the node advertises, as the RENDERED GPU Operator values make
    its device plugin do: MIG instances of the mig-parted configuration its nvidia.com/mig.config
    label names (mixed strategy: nvidia.com/mig-<profile>; single: nvidia.com/gpu), else its GPUs
    times the time-slicing replicas of the device plugin configuration its label names."""
    operator = files.values.get("gpu-operator", {})
    labels = labels_of(node)
    count = gpus_of(cluster, node)
    mig_config = labels.get("nvidia.com/mig.config")
    if mig_config:
        text = operator["migManager"]["config"]["data"]["config.yaml"]
        entries = yaml.safe_load(text)["mig-configs"][mig_config]
        out: dict[str, int] = {}
        strategy = operator["mig"]["strategy"]
        for entry in entries:
            gpus = count if entry["devices"] == "all" else len(entry["devices"])
            for profile, number in (entry.get("mig-devices") or {}).items():
                resource = GPU if strategy == "single" else f"nvidia.com/mig-{profile}"
                out[resource] = out.get(resource, 0) + gpus * number
        return out
    replicas = 1
    plugin_config = labels.get("nvidia.com/device-plugin.config")
    if plugin_config:
        config = yaml.safe_load(operator["devicePlugin"]["config"]["data"][plugin_config])
        (resource,) = config["sharing"]["timeSlicing"]["resources"]
        assert resource["name"] == GPU
        replicas = resource["replicas"]
    return {GPU: count * replicas}


# --- the checks, as functions returning problems (so that the negative tests can prove them) ------


def ownership_problems(cluster: Cluster, files: Rendered) -> list[str]:
    problems: list[str] = []
    twice = files.slurm_hosts & set(files.nodes)
    if twice:
        problems.append(f"in slurm.conf and in nodes.yaml: {sorted(twice)}")
    missing = set(cluster.hosts) - files.slurm_hosts - set(files.nodes)
    if missing:
        problems.append(f"hosts with no scheduler: {sorted(missing)}")
    k8s = cluster.spec.kubernetes
    assert k8s is not None
    for name, node in files.nodes.items():
        owner = labels_of(node).get(OWNER_LABEL)
        nodesets = [n.name for n in files.nodesets if selects(n.selector, node)]
        flavors = [f for f, labels in files.flavors.items() if selects(labels, node)]
        node_type_flavors = [
            f
            for f, labels in files.flavors.items()
            if labels.get(NODE_TYPE_LABEL) == labels_of(node)[NODE_TYPE_LABEL]
        ]
        tainted = [t for t in node.get("spec", {}).get("taints", []) if t["key"] == OWNER_TAINT_KEY]
        pool = labels_of(node).get(KAI_NODE_POOL_LABEL)
        if owner == SLURM_PODS:
            if len(nodesets) != 1:
                problems.append(f"{name}: slurm-on-kubernetes node selected by NodeSets {nodesets}")
            if flavors:
                problems.append(f"{name}: slurm-on-kubernetes node selected by Kueue flavors {flavors}")
            if tainted != [OWNER_TAINT]:
                problems.append(f"{name}: slurm-on-kubernetes node without the owner taint: {tainted}")
            if k8s.kai.enabled and pool != KAI_UNSERVED_POOL:
                problems.append(f"{name}: slurm-on-kubernetes node in KAI node pool {pool!r}")
        elif owner == KUBERNETES:
            if nodesets:
                problems.append(f"{name}: kubernetes node selected by NodeSets {nodesets}")
            if k8s.kueue.enabled and node_type_flavors and len(flavors) != 1:
                problems.append(f"{name}: kubernetes node selected by Kueue flavors {flavors}")
            if tainted:
                problems.append(f"{name}: kubernetes node carries the owner taint")
            if pool is not None:
                problems.append(f"{name}: kubernetes node in KAI node pool {pool!r}")
        else:
            problems.append(f"{name}: owner label {owner!r}")
    return problems


def nodeset_problems(files: Rendered) -> list[str]:
    problems = []
    for nodeset in files.nodesets:
        selected = [n for n in files.nodes.values() if selects(nodeset.selector, n)]
        if nodeset.replicas != len(selected):
            problems.append(f"NodeSet {nodeset.name}: {nodeset.replicas} replicas for {len(selected)} nodes")
        if nodeset.selector.get(OWNER_LABEL) != SLURM_PODS:
            problems.append(f"NodeSet {nodeset.name} does not select on the owner label: {nodeset.selector}")
        for node in selected:
            for taint in node.get("spec", {}).get("taints", []):
                if not tolerates(nodeset.tolerations, taint):
                    problems.append(
                        f"NodeSet {nodeset.name} does not tolerate {taint} of {node['metadata']['name']}"
                    )
    return problems


def _gpu_quota(resource_groups: list[Obj], flavor: str, field_name: str, resource: str = GPU) -> int:
    total = 0
    for group in resource_groups:
        for entry in group["flavors"]:
            if entry["name"] == flavor:
                total += sum(int(r.get(field_name, 0)) for r in entry["resources"] if r["name"] == resource)
    return total


def _gpu_resources(holders: list[Obj]) -> set[str]:
    """The GPU resources the holders' resource groups cover (nvidia.com/gpu, nvidia.com/mig-*)."""
    return {
        name
        for h in holders
        for g in h["spec"].get("resourceGroups", [])
        for name in g["coveredResources"]
        if name.startswith("nvidia.com/")
    } | {GPU}


def kueue_problems(cluster: Cluster, files: Rendered) -> list[str]:
    """Per flavor and GPU resource: nominal quotas of every ClusterQueue and Cohort <= what the nodes
    it selects advertise (GPUs, time-slicing replicas, MIG instances)."""
    problems = []
    holders = files.kinds("ClusterQueue") + files.kinds("Cohort")
    for flavor, labels in files.flavors.items():
        selected = [n for n in files.nodes.values() if selects(labels, n)]
        for resource in sorted(_gpu_resources(holders)):
            capacity = sum(advertised(cluster, files, n).get(resource, 0) for n in selected)
            nominal = sum(
                _gpu_quota(h["spec"].get("resourceGroups", []), flavor, "nominalQuota", resource)
                for h in holders
            )
            if nominal > capacity:
                problems.append(
                    f"flavor {flavor}: nominal {resource} quotas {nominal} > {capacity} of its nodes"
                )
            for holder in holders:
                groups = holder["spec"].get("resourceGroups", [])
                ceiling = _gpu_quota(groups, flavor, "nominalQuota", resource) + _gpu_quota(
                    groups, flavor, "borrowingLimit", resource
                )
                if ceiling > capacity:
                    problems.append(
                        f"{holder['metadata']['name']} may hold {ceiling} {resource} of flavor {flavor} ({capacity})"
                    )
    return problems


def kai_problems(cluster: Cluster, files: Rendered) -> list[str]:
    """The nodes KAI's default shard sees are those without the node-pool label; its root queue
    holds their GPUs, every parent's children fit it, no limit exceeds the root."""
    problems = []
    queues = {q["metadata"]["name"]: q["spec"] for q in files.kinds("Queue", KAI_GROUP)}
    if not queues:
        return problems
    seen = sum(gpus_of(cluster, n) for n in files.nodes.values() if KAI_NODE_POOL_LABEL not in labels_of(n))
    roots = [name for name, spec in queues.items() if "parentQueue" not in spec]
    assert len(roots) == 1, roots
    root = queues[roots[0]]["resources"]["gpu"]
    if root["quota"] > seen or root["limit"] > seen:
        problems.append(f"root queue {root} > {seen} GPUs KAI sees")
    for name, spec in queues.items():
        gpu = spec["resources"]["gpu"]
        children = [s["resources"]["gpu"]["quota"] for s in queues.values() if s.get("parentQueue") == name]
        if sum(children) > gpu["quota"]:
            problems.append(f"queue {name}: children's quotas {sum(children)} > its {gpu['quota']}")
        if gpu["limit"] > root["quota"] or gpu["limit"] < gpu["quota"]:
            problems.append(
                f"queue {name}: limit {gpu['limit']} (quota {gpu['quota']}, root {root['quota']})"
            )
    return problems


def volcano_problems(cluster: Cluster, files: Rendered) -> list[str]:
    """Volcano's queues: gpucluster's parent queue holds no more GPUs than the Kubernetes-owned nodes
    (the only ones Volcano's pods may use: the admission resource group selects the owner label), every
    queue's children fit it (deserved summed, capability each), no limit passes the parent queue, and
    Volcano's default queue holds no GPUs. Every Kubernetes-owned node is in exactly one HyperNode of
    tier 1 (by the labels nodes.yaml gives it), and no other node is."""
    problems: list[str] = []
    values = files.values.get("volcano")
    if values is None:
        return problems
    queues = {q["metadata"]["name"]: q["spec"] for q in files.kinds("Queue", VOLCANO_GROUP)}
    admission = yaml.safe_load(values["custom"].get("admission_config_override") or "{}")
    for group in admission.get("resourceGroups", []):
        if group["labels"] != {OWNER_LABEL: KUBERNETES}:
            problems.append(f"resource group {group['resourceGroup']} places pods on {group['labels']}")
    owned = [n for n in files.nodes.values() if labels_of(n)[OWNER_LABEL] == KUBERNETES]
    seen = sum(gpus_of(cluster, n) for n in owned)
    if not queues:
        return problems
    default = queues["default"]["capability"]
    gpu_keys = [k for k in default if k == GPU or k.startswith("deviceclass/")]
    if not gpu_keys or any(int(default[k]) for k in gpu_keys):
        problems.append(f"Volcano's default queue may hold GPUs: {default}")
    tops = [name for name, spec in queues.items() if spec["parent"] == "root" and name != "default"]
    assert len(tops) == 1, tops

    def gpus(resources: Obj) -> int:
        return sum(int(v) for k, v in resources.items() if k == GPU or k.startswith("deviceclass/"))

    top = queues[tops[0]]
    if gpus(top["deserved"]) > seen or gpus(top["capability"]) > seen:
        problems.append(
            f"parent queue holds {gpus(top['capability'])} GPUs > {seen} of the Kubernetes-owned nodes"
        )
    for name, spec in queues.items():
        children = [s for s in queues.values() if s.get("parent") == name]
        for key in spec.get("deserved", {}):
            summed = sum(_volcano_amount(c["deserved"].get(key, 0)) for c in children)
            if summed > _volcano_amount(spec["deserved"][key]):
                problems.append(
                    f"queue {name}: children's deserved {key} {summed} > its {spec['deserved'][key]}"
                )
        for child in children:
            for key, value in child.get("capability", {}).items():
                if key in spec.get("capability", {}) and _volcano_amount(value) > _volcano_amount(
                    spec["capability"][key]
                ):
                    problems.append(
                        f"queue {name}: a child's capability {key} {value} > its {spec['capability'][key]}"
                    )
        if gpus(spec.get("capability", {})) > gpus(top["capability"]):
            problems.append(f"queue {name}: capability over the parent queue's")
    tier1 = [h for h in files.kinds("HyperNode") if h["spec"]["tier"] == 1]
    for node in files.nodes.values():
        holders = [
            h["metadata"]["name"]
            for h in tier1
            for m in h["spec"]["members"]
            if selects(m["selector"].get("labelMatch", {}).get("matchLabels", {}), node)
            or m["selector"].get("exactMatch", {}).get("name") == node["metadata"]["name"]
        ]
        wanted = 1 if labels_of(node)[OWNER_LABEL] == KUBERNETES and tier1 else 0
        if len(holders) != wanted:
            problems.append(f"{node['metadata']['name']}: in tier-1 HyperNodes {holders}")
    return problems


def _volcano_amount(value: Any) -> int:
    return int(str(value).removesuffix("m").removesuffix("Mi"))


# --- the example inventories -------------------------------------------------------------------


def test_examples_have_every_owner() -> None:
    """The checks below see both Kubernetes-side owners and bare-metal Slurm beside Kubernetes."""
    owners = {owner for name in ("superpod", "nvl72", "gke-prod") for owner in cluster_of(name).owners}
    assert {o.value for o in owners} == {"slurm", KUBERNETES, SLURM_PODS}


def test_no_host_is_owned_twice(inventory: str) -> None:
    assert ownership_problems(cluster_of(inventory), read(rendered(inventory))) == []


def test_slurm_pod_replicas_match_their_nodes(inventory: str) -> None:
    assert nodeset_problems(read(rendered(inventory))) == []


def test_kueue_quotas_fit_the_nodes_of_their_flavors(inventory: str) -> None:
    assert kueue_problems(cluster_of(inventory), read(rendered(inventory))) == []


def test_kai_quotas_fit_the_nodes_kai_sees(inventory: str) -> None:
    assert kai_problems(cluster_of(inventory), read(rendered(inventory))) == []


def test_volcano_quotas_and_hypernodes_fit_the_kubernetes_owned_nodes(inventory: str) -> None:
    assert volcano_problems(cluster_of(inventory), read(rendered(inventory))) == []


def test_bare_metal_slurm_hosts_are_no_kubernetes_nodes() -> None:
    files = read(rendered("superpod"))
    assert len(files.slurm_hosts) == 96 and len(files.nodes) == 32
    assert {labels_of(n)[OWNER_LABEL] for n in files.nodes.values()} == {KUBERNETES}
    assert files.flavors == {"dgx-h100": {NODE_TYPE_LABEL: "dgx-h100", OWNER_LABEL: KUBERNETES}}


def test_slinky_declares_gpus_for_pod_named_nodes(inventory: str) -> None:
    """NodeSet pods are Slurm nodes named <nodeset>-<n>: gres.conf names no host (AutoDetect) and
    each NodeSet declares its GPUs; topology.yaml names no node (pods join it through the node
    annotation, test_slinky.py) and the partitions are these NodeSets'."""
    files = read(rendered(inventory))
    slurm = files.values.get("slurm")
    if slurm is None:
        return
    cluster = cluster_of(inventory)
    gres = slurm["configFiles"].get("gres.conf", "")
    assert "NodeName" not in gres
    nodesets = slurm["nodesets"]
    for entry in nodesets.values():
        node = next(n for n in files.nodes.values() if selects(entry["podSpec"]["nodeSelector"], n))
        gpus = cluster.spec.node_types[labels_of(node)[NODE_TYPE_LABEL]].gpus
        if gpus:
            assert "AutoDetect=nvidia" in gres.splitlines()
            assert entry["extraConfMap"]["Gres"] == [f"gpu:{gpus.model}:{gpus.count}"]
    topology = slurm["configFiles"].get("topology.yaml")
    if topology:
        assert not [h for entry in yaml.safe_load(topology) for h in _topology_hosts(entry)]
    for partition in slurm["partitions"].values():
        assert partition["nodesets"] and set(partition["nodesets"]) <= set(nodesets)
    bare_metal = re.findall(r"^PartitionName=(\S+)", rendered(inventory).get("slurm/slurm.conf", ""), re.M)
    assert not set(bare_metal) & set(slurm["partitions"])


def _topology_hosts(entry: Obj) -> list[str]:
    hosts = []
    for switch in entry.get("tree", {}).get("switches", []):
        hosts += expand(switch["nodes"]) if "nodes" in switch else []
    for block in entry.get("block", {}).get("blocks", []):
        hosts += expand(block["nodes"]) if "nodes" in block else []
    return hosts


def test_node_daemons_run_on_slurm_pod_nodes(inventory: str) -> None:
    """The GPU Operator's, NFD's, the DRA driver's and the Network Operator's node daemons tolerate
    the owner taint wherever some node carries it (their charts' keys; the NicClusterPolicy field)."""
    files = read(rendered(inventory))
    if not any(labels_of(n)[OWNER_LABEL] == SLURM_PODS for n in files.nodes.values()):
        return
    daemons: list[list[Obj]] = []
    if "gpu-operator" in files.values:
        values = files.values["gpu-operator"]
        daemons.append(values["daemonsets"]["tolerations"])
        if values["nfd"]["enabled"]:
            daemons.append(values["node-feature-discovery"]["worker"]["tolerations"])
    if "dra-driver-nvidia-gpu" in files.values:
        daemons.append(files.values["dra-driver-nvidia-gpu"]["kubeletPlugin"]["tolerations"])
    daemons += [p["spec"]["tolerations"] for p in files.kinds("NicClusterPolicy")]
    assert daemons
    for tolerations in daemons:
        assert tolerates(tolerations, OWNER_TAINT)
        assert tolerates(tolerations, {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"})


def test_kai_pool_label_is_one_no_shard_serves(inventory: str) -> None:
    """KAI reads the node-pool label key the nodes carry, and its only shard (the chart's default,
    which gpucluster keeps) serves the nodes without that label."""
    files = read(rendered(inventory))
    values = files.values.get("kai-scheduler")
    if values is None:
        return
    assert values["global"]["nodePoolLabelKey"] == KAI_NODE_POOL_LABEL
    upstream = yaml.safe_load(catalogue(KAI_VALUES).read_text())
    assert "nodePoolLabelKey" in upstream["global"]
    assert upstream["defaultShard"] == {"enabled": True}  # no partitionLabelValue: nodes without the label
    assert not files.kinds("SchedulingShard")
    pools = {labels_of(n).get(KAI_NODE_POOL_LABEL) for n in files.nodes.values()} - {None}
    assert pools <= {KAI_UNSERVED_POOL}


def test_the_role_keeps_other_taints_and_cleans_nodes_handed_back_to_kubernetes() -> None:
    """Node.spec.taints is an atomic list (Kubernetes 1.34 OpenAPI): a patch carrying it replaces every
    taint of the node. So the node patch is a strategic merge of metadata only, and the rendered taints
    are added one by one (k8s_taint, which keeps the others); a node handed back to Kubernetes (owner
    label rewritten, NodeSet label left) loses the owner taint, its NodeSet label and KAI's unserved
    node pool, which a patch can only add."""
    schema = json.loads(
        (
            Path(kubernetes_validate.__file__).parent
            / "kubernetes-json-schema/v1.34.0-local-strict/nodespec-v1.json"
        ).read_text()
    )
    assert schema["properties"]["taints"]["x-kubernetes-list-type"] == "atomic"
    tasks = yaml.safe_load((REPO / "roles/gpu_workloads/tasks/apply.yml").read_text())
    patch = tasks[0]["kubernetes.core.k8s"]
    assert patch["merge_type"] == "strategic-merge" and "src" not in patch
    definition = tasks[0]["vars"]["gpu_workloads_node_patches"]
    assert "map(attribute='metadata')" in definition and "spec" not in definition
    taint = tasks[1]["kubernetes.core.k8s_taint"]
    assert (taint["state"], taint["replace"], taint["taints"]) == (
        "present",
        True,
        "{{ gpu_workloads_node.spec.taints }}",
    )
    find = next(t for t in tasks if "kubernetes.core.k8s_info" in t)
    assert find["kubernetes.core.k8s_info"]["label_selectors"] == [
        f"{OWNER_LABEL}={KUBERNETES}",
        NODESET_LABEL,
    ]
    lift = next(t for t in tasks if t.get("kubernetes.core.k8s_taint", {}).get("state") == "absent")
    assert lift["kubernetes.core.k8s_taint"]["state"] == "absent"
    assert lift["kubernetes.core.k8s_taint"]["taints"] == [
        {"key": OWNER_TAINT_KEY, "effect": OWNER_TAINT_EFFECT}
    ]
    drop = next(t for t in tasks if isinstance(t.get("kubernetes.core.k8s", {}).get("definition"), dict))
    labels = drop["kubernetes.core.k8s"]["definition"]["metadata"]["labels"]
    assert all(text in labels for text in (NODESET_LABEL, KAI_NODE_POOL_LABEL, f"'{KAI_UNSERVED_POOL}'"))


# --- Soperator instead of Slinky: the same guarantees --------------------------------------------


def _variant(tmp_path: Path, base: str, edit: Callable[[Obj], None]) -> tuple[Cluster, Rendered]:
    cluster = load_cluster(variant_inventory(tmp_path, base, edit))
    return cluster, read(render_files(cluster, only=["slurm", "kubernetes", "helm"]))


def test_soperator_selects_only_slurm_pod_nodes(tmp_path: Path) -> None:
    def soperator(cluster: Obj) -> None:
        cluster["kubernetes"]["slurm"] = {"operator": "soperator"}
        without_slurm_pod_quotas(cluster)

    cluster, files = _variant(tmp_path, "gke-prod", soperator)
    assert [(n.name, n.replicas) for n in files.nodesets] == [("a3-mega", 16)]
    assert ownership_problems(cluster, files) == []
    assert nodeset_problems(files) == []
    partitions = files.values["slurm-cluster"]["partitionConfiguration"]["partitions"]
    assert {p["name"]: p["nodeSetRefs"] for p in partitions} == {"train": ["a3-mega"], "dev": ["a3-mega"]}


# --- the checks catch what they are meant to ----------------------------------------------------


def _stale_nodeset_label(files: Rendered) -> None:
    """A Kubernetes-owned node that still carries the NodeSet label of its Slurm days."""
    labels_of(files.nodes["gke-prod-a3mega-017"])[NODESET_LABEL] = files.nodesets[0].name


def _gke() -> tuple[Cluster, Rendered]:
    """gke-prod's model and a fresh copy of its rendered files, to mutate."""
    return cluster_of("gke-prod"), read(rendered("gke-prod"))


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda f: labels_of(f.nodes["gke-prod-a3mega-017"]).update({OWNER_LABEL: SLURM_PODS}),
            "by NodeSets []",
        ),
        # Without the owner label in its selector, a NodeSet would take a node with a stale NodeSet label.
        (
            lambda f: (f.nodesets[0].selector.pop(OWNER_LABEL), _stale_nodeset_label(f)),
            "kubernetes node selected by NodeSets",
        ),
        (
            lambda f: f.flavors["a3-mega"].pop(OWNER_LABEL),
            "slurm-on-kubernetes node selected by Kueue flavors",
        ),
        (lambda f: f.nodes["gke-prod-a3mega-001"].pop("spec"), "without the owner taint"),
        (lambda f: f.slurm_hosts.add("gke-prod-a3mega-001"), "in slurm.conf and in nodes.yaml"),
        (lambda f: f.nodes.pop("gke-prod-a3mega-020"), "hosts with no scheduler"),
    ],
)
def test_ownership_check_catches(mutate: Callable[[Rendered], object], expected: str) -> None:
    cluster, files = _gke()
    mutate(files)
    problems = ownership_problems(cluster, files)
    assert any(expected in p for p in problems), problems


def test_a_stale_nodeset_label_selects_nothing() -> None:
    """A node handed back to Kubernetes keeps labels nobody removes (merge patches); its owner label
    is rewritten, and every NodeSet selects on it."""
    cluster, files = _gke()
    _stale_nodeset_label(files)
    assert ownership_problems(cluster, files) == []
    assert nodeset_problems(files) == []


def test_nodeset_check_catches_wrong_replicas_and_tolerations() -> None:
    files = read(rendered("gke-prod"))
    files.nodesets[0].replicas += 1
    files.nodesets[0].tolerations = [t for t in files.nodesets[0].tolerations if t["key"] != OWNER_TAINT_KEY]
    problems = nodeset_problems(files)
    assert any("17 replicas for 16 nodes" in p for p in problems)
    assert any("does not tolerate" in p for p in problems)


def test_quota_checks_catch_overcommitment() -> None:
    cluster, files = _gke()
    queue = files.kinds("ClusterQueue")[0]
    gpu = next(r for r in queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"] if r["name"] == GPU)
    gpu["nominalQuota"] = 1000
    assert any("nominal nvidia.com/gpu quotas" in p for p in kueue_problems(cluster, files))
    cluster, files = cluster_of("nvl72"), read(rendered("nvl72"))
    # KAI sees only the 72 Kubernetes-owned trays (288 GPUs): a root queue over the fleet is refused.
    root = next(q for q in files.kinds("Queue", KAI_GROUP) if "parentQueue" not in q["spec"])
    root["spec"]["resources"]["gpu"]["quota"] = 576
    assert any("GPUs KAI sees" in p for p in kai_problems(cluster, files))
    cluster, files = cluster_of("superpod"), read(rendered("superpod"))
    # Volcano: the parent queue holds the 32 Kubernetes-owned DGX (256 GPUs), a tenant fits under it.
    queues = {q["metadata"]["name"]: q for q in files.kinds("Queue", VOLCANO_GROUP)}
    queues["research"]["spec"]["deserved"][GPU] = 250
    queues["default"]["spec"]["capability"][GPU] = 8
    queues["gpucluster"]["spec"]["capability"][GPU] = 1024
    problems = volcano_problems(cluster, files)
    assert any("children's deserved nvidia.com/gpu 442" in p for p in problems), problems
    assert any("default queue may hold GPUs" in p for p in problems)
    assert any("1024 GPUs > 256" in p for p in problems)
    leaf = next(h for h in files.kinds("HyperNode") if h["spec"]["tier"] == 1)
    leaf["spec"]["members"][0]["selector"]["labelMatch"]["matchLabels"][OWNER_LABEL] = SLURM_PODS
    assert any("dgx097: in tier-1 HyperNodes []" in p for p in volcano_problems(cluster, files))


def test_quota_check_counts_what_shared_gpus_advertise() -> None:
    """Kueue's quotas in shared units fit what the rendered GPU Operator values make each node
    advertise: with fewer time-slicing replicas, or a smaller MIG layout, they no longer do."""
    cluster, files = cluster_of("shared-gpus"), read(rendered("shared-gpus"))
    assert kueue_problems(cluster, files) == []
    operator = files.values["gpu-operator"]
    plugin = operator["devicePlugin"]["config"]["data"]
    plugin["gpucluster-l40s"] = plugin["gpucluster-l40s"].replace("replicas: 4", "replicas: 1")
    mig = operator["migManager"]["config"]
    mig["data"]["config.yaml"] = mig["data"]["config.yaml"].replace("1g.10gb: 7", "1g.10gb: 1")
    problems = kueue_problems(cluster, files)
    assert any("nominal nvidia.com/gpu quotas" in p and "flavor l40s" in p for p in problems), problems
    assert any("nvidia.com/mig-1g.10gb" in p and "flavor h100-mig" in p for p in problems), problems
