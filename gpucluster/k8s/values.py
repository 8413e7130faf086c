"""Helm values for each chart, from the cluster model. Only keys that exist in the upstream chart
values of the pinned version are set (tests/k8s checks that: Helm ignores a misspelt key).

Ownership: Slinky and Soperator get the Slurm-on-Kubernetes hosts only (owners.slurm_pods_view),
Kueue the device classes of the Kubernetes-owned ones; the node daemons of the GPU Operator and the
DRA driver also tolerate the owner taint, so they keep running on Slurm-on-Kubernetes nodes."""

from __future__ import annotations

from typing import Any

from gpucluster import yamlout
from gpucluster.k8s import volcano
from gpucluster.k8s.host_software import host_owns_everywhere
from gpucluster.k8s.mirror import apply_mirror
from gpucluster.k8s.model import KubernetesSpec
from gpucluster.k8s.names import (
    GPU_RESOURCE,
    KAI_NODE_POOL_LABEL,
    MANAGED_BY,
    NODESET_LABEL,
    TENANT_LABEL,
    NodeSetGroup,
    k8s_name,
    nodeset_groups,
)
from gpucluster.k8s.objects import (
    GPU_DRIVER,
    RESOURCE_API,
    device_class_name,
    gpu_node_types,
    gpu_toleration,
    leaf_tenants,
)
from gpucluster.k8s.owners import (
    has_slurm_pods,
    owner_selector,
    owner_toleration,
    pods_view,
    slurm_pods_view,
)
from gpucluster.k8s.sharing import gpu_operator_sharing, mig_device_classes, mig_resource, mig_strategy
from gpucluster.k8s.volumes import mount_in_pod, rendered_claims, soperator_jail_submounts
from gpucluster.model.cluster import Cluster
from gpucluster.model.spec import Owner

Values = dict[str, Any]

GKE_DRIVER_DIR = "/home/kubernetes/bin/nvidia"


def cert_manager_values(k8s: KubernetesSpec) -> Values:
    values: Values = {"crds": {"enabled": True, "keep": True}}
    apply_mirror("cert-manager", values, k8s.registry_mirror)
    return values


def network_operator_values(k8s: KubernetesSpec) -> Values:
    values: Values = {
        "nfd": {"enabled": k8s.network_operator.nfd},
        "upgradeCRDs": True,
        "sriovNetworkOperator": {"enabled": False},
    }
    apply_mirror("network-operator", values, k8s.registry_mirror)
    return values


def node_daemon_tolerations(cluster: Cluster, defaults: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A chart's node daemon tolerations: its defaults (replaced when the key is set, so repeated
    here), plus the owner taint's when some nodes belong to Slurm on Kubernetes."""
    return [*defaults, owner_toleration()] if has_slurm_pods(cluster) else defaults


# Upstream default of node-feature-discovery.worker.tolerations in the GPU Operator chart.
NFD_WORKER_TOLERATIONS = [
    {
        "key": "node-role.kubernetes.io/control-plane",
        "operator": "Equal",
        "value": "",
        "effect": "NoSchedule",
    },
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
]


def gpu_operator_values(cluster: Cluster, k8s: KubernetesSpec) -> Values:
    gpu = k8s.gpu_operator
    # A component the gpu_driver role installs on every Kubernetes GPU node needs no operand at
    # all; where only some nodes have it, their deploy labels keep the operand off them.
    driver: Values = {"enabled": gpu.driver == "operator" and not host_owns_everywhere(cluster, "driver")}
    if gpu.driver_version:
        driver["version"] = gpu.driver_version
    values: Values = {
        "operator": {"upgradeCRD": True},
        "nfd": {"enabled": gpu.nfd},
        "cdi": {"enabled": True},
        "driver": driver,
        "toolkit": {"enabled": gpu.toolkit and not host_owns_everywhere(cluster, "toolkit")},
        # The DRA driver allocates GPUs in `dra` mode: the device plugin must not advertise them too.
        "devicePlugin": {"enabled": k8s.device_allocation == "device-plugin"},
        "mig": {"strategy": mig_strategy(pods_view(cluster), k8s)},
        "dcgmExporter": {"serviceMonitor": {"enabled": gpu.dcgm_service_monitor or k8s.prometheus_operator}},
        # Driver, toolkit, device plugin, DCGM, validator...: on every GPU node, whoever owns it.
        "daemonsets": {"tolerations": node_daemon_tolerations(cluster, [gpu_toleration()])},
    }
    for key, value in gpu_operator_sharing(pods_view(cluster), k8s).items():
        values[key] = {**values.get(key, {}), **value}
    if gpu.nfd and has_slurm_pods(cluster):
        # NFD's labels decide where the operands go: its worker must run there too.
        values["node-feature-discovery"] = {
            "worker": {"tolerations": node_daemon_tolerations(cluster, NFD_WORKER_TOLERATIONS)}
        }
    if k8s.platform == "gke":
        # GKE installs the driver under its own path; the toolkit must look there.
        values["hostPaths"] = {"driverInstallDir": GKE_DRIVER_DIR}
        values["toolkit"]["installDir"] = GKE_DRIVER_DIR
    apply_mirror("gpu-operator", values, k8s.registry_mirror)
    return values


