"""Shared GPUs on Kubernetes, from the same declaration Slurm reads (gpus.sharing):

- MIG: the GPU Operator's MIG manager partitions each node as its `nvidia.com/mig.config` label
  names, from a ConfigMap of mig-parted configurations rendered here (one per node type, the same
  layout bare-metal Slurm's gpu_mig role applies), and the device plugin advertises the instances
  (`mig.strategy`: mixed -> nvidia.com/mig-<profile>; single -> nvidia.com/gpu, one profile per node).
  With DRA, the driver advertises the instances instead: a DeviceClass per node type and profile
  selects them by the driver's `profile` attribute.
- time-slicing: the device plugin's sharing.timeSlicing config, chosen per node by its
  `nvidia.com/device-plugin.config` label; the node advertises its GPUs times the replicas.

Kueue's flavors and the tenants' ResourceQuotas count these units (gpucluster.model.sharing).
Label keys, ConfigMap layout and values keys: the GPU Operator chart v26.7.0 (migManager.config,
devicePlugin.config), k8s-mig-manager and k8s-device-plugin's documented configuration files, and
the DRA driver 0.4.1 (cmd/gpu-kubelet-plugin/mig.go: attributes `type` = mig, `profile`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpucluster import yamlout
from gpucluster.k8s.names import k8s_name
from gpucluster.model.sharing import GpuSharing, kubernetes_units, mig_counts

if TYPE_CHECKING:
    from gpucluster.k8s.model import KubernetesSpec
    from gpucluster.model.cluster import Cluster

MIG_CONFIG_LABEL = "nvidia.com/mig.config"
DEVICE_PLUGIN_CONFIG_LABEL = "nvidia.com/device-plugin.config"
MIG_PARTED_CONFIG_MAP = "gpucluster-mig-parted"
DEVICE_PLUGIN_CONFIG_MAP = "gpucluster-device-plugin"
MIG_DISABLED = "all-disabled"
DEVICE_PLUGIN_DEFAULT = "default"
DRA_DRIVER = "gpu.nvidia.com"


def sharing_by_type(view: Cluster) -> dict[str, GpuSharing]:
    """Node type -> its sharing, for the node types of the view that share GPUs."""
    found: dict[str, GpuSharing] = {}
    for name in sorted(view.hosts_by_type):
        gpus = view.spec.node_types[name].gpus
        if gpus is not None and gpus.sharing is not None:
            found[name] = gpus.sharing
    return found


def mig_types(view: Cluster) -> list[str]:
    return [name for name, s in sharing_by_type(view).items() if s.mig is not None]


def time_sliced_types(view: Cluster) -> list[str]:
    return [name for name, s in sharing_by_type(view).items() if s.time_slicing is not None]


def mig_strategy(view: Cluster, k8s: KubernetesSpec) -> str:
    """The GPU Operator's mig.strategy: as set, else mixed where Kubernetes runs MIG nodes."""
    if k8s.gpu_operator.mig_strategy is not None:
        return k8s.gpu_operator.mig_strategy
    return "mixed" if mig_types(view) and k8s.device_allocation == "device-plugin" else "none"


def config_name(type_name: str) -> str:
    """The name of a node type's mig-parted and device plugin configurations (and label value)."""
    return f"gpucluster-{k8s_name(type_name)}"


def mig_parted_config(view: Cluster) -> dict[str, Any]:
    """mig-parted's configuration file (`version: v1`, `mig-configs`): MIG off, and each MIG node
    type's layout (every GPU alike: `devices: all`; else a list of GPU indexes per layout)."""
    configs: dict[str, Any] = {MIG_DISABLED: [{"devices": "all", "mig-enabled": False}]}
    for name in mig_types(view):
        gpus = view.spec.node_types[name].gpus
        assert gpus is not None and gpus.sharing is not None and gpus.sharing.mig is not None
        layouts = gpus.sharing.mig.layouts(gpus.count)
        groups: dict[str, tuple[list[int], dict[str, int]]] = {}
        for index, layout in enumerate(layouts):
            groups.setdefault(repr(sorted(layout.items())), ([], layout))[0].append(index)
        entries = []
        for indexes, layout in groups.values():
            devices: Any = "all" if len(indexes) == gpus.count else indexes
            entries.append({"devices": devices, "mig-enabled": True, "mig-devices": dict(layout)})
        configs[config_name(name)] = entries
    return {"version": "v1", "mig-configs": configs}


def device_plugin_configs(view: Cluster) -> dict[str, str]:
    """The device plugin's configuration files by name: a plain default, and each time-sliced node
    type's (sharing.timeSlicing of nvidia.com/gpu, its replicas)."""
    configs = {DEVICE_PLUGIN_DEFAULT: yamlout.dump({"version": "v1"}, width=80)}
    for name in time_sliced_types(view):
        sharing = view.spec.node_types[name].gpus.sharing  # type: ignore[union-attr]
        assert sharing is not None and sharing.time_slicing is not None
        config = {
            "version": "v1",
            "sharing": {
                "timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": sharing.time_slicing}]}
            },
        }
        configs[config_name(name)] = yamlout.dump(config, width=80)
    return configs


