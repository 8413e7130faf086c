"""Volcano as the gang scheduler of the Kubernetes-owned GPU nodes, and the one-gang-scheduler rule.

Read from the rendered files of the examples (superpod runs its Kubernetes unit under Volcano, nvl72
under KAI) and of variants; every Volcano object is validated against the pinned CRDs elsewhere
(test_objects.py), its values keys against the pinned chart (test_values.py); here what they mean.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucluster.errors import InventoryError
from gpucluster.k8s import volcano
from gpucluster.k8s.names import OWNER_LABEL, VOLCANO_QUEUE_ANNOTATION
from gpucluster.layers import load_cluster
from gpucluster.model.spec import Owner
from gpucluster.rendering import render_files
from tests.conftest import run_cli
from tests.k8s.conftest import cluster_of, documents, rendered, tenant_objects, variant_inventory
from tests.k8s.crd import catalogue, validate_custom_resource

Obj = dict[str, Any]
VALUES = "volcano/1.15.1/charts/volcano/values.yaml"
# Volcano 1.15.1 at its tag: the plugins of pkg/scheduler/plugins/ and the actions of
# pkg/scheduler/actions/ (a name the scheduler does not know makes it fail to start).
PLUGINS = {
    "binpack",
    "capacity",
    "cdp",
    "conformance",
    "deviceshare",
    "drf",
    "extender",
    "gang",
    "network-topology-aware",
    "nodegroup",
    "nodeorder",
    "numaaware",
    "overcommit",
    "pdb",
    "predicates",
    "priority",
    "proportion",
    "rescheduling",
    "resource-strategy-fit",
    "resourcequota",
    "sla",
    "task-topology",
    "tdm",
    "usage",
}
ACTIONS = {"allocate", "backfill", "enqueue", "gangpreempt", "gangreclaim", "preempt", "reclaim", "shuffle"}
# Keys of a plugin entry (pkg/scheduler/conf PluginOption) that gpucluster sets.
PLUGIN_OPTIONS = {"name", "arguments", "enableHierarchy", "enablePreemptable"}


def _values(files: dict[str, str]) -> Obj:
    data: Obj = yaml.safe_load(files["helm/values/volcano.yaml"])
    return data


def _objects(files: dict[str, str], path: str) -> list[Obj]:
    return [d for d in yaml.safe_load_all(files[path]) if d is not None]


def _with(edit: dict[str, Any]) -> Any:
    def change(cluster: dict[str, Any]) -> None:
        for key, value in edit.items():
            cluster["kubernetes"][key] = {**cluster["kubernetes"].get(key, {}), **value}

    return change


def test_examples_choose_one_gang_scheduler_each() -> None:
    """superpod's Kubernetes unit runs under Volcano, nvl72's racks under KAI, gke-prod under Kueue alone."""
    choices = {
        name: cluster_of(name).spec.kubernetes.gang_scheduler for name in ("superpod", "nvl72", "gke-prod")
    }  # type: ignore[union-attr]
    assert choices == {"superpod": "volcano", "nvl72": "kai", "gke-prod": None}
    releases = {
        name: {r["name"] for r in yaml.safe_load(rendered(name)["helm/releases.yaml"])["releases"]}
        for name in choices
    }
    assert "volcano" in releases["superpod"] and "kai-scheduler" not in releases["superpod"]
    assert "kai-scheduler" in releases["nvl72"] and "volcano" not in releases["nvl72"]
    assert not {"volcano", "kai-scheduler"} & releases["gke-prod"]


def test_both_gang_schedulers_are_refused(tmp_path: Path) -> None:
    """KAI and Volcano on the same nodes would both bind pods to the same GPUs: exit 2, file:line,
    key path, reason, and nothing rendered."""
    directory = variant_inventory(tmp_path, "superpod", _with({"kai": {"enabled": True}}))
    result = run_cli("render", str(directory), "--out", str(tmp_path / "out"))
    assert result.returncode == 2, result.stderr
    (line,) = [x for x in result.stderr.splitlines() if "cluster.kubernetes.volcano.enabled" in x]
    where, path, reason = line.split(": ", 2)
    assert where.startswith(f"{directory}/group_vars/all/cluster.yml:") and int(where.rsplit(":", 1)[1]) > 0
    assert path == "cluster.kubernetes.volcano.enabled"
    assert reason.startswith("KAI (kubernetes.kai.enabled) and Volcano are both enabled")
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (
            {"volcano": {"parent_queue": "research"}},
            "cluster.kubernetes.volcano.parent_queue: queue `research`",
        ),
        ({"volcano": {"parent_queue": "root"}}, "cluster.kubernetes.volcano.parent_queue: queue `root`"),
    ],
)
def test_volcano_queue_names_are_checked(tmp_path: Path, edit: dict[str, Any], expected: str) -> None:
    with pytest.raises(InventoryError) as info:
        load_cluster(variant_inventory(tmp_path, "superpod", _with(edit)))
    assert any(expected in str(p) for p in info.value.problems), info.value.problems


def test_volcano_without_kubernetes_owned_gpus_is_refused(tmp_path: Path) -> None:
    def edit(cluster: dict[str, Any]) -> None:
        cluster["kubernetes"]["volcano"] = {"enabled": True}
        cluster["kubernetes"]["kueue"] = {"enabled": False}
        cluster["nodes"] = [{**n, "owner": "slurm-on-kubernetes"} for n in cluster["nodes"]]
        cluster["partitions"] = [{**p, "nodes": ["a3mega"]} for p in cluster["partitions"]]
        cluster["tenants"] = [{"name": "pretraining", "fairshare": 1, "gpu_quota": 64}]

    with pytest.raises(InventoryError) as info:
        load_cluster(variant_inventory(tmp_path, "gke-prod", edit))
    assert any(
        "cluster.kubernetes.volcano.enabled: Volcano is enabled but no GPU node is owned by kubernetes"
        in str(p)
        for p in info.value.problems
    ), info.value.problems


def test_hypernode_names_must_not_collide(tmp_path: Path) -> None:
    """A switch and an NVLink block of the same name would be one HyperNode."""

    def edit(cluster: dict[str, Any]) -> None:
        cluster["fabric"]["blocks"] = {"su4-leaf": ["dgx_su4"]}

    with pytest.raises(InventoryError) as info:
        load_cluster(variant_inventory(tmp_path, "superpod", edit))
    assert any(
        "cluster.fabric: nvlink-block `su4-leaf` and leaf `su4-leaf` would both be the Volcano HyperNode `su4-leaf`"
        in str(p)
        for p in info.value.problems
    ), info.value.problems


def test_scheduler_configuration_names_what_volcano_knows() -> None:
    conf = yaml.safe_load(_values(rendered("superpod"))["custom"]["scheduler_config_override"])
    assert set(conf) == {"actions", "tiers"}
    actions = [a.strip() for a in conf["actions"].split(",")]
    assert set(actions) <= ACTIONS and "reclaim" in actions and actions[0] == "enqueue"
    plugins = [p for tier in conf["tiers"] for p in tier["plugins"]]
    assert {p["name"] for p in plugins} <= PLUGINS
    assert all(set(p) <= PLUGIN_OPTIONS for p in plugins)
    names = [p["name"] for p in plugins]
    # gang all-or-nothing; DRF fair share; the capacity plugin (never with proportion) over the
    # tenants' hierarchy; network-topology-aware placement since superpod has a fabric.
    assert {"gang", "drf", "capacity", "network-topology-aware"} <= set(names)
    assert "proportion" not in names
    assert next(p for p in plugins if p["name"] == "capacity")["enableHierarchy"] is True


def test_network_topology_follows_the_fabric(tmp_path: Path) -> None:
    directory = variant_inventory(tmp_path, "superpod", _with({"volcano": {"network_topology": False}}))
    files = render_files(load_cluster(directory), only=["kubernetes", "helm"])
    conf = yaml.safe_load(_values(files)["custom"]["scheduler_config_override"])
    assert "network-topology-aware" not in [p["name"] for t in conf["tiers"] for p in t["plugins"]]
    assert "kubernetes/volcano/hypernodes.yaml" not in files
    assert "networkTopology" not in _objects(files, "kubernetes/samples/volcano-gang-job.yaml")[0]["spec"]


def test_admissions_keep_the_chart_defaults() -> None:
    """The chart's own webhooks stay on; pods and podgroups mutation are added."""
    chart = yaml.safe_load(catalogue(VALUES).read_text())["custom"]["enabled_admissions"].split(",")
    assert tuple(chart) == volcano.CHART_ADMISSIONS
    ours = _values(rendered("superpod"))["custom"]["enabled_admissions"].split(",")
    assert set(chart) < set(ours) and {"/pods/mutate", "/podgroups/mutate"} <= set(ours)