def dra_driver_root(k8s: KubernetesSpec) -> str:
    if k8s.dra.driver_root:
        return k8s.dra.driver_root
    if k8s.platform == "gke" and k8s.gpu_operator.driver != "operator":
        return GKE_DRIVER_DIR
    return "/run/nvidia/driver" if k8s.gpu_operator.driver == "operator" else "/"


def dra_driver_values(cluster: Cluster, k8s: KubernetesSpec) -> Values:
    gpus = k8s.device_allocation == "dra"
    values: Values = {
        "nvidiaDriverRoot": dra_driver_root(k8s),
        # Auto-detection needs a live API server; rendering must not depend on one.
        "resourceApiVersion": "resource.k8s.io/v1",
        # The chart refuses GPU allocation unless told the GPU Operator's device plugin is off.
        "gpuResourcesEnabledOverride": gpus,
        "resources": {"gpus": {"enabled": gpus}, "computeDomains": {"enabled": k8s.dra.compute_domains}},
        "kubeletPlugin": {"tolerations": node_daemon_tolerations(cluster, [gpu_toleration()])},
    }
    apply_mirror("dra-driver-nvidia-gpu", values, k8s.registry_mirror)
    return values


def kueue_configuration(cluster: Cluster, k8s: KubernetesSpec) -> Values:
    """The config.kueue.x-k8s.io/v1beta2 Configuration the chart mounts into the manager."""
    config: Values = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": ":8081"},
        "metrics": {"bindAddress": ":8443", "enableClusterQueueResources": True},
        "webhook": {"port": 9443},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        # Jobs without a queue name in the tenants' namespaces (only there: the pod-based integrations
        # would otherwise take every Deployment of the cluster) are Kueue's too, and land in the
        # namespace's `default` LocalQueue, on the tenant's quota (objects.local_queues).
        "manageJobsWithoutQueueName": True,
        "managedJobsNamespaceSelector": {"matchExpressions": [{"key": TENANT_LABEL, "operator": "Exists"}]},
        "integrations": {"frameworks": list(k8s.kueue.integrations)},
        "fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]},
    }
    if k8s.kueue.wait_for_pods_ready:
        config["waitForPodsReady"] = {
            "timeout": "10m",
            "blockAdmission": False,
            "requeuingStrategy": {
                "timestamp": "Eviction",
                "backoffBaseSeconds": 60,
                "backoffMaxSeconds": 3600,
            },
        }
    if k8s.device_allocation == "dra":
        # Count DRA claims against the same nvidia.com/gpu quota the ClusterQueues hold.
        # MIG instances count against their profile's resource (nvidia.com/mig-<profile>), the
        # one Kueue's flavors cover (gpucluster.k8s.sharing).
        view = pods_view(cluster)
        migs = mig_device_classes(view)
        mig_kinds = {t for t, _, _ in migs}
        kinds = [t for t in gpu_node_types(view) if t not in mig_kinds]
        classes = ["gpu.nvidia.com", *(device_class_name(t) for t in kinds)]
        mappings = [{"name": GPU_RESOURCE, "deviceClassNames": classes}]
        for profile in sorted({p for _, p, _ in migs}):
            names = [c for _, p, c in migs if p == profile]
            mappings.append({"name": mig_resource(profile), "deviceClassNames": names})
        config["resources"] = {"deviceClassMappings": mappings}
        config["featureGates"] = {"DynamicResourceAllocation": True}
    return config


