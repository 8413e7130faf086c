"""Slurm on Kubernetes with Slinky, read from the rendered files: the topology its dynamic nodes join,
the accounts that carry the tenants' `slurm-on-kubernetes` numbers, and the GPUs its slurmd pods
claim through DRA.

- topology.yaml in the `slurm` chart values defines the topologies and names no node: slurmd pods
  are dynamic nodes `<nodeset>-<ordinal>`, placed by their Topology= option, which the operator
  copies from the node annotation `topology.slinky.slurm.net/spec`. Each annotation must name a leaf
  switch and a block that topology.yaml defines.
- kubernetes/slinky/accounts.yaml (Slinky with accounting) is slurm/accounts.yaml's format with the
  tenants' `slurm-on-kubernetes` numbers; the `slurm` release tells slurm_on_k8s where to apply it.
- With `device_allocation: dra` every GPU NodeSet pod claims its node type's GPUs through a
  ResourceClaimTemplate of the chart's extraObjects.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from gpucluster.hostlists import expand
from gpucluster.k8s.names import NODESET_LABEL, OWNER_LABEL, SLINKY_TOPOLOGY_ANNOTATION, nodeset_groups
from gpucluster.k8s.owners import slurm_pods_view
from gpucluster.layers import load_cluster
from gpucluster.model.cluster import Cluster
from gpucluster.model.spec import GpuQuota, Owner
from gpucluster.rendering import render_files
from gpucluster.slurm.accounts import fair_shares
from tests.k8s.conftest import (
    REPO,
    cluster_of,
    k8s_inventories,
    object_paths,
    rendered,
    variant_inventory,
    without_slurm_pod_quotas,
)
from tests.k8s.crd import catalogue, validate_custom_resource
from tests.k8s.test_values import chart_values, unknown_keys

Obj = dict[str, Any]
ACCOUNTS = "kubernetes/slinky/accounts.yaml"
SLURM_PODS = Owner.SLURM_ON_KUBERNETES.value
KUBE_VERSION = "1.34.0"
# The DeviceClass of whole GPUs that the pinned DRA driver chart creates (templates/deviceclass-gpu.yaml
# at v0.4.1) when resources.gpus.enabled is true.
DRA_GPU_CLASS = "gpu.nvidia.com"
SLINKY_CHART = "slinky/1.2.1/charts/slurm/Chart.yaml"


def _variant(tmp_path: Path, base: str, edit: Callable[[Obj], None]) -> tuple[Cluster, dict[str, str]]:
    cluster = load_cluster(variant_inventory(tmp_path, base, edit))
    return cluster, render_files(cluster, only=["slurm", "kubernetes", "helm"])


def _nvl72_on_kubernetes(cluster: Obj) -> None:
    """nvl72 with racks 5-8 in Slurm on Kubernetes (Slinky, accounting, DRA): NVLink blocks and a
    switch tree, both topologies of topology.yaml. Slurm 25.11, the oldest the pinned Slinky runs."""
    cluster["slurm"]["version"] = "25.11"
    cluster["nodes"][1]["owner"] = SLURM_PODS
    for tenant in cluster["tenants"]:
        tenant["gpus"][SLURM_PODS] = tenant["gpus"].pop("kubernetes")
    cluster["partitions"].append(
        {"name": "k8s-train", "nodes": ["gb200_k8s"], "default": True, "max_time": "1-00:00:00"}
    )
    k8s = cluster["kubernetes"]
    k8s["kueue"] = {"enabled": False}
    k8s["kai"] = {"enabled": False}
    k8s["dra"] = {"enabled": True}
    k8s["slurm"] = {"operator": "slinky", "accounting": True, "database_host": "10.0.0.5"}


def _gke_with_dra(cluster: Obj) -> None:
    k8s = cluster["kubernetes"]
    k8s["device_allocation"] = "dra"
    k8s["dra"] = {"enabled": True}
    k8s["gpu_operator"]["driver"] = "operator"


@pytest.fixture(scope="module")
def nvl72_slinky(tmp_path_factory: pytest.TempPathFactory) -> tuple[Cluster, dict[str, str]]:
    return _variant(tmp_path_factory.mktemp("nvl72"), "nvl72", _nvl72_on_kubernetes)


@pytest.fixture(scope="module")
def gke_dra(tmp_path_factory: pytest.TempPathFactory) -> tuple[Cluster, dict[str, str]]:
    return _variant(tmp_path_factory.mktemp("gke"), "gke-prod", _gke_with_dra)


def _slinky_values(files: dict[str, str]) -> Obj | None:
    releases = yaml.safe_load(files["helm/releases.yaml"])["releases"]
    slurm = next((r for r in releases if r["name"] == "slurm"), None)
    if slurm is None:
        return None
    values: Obj = yaml.safe_load(files[slurm["values_file"]])
    return values


def _nodes(files: dict[str, str]) -> list[Obj]:
    return [
        doc
        for path in object_paths(files)
        for doc in yaml.safe_load_all(files[path])
        if doc and doc["kind"] == "Node"
    ]


def slinky_inventories() -> list[str]:
    return [name for name in k8s_inventories() if _slinky_values(rendered(name)) is not None]


# --- topology -------------------------------------------------------------------------------


def topology_problems(files: dict[str, str]) -> list[str]:
    """What is wrong between the Slinky topology.yaml and the node annotations."""
    values = _slinky_values(files)
    assert values is not None
    text = values["configFiles"].get("topology.yaml")
    nodes = [n for n in _nodes(files) if n["metadata"]["labels"][OWNER_LABEL] == SLURM_PODS]
    annotations = [n["metadata"].get("annotations", {}).get(SLINKY_TOPOLOGY_ANNOTATION) for n in nodes]
    if text is None:
        return [f"annotation {a} without topology.yaml" for a in annotations if a]
    problems = []
    units: dict[str, set[str]] = {}  # topology -> the units a node may name (leaf switches, blocks)
    for topology in yaml.safe_load(text):
        name = topology["topology"]
        if "tree" in topology:
            switches = topology["tree"]["switches"]
            children = {c for s in switches if "children" in s for c in expand(s["children"])}
            defined = {s["switch"] for s in switches}
            problems += [f"{name}: child switch {c} not defined" for c in sorted(children - defined)]
            units[name] = {s["switch"] for s in switches if "children" not in s}
            problems += [f"{name}: switch {s['switch']} names nodes" for s in switches if "nodes" in s]
        if "block" in topology:
            blocks = topology["block"]["blocks"]
            units[name] = {b["block"] for b in blocks}
            problems += [f"{name}: block {b['block']} names nodes" for b in blocks if "nodes" in b]
            if not topology["block"].get("block_sizes"):
                problems.append(f"{name}: empty blocks need block_sizes")
    named: dict[str, set[str]] = {name: set() for name in units}
    for node, spec in zip(nodes, annotations, strict=True):
        host = node["metadata"]["name"]
        if not spec:
            problems.append(f"{host}: no {SLINKY_TOPOLOGY_ANNOTATION}")
            continue
        seen = set()
        for part in spec.split(","):
            topology, _, unit = part.partition(":")
            if topology not in units:
                problems.append(f"{host}: topology {topology} is not in topology.yaml")
            elif unit not in units[topology]:
                problems.append(f"{host}: {unit} is no leaf switch or block of {topology}")
            else:
                named[topology].add(unit)
            seen.add(topology)
        problems += [f"{host}: not placed in {t}" for t in sorted(set(units) - seen)]
    for topology, defined in units.items():
        problems += [
            f"{topology}: {u} defined but no node joins it" for u in sorted(defined - named[topology])
        ]
    return problems


def test_slinky_examples_exist() -> None:
    assert {"gke-prod", "gcp-prod"} <= set(slinky_inventories())


@pytest.mark.parametrize("inventory", slinky_inventories())
def test_annotations_name_what_topology_yaml_defines(inventory: str) -> None:
    assert topology_problems(rendered(inventory)) == []


def test_blocks_and_tree_for_dynamic_nodes(nvl72_slinky: tuple[Cluster, dict[str, str]]) -> None:
    _, files = nvl72_slinky
    assert topology_problems(files) == []
    values = _slinky_values(files)
    assert values is not None
    topologies = {t["topology"]: t for t in yaml.safe_load(values["configFiles"]["topology.yaml"])}
    blocks = topologies["nvlink-blocks"]["block"]
    assert [b["block"] for b in blocks["blocks"]] == ["nvl72-r05", "nvl72-r06", "nvl72-r07", "nvl72-r08"]
    assert blocks["block_sizes"] == [18, 36, 72]
    assert topologies["nvlink-blocks"]["cluster_default"] is True
    assert topologies["fabric-tree"]["tree"]["switches"] == [
        {"switch": "ib-leaf2"},
        {"switch": "ib-spine", "children": "ib-leaf2"},
    ]
    node = next(n for n in _nodes(files) if n["metadata"]["name"] == "r05n01")
    assert (
        node["metadata"]["annotations"][SLINKY_TOPOLOGY_ANNOTATION]
        == "nvlink-blocks:nvl72-r05,fabric-tree:ib-leaf2"
    )
    # Bare-metal Slurm (racks 1-4) keeps naming its hosts.
    bare = {t["topology"]: t for t in yaml.safe_load(files["slurm/topology.yaml"])}
    assert bare["nvlink-blocks"]["block"]["blocks"][0] == {"block": "nvl72-r01", "nodes": "r01n[01-18]"}
    leaf1 = next(s for s in bare["fabric-tree"]["tree"]["switches"] if s["switch"] == "ib-leaf1")
    assert leaf1["nodes"] == "r[01-04]n[01-18]"


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda n: n.update({"r05n01": "nvlink-blocks:nvl72-r01,fabric-tree:ib-leaf2"}),
            "no leaf switch or block",
        ),
        (
            lambda n: n.update({"r05n01": "nvlink-blocks:nvl72-r05,fabric-tree:ib-spine"}),
            "no leaf switch or block",
        ),
        (
            lambda n: n.update({"r05n01": "topo-block:nvl72-r05,fabric-tree:ib-leaf2"}),
            "is not in topology.yaml",
        ),
        (lambda n: n.update({"r05n01": "fabric-tree:ib-leaf2"}), "not placed in nvlink-blocks"),
    ],
)
def test_topology_check_catches(
    nvl72_slinky: tuple[Cluster, dict[str, str]], mutate: Callable[[dict[str, str]], None], expected: str
) -> None:
    _, files = nvl72_slinky
    nodes = list(yaml.safe_load_all(files["kubernetes/nodes.yaml"]))
    specs = {
        n["metadata"]["name"]: n["metadata"].get("annotations", {}).get(SLINKY_TOPOLOGY_ANNOTATION)
        for n in nodes
    }
    mutate(specs)
    for node in nodes:
        if specs[node["metadata"]["name"]]:
            node["metadata"]["annotations"] = {SLINKY_TOPOLOGY_ANNOTATION: specs[node["metadata"]["name"]]}
    changed = {**files, "kubernetes/nodes.yaml": yaml.safe_dump_all(nodes)}
    assert any(expected in p for p in topology_problems(changed)), topology_problems(changed)


def test_topology_check_catches_named_hosts(nvl72_slinky: tuple[Cluster, dict[str, str]]) -> None:
    """The gap this closes: inventory host names in the Slinky topology.yaml."""
    _, files = nvl72_slinky
    values = _slinky_values(files)
    assert values is not None
    topologies = yaml.safe_load(values["configFiles"]["topology.yaml"])
    topologies[1]["tree"]["switches"][0]["nodes"] = "r05n[01-18]"
    values["configFiles"]["topology.yaml"] = yaml.safe_dump(topologies)
    changed = {**files, "helm/values/slurm.yaml": yaml.safe_dump(values)}
    assert "fabric-tree: switch ib-leaf2 names nodes" in topology_problems(changed)


# --- accounts -------------------------------------------------------------------------------


def accounts_problems(cluster: Cluster, files: dict[str, str]) -> list[str]:
    """The Slinky accounts file against the inventory's `slurm-on-kubernetes` numbers, and the
    release entry that tells slurm_on_k8s where to apply it."""
    k8s = cluster.spec.kubernetes
    assert k8s is not None and k8s.slurm is not None
    releases = {r["name"]: r for r in yaml.safe_load(files["helm/releases.yaml"])["releases"]}
    wanted = k8s.slurm.operator == "slinky" and k8s.slurm.accounting
    entry = releases.get("slurm", {}).get("accounts")
    if not wanted:
        return [f"{ACCOUNTS} rendered"] * (ACCOUNTS in files) + ["accounts in releases.yaml"] * bool(entry)
    if ACCOUNTS not in files or entry is None:
        return [f"{ACCOUNTS} or its release entry missing"]
    problems = []
    if entry["file"] != ACCOUNTS or entry["namespace"] != k8s.slurm.namespace:
        problems.append(f"release entry {entry}")
    desired = yaml.safe_load(files[ACCOUNTS])
    if (
        desired["cluster"] != cluster.name
        or desired["cluster"] != yaml.safe_load(files["helm/values/slurm.yaml"])["clusterName"]
    ):
        problems.append("cluster name differs from the chart's clusterName")
    numbers = {
        t: per[Owner.SLURM_ON_KUBERNETES]
        for t, per in cluster.tenant_gpus.items()
        if Owner.SLURM_ON_KUBERNETES in per
    }
    accounts = {a["name"]: a for a in desired["accounts"]}
    if set(accounts) != {t.name for t in cluster.spec.tenants}:
        problems.append(f"accounts {sorted(accounts)}")
    for tenant in cluster.spec.tenants:
        gpus = numbers.get(tenant.name, GpuQuota())
        account = accounts.get(tenant.name, {})
        got = (account.get("gpu_quota"), account.get("gpu_limit"), account.get("grp_tres"))
        if got != (gpus.quota, gpus.effective_limit, f"gres/gpu={gpus.effective_limit}"):
            problems.append(f"{tenant.name}: {got} instead of its slurm-on-kubernetes numbers")
        # Shares: the tenant's quota there (gpucluster.slurm.accounts.fair_shares).
        shares = fair_shares(cluster.owned_by(Owner.SLURM_ON_KUBERNETES), tenant)
        if account.get("fairshare") != shares or account.get("parent") != (tenant.parent or "root"):
            problems.append(f"{tenant.name}: fairshare or parent")
    users = {u["name"]: u["accounts"] for u in desired["users"]}
    expected = {
        u: sorted(t.name for t in cluster.spec.tenants if u in t.users)
        for t in cluster.spec.tenants
        for u in t.users
    }
    if users != expected:
        problems.append(f"users {users}")
    return problems


@pytest.mark.parametrize("inventory", slinky_inventories())
def test_slinky_accounts_carry_the_slurm_on_kubernetes_numbers(inventory: str) -> None:
    assert accounts_problems(cluster_of(inventory), rendered(inventory)) == []


def test_gke_prod_accounts() -> None:
    """pretraining and finetuning have Slurm-on-Kubernetes numbers; evals only Kubernetes ones, so
    its account there may hold no GPU. Bare-metal Slurm owns nothing: no slurm/accounts.yaml."""
    files = rendered("gke-prod")
    assert "slurm/accounts.yaml" not in files
    accounts = {a["name"]: a for a in yaml.safe_load(files[ACCOUNTS])["accounts"]}
    assert {n: (a["gpu_quota"], a["gpu_limit"]) for n, a in accounts.items()} == {
        "pretraining": (96, 128),
        "finetuning": (32, 64),
        "evals": (0, 0),
    }
    assert files[ACCOUNTS].startswith("# Generated by gpucluster for cluster 'gke-prod'.")


def test_no_accounts_without_accounting_or_with_soperator(tmp_path: Path) -> None:
    """Slinky without slurmdbd, and Soperator (no accounts mechanism, docs): no accounts file, and
    such variants carry no slurm-on-kubernetes numbers (refused otherwise, tests/k8s/test_checks.py)."""

    def no_accounting(cluster: Obj) -> None:
        cluster["kubernetes"]["slurm"] = {"operator": "slinky", "accounting": False}
        without_slurm_pod_quotas(cluster)

    def soperator(cluster: Obj) -> None:
        cluster["kubernetes"]["slurm"] = {"operator": "soperator", "accounting": True, "database_host": "db"}
        without_slurm_pod_quotas(cluster)

    for name, edit in (("no-accounting", no_accounting), ("soperator", soperator)):
        cluster, files = _variant(tmp_path / name, "gke-prod", edit)
        assert ACCOUNTS not in files
        assert accounts_problems(cluster, files) == []


def test_accounts_check_catches_kubernetes_numbers() -> None:
    """The gap this closes: Kubernetes (or Slurm) numbers where Slurm on Kubernetes runs."""
    cluster = cluster_of("gke-prod")
    files = dict(rendered("gke-prod"))
    desired = yaml.safe_load(files[ACCOUNTS])
    finetuning = next(a for a in desired["accounts"] if a["name"] == "finetuning")
    finetuning.update(gpu_quota=64, gpu_limit=128, grp_tres="gres/gpu=128")  # its kubernetes numbers
    files[ACCOUNTS] = yaml.safe_dump(desired)
    assert accounts_problems(cluster, files) == [
        "finetuning: (64, 128, 'gres/gpu=128') instead of its slurm-on-kubernetes numbers"
    ]
    del files[ACCOUNTS]
    assert accounts_problems(cluster, files) == [f"{ACCOUNTS} or its release entry missing"]


def test_accounts_with_blocks_variant(nvl72_slinky: tuple[Cluster, dict[str, str]]) -> None:
    cluster, files = nvl72_slinky
    assert accounts_problems(cluster, files) == []
    # Bare metal keeps its own numbers; Slurm on Kubernetes gets the ones moved to it.
    bare = {a["name"]: a["gpu_limit"] for a in yaml.safe_load(files["slurm/accounts.yaml"])["accounts"]}
    pods = {a["name"]: a["gpu_limit"] for a in yaml.safe_load(files[ACCOUNTS])["accounts"]}
    assert bare == {"foundation": 288, "alignment": 144} == pods


def test_slurm_on_k8s_applies_the_accounts_in_the_slurmctld_container() -> None:
    """The role runs slurm_accounts (its slurm_associations module) delegated to a host reached with
    kubectl exec in the pod and container the release entry names, after slurmdbd and slurmctld are
    Ready; render-only mode writes what it would apply."""
    role = REPO / "roles" / "slurm_on_k8s" / "tasks"
    main = yaml.safe_load((role / "main.yml").read_text())
    include = next(t for t in main if t.get("ansible.builtin.include_tasks") == "accounts.yml")
    assert include["loop"] == "{{ helm_release_releases | selectattr('accounts', 'defined') }}"
    assert include["loop_control"]["loop_var"] == "slurm_on_k8s_release"
    tasks = yaml.safe_load((role / "accounts.yml").read_text())
    waits = [t["kubernetes.core.k8s_info"] for t in tasks if "kubernetes.core.k8s_info" in t]
    assert [w["label_selectors"] for w in waits] == [
        "{{ slurm_on_k8s_accounts.accounting_selector }}",
        "{{ slurm_on_k8s_accounts.controller_selector }}",
    ]
    assert all(w["wait_condition"] == {"type": "Ready", "status": "True"} for w in waits)
    host = next(t["ansible.builtin.add_host"] for t in tasks if "ansible.builtin.add_host" in t)
    assert host["ansible_connection"] == "kubernetes.core.kubectl"
    assert host["ansible_kubectl_container"] == "{{ slurm_on_k8s_accounts.container }}"
    run = next(t for t in tasks if "ansible.builtin.include_role" in t)
    assert run["ansible.builtin.include_role"]["name"] == "gpucluster.cluster.slurm_accounts"
    assert run["ansible.builtin.include_role"]["apply"]["delegate_to"] == "{{ slurm_on_k8s_accounts_host }}"
    assert run["vars"]["slurm_accounts_desired_file"].endswith("{{ slurm_on_k8s_accounts.file }}")
    accounts_role = yaml.safe_load((REPO / "roles/slurm_accounts/tasks/main.yml").read_text())
    assert "gpucluster.cluster.slurm_associations" in accounts_role[0]
    # The selectors name the Controller and Accounting objects after the release: the chart calls
    # them `slurm.fullname`, which is the release name when it contains the chart's name.
    entry = next(
        r
        for r in yaml.safe_load(rendered("gke-prod")["helm/releases.yaml"])["releases"]
        if r["name"] == "slurm"
    )
    chart = yaml.safe_load(catalogue(SLINKY_CHART).read_text())
    assert chart["name"] in entry["name"]
    assert f"app.kubernetes.io/instance={entry['name']}" in entry["accounts"]["controller_selector"]
    assert entry["accounts"]["container"] == "slurmctld"


# --- GPUs through DRA -----------------------------------------------------------------------


def claim_problems(cluster: Cluster, values: Obj) -> list[str]:
    """Each GPU NodeSet's pods claim exactly their node type's GPUs through a template of the
    chart's extraObjects, used by the slurmd container; no device-plugin limit is left."""
    problems = []
    templates = {
        o["metadata"]["name"]: o
        for o in values.get("extraObjects", [])
        if o["kind"] == "ResourceClaimTemplate"
    }
    used = set()
    for name, nodeset in values["nodesets"].items():
        type_name = _node_type_of(cluster, nodeset)
        gpus = cluster.spec.node_types[type_name].gpus
        pod_claims = {c["name"]: c for c in nodeset["podSpec"].get("resourceClaims", [])}
        resources = nodeset.get("slurmd", {}).get("resources", {})
        if gpus is None:
            if pod_claims:
                problems.append(f"{name}: claims GPUs it does not have")
            continue
        if "nvidia.com/gpu" in resources.get("limits", {}):
            problems.append(f"{name}: nvidia.com/gpu limit with DRA")
        container_claims = [c["name"] for c in resources.get("claims", [])]
        if not container_claims or set(container_claims) - set(pod_claims):
            problems.append(f"{name}: slurmd uses claims {container_claims} of {sorted(pod_claims)}")
            continue
        count = 0
        for claim in container_claims:
            template = templates.get(pod_claims[claim].get("resourceClaimTemplateName", ""))
            if template is None:
                problems.append(f"{name}: claim {claim} has no template in extraObjects")
                continue
            used.add(template["metadata"]["name"])
            for request in template["spec"]["spec"]["devices"]["requests"]:
                exactly = request["exactly"]
                if exactly["deviceClassName"] != DRA_GPU_CLASS or exactly["allocationMode"] != "ExactCount":
                    problems.append(f"{name}: request {request}")
                count += exactly["count"]
        if count != gpus.count:
            problems.append(f"{name}: claims {count} GPUs, its nodes have {gpus.count}")
    problems += [f"template {t} unused" for t in sorted(set(templates) - used)]
    return problems