def test_tenant_pods_go_to_volcano_and_their_queue() -> None:
    """Every pod of a tenant namespace is given to Volcano on the Kubernetes-owned nodes, tolerating
    the GPU taint those nodes carry; a PodGroup naming no queue takes its namespace's queue."""
    files = rendered("superpod")
    admission = yaml.safe_load(_values(files)["custom"]["admission_config_override"])
    (group,) = admission["resourceGroups"]
    namespaces = {d["metadata"]["name"]: d for d in tenant_objects("superpod", "Namespace")}
    assert group["object"] == {"key": "namespace", "value": sorted(namespaces)}
    assert group["schedulerName"] == "volcano"
    assert group["labels"] == {OWNER_LABEL: Owner.KUBERNETES.value}
    nodes = [d for _, d in documents("superpod") if d["kind"] == "Node"]
    for taint in {(t["key"], t["effect"]) for n in nodes for t in n.get("spec", {}).get("taints", [])}:
        assert any(t["key"] == taint[0] and t["effect"] == taint[1] for t in group["tolerations"])
    queues = {d["metadata"]["name"] for _, d in documents("superpod") if d["kind"] == "Queue"}
    for name, namespace in namespaces.items():
        queue = namespace["metadata"]["annotations"][VOLCANO_QUEUE_ANNOTATION]
        assert queue == namespace["metadata"]["labels"]["gpucluster.io/tenant"] and queue in queues, name