def kueue_values(cluster: Cluster, k8s: KubernetesSpec) -> Values:
    config = yamlout.dump(kueue_configuration(cluster, k8s), width=80)
    values: Values = {
        "enableCertManager": k8s.cert_manager.enabled,
        "managerConfig": {"controllerManagerConfigYaml": config},
    }
    if k8s.prometheus_operator:
        # The chart's ServiceMonitor of the manager's metrics (ClusterQueue usage, pending workloads).
        values["enablePrometheus"] = True
    apply_mirror("kueue", values, k8s.registry_mirror)
    return values


def kai_values(cluster: Cluster, k8s: KubernetesSpec) -> Values:
    values: Values = {
        # gpucluster creates the tenants' queues; a catch-all default queue would bypass their quotas.
        "defaultQueue": {"createDefaultQueue": not leaf_tenants(pods_view(cluster))},
        # The operator's default, made explicit: Slurm-on-Kubernetes nodes carry this label with a
        # value no SchedulingShard serves (names.KAI_UNSERVED_POOL), which keeps KAI off them.
        "global": {"nodePoolLabelKey": KAI_NODE_POOL_LABEL},
        # GPU sharing hands devices over through CDI when the GPU Operator enables it (cdi.enabled above).
        "admission": {"cdi": k8s.gpu_operator.enabled},
    }
    apply_mirror("kai-scheduler", values, k8s.registry_mirror)
    return values


def volcano_values(cluster: Cluster, k8s: KubernetesSpec) -> Values:
    """Volcano's chart: the scheduler configuration (gang, fair share, tenant queues, network
    topology) and the admission webhooks and resource group that put every pod of a tenant
    namespace on Volcano and in its tenant's queue (gpucluster.k8s.volcano)."""
    view = pods_view(cluster)
    custom: Values = {
        "scheduler_config_override": yamlout.dump(volcano.scheduler_configuration(view, k8s), width=80),
        "enabled_admissions": ",".join(volcano.ADMISSIONS),
    }
    admission = volcano.admission_configuration(view, k8s)
    if admission:
        custom["admission_config_override"] = yamlout.dump(admission, width=80)
    values: Values = {"custom": custom}
    apply_mirror("volcano", values, k8s.registry_mirror)
    return values


def slinky_operator_values(k8s: KubernetesSpec) -> Values:
    values: Values = {"crds": {"enabled": False}, "certManager": {"enabled": True}}
    apply_mirror("slurm-operator", values, k8s.registry_mirror)
    return values


def _partition_config(cluster: Cluster, name: str) -> Values:
    partition = next(p for p in cluster.spec.partitions if p.name == name)
    config: Values = {
        "Default": "YES" if partition.default else "NO",
        "MaxTime": partition.max_time,
        "State": "UP",
    }
    if partition.default_time:
        config["DefaultTime"] = partition.default_time
    if partition.exclusive:
        config["OverSubscribe"] = "EXCLUSIVE"
    if partition.priority_tier is not None:
        config["PriorityTier"] = str(partition.priority_tier)
    if partition.tenants:
        config["AllowAccounts"] = ",".join(partition.tenants)
    return config


def nodeset_selector(group: NodeSetGroup) -> dict[str, str]:
    """The labels a NodeSet's pods select: the owner's and the NodeSet's. With the owner label a node
    handed back to Kubernetes stops matching even while it still carries a stale NodeSet label."""
    return {**owner_selector(Owner.SLURM_ON_KUBERNETES), NODESET_LABEL: group.name}


def nodeset_tolerations(cluster: Cluster, k8s: KubernetesSpec, group: NodeSetGroup) -> list[dict[str, Any]]:
    tolerations = [owner_toleration()]
    if cluster.spec.node_types[group.node_type].gpus and k8s.gpu_taint:
        tolerations.append(gpu_toleration())
    return tolerations


# Slurm on Kubernetes runs the same gpucluster-healthcheck as bare metal. Configless Slurm ships
# Prolog scripts to slurmd but not HealthCheckProgram, so the program, a wrapper naming its paths
# (Slurm passes it no arguments) and its healthcheck.conf reach the slurmd pods as a ConfigMap
# (the chart's extraObjects) mounted at this directory; the Prolog is a script the chart distributes.
SLINKY_HEALTH_NAME = "gpucluster-health"
SLINKY_HEALTH_DIR = "/etc/gpucluster-health"
SLINKY_HEALTH_STATE = "/var/spool/slurmd/gpucluster-health"  # SlurmdSpoolDir of Slinky's image
SLINKY_HEALTH_PROGRAM = f"{SLINKY_HEALTH_DIR}/gpucluster-healthcheck"


