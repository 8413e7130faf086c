"""Registry mirror for air-gapped sites: which values keys hold image references in each chart,
their published defaults, and how chart references are rewritten.

tests/k8s checks these tables against the upstream values.yaml of the pinned versions, so a
chart that gains an image key fails the tests instead of pulling from the internet.
"""

from __future__ import annotations

from typing import Any

from gpucluster.k8s.model import ChartPin, RegistryMirror

KeyPath = tuple[str, ...]

# release -> values key path -> default image repository (registry/path) of the published chart.
IMAGE_KEYS: dict[str, dict[KeyPath, str]] = {
    "cert-manager": {
        # Since v1.20 every image is <imageRegistry>/<imageNamespace>/<name> (image.repository empty).
        ("imageRegistry",): "quay.io",
    },
    "network-operator": {
        ("operator", "repository"): "nvcr.io/nvidia/cloud-native",
        ("operator", "ofedDriver", "initContainer", "repository"): "nvcr.io/nvidia/mellanox",
        ("node-feature-discovery", "image", "repository"): "nvcr.io/nvidia/mellanox/node-feature-discovery",
        # Subchart, installed only with maintenanceOperator.enabled (gpucluster leaves it off).
        ("maintenance-operator-chart", "operator", "image", "repository"): "nvcr.io/nvidia/mellanox",
    },
    "gpu-operator": {
        ("validator", "repository"): "nvcr.io/nvidia",
        ("operator", "repository"): "nvcr.io/nvidia",
        ("driver", "repository"): "nvcr.io/nvidia",
        ("driver", "manager", "repository"): "nvcr.io/nvidia/cloud-native",
        ("toolkit", "repository"): "nvcr.io/nvidia/k8s",
        ("devicePlugin", "repository"): "nvcr.io/nvidia",
        ("dcgm", "repository"): "nvcr.io/nvidia/cloud-native",
        ("dcgmExporter", "repository"): "nvcr.io/nvidia/k8s",
        ("gfd", "repository"): "nvcr.io/nvidia",
        ("migManager", "repository"): "nvcr.io/nvidia/cloud-native",
        ("nodeStatusExporter", "repository"): "nvcr.io/nvidia",
        ("gds", "repository"): "nvcr.io/nvidia/cloud-native",
        ("gdrcopy", "repository"): "nvcr.io/nvidia/cloud-native",
        ("vgpuManager", "driverManager", "repository"): "nvcr.io/nvidia/cloud-native",
        ("vgpuDeviceManager", "repository"): "nvcr.io/nvidia/cloud-native",
        ("vfioManager", "repository"): "nvcr.io/nvidia/cloud-native",
        ("vfioManager", "driverManager", "repository"): "nvcr.io/nvidia/cloud-native",
        ("sandboxDevicePlugin", "repository"): "nvcr.io/nvidia",
        ("kataSandboxDevicePlugin", "repository"): "nvcr.io/nvidia/cloud-native",
        ("ccManager", "repository"): "nvcr.io/nvidia/cloud-native",
        ("draDriver", "repository"): "nvcr.io/nvidia",
        # Subchart value (node-feature-discovery's own values.yaml).
        ("node-feature-discovery", "image", "repository"): "registry.k8s.io/nfd/node-feature-discovery",
    },
    "dra-driver-nvidia-gpu": {
        ("image", "repository"): "registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu",
    },
    "kueue": {
        # The packaged chart points at the release registry, not the staging one in git.
        ("controllerManager", "manager", "image", "repository"): "registry.k8s.io/kueue/kueue",
        ("kueueViz", "backend", "image", "repository"): "registry.k8s.io/kueue/kueueviz-backend",
        ("kueueViz", "frontend", "image", "repository"): "registry.k8s.io/kueue/kueueviz-frontend",
    },
    "kai-scheduler": {
        # One registry for every KAI image; the published chart sets the release registry.
        ("global", "registry"): "ghcr.io/kai-scheduler/kai-scheduler",
    },
    "volcano": {
        # Every Volcano image is <basic.image_registry>/<basic.*_image_name>.
        ("basic", "image_registry"): "docker.io",
    },
    "slurm-operator": {
        ("operator", "image", "repository"): "ghcr.io/slinkyproject/slurm-operator",
        ("webhook", "image", "repository"): "ghcr.io/slinkyproject/slurm-operator-webhook",
    },
    "slurm": {
        ("controller", "slurmctld", "image", "repository"): "ghcr.io/slinkyproject/slurmctld",
        ("controller", "reconfigure", "image", "repository"): "ghcr.io/slinkyproject/slurmctld",
        ("controller", "logfile", "image", "repository"): "docker.io/library/alpine",
        ("restapi", "slurmrestd", "image", "repository"): "ghcr.io/slinkyproject/slurmrestd",
        ("accounting", "slurmdbd", "image", "repository"): "ghcr.io/slinkyproject/slurmdbd",
        ("loginsetDefaults", "login", "image", "repository"): "ghcr.io/slinkyproject/login",
        ("loginsetDefaults", "initconf", "image", "repository"): "docker.io/library/alpine",
        ("nodesetDefaults", "slurmd", "image", "repository"): "ghcr.io/slinkyproject/slurmd",
        ("nodesetDefaults", "logfile", "image", "repository"): "docker.io/library/alpine",
    },
}

