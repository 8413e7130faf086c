"""Shared filesystems (`cluster.storage`): what backs each one, where it is mounted and by whom.

The model only: gpucluster.cluster checks it against the inventory, gpucluster.render.storage
writes what the nfs_server and shared_storage roles apply, the Kubernetes layer turns the
`kubernetes:` sub-key into volumes and the cloud layer creates the `cloud:` ones.
"""

import posixpath
from typing import Annotated, Literal

from pydantic import Field, StrictBool, field_validator, model_validator

from gpucluster.model.base import NameList, Strict, Update, spec

# A DNS label: the name also names the filesystem's Kubernetes volume and claim.
FILESYSTEM_NAME_RE = r"^[a-z]([a-z0-9-]{0,30}[a-z0-9])?$"
# A Kubernetes quantity of bytes with a binary suffix, e.g. 10Ti.
QUANTITY_RE = r"^[1-9][0-9]*(Ki|Mi|Gi|Ti|Pi)$"
DNS_LABEL_RE = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
# fstab's third and fourth fields: a filesystem type, comma-separated options without blanks.
FSTYPE_RE = r"^[a-z0-9][a-z0-9._-]*$"
OPTIONS_RE = r"^[^\s#]+$"
# What a real mount gets unless the entry says otherwise: wait for the network at boot.
DEFAULT_OPTIONS = "defaults,_netdev"


def absolute_path(value: str) -> str:
    """An absolute path written once: no trailing slash, no `.`/`..`/empty parts, no blanks."""
    if not value.startswith("/") or value != posixpath.normpath(value) or value.startswith("//"):
        raise ValueError(f"{value!r} is not an absolute path in plain form (e.g. /home, /scratch)")
    if any(c.isspace() for c in value):
        raise ValueError(f"{value!r} holds a blank, which fstab and exports cannot carry")
    return value


def below(path: str, mount: str) -> bool:
    """`path` is `mount` or inside it."""
    return path == mount or path.startswith(mount.rstrip("/") + "/")


class NfsServer(Strict):
    """An NFS export served by a host of the inventory (role nfs_server)."""

    host: str = spec(
        "Inventory host that exports the directory (role nfs_server: nfs-kernel-server, the export "
        "in /etc/exports.d with root squash). It gets the filesystem at `mount` too, as a bind mount "
        "of the export rather than an NFS mount of itself.",
        Update.STORAGE,
    )
    export: str = spec(
        "Directory the server exports, created by the role (root, 0755) when missing.", Update.STORAGE
    )
    address: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9.:-]*$")] | None = spec(
        "Name or address the clients mount from. Default: the host's `ansible_host` in the "
        "inventory, else its inventory name.",
        Update.STORAGE,
        default=None,
    )
    clients: list[Annotated[str, Field(pattern=r"^[A-Za-z0-9*?.:/_-]+$")]] = spec(
        "Who may mount the export, as exports(5) writes clients: host names, networks "
        "(10.0.0.0/16), wildcards (*.cluster.example). Default: the hosts of `hosts` by their "
        "inventory names, which the server must resolve. Nobody else is allowed.",
        Update.STORAGE,
        default_factory=list,
    )

    @field_validator("export")
    @classmethod
    def _absolute(cls, value: str) -> str:
        return absolute_path(value)


class KubernetesVolume(Strict):
    """The same filesystem in Slurm on Kubernetes: a PersistentVolumeClaim its pods mount."""

    storage_class: str | None = spec(
        "StorageClass of a ReadWriteMany PersistentVolumeClaim that gpucluster renders in the Slurm "
        "namespace, named like the filesystem (e.g. `standard-rwx` for GKE Filestore, `efs-sc`, "
        "`azurefile-csi-premium`). With `size`; or `claim` instead.",
        Update.KUBERNETES,
        default=None,
    )
    size: Annotated[str, Field(pattern=QUANTITY_RE)] | None = spec(
        "Requested size of that claim (a Kubernetes quantity, e.g. 10Ti).", Update.KUBERNETES, default=None
    )
    claim: Annotated[str, Field(pattern=DNS_LABEL_RE)] | None = spec(
        "An existing PersistentVolumeClaim in the Slurm namespace (e.g. bound to a PersistentVolume "
        "of the site's NFS or Lustre export) instead of a rendered one.",
        Update.KUBERNETES,
        default=None,
    )

    @model_validator(mode="after")
    def _one_source(self) -> "KubernetesVolume":
        if self.claim is not None and (self.storage_class is not None or self.size is not None):
            raise ValueError(
                "give either `claim` (an existing claim) or `storage_class` with `size`, not both"
            )
        if self.claim is None and (self.storage_class is None or self.size is None):
            raise ValueError("give `storage_class` and `size` (a claim gpucluster renders), or `claim`")
        return self