def slinky_health_wrapper(cluster: Cluster) -> str:
    from gpucluster.render.templating import header

    return (
        f"#!/bin/sh\n{header(cluster.name)}\n"
        f"exec /usr/bin/python3 {SLINKY_HEALTH_DIR}/gpucluster_healthcheck.py "
        f'--config {SLINKY_HEALTH_DIR}/healthcheck.conf --state-dir {SLINKY_HEALTH_STATE} "$@"\n'
    )


def slinky_health(cluster: Cluster, groups: list[NodeSetGroup]) -> Values:
    """The ConfigMap of the health check and the slurm.conf keys that run it. Each NodeSet's slurmd
    pods are `<nodeset>-<ordinal>` (the chart's hostname, ordinals from 0), one section each."""
    from gpucluster.render.health import program_text, render_health_conf, section

    health = cluster.spec.slurm.health
    assert health is not None
    sections = [
        section(g.name, [f"{g.name}-{i}" for i in range(len(g.hosts))], cluster.spec.node_types[g.node_type])
        for g in groups
    ]
    config_map: Values = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": SLINKY_HEALTH_NAME, "labels": dict(MANAGED_BY)},
        "data": {
            "gpucluster-healthcheck": slinky_health_wrapper(cluster),
            "gpucluster_healthcheck.py": program_text(),
            "healthcheck.conf": render_health_conf(cluster, health, sections),
        },
    }
    conf: Values = {
        "HealthCheckProgram": SLINKY_HEALTH_PROGRAM,
        "HealthCheckInterval": str(health.interval),
        "HealthCheckNodeState": ",".join(health.node_state),
    }
    return {"config_map": config_map, "conf": conf}


def slinky_health_pod(podspec: Values, slurmd: Values) -> None:
    """Mount the health check's ConfigMap in a NodeSet's slurmd container (executable files)."""
    podspec["volumes"] = [
        {"name": SLINKY_HEALTH_NAME, "configMap": {"name": SLINKY_HEALTH_NAME, "defaultMode": 0o755}}
    ]
    slurmd["volumeMounts"] = [{"name": SLINKY_HEALTH_NAME, "mountPath": SLINKY_HEALTH_DIR, "readOnly": True}]


# With device_allocation `dra` the GPU Operator's device plugin is off and nothing advertises
# nvidia.com/gpu: a NodeSet's slurmd pod gets its node's GPUs through a ResourceClaimTemplate (one
# claim per pod, made by Kubernetes) asking for the node type's count of whole GPUs of the DRA
# driver's own DeviceClass `gpu.nvidia.com` (the chart creates it with resources.gpus.enabled;
# the per-type `<type>.gpucluster.io` classes exist only for Kubernetes-owned node types, and the
# NodeSet's node selector already pins the node type). Referenced from the pod (podSpec.resourceClaims)
# and the slurmd container (resources.claims); CDI then hands the devices to the container, where
# slurmd finds them (gres.conf AutoDetect=nvidia).
SLINKY_GPU_CLAIM = "gpus"
DRA_GPU_DEVICE_CLASS = GPU_DRIVER


def slinky_gpu_claim_template(group: NodeSetGroup, count: int) -> Values:
    """The ResourceClaimTemplate of a NodeSet's pods (in the chart's namespace, through extraObjects)."""
    request = {
        "name": SLINKY_GPU_CLAIM,
        "exactly": {"deviceClassName": DRA_GPU_DEVICE_CLASS, "allocationMode": "ExactCount", "count": count},
    }
    return {
        "apiVersion": RESOURCE_API,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": k8s_name(group.name, "gpus"), "labels": dict(MANAGED_BY)},
        "spec": {"spec": {"devices": {"requests": [request]}}},
    }


def slinky_gpu_claim_pod(podspec: Values, slurmd: Values, template: Values) -> None:
    """A NodeSet pod's claim from its template, and the slurmd container's use of it."""
    podspec["resourceClaims"] = [
        {"name": SLINKY_GPU_CLAIM, "resourceClaimTemplateName": template["metadata"]["name"]}
    ]
    slurmd["resources"] = {"claims": [{"name": SLINKY_GPU_CLAIM}]}


