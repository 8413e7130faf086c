"""cluster.slurm.containers: containers in jobs, the two ways users ask for them.

Slurm's own OCI support (`srun --container=BUNDLE`, oci.conf, Debian's crun run rootless) and
Pyxis + enroot (`srun --container-image=...`, a SPANK plugin built against the release's spank.h).
Only the settings live here; gpucluster.slurm.containers renders them.
"""

import re
from typing import Annotated

from pydantic import Field, StrictBool, field_validator

from gpucluster.model.base import NAME_RE, Strict, Update, spec

SHA256_RE = r"^[0-9a-f]{64}$"
VERSION_RE = r"^[0-9]+(\.[0-9]+){1,3}$"
# A per-user path: enroot expands $(id -u) and ${UID}-style variables itself.
ENROOT_PATH_RE = r"^/\S+$"
# Pyxis' own syntax (srun --container-mounts): SRC:DST[:FLAGS], flags joined with '+'.
MOUNT_RE = re.compile(r"(?P<src>/[^:\s]*):(?P<dst>/[^:\s]*)(?::(?P<flags>[a-z]+(\+[a-z]+)*))?")

# Upstream's source archives (GitHub's tag archives). An offline site mirrors them under the file
# names of `archive_name` and points `sources` there.
UPSTREAM_ARCHIVES = {
    "pyxis": "https://github.com/NVIDIA/pyxis/archive/refs/tags/v{version}.tar.gz",
    "enroot": "https://github.com/NVIDIA/enroot/archive/refs/tags/v{version}.tar.gz",
    # enroot's tag archive lacks its git submodules; makeself is the one its install needs (the
    # version enroot 4.1.2 pins in deps/Makefile).
    "makeself": "https://github.com/megastep/makeself/archive/refs/tags/release-{version}.tar.gz",
}


def archive_name(component: str, version: str) -> str:
    """The file name of a component's source archive in a mirror (`sources`)."""
    return f"{component}-{version}.tar.gz"