def gpu_operator_sharing(view: Cluster, k8s: KubernetesSpec) -> dict[str, Any]:
    """The GPU Operator values that carry the sharing: mig.strategy, the MIG manager's ConfigMap
    where Kubernetes runs MIG nodes, the device plugin's where it time-slices."""
    values: dict[str, Any] = {"mig": {"strategy": mig_strategy(view, k8s)}}
    if mig_types(view):
        text = yamlout.dump(mig_parted_config(view), width=80)
        values["migManager"] = {
            "enabled": True,
            "config": {
                "create": True,
                "name": MIG_PARTED_CONFIG_MAP,
                "default": MIG_DISABLED,
                "data": {"config.yaml": text},
            },
        }
    if time_sliced_types(view) and k8s.device_allocation == "device-plugin":
        values["devicePlugin"] = {
            "config": {
                "create": True,
                "name": DEVICE_PLUGIN_CONFIG_MAP,
                "default": DEVICE_PLUGIN_DEFAULT,
                "data": device_plugin_configs(view),
            }
        }
    return values


def node_sharing_labels(cluster: Cluster, host: str, k8s: KubernetesSpec) -> dict[str, str]:
    """The labels that pick a Kubernetes node's MIG layout and device plugin configuration."""
    gpus = cluster.node_type(host).gpus
    if gpus is None or gpus.sharing is None:
        return {}
    name = config_name(cluster.node_type_of[host])
    labels: dict[str, str] = {}
    if gpus.sharing.mig is not None:
        labels[MIG_CONFIG_LABEL] = name
    if gpus.sharing.time_slicing is not None and k8s.device_allocation == "device-plugin":
        labels[DEVICE_PLUGIN_CONFIG_LABEL] = name
    return labels


def units_of_type(view: Cluster, k8s: KubernetesSpec, type_name: str) -> dict[str, int]:
    """Extended resource -> count on one node of a type, as the device plugin advertises it."""
    gpus = view.spec.node_types[type_name].gpus
    assert gpus is not None
    return kubernetes_units(gpus.count, gpus.sharing, mig_strategy(view, k8s))


def mig_device_classes(view: Cluster) -> list[tuple[str, str, str]]:
    """(node type, profile, DeviceClass name) of each MIG instance kind the view's nodes carry."""
    found = []
    for name in mig_types(view):
        gpus = view.spec.node_types[name].gpus
        assert gpus is not None and gpus.sharing is not None and gpus.sharing.mig is not None
        for profile in mig_counts(gpus.sharing.mig, gpus.count):
            found.append((name, profile, f"{k8s_name(name)}-{profile.replace('.', '-')}.gpucluster.io"))
    return found


def mig_class_expression(profile: str) -> str:
    return (
        f"device.driver == '{DRA_DRIVER}' && device.attributes['{DRA_DRIVER}'].type == 'mig' && "
        f"device.attributes['{DRA_DRIVER}'].profile == '{profile}'"
    )


def mig_resource(profile: str) -> str:
    """The extended resource Kueue and quotas count a MIG profile's instances by."""
    return f"nvidia.com/mig-{profile}"


def sharing_problems(view: Cluster, k8s: KubernetesSpec) -> list[tuple[list[str | int], str]]:
    """(key path under cluster, message) of what Kubernetes cannot do with the shared GPUs it owns."""
    problems: list[tuple[list[str | int], str]] = []
    strategy = k8s.gpu_operator.mig_strategy
    for name, sharing in sharing_by_type(view).items():
        parts: list[str | int] = ["node_types", name, "gpus", "sharing"]
        gpus = view.spec.node_types[name].gpus
        assert gpus is not None
        if sharing.time_slicing is not None and k8s.device_allocation == "dra":
            problems.append(
                (
                    [*parts, "time_slicing"],
                    "time-slicing replicas are the device plugin's, off with device_allocation `dra` (a DRA "
                    "claim shares a GPU through its own config): leave time_slicing out or use the device plugin",
                )
            )
        if sharing.mig is None or k8s.device_allocation != "device-plugin":
            continue
        if strategy == "none":
            problems.append(
                (
                    ["kubernetes", "gpu_operator", "mig_strategy"],
                    f"node type {name} has MIG instances, which the device plugin offers only with mig_strategy "
                    "single or mixed (leave it out for mixed)",
                )
            )
        if strategy == "single":
            profiles = {p for layout in sharing.mig.layouts(gpus.count) for p in layout}
            if len(profiles) > 1:
                problems.append(
                    (
                        ["kubernetes", "gpu_operator", "mig_strategy"],
                        f"mig_strategy single needs one profile on every GPU of a node; node type {name} has "
                        f"{', '.join(sorted(profiles))}: use mixed",
                    )
                )
    return problems