# slurmd pods are dynamic nodes named <nodeset>-<n>, not inventory hosts: a gres.conf with NodeName
# lines would match none of them. Each NodeSet declares its GPUs (extraConfMap Gres) and slurmd
# finds the devices itself (AutoDetect=nvidia: no NVML library needed; Slurm >= 24.11).
SLINKY_GRES_CONF = "AutoDetect=nvidia\n"


def _slinky_gres_types(cluster: Cluster, groups: list[NodeSetGroup]) -> str:
    sharings = [cluster.spec.node_types[g.node_type].gpus for g in groups]
    shard = any(g is not None and g.sharing is not None and g.sharing.shard is not None for g in sharings)
    return "gpu,shard" if shard else "gpu"


def slinky_slurm_values(cluster: Cluster, k8s: KubernetesSpec) -> Values:
    """The `slurm` chart: one NodeSet per group of same-type Slurm-on-Kubernetes hosts in the same
    partitions, and the partitions of those hosts only."""
    # Imported here: gpucluster.render registers this package's renderers at import time.
    from gpucluster.render.templating import header
    from gpucluster.slurm.render import render_topology_yaml

    assert k8s.slurm is not None
    slurm_pods = slurm_pods_view(cluster)
    groups = nodeset_groups(slurm_pods)
    has_gpus = any(cluster.spec.node_types[g.node_type].gpus for g in groups)
    config_files: Values = {}
    if has_gpus:
        config_files["gres.conf"] = f"{header(cluster.name)}\n{SLINKY_GRES_CONF}"
    # Defines the switches and blocks without naming nodes: pods are dynamic nodes placed by the
    # node annotation (objects.slinky_topology_spec; render_topology_yaml says why).
    topology = render_topology_yaml(slurm_pods, dynamic_nodes=True)
    if topology is not None:
        config_files["topology.yaml"] = topology
    health = slinky_health(cluster, groups) if cluster.spec.slurm.health else None
    extra_objects: list[Values] = [health["config_map"]] if health else []
    nodesets: Values = {}
    for group in groups:
        node_type = cluster.spec.node_types[group.node_type]
        conf: Values = {}
        slurmd: Values = {}
        claim: Values | None = None
        if node_type.gpus:
            # With its shards (spread evenly over the GPUs slurmd detects: no gres.conf line needed).
            gres = node_type.gpus.gres()
            conf["Gres"] = [f"{name}:{count}" for name, count in gres.entries]
            if k8s.device_allocation == "device-plugin":
                slurmd["resources"] = {"limits": {GPU_RESOURCE: node_type.gpus.count}}
            else:
                claim = slinky_gpu_claim_template(group, node_type.gpus.count)
                extra_objects.append(claim)
        if node_type.features:
            conf["Features"] = list(node_type.features)
        nodeset: Values = {
            "enabled": True,
            "replicas": len(group.hosts),
            "extraConfMap": conf,
            "partition": {"enabled": False},
            "podSpec": {
                "nodeSelector": nodeset_selector(group),
                "tolerations": nodeset_tolerations(cluster, k8s, group),
            },
        }
        if health:
            slinky_health_pod(nodeset["podSpec"], slurmd)
        if claim is not None:
            slinky_gpu_claim_pod(nodeset["podSpec"], slurmd, claim)
        mount_in_pod(cluster, nodeset["podSpec"], slurmd)
        if slurmd:
            nodeset["slurmd"] = slurmd
        nodesets[group.name] = nodeset
    partitions: Values = {}
    for partition in cluster.spec.partitions:
        if partition.name not in slurm_pods.partitions:
            continue  # a bare-metal Slurm partition
        members = [g.name for g in groups if partition.name in g.partitions]
        partitions[partition.name] = {
            "enabled": True,
            "nodesets": members,
            "configMap": _partition_config(cluster, partition.name),
        }
    values: Values = {
        "clusterName": cluster.name,
        "configFiles": config_files,
        "controller": {
            "extraConfMap": {"GresTypes": _slinky_gres_types(cluster, groups)} if has_gpus else {}
        },
        "nodesets": nodesets,
        "partitions": partitions,
        "accounting": {"enabled": k8s.slurm.accounting},
    }
    if k8s.slurm.accounting:
        values["accounting"]["storageConfig"] = {
            "host": k8s.slurm.database_host,
            "passwordKeyRef": {"name": k8s.slurm.database_password_secret, "key": "password"},
        }
    if k8s.slurm.login_replicas:
        login: Values = {"enabled": True, "replicas": k8s.slurm.login_replicas}
        podspec: Values = {}
        container: Values = {}
        mount_in_pod(cluster, podspec, container)
        if podspec:
            login["podSpec"] = podspec
            login["login"] = container
        values["loginsets"] = {"login": login}
    extra_objects += rendered_claims(cluster)
    if extra_objects:
        values["extraObjects"] = extra_objects
    if health:
        values["controller"]["extraConfMap"].update(health["conf"])
        if cluster.spec.slurm.health and cluster.spec.slurm.health.prolog:
            # The chart names it prolog-<key> in slurm.conf; configless Slurm ships it to slurmd.
            prolog = f"#!/bin/sh\n{header(cluster.name)}\nexec {SLINKY_HEALTH_PROGRAM} --prolog\n"
            values["prologScripts"] = {SLINKY_HEALTH_NAME: prolog}
    apply_mirror("slurm", values, k8s.registry_mirror)
    return values