# Values keys holding image pull secrets, and their form: a list of names (the GPU Operator's
# ClusterPolicy takes strings), of LocalObjectReferences ({name: ...}), or one name (Volcano).
_GPU_OPERATOR_COMPONENTS = (
    "operator",
    "validator",
    "driver",
    "toolkit",
    "devicePlugin",
    "gfd",
    "migManager",
    "nodeStatusExporter",
    "gds",
    "gdrcopy",
    "vgpuManager",
    "vgpuDeviceManager",
    "vfioManager",
    "sandboxDevicePlugin",
    "kataSandboxDevicePlugin",
    "ccManager",
    "kataManager",
    "draDriver",
)
PULL_SECRET_KEYS: dict[str, tuple[str, list[KeyPath]]] = {
    "cert-manager": ("ref", [("global", "imagePullSecrets")]),
    "network-operator": ("name", [("imagePullSecrets",)]),
    "gpu-operator": ("name", [(c, "imagePullSecrets") for c in _GPU_OPERATOR_COMPONENTS]),
    "dra-driver-nvidia-gpu": ("ref", [("imagePullSecrets",)]),
    "kueue": ("ref", [("controllerManager", "imagePullSecrets")]),
    "kai-scheduler": ("ref", [("global", "imagePullSecrets")]),
    "slurm-operator": ("ref", [("imagePullSecrets",)]),
    "slurm": ("ref", [("imagePullSecrets",)]),
    "volcano": ("string", [("basic", "image_pull_secret")]),
}


def mirror_image(mirror: RegistryMirror | None, repository: str) -> str:
    """`nvcr.io/nvidia/k8s` -> `<mirror>/nvcr.io/nvidia/k8s`: the source registry stays in the path,
    so images of different registries cannot collide in the mirror."""
    return repository if mirror is None else f"{mirror.images}/{repository}"


def chart_name(pin: ChartPin) -> str:
    return pin.chart.rstrip("/").rsplit("/", 1)[-1]


def chart_source(pin: ChartPin, mirror: RegistryMirror | None) -> tuple[str, str | None]:
    """(chart reference, repository URL or None) after mirroring."""
    if mirror is None:
        return pin.chart, pin.repo
    return f"oci://{mirror.charts}/{chart_name(pin)}", None


def set_path(values: dict[str, Any], path: KeyPath, value: Any) -> None:
    node = values
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value


def apply_mirror(release: str, values: dict[str, Any], mirror: RegistryMirror | None) -> None:
    """Rewrite every image key of the release's chart to the mirror (in place)."""
    if mirror is None:
        return
    for path, default in IMAGE_KEYS.get(release, {}).items():
        set_path(values, path, mirror_image(mirror, default))
    if mirror.pull_secret and release in PULL_SECRET_KEYS:
        form, paths = PULL_SECRET_KEYS[release]
        entry: Any = mirror.pull_secret if form in ("name", "string") else {"name": mirror.pull_secret}
        for path in paths:
            set_path(values, path, entry if form == "string" else [entry])