def test_hypernodes_are_the_fabric_of_the_kubernetes_owned_nodes() -> None:
    """superpod: SU4's leaf (tier 1, its 32 nodes by label) under the spine (tier 2); nothing of
    the Slurm units."""
    hypernodes = {
        d["metadata"]["name"]: d["spec"] for _, d in documents("superpod") if d["kind"] == "HyperNode"
    }
    assert set(hypernodes) == {"su4-leaf", "spine"}
    assert hypernodes["su4-leaf"]["tier"] == 1 and hypernodes["su4-leaf"]["tierName"] == "leaf"
    assert hypernodes["spine"]["tier"] == 2
    assert hypernodes["spine"]["members"] == [
        {"type": "HyperNode", "selector": {"exactMatch": {"name": "su4-leaf"}}}
    ]
    (member,) = hypernodes["su4-leaf"]["members"]
    match = member["selector"]["labelMatch"]["matchLabels"]
    nodes = [d for _, d in documents("superpod") if d["kind"] == "Node"]
    assert sum(match.items() <= d["metadata"]["labels"].items() for d in nodes) == 32


def test_nvlink_blocks_are_the_narrowest_tier(tmp_path: Path) -> None:
    """nvl72 under Volcano: each rack's NVLink block is a tier-1 HyperNode inside its leaf switch."""

    def edit(cluster: dict[str, Any]) -> None:
        cluster["kubernetes"]["kai"] = {"enabled": False}
        cluster["kubernetes"]["volcano"] = {"enabled": True}

    files = render_files(
        load_cluster(variant_inventory(tmp_path, "nvl72", edit)), only=["kubernetes", "helm"]
    )
    hypernodes = {
        d["metadata"]["name"]: d["spec"] for d in _objects(files, "kubernetes/volcano/hypernodes.yaml")
    }
    tier1 = {name for name, spec in hypernodes.items() if spec["tier"] == 1}
    assert tier1 == {"nvl72-r05", "nvl72-r06", "nvl72-r07", "nvl72-r08"}
    assert {spec["tierName"] for name, spec in hypernodes.items() if name in tier1} == {"nvlink-block"}
    tier2 = {name: spec for name, spec in hypernodes.items() if spec["tier"] == 2}
    children = sorted(m["selector"]["exactMatch"]["name"] for spec in tier2.values() for m in spec["members"])
    assert children == sorted(tier1)
    for document in (
        d for path in files if path.startswith("kubernetes/volcano/") for d in _objects(files, path)
    ):
        validate_custom_resource(document)


