"""The software stack each node type gets, resolved once from the model: packages, their pinned
versions, services, and what the renderers, the role, verify and the Kubernetes layer read.
`problems` lists what would leave a node with mismatched or impossible components."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gpucluster.hostlists import compress
from gpucluster.nodesoftware import facts

if TYPE_CHECKING:
    from gpucluster.model.cluster import Cluster
    from gpucluster.model.nodesoftware import NodeSoftware
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


def resolve_stacks(cluster: Cluster) -> Resolution:
    """Every node type with a managed driver -> its Stack, and the problems found on the way."""
    out = Resolution()
    release = cluster.release
    suite = release.packaging.debian_suite
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

        if node_type.gpus is None:
            fail(["driver", "source"], "a GPU driver on a node type without gpus")
            continue
        generation = soft.generation or facts.generation_of(node_type.gpus.model)
        driver = soft.driver
        version = driver.version
        if driver.source == "debian":
            known = facts.DEBIAN_DRIVERS.get(suite or "")
            if known is None:
                fail(
                    ["driver", "source"],
                    f"driver source `debian` needs a Debian suite; Slurm {release.name} comes from the "
                    "site's repository: use source `nvidia` or `none`",
                )
                continue
            if version is not None and version != known.version:
                fail(["driver", "version"], f"{known.suite} carries driver {known.version}, not {version}")
                continue
            version = known.version
        branch = int(version.split(".")[0]) if version else int(driver.branch or 0)
        modules = driver.kernel_modules
        if modules == "auto":
            if facts.open_modules_required(generation):
                modules = "open"
            elif not facts.open_modules_possible(generation):
                modules = "proprietary"
            elif driver.source == "debian" and not facts.DEBIAN_DRIVERS[suite or ""].open_modules:
                # The suite has no open modules and these GPUs still run the proprietary ones.
                modules = "proprietary"
            else:
                modules = "open"
        if modules == "proprietary" and facts.open_modules_required(generation):
            fail(
                ["driver", "kernel_modules"],
                f"{generation} GPUs ({node_type.gpus.model}) run only the open kernel modules, not proprietary",
            )
        if modules == "open" and not facts.open_modules_possible(generation):
            fail(["driver", "kernel_modules"], f"{generation} GPUs need the proprietary kernel modules")
        oldest = facts.MIN_BRANCH.get(generation or "")
        if oldest is not None and branch < oldest:
            fail(
                ["driver", "version" if driver.version or driver.source == "debian" else "branch"],
                f"{generation} GPUs need driver branch {oldest} or newer; this node would get {version or branch}"
                + (f" (Debian {suite}'s)" if driver.source == "debian" else ""),
            )
        if (
            driver.source == "debian"
            and modules == "open"
            and not facts.DEBIAN_DRIVERS[suite or ""].open_modules
        ):
            fail(
                ["driver", "kernel_modules"],
                f"{suite} has no nvidia-open-kernel-dkms (only sid does): use source `nvidia`",
            )
        cuda = facts.cuda_major(branch)
        dcgm = soft.dcgm if soft.dcgm is not None else driver.source == "nvidia"
        nvidia_only = [
            name
            for name, wanted in (
                ("dcgm", dcgm),
                ("nvlink", soft.nvlink != "none"),
                ("container_toolkit", soft.container_toolkit),
            )
            if wanted
        ]
        if driver.source == "debian" and nvidia_only:
            for name in nvidia_only:
                fail(
                    [name],
                    f"{name} comes from NVIDIA's repository only, versioned with NVIDIA's driver; Debian "
                    f"{suite}'s driver {version} has no matching package: use driver source `nvidia`",
                )
        if soft.dcgm_cuda is not None and dcgm and soft.dcgm_cuda != cuda:
            fail(
                ["dcgm_cuda"],
                f"DCGM for CUDA {soft.dcgm_cuda} does not match driver {version or branch} (CUDA {cuda})",
            )
        if soft.fabric_manager_version is not None and soft.fabric_manager_version != version:
            fail(
                ["fabric_manager_version"],
                f"fabric manager {soft.fabric_manager_version} does not match driver {version or branch}: "
                "it must be the same version",
            )
        if soft.nvlink == "nvl72":
            unblocked = [h for h in hosts if h not in cluster.block_of]
            if unblocked:
                fail(
                    ["nvlink"],
                    f"IMEX needs every NVL72 tray in an NVLink block of fabric.blocks; none for {compress(unblocked)}",
                )
        repo_url = repo_key = None
        if driver.source == "nvidia":
            assert driver.repository is not None
            folder = facts.DEBIAN_DRIVERS[suite].nvidia_repo if suite in facts.DEBIAN_DRIVERS else None
            if driver.repository.url:
                repo_url = driver.repository.url
            elif folder:
                repo_url = f"{NVIDIA_REPO_BASE}/{folder}/{driver.repository.arch}/"
            else:
                fail(
                    ["driver", "repository", "url"],
                    f"NVIDIA has no CUDA repository for {suite or 'the site release'}: give its url (a mirror)",
                )
            repo_key = driver.repository.key
        if driver.source == "debian":
            packages = [*facts.DEBIAN_USERSPACE]
            kernel = facts.DEBIAN_KERNEL[modules]
            if driver.persistenced:
                packages.append(facts.DEBIAN_PERSISTENCED)
        else:
            packages = [*facts.NVIDIA_USERSPACE]
            kernel = facts.NVIDIA_KERNEL[modules]
            if driver.persistenced:
                packages.append(facts.NVIDIA_PERSISTENCED)
        services = ["nvidia-persistenced"] if driver.persistenced else []
        if soft.nvlink == "nvswitch":
            packages.append(f"nvidia-fabricmanager-{branch}")
            services.append("nvidia-fabricmanager")
        if soft.nvlink == "nvl72":
            packages.append(f"nvidia-imex-{branch}")
            services.append("nvidia-imex")
        if dcgm:
            packages.append(f"datacenter-gpu-manager-4-cuda{cuda}")
            services.append("nvidia-dcgm")
        if soft.container_toolkit:
            packages.append("nvidia-container-toolkit")
        nvml = release.packaging.nvml_plugin and node_type.gpus.autodetect == "nvml"
        if nvml:
            packages.append("slurm-wlm-nvml-plugin")
        out.stacks[type_name] = Stack(
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
            pin_version=None
            if driver.source == "debian"
            else f"{version or branch}{'-*' if version else '.*'}",
            cuda_major=cuda,
            fabric_manager=soft.nvlink == "nvswitch",
            imex=soft.nvlink == "nvl72",
            dcgm=dcgm,
            container_toolkit=soft.container_toolkit,
            nvml_plugin=nvml,
        )
    return out