def _node_type_of(cluster: Cluster, nodeset: Obj) -> str:
    selected = nodeset["podSpec"]["nodeSelector"][NODESET_LABEL]
    return next(g.node_type for g in nodeset_groups(slurm_pods_view(cluster)) if g.name == selected)


@pytest.mark.parametrize("fixture", ["gke_dra", "nvl72_slinky"])
def test_dra_nodesets_claim_their_gpus(fixture: str, request: pytest.FixtureRequest) -> None:
    cluster, files = request.getfixturevalue(fixture)
    values = _slinky_values(files)
    assert values is not None
    assert claim_problems(cluster, values) == []
    assert [o["kind"] for o in values["extraObjects"]] == ["ResourceClaimTemplate"]
    dra = yaml.safe_load(files["helm/values/dra-driver-nvidia-gpu.yaml"])
    assert dra["resources"]["gpus"]["enabled"] and dra["resourceApiVersion"] == "resource.k8s.io/v1"
    gpu_operator = yaml.safe_load(files["helm/values/gpu-operator.yaml"])
    assert gpu_operator["devicePlugin"]["enabled"] is False  # nothing advertises nvidia.com/gpu


def test_device_plugin_nodesets_keep_limits() -> None:
    values = _slinky_values(rendered("gke-prod"))
    assert values is not None
    nodeset = values["nodesets"]["a3-mega"]
    assert nodeset["slurmd"]["resources"] == {"limits": {"nvidia.com/gpu": 8}}
    assert "resourceClaims" not in nodeset["podSpec"] and "extraObjects" not in values