class PyxisEnroot(Strict):
    """Pyxis (SPANK plugin) and enroot (the unprivileged container runtime it drives)."""

    pyxis_version: Annotated[str, Field(pattern=VERSION_RE)] = spec(
        "Pyxis release, built on every Slurm host from its source archive against the target "
        "release's libslurm-dev (spank.h).",
        Update.RESTART,
        default="0.24.0",
    )
    pyxis_sha256: Annotated[str, Field(pattern=SHA256_RE)] = spec(
        "sha256 of Pyxis' source archive (`pyxis-<version>.tar.gz`, top directory "
        "`pyxis-<version>/`); an archive with another checksum is refused before anything is built.",
        Update.RESTART,
        default="063653ba39125ac29796cc6079701d1ec34dd4c5baf698efacc0f36bf3619681",
    )
    enroot_version: Annotated[str, Field(pattern=VERSION_RE)] = spec(
        "enroot release, built from its source archive (FORCE_GLIBC=1, then `make setcap`).",
        Update.RESTART,
        default="4.1.2",
    )
    enroot_sha256: Annotated[str, Field(pattern=SHA256_RE)] = spec(
        "sha256 of enroot's source archive (`enroot-<version>.tar.gz`, top directory `enroot-<version>/`).",
        Update.RESTART,
        default="817e8d551135e6f3fc311d1ee57b03fb4d30325acba732f8dea43069ca11f8d3",
    )
    makeself_version: Annotated[str, Field(pattern=VERSION_RE)] = spec(
        "makeself release standing in for enroot's missing git submodule (enroot-makeself).",
        Update.RESTART,
        default="2.4.5",
    )
    makeself_sha256: Annotated[str, Field(pattern=SHA256_RE)] = spec(
        "sha256 of makeself's source archive (`makeself-<version>.tar.gz`, top directory "
        "`makeself-release-<version>/`).",
        Update.RESTART,
        default="7033ad65561046071633e55d1ad679628df29df6af423969c598f4a2df75dd63",
    )
    sources: Annotated[str, Field(pattern=r"^(https?://\S+|file://\S+|/\S*)$")] | None = spec(
        "Where the source archives come from: a URL (a mirror holding `pyxis-<v>.tar.gz`, "
        "`enroot-<v>.tar.gz`, `makeself-<v>.tar.gz`; each node downloads them) or an absolute "
        "directory on the Ansible controller holding those files (copied to the hosts). Omit to "
        "download upstream's GitHub tag archives. An offline site points it at its mirror.",
        Update.RESTART,
        default=None,
    )
    runtime_path: Annotated[str, Field(pattern=ENROOT_PATH_RE)] = spec(
        "ENROOT_RUNTIME_PATH: each user's running containers (per user: keep `$(id -u)` in it).",
        Update.RENDER_ONLY,
        default="/run/enroot/user-$(id -u)",
    )
    cache_path: Annotated[str, Field(pattern=ENROOT_PATH_RE)] = spec(
        "ENROOT_CACHE_PATH: each user's image layers.",
        Update.RENDER_ONLY,
        default="/var/lib/enroot/cache/user-$(id -u)",
    )
    data_path: Annotated[str, Field(pattern=ENROOT_PATH_RE)] = spec(
        "ENROOT_DATA_PATH: each user's container root filesystems (`--container-name` keeps them "
        "there between steps of a job).",
        Update.RENDER_ONLY,
        default="/var/lib/enroot/data/user-$(id -u)",
    )
    writable: StrictBool = spec(
        "Containers are writable unless a job asks `--container-readonly` (ENROOT_ROOTFS_WRITABLE); "
        "upstream's default is read-only.",
        Update.RENDER_ONLY,
        default=False,
    )
    remap_root: StrictBool = spec(
        "Users are root inside their containers unless a job asks `--no-container-remap-root` "
        "(ENROOT_REMAP_ROOT; no privilege outside the container).",
        Update.RENDER_ONLY,
        default=False,
    )
    mounts: list[str] = spec(
        "Mounts every container gets, in `srun --container-mounts` syntax `SRC:DST[:FLAGS]` "
        "(flags joined with `+`, e.g. `/scratch:/scratch` or `/datasets:/datasets:ro`); written "
        "to enroot's mounts.d.",
        Update.RENDER_ONLY,
        default_factory=list,
    )

    @field_validator("mounts")
    @classmethod
    def _mounts(cls, values: list[str]) -> list[str]:
        for value in values:
            if not MOUNT_RE.fullmatch(value):
                raise ValueError(
                    f"{value!r} is not SRC:DST[:FLAGS] with absolute paths (e.g. /scratch:/scratch:ro)"
                )
        return values

    def archive_url(self, component: str) -> str:
        """Where `component`'s archive is downloaded from when `sources` is not a directory."""
        version = {
            "pyxis": self.pyxis_version,
            "enroot": self.enroot_version,
            "makeself": self.makeself_version,
        }[component]
        if self.sources is None:
            return UPSTREAM_ARCHIVES[component].format(version=version)
        return f"{self.sources.rstrip('/')}/{archive_name(component, version)}"


class ContainerSettings(Strict):
    """Containers in jobs on the nodes of this cluster."""

    oci: StrictBool = spec(
        "Slurm's OCI support: oci.conf for Debian's crun run rootless, so `srun --container=BUNDLE` "
        "and `sbatch --container=BUNDLE` run an OCI bundle as the job's user (crun installed on the "
        "node types below; /run/user/<uid> made for each job's user).",
        Update.RESTART,
        default=False,
    )
    pyxis: PyxisEnroot | None = spec(
        "Pyxis + enroot: `srun --container-image=...`, `--container-name`, `--container-mounts`, "
        "`sbatch --container-image`. Installed on the controllers, login hosts and the node types "
        "below (srun loads the plugin where it runs). Omit for none.",
        Update.RESTART,
        default=None,
    )
    node_types: list[Annotated[str, Field(pattern=NAME_RE)]] = spec(
        "Node types (keys of `node_types`) whose nodes run container jobs; empty: every node type.",
        Update.RESTART,
        default_factory=list,
    )