def test_dra_queues_count_device_classes(tmp_path: Path) -> None:
    """With DRA nothing advertises nvidia.com/gpu: a tenant's Volcano quota is on the device class of
    each node type (the classes its ResourceClaimTemplates use), and the driver's own GPU classes are
    closed to every tenant and to the default queue."""

    def edit(cluster: dict[str, Any]) -> None:
        cluster["kubernetes"]["kai"] = {"enabled": False}
        cluster["kubernetes"]["volcano"] = {"enabled": True}

    directory = variant_inventory(tmp_path, "nvl72", edit)
    cluster = load_cluster(directory)
    files = render_files(cluster, only=["kubernetes", "helm"])
    queues = {d["metadata"]["name"]: d["spec"] for d in _objects(files, "kubernetes/volcano/queues.yaml")}
    classes = {d["metadata"]["name"] for d in _objects(files, "kubernetes/dra/device-classes.yaml")}
    tenants = {
        name: per[Owner.KUBERNETES] for name, per in cluster.tenant_gpus.items() if Owner.KUBERNETES in per
    }
    for name, gpus in tenants.items():
        deserved = queues[name]["deserved"]
        assert "nvidia.com/gpu" not in deserved
        assert sum(v for k, v in deserved.items() if k.startswith("deviceclass/")) == gpus.quota
        assert {k.removeprefix("deviceclass/") for k in deserved if k.startswith("deviceclass/")} <= classes
        capability = queues[name]["capability"]
        assert all(capability[f"deviceclass/{c}"] == 0 for c in volcano.DRA_DRIVER_GPU_CLASSES)
    assert all(v == 0 for v in queues["default"]["capability"].values())
    (job,) = _objects(files, "kubernetes/samples/volcano-gang-job.yaml")
    pod = job["spec"]["tasks"][0]["template"]["spec"]
    templates = {
        d["metadata"]["name"] for d in _objects(files, "kubernetes/dra/resource-claim-templates.yaml")
    }
    assert pod["resourceClaims"][0]["resourceClaimTemplateName"] in templates
    for document in (*_objects(files, "kubernetes/volcano/queues.yaml"), job):
        validate_custom_resource(document)


def test_reserve_quota_makes_the_quota_a_guarantee(tmp_path: Path) -> None:
    directory = variant_inventory(tmp_path, "superpod", _with({"volcano": {"reserve_quota": True}}))
    files = render_files(load_cluster(directory), only=["kubernetes"])
    queues = {d["metadata"]["name"]: d for d in _objects(files, "kubernetes/volcano/queues.yaml")}
    for name in ("research", "inference"):
        spec = queues[name]["spec"]
        assert spec["guarantee"] == {"resource": spec["deserved"]}
        validate_custom_resource(queues[name])
    assert "guarantee" not in queues["gpucluster"]["spec"] and "guarantee" not in queues["default"]["spec"]