def test_claim_check_catches_the_gap(gke_dra: tuple[Cluster, dict[str, str]]) -> None:
    """The gap this closes: DRA mode with NodeSet pods that request no GPU at all."""
    cluster, files = gke_dra
    values = _slinky_values(files)
    assert values is not None
    nodeset = values["nodesets"]["a3-mega"]
    nodeset["podSpec"].pop("resourceClaims")
    nodeset.pop("slurmd")
    assert "a3-mega: slurmd uses claims [] of []" in claim_problems(cluster, values)
    values = _slinky_values(files)
    assert values is not None
    values["extraObjects"][0]["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] = 1
    assert claim_problems(cluster, values) == ["a3-mega: claims 1 GPUs, its nodes have 8"]


@pytest.mark.parametrize("fixture", ["gke_dra", "nvl72_slinky"])
def test_dra_values_match_the_pinned_chart_crd_and_kubernetes(
    fixture: str, request: pytest.FixtureRequest
) -> None:
    """Values keys exist in the pinned slurm chart; the NodeSet the chart makes of them validates
    against the pinned NodeSet CRD, its pod (podSpec + the slurmd container) and the
    ResourceClaimTemplate against Kubernetes 1.34."""
    _, files = request.getfixturevalue(fixture)
    values = _slinky_values(files)
    assert values is not None
    assert unknown_keys("slurm", values, chart_values("slurm")) == []
    for template in values["extraObjects"]:
        kubernetes_validate.validate(template, KUBE_VERSION, strict=True)
        assert "{{" not in yaml.safe_dump(template)  # the chart renders extraObjects through `tpl`
    for name, nodeset in values["nodesets"].items():
        slurmd = {
            "name": "slurmd",
            "image": "ghcr.io/slinkyproject/slurmd:26.05-ubuntu26.04",
            **nodeset["slurmd"],
        }
        # As helm/slurm/templates/nodeset/nodeset-cr.yaml of the pinned chart writes it.
        nodeset_cr = {
            "apiVersion": "slinky.slurm.net/v1beta1",
            "kind": "NodeSet",
            "metadata": {"name": f"slurm-worker-{name}", "namespace": "slurm"},
            "spec": {
                "controllerRef": {"name": "slurm"},
                "replicas": nodeset["replicas"],
                "slurmd": slurmd,
                "template": {"spec": {**nodeset["podSpec"], "hostname": f"{name}-"}},
            },
        }
        validate_custom_resource(nodeset_cr)
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{name}-0"},
            "spec": {"containers": [slurmd], **nodeset["podSpec"]},
        }
        kubernetes_validate.validate(pod, KUBE_VERSION, strict=True)


def test_dra_and_health_share_extra_objects(tmp_path: Path) -> None:
    def both(cluster: Obj) -> None:
        _gke_with_dra(cluster)
        cluster["slurm"]["health"] = {}

    cluster, files = _variant(tmp_path, "gke-prod", both)
    values = _slinky_values(files)
    assert values is not None
    assert [o["kind"] for o in values["extraObjects"]] == ["ConfigMap", "ResourceClaimTemplate"]
    assert claim_problems(cluster, values) == []
    nodeset = values["nodesets"]["a3-mega"]
    assert [v["name"] for v in nodeset["podSpec"]["volumes"]] == ["gpucluster-health"]
    assert set(nodeset["slurmd"]) == {"volumeMounts", "resources"}
