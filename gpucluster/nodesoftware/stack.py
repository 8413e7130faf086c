"""The software stack each node type gets, resolved once from the model: packages, their pinned
versions, services, and what the renderers, the role, verify and the Kubernetes layer read.
`problems` lists what would leave a node with mismatched or impossible components."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gpucluster.hostlists import compress
from gpucluster.model.sharing import effective_autodetect
from gpucluster.nodesoftware import facts

if TYPE_CHECKING:
    from gpucluster.model.cluster import Cluster
    from gpucluster.model.nodesoftware import DriverSettings, NodeSoftware
    from gpucluster.model.spec import NodeType

NVIDIA_REPO_BASE = "https://developer.download.nvidia.com/compute/cuda/repos"
KEYRING = "/usr/share/keyrings/gpucluster-nvidia-cuda.asc"


@dataclass(frozen=True)
class Stack:
    """What the gpu_driver role installs on the hosts of one node type."""

    node_type: str
    source: str  # debian | nvidia
    suite: str | None
    version: str | None  # exact driver version, when pinned
    branch: int | None
    kernel_modules: str  # open | proprietary
    generation: str | None
    packages: tuple[str, ...]
    kernel_packages: tuple[str, ...]
    services: tuple[str, ...]  # enabled and started where the driver is loaded
    repository_url: str | None
    repository_key: str | None
    pin_version: str | None  # apt preference `Pin: version`
    cuda_major: int | None
    fabric_manager: bool
    imex: bool
    dcgm: bool
    container_toolkit: bool
    nvml_plugin: bool

    @property
    def installs(self) -> dict[str, bool]:
        """Component -> installed by the role (the Kubernetes layer leaves those to us)."""
        return {"driver": True, "toolkit": self.container_toolkit, "dcgm": self.dcgm}


@dataclass
class Resolution:
    stacks: dict[str, Stack] = field(default_factory=dict)
    # (key path under cluster, message)
    problems: list[tuple[list[str | int], str]] = field(default_factory=list)


def software_of(node_type: NodeType) -> NodeSoftware | None:
    return node_type.software


# Where a node type's problems go: (key path under its `software`, message).
Fail = Callable[[list[str | int], str], None]


class _Driver:
    """The driver a node type gets, as resolved: what its checks and packages follow from. (Not a
    dataclass: generating its methods costs about a millisecond at import, on every command.)"""

    __slots__ = ("branch", "cuda", "dcgm", "generation", "modules", "source", "suite", "version")

    def __init__(
        self,
        source: str,  # debian | nvidia
        suite: str | None,
        version: str | None,
        branch: int,  # 0: neither version nor branch given
        modules: str,  # open | proprietary
        generation: str | None,
        dcgm: bool,
    ) -> None:
        self.source = source
        self.suite = suite
        self.version = version
        self.branch = branch
        self.modules = modules
        self.generation = generation
        self.cuda = facts.cuda_major(branch)
        self.dcgm = dcgm


def resolve_stacks(cluster: Cluster) -> Resolution:
    """Every node type with a managed driver -> its Stack, and the problems found on the way."""
    out = Resolution()
    for type_name, node_type in cluster.spec.node_types.items():
        soft = node_type.software
        if soft is None or soft.driver.source == "none":
            continue
        hosts = cluster.hosts_by_type.get(type_name, [])
        where = compress(hosts) if hosts else "(no hosts)"
        base: list[str | int] = ["node_types", type_name, "software"]

        def fail(
            parts: list[str | int], message: str, base: list[str | int] = base, where: str = where
        ) -> None:
            out.problems.append(([*base, *parts], f"{message} (hosts {where})"))

        stack = _stack_of(cluster, type_name, node_type, soft, hosts, fail)
        if stack is not None:
            out.stacks[type_name] = stack
    return out


def _stack_of(
    cluster: Cluster, type_name: str, node_type: NodeType, soft: NodeSoftware, hosts: list[str], fail: Fail
) -> Stack | None:
    """One node type's Stack, its problems said through `fail`; None where a problem leaves no
    driver to resolve (no GPUs, a Debian driver the suite does not carry)."""
    if node_type.gpus is None:
        fail(["driver", "source"], "a GPU driver on a node type without gpus")
        return None
    release = cluster.release
    suite = release.packaging.debian_suite
    generation = soft.generation or facts.generation_of(node_type.gpus.model)
    settings = soft.driver
    version = settings.version
    if settings.source == "debian":
        version = _debian_version(settings.version, suite, release.name, fail)
        if version is None:
            return None
    branch = int(version.split(".")[0]) if version else int(settings.branch or 0)
    modules = _kernel_modules(settings, generation, suite)
    dcgm = soft.dcgm if soft.dcgm is not None else settings.source == "nvidia"
    driver = _Driver(settings.source, suite, version, branch, modules, generation, dcgm)
    _check_driver(driver, settings, node_type.gpus.model, fail)
    _check_components(driver, soft, hosts, cluster.block_of, fail)
    repo_url = repo_key = None
    if driver.source == "nvidia":
        repo_url, repo_key = _repository(settings, suite, fail)
    packages, kernel, services = _packages(driver, soft)
    # MIG nodes autodetect with NVML whatever gpus.autodetect says (gpucluster.model.sharing).
    autodetect = effective_autodetect(node_type.gpus.autodetect, node_type.gpus.sharing)
    nvml = release.packaging.nvml_plugin and autodetect == "nvml"
    if nvml:
        packages.append("slurm-wlm-nvml-plugin")
    sharing = node_type.gpus.sharing
    if sharing is not None and sharing.mps is not None and driver.source == "debian":
        # nvidia-cuda-mps-control, which gpucluster-mps starts for jobs asking gres/mps.
        packages.append("nvidia-cuda-mps")
    return Stack(
        node_type=type_name,
        source=driver.source,
        suite=suite,
        version=version,
        branch=branch or None,
        kernel_modules=modules,
        generation=generation,
        packages=tuple(packages),
        kernel_packages=kernel,
        services=tuple(services),
        repository_url=repo_url,
        repository_key=repo_key,
        pin_version=None if driver.source == "debian" else f"{version or branch}{'-*' if version else '.*'}",
        cuda_major=driver.cuda,
        fabric_manager=soft.nvlink == "nvswitch",
        imex=soft.nvlink == "nvl72",
        dcgm=driver.dcgm,
        container_toolkit=soft.container_toolkit,
        nvml_plugin=nvml,
    )


def _debian_version(given: str | None, suite: str | None, release: str, fail: Fail) -> str | None:
    """The version of the suite's driver; None (a problem said) where the release has no Debian
    suite or the inventory pins another version."""
    known = facts.DEBIAN_DRIVERS.get(suite or "")
    if known is None:
        fail(
            ["driver", "source"],
            f"driver source `debian` needs a Debian suite; Slurm {release} comes from the "
            "site's repository: use source `nvidia` or `none`",
        )
        return None
    if given is not None and given != known.version:
        fail(["driver", "version"], f"{known.suite} carries driver {known.version}, not {given}")
        return None
    return known.version


def _kernel_modules(settings: DriverSettings, generation: str | None, suite: str | None) -> str:
    """`open` or `proprietary`: as given, or for `auto` what the GPUs run (open where both do,
    unless Debian's suite has no open modules)."""
    if settings.kernel_modules != "auto":
        return settings.kernel_modules
    if facts.open_modules_required(generation):
        return "open"
    if not facts.open_modules_possible(generation):
        return "proprietary"
    if settings.source == "debian" and not facts.DEBIAN_DRIVERS[suite or ""].open_modules:
        # The suite has no open modules and these GPUs still run the proprietary ones.
        return "proprietary"
    return "open"


def _check_driver(driver: _Driver, settings: DriverSettings, model: str | None, fail: Fail) -> None:
    """The kernel modules and the branch against the GPUs' generation and the Debian suite."""
    generation, modules, suite = driver.generation, driver.modules, driver.suite
    if modules == "proprietary" and facts.open_modules_required(generation):
        fail(
            ["driver", "kernel_modules"],
            f"{generation} GPUs ({model}) run only the open kernel modules, not proprietary",
        )
    if modules == "open" and not facts.open_modules_possible(generation):
        fail(["driver", "kernel_modules"], f"{generation} GPUs need the proprietary kernel modules")
    oldest = facts.MIN_BRANCH.get(generation or "")
    if oldest is not None and driver.branch < oldest:
        fail(
            ["driver", "version" if settings.version or driver.source == "debian" else "branch"],
            f"{generation} GPUs need driver branch {oldest} or newer; this node would get "
            f"{driver.version or driver.branch}"
            + (f" (Debian {suite}'s)" if driver.source == "debian" else ""),
        )
    if driver.source == "debian" and modules == "open" and not facts.DEBIAN_DRIVERS[suite or ""].open_modules:
        fail(
            ["driver", "kernel_modules"],
            f"{suite} has no nvidia-open-kernel-dkms (only sid does): use source `nvidia`",
        )


def _check_components(
    driver: _Driver, soft: NodeSoftware, hosts: list[str], block_of: dict[str, str], fail: Fail
) -> None:
    """The components beside the driver: NVIDIA-only ones on a Debian driver, versions that must
    match the driver's, and for IMEX an NVLink block (`block_of`) for each of the `hosts`."""
    version_or_branch = driver.version or driver.branch
    nvidia_only = [
        name
        for name, wanted in (
            ("dcgm", driver.dcgm),
            ("nvlink", soft.nvlink != "none"),
            ("container_toolkit", soft.container_toolkit),
        )
        if wanted
    ]
    if driver.source == "debian":
        for name in nvidia_only:
            fail(
                [name],
                f"{name} comes from NVIDIA's repository only, versioned with NVIDIA's driver; Debian "
                f"{driver.suite}'s driver {driver.version} has no matching package: use driver source `nvidia`",
            )
    if soft.dcgm_cuda is not None and driver.dcgm and soft.dcgm_cuda != driver.cuda:
        fail(
            ["dcgm_cuda"],
            f"DCGM for CUDA {soft.dcgm_cuda} does not match driver {version_or_branch} (CUDA {driver.cuda})",
        )
    if soft.fabric_manager_version is not None and soft.fabric_manager_version != driver.version:
        fail(
            ["fabric_manager_version"],
            f"fabric manager {soft.fabric_manager_version} does not match driver {version_or_branch}: "
            "it must be the same version",
        )
    if soft.nvlink == "nvl72":
        unblocked = [h for h in hosts if h not in block_of]
        if unblocked:
            fail(
                ["nvlink"],
                f"IMEX needs every NVL72 tray in an NVLink block of fabric.blocks; none for {compress(unblocked)}",
            )


def _repository(settings: DriverSettings, suite: str | None, fail: Fail) -> tuple[str | None, str | None]:
    """(url, key) of NVIDIA's CUDA repository: the url given, else NVIDIA's for the Debian suite
    (None, a problem said, where NVIDIA has none)."""
    assert settings.repository is not None
    folder = facts.DEBIAN_DRIVERS[suite].nvidia_repo if suite in facts.DEBIAN_DRIVERS else None
    url = None
    if settings.repository.url:
        url = settings.repository.url
    elif folder:
        url = f"{NVIDIA_REPO_BASE}/{folder}/{settings.repository.arch}/"
    else:
        fail(
            ["driver", "repository", "url"],
            f"NVIDIA has no CUDA repository for {suite or 'the site release'}: give its url (a mirror)",
        )
    return url, settings.repository.key


def _packages(driver: _Driver, soft: NodeSoftware) -> tuple[list[str], tuple[str, ...], list[str]]:
    """(packages, kernel packages, services) of the driver and the components beside it."""
    persistenced = soft.driver.persistenced
    if driver.source == "debian":
        packages = [*facts.DEBIAN_USERSPACE]
        kernel = facts.DEBIAN_KERNEL[driver.modules]
        if persistenced:
            packages.append(facts.DEBIAN_PERSISTENCED)
    else:
        packages = [*facts.NVIDIA_USERSPACE]
        kernel = facts.NVIDIA_KERNEL[driver.modules]
        if persistenced:
            packages.append(facts.NVIDIA_PERSISTENCED)
    services = ["nvidia-persistenced"] if persistenced else []
    if soft.nvlink == "nvswitch":
        packages.append(f"nvidia-fabricmanager-{driver.branch}")
        services.append("nvidia-fabricmanager")
    if soft.nvlink == "nvl72":
        packages.append(f"nvidia-imex-{driver.branch}")
        services.append("nvidia-imex")
    if driver.dcgm:
        packages.append(f"datacenter-gpu-manager-4-cuda{driver.cuda}")
        services.append("nvidia-dcgm")
    if soft.container_toolkit:
        packages.append("nvidia-container-toolkit")
    return packages, kernel, services