class CloudFilesystem(Strict):
    """A managed filesystem the cloud stack creates (the inventory's `cloud:` provider)."""

    service: Literal["filestore"] = spec(
        "Managed NFS service the stack creates: GCP Filestore (provider gcp), on the stack's "
        "network. Elsewhere (AWS EFS/FSx, Azure Files, Nebius), create it outside and point "
        "`source` or `kubernetes.claim` at it.",
        Update.REBUILD,
    )
    size_gb: Annotated[int, Field(ge=1, le=1_000_000)] | None = spec(
        "Capacity in GB (Filestore: at least 1024; 2560 for BASIC_SSD).",
        Update.REBUILD,
        default=None,
    )
    tier: Literal["BASIC_HDD", "BASIC_SSD", "ZONAL", "REGIONAL"] | None = spec(
        "Filestore tier. Default: ZONAL.", Update.REBUILD, default=None
    )


class SharedFilesystem(Strict):
    """One shared filesystem: what backs it, where it is mounted, by which hosts."""

    name: Annotated[str, Field(pattern=FILESYSTEM_NAME_RE)] = spec(
        "Name of the filesystem (lowercase DNS label): its Kubernetes volume and claim too.", Update.STORAGE
    )
    mount: str = spec(
        "Mount point, the same on every host that mounts it (e.g. /home, /scratch).", Update.STORAGE
    )
    nfs_server: NfsServer | None = spec(
        "Backed by an NFS export that a host of the inventory serves (role nfs_server).",
        Update.STORAGE,
        default=None,
    )
    source: Annotated[str, Field(pattern=r"^\S+$")] | None = spec(
        "Backed by an existing export the site has: fstab's first field, e.g. `filer01:/export/home` "
        "(NFS) or `10.0.0.5@o2ib:/lustre` (Lustre). With `type`.",
        Update.STORAGE,
        default=None,
    )
    type: Annotated[str, Field(pattern=FSTYPE_RE)] | None = spec(
        "Filesystem type of `source` (fstab's third field): nfs, nfs4, lustre, ... Its client must "
        "be installed on the hosts (the role installs nfs-common for nfs and nfs4 only).",
        Update.STORAGE,
        default=None,
    )
    options: Annotated[str, Field(pattern=OPTIONS_RE)] | None = spec(
        f"Mount options (fstab's fourth field). Default: `{DEFAULT_OPTIONS}`.", Update.STORAGE, default=None
    )
    site_managed: StrictBool = spec(
        "Already mounted by the site on every host of `hosts` (autofs, a baked image, a parallel "
        "filesystem's own tooling): the shared_storage role only checks that the mount point is a "
        "mounted filesystem, and never mounts or unmounts it.",
        Update.STORAGE,
        default=False,
    )
    hosts: NameList | None = spec(
        "Inventory hosts and groups that mount it. Default: every bare-metal Slurm host "
        "(controllers, accounting host, login hosts, nodes owned by slurm).",
        Update.STORAGE,
        default=None,
    )
    home: StrictBool = spec(
        "Holds the users' homes: a user of cluster.users without `home` lives in `<mount>/<name>`. "
        "The homes are created once, on one host (the NFS server, else the first host in name "
        "order that mounts it); the others create the accounts only.",
        Update.UNIX_ACCOUNTS,
        default=False,
    )
    kubernetes: KubernetesVolume | None = spec(
        "Mount it in Slurm on Kubernetes too (Slinky NodeSets and login pods, Soperator's workers "
        "and login nodes) from a PersistentVolumeClaim; omit for bare-metal hosts only.",
        Update.KUBERNETES,
        default=None,
    )
    cloud: CloudFilesystem | None = spec(
        "Let the cloud stack create it as a managed service; the stack exports its address and "
        "share (output `filesystems`), which `source` or a PersistentVolume of `kubernetes.claim` "
        "then names.",
        Update.REBUILD,
        default=None,
    )

    @field_validator("mount")
    @classmethod
    def _absolute(cls, value: str) -> str:
        return absolute_path(value)

    @property
    def backing(self) -> str:
        """`nfs_server`, `source` or `site_managed` (the checks make sure there is exactly one)."""
        if self.nfs_server is not None:
            return "nfs_server"
        return "site_managed" if self.site_managed else "source"


# Where a user lives when neither the user nor a filesystem says otherwise (Debian's default).
HOME_ROOT = "/home"


def home_filesystem(storage: list[SharedFilesystem]) -> SharedFilesystem | None:
    return next((fs for fs in storage if fs.home), None)


def home_directory(name: str, explicit: str | None, storage: list[SharedFilesystem]) -> str:
    """A user's home: its own `home`, else under the filesystem marked `home: true`, else /home."""
    if explicit is not None:
        return explicit
    shared = home_filesystem(storage)
    return f"{shared.mount if shared else HOME_ROOT}/{name}"


def filesystem_of(path: str, storage: list[SharedFilesystem]) -> SharedFilesystem | None:
    """The filesystem holding `path` (the deepest mount point above it)."""
    holding = [fs for fs in storage if below(path, fs.mount)]
    return max(holding, key=lambda fs: len(fs.mount), default=None)