def soperator_cluster_values(cluster: Cluster, k8s: KubernetesSpec) -> Values:
    """Soperator's `slurm-cluster` chart: structured partitions over its node sets, and a node filter
    per node set selecting its Slurm-on-Kubernetes nodes."""
    slurm_pods = slurm_pods_view(cluster)
    groups = nodeset_groups(slurm_pods)
    partitions = []
    for partition in cluster.spec.partitions:
        if partition.name not in slurm_pods.partitions:
            continue
        config = " ".join(f"{k}={v}" for k, v in _partition_config(cluster, partition.name).items())
        refs = [g.name for g in groups if partition.name in g.partitions]
        partitions.append({"name": partition.name, "nodeSetRefs": refs, "config": config})
    filters = [
        {
            "name": group.name,
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": key, "operator": "In", "values": [value]}
                                    for key, value in nodeset_selector(group).items()
                                ]
                            }
                        ]
                    }
                }
            },
            "tolerations": nodeset_tolerations(cluster, k8s, group),
        }
        for group in groups
    ]
    values: Values = {
        "clusterName": cluster.name,
        "partitionConfiguration": {"configType": "structured", "partitions": partitions},
        "k8sNodeFilters": filters,
    }
    if slurm_pods.blocks:
        values["slurmConfig"] = {"topologyPlugin": "topology/block"}
    return values


def soperator_nodesets_values(cluster: Cluster, k8s: KubernetesSpec) -> Values:
    """Soperator's `nodesets` chart: one NodeSet per group of same-type hosts in the same partitions.

    slurmd asks for 90% of the node's CPU and memory: kubelet and the node's daemons need the rest.
    """
    assert k8s.slurm is not None
    spool: Values = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "128Gi"}}}
    if k8s.slurm.spool_storage_class:
        spool["storageClassName"] = k8s.slurm.spool_storage_class
    nodesets = []
    for group in nodeset_groups(slurm_pods_view(cluster)):
        node_type = cluster.spec.node_types[group.node_type]
        resources: Values = {
            "cpu": f"{node_type.total_cpus * 900}m",
            "memory": f"{(node_type.memory_mb or 0) * 9 // 10}Mi",
            "ephemeralStorage": "55Gi",
        }
        static = (
            f"Boards=1 SocketsPerBoard={node_type.sockets} CoresPerSocket={node_type.cores_per_socket} "
            f"ThreadsPerCore={node_type.threads_per_core} RealMemory={node_type.memory_mb}"
        )
        node_config: Values = {"features": list(node_type.features), "static": static}
        nodeset: Values = {"name": group.name, "replicas": len(group.hosts), "nodeConfig": node_config}
        if node_type.gpus:
            nodeset["gpu"] = {"enabled": True, "nvidia": {}}
            resources["gpu"] = node_type.gpus.count
        nodeset["tolerations"] = nodeset_tolerations(cluster, k8s, group)
        volumes: Values = {
            "spool": {"volumeClaimTemplateSpec": spool},
            "jail": {"persistentVolumeClaim": {"claimName": k8s.slurm.jail_pvc}},
        }
        submounts = soperator_jail_submounts(cluster)
        if submounts:
            volumes["jailSubMounts"] = submounts
        nodeset["slurmd"] = {"resources": resources, "volumes": volumes}
        nodeset["nodeSelector"] = nodeset_selector(group)
        nodesets.append(nodeset)
    return {"nodesets": nodesets}