def test_sample_gang_job_takes_two_whole_nodes_at_once() -> None:
    """A Volcano Job of two pods of 8 GPUs, all or nothing, in a tenant's namespace and queue, on two
    nodes the selector finds among the Kubernetes-owned ones, within one leaf switch."""
    files = rendered("superpod")
    manifest = yaml.safe_load(files["kubernetes/manifest.yaml"])
    assert [s["file"] for s in manifest["samples"]] == ["kubernetes/samples/volcano-gang-job.yaml"]
    assert "kubernetes/samples/volcano-gang-job.yaml" not in [f["file"] for f in manifest["files"]]
    (job,) = _objects(files, "kubernetes/samples/volcano-gang-job.yaml")
    spec = job["spec"]
    (task,) = spec["tasks"]
    assert spec["schedulerName"] == "volcano"
    assert spec["minAvailable"] == task["replicas"] == 2
    pod = task["template"]["spec"]
    (container,) = pod["containers"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 8
    assert spec["networkTopology"] == {"mode": "hard", "highestTierAllowed": 1}
    namespaces = {d["metadata"]["name"] for d in tenant_objects("superpod", "Namespace")}
    queues = {d["metadata"]["name"]: d for _, d in documents("superpod") if d["kind"] == "Queue"}
    assert job["metadata"]["namespace"] in namespaces
    assert queues[spec["queue"]]["spec"]["capability"]["nvidia.com/gpu"] >= 16
    nodes = [d for _, d in documents("superpod") if d["kind"] == "Node"]
    fitting = [n for n in nodes if pod["nodeSelector"].items() <= n["metadata"]["labels"].items()]
    assert len(fitting) >= 2
    for node in fitting:
        for taint in node.get("spec", {}).get("taints", []):
            assert any(
                t["key"] == taint["key"] and t["effect"] == taint["effect"] for t in pod["tolerations"]
            )
    validate_custom_resource(job)


def test_no_sample_without_a_tenant_that_may_hold_two_nodes(tmp_path: Path) -> None:
    def edit(cluster: dict[str, Any]) -> None:
        for tenant in cluster["tenants"]:
            if "kubernetes" in tenant.get("gpus", {}):
                tenant["gpus"]["kubernetes"] = {"quota": 8, "limit": 8}

    files = render_files(load_cluster(variant_inventory(tmp_path, "superpod", edit)), only=["kubernetes"])
    assert "kubernetes/samples/volcano-gang-job.yaml" not in files
    assert "samples" not in yaml.safe_load(files["kubernetes/manifest.yaml"])


def test_kueue_admits_in_front_of_a_gang_scheduler_without_placing_pods() -> None:
    """With KAI or Volcano, Kueue's flavors carry no topology (Topology-Aware Scheduling would pick
    each pod's node itself, overruling the gang scheduler's placement); Kueue alone keeps it."""
    for name in ("superpod", "nvl72"):
        docs = [d for _, d in documents(name)]
        assert not [d for d in docs if d["kind"] == "Topology" and d["apiVersion"].startswith("kueue.")]
        assert all("topologyName" not in d["spec"] for d in docs if d["kind"] == "ResourceFlavor")
    gke = [d for _, d in documents("gke-prod")]
    assert [d for d in gke if d["kind"] == "Topology" and d["apiVersion"].startswith("kueue.")]
    assert all(d["spec"]["topologyName"] for d in gke if d["kind"] == "ResourceFlavor")


def test_mirror_rewrites_volcano_images(tmp_path: Path) -> None:
    """gke-prod (registry mirror, pull secret) under Volcano: every Volcano image and the sample's
    come from the mirror, with the pull secret as the chart takes it (one name)."""
    directory = variant_inventory(tmp_path, "gke-prod", _with({"volcano": {"enabled": True}}))
    files = render_files(load_cluster(directory), only=["kubernetes", "helm"])
    basic = _values(files)["basic"]
    assert basic == {
        "image_registry": "europe-west4-docker.pkg.dev/acme-prod/mirror/docker.io",
        "image_pull_secret": "artifact-registry",
    }
    (job,) = _objects(files, "kubernetes/samples/volcano-gang-job.yaml")
    image = job["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["image"]
    assert image == f"europe-west4-docker.pkg.dev/acme-prod/mirror/{volcano.SAMPLE_IMAGE}"


def test_show_lists_the_choice() -> None:
    """`gpucluster show` (text and JSON) says who schedules the Kubernetes-owned GPU nodes."""
    import json

    text = run_cli("show", "inventories/superpod")
    assert text.returncode == 0, text.stderr
    assert "Volcano 1.15.1 gang-schedules; Kueue 0.19.2 admits in front of it" in text.stdout
    doc = json.loads(run_cli("show", "--json", "inventories/nvl72").stdout)["kubernetes"]
    assert (doc["gang_scheduler"], doc["kueue"]) == ("kai", True)
    assert doc["scheduling"] == "KAI Scheduler v0.17.0 gang-schedules; Kueue 0.19.2 admits in front of it"
    assert {r["name"]: r["version"] for r in doc["releases"]}["kai-scheduler"] == "v0.17.0"
    gke = json.loads(run_cli("show", "--json", "inventories/gke-prod").stdout)["kubernetes"]
    assert (gke["gang_scheduler"], gke["scheduling"]) == (None, "Kueue 0.19.2 admits; kube-scheduler places")
    assert "kubernetes" not in json.loads(run_cli("show", "--json", "inventories/lab").stdout)
