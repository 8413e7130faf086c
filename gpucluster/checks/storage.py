"""Checks of cluster.storage against the inventory: one backing per filesystem, mount points that do
not collide, servers and hosts that exist, a filesystem someone mounts, users' homes on a shared
filesystem. Resolves which hosts mount each filesystem (Cluster.storage_hosts)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import hostlist

from gpucluster.model.spec import Owner
from gpucluster.model.storage import SharedFilesystem, below, filesystem_of, home_directory

if TYPE_CHECKING:
    from gpucluster.model.checking import CheckContext

# Directories of the system itself: a filesystem mounted over one hides what the host runs on.
SYSTEM_DIRS = (
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/lib",
    "/lib64",
    "/proc",
    "/run",
    "/sbin",
    "/sys",
    "/usr",
    "/var",
)


def default_hosts(checker: CheckContext) -> list[str]:
    """Every bare-metal Slurm host: controllers, accounting host, login hosts, Slurm's nodes (none
    when bare-metal Slurm owns no node: then there is no bare-metal Slurm)."""
    cluster = checker.cluster
    nodes = cluster.hosts_owned_by(Owner.SLURM)
    if not nodes:
        return []
    slurm = checker.spec.slurm
    named = [*slurm.controller, *([slurm.accounting.host] if slurm.accounting else []), *slurm.login]
    return [h for h in dict.fromkeys([*named, *nodes]) if h in checker.inv.hostvars]


def check_backing(checker: CheckContext, index: int, fs: SharedFilesystem, hosts: list[str]) -> None:
    """One backing for the hosts that mount it (a filesystem only Kubernetes pods mount has its claim)."""
    parts: list[str | int] = ["storage", index]
    given = [key for key, on in (("nfs_server", fs.nfs_server), ("source", fs.source)) if on is not None]
    given += ["site_managed"] if fs.site_managed else []
    if not given and (hosts or fs.kubernetes is None):
        checker.fail(
            parts,
            "say what backs the filesystem on its hosts: `nfs_server` (an inventory host exports it), "
            "`source` + `type` (an existing export or parallel filesystem), or `site_managed: true` (already mounted)",
        )
    elif len(given) > 1:
        checker.fail([*parts, given[1]], f"`{given[0]}` and `{given[1]}` both back it: give one")
    if fs.source is not None and fs.type is None:
        checker.fail([*parts, "type"], "`source` needs its filesystem `type` (nfs, nfs4, lustre, ...)")
    if fs.type is not None and fs.source is None:
        checker.fail([*parts, "type"], "`type` is the type of `source`, which is missing")
    if fs.site_managed and fs.options is not None:
        checker.fail(
            [*parts, "options"], "a site-managed filesystem is mounted by the site, not with these options"
        )
    server = fs.nfs_server
    if server is not None and server.host not in checker.inv.hostvars:
        checker.fail(
            [*parts, "nfs_server", "host"],
            f"NFS server `{server.host}` is not a host of {checker.inv.hosts_file.file}",
        )


# Directories of the system whose own subdirectories are the system's too; below the others of
# SYSTEM_DIRS (/var) only these: a site's state or spool directory under /var/lib may be a mount.
_WHOLE = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib64", "/proc", "/run", "/sbin", "/sys", "/usr")
_VAR_SYSTEM = ("/var/lib", "/var/log", "/var/cache", "/var/spool", "/var/tmp", "/var/run")


def _hides(mount: str, system: str) -> bool:
    """A filesystem mounted at `mount` hides files of the system directory `system`."""
    if system in _WHOLE:
        return below(mount, system)
    return mount == system or mount in _VAR_SYSTEM or below(mount, "/var/run")


def check_mount_point(
    checker: CheckContext, index: int, fs: SharedFilesystem, mounts: dict[str, int]
) -> None:
    parts: list[str | int] = ["storage", index, "mount"]
    system = "/" if fs.mount == "/" else next((d for d in SYSTEM_DIRS if _hides(fs.mount, d)), None)
    if system is not None:
        checker.fail(parts, f"{fs.mount} is a directory of the system ({system}): mount it elsewhere")
        return
    for mount, other in mounts.items():
        theirs = checker.spec.storage[other].name
        if mount == fs.mount:
            checker.fail(
                parts, f"{fs.mount} is also the mount point of `{theirs}` (cluster.storage[{other}])"
            )
        elif below(fs.mount, mount) or below(mount, fs.mount):
            inner, outer = sorted((mount, fs.mount), key=len, reverse=True)
            checker.fail(
                parts,
                f"{fs.mount} and {mount} (`{theirs}`, cluster.storage[{other}]) are nested: {inner} would "
                f"hide or be hidden by {outer} depending on mount order; use separate directories",
            )
    mounts.setdefault(fs.mount, index)


def resolve_hosts(checker: CheckContext, index: int, fs: SharedFilesystem) -> list[str]:
    """The hosts that mount the filesystem (the NFS server included), in name order."""
    parts: list[str | int] = ["storage", index, "hosts"]
    if fs.hosts is None:
        hosts = default_hosts(checker)
    else:
        hosts = []
        for n, name in enumerate(fs.hosts):
            hosts += checker.hosts_of(name, [*parts, n]) or []
    if not hosts and fs.kubernetes is None:
        where = (
            "`hosts` names no host" if fs.hosts is not None else "the inventory has no bare-metal Slurm host"
        )
        checker.fail(
            parts if fs.hosts is not None else ["storage", index],
            f"nobody mounts `{fs.name}`: {where} (name the hosts or groups that mount it in `hosts`, "
            "or give it a `kubernetes:` volume)",
        )
    server = fs.nfs_server.host if fs.nfs_server else None
    if hosts and server in checker.inv.hostvars:
        hosts.append(server)
    return list(hostlist.numerically_sorted(list(set(hosts))))


def check_homes(checker: CheckContext) -> None:
    """With shared filesystems declared, every declared user lives on one of them."""
    storage = checker.spec.storage
    marked = [i for i, fs in enumerate(storage) if fs.home]
    for i in marked[1:]:
        checker.fail(
            ["storage", i, "home"],
            f"`{storage[marked[0]].name}` (cluster.storage[{marked[0]}]) already holds the homes; mark one filesystem",
        )
    if not storage:
        return
    for index, user in enumerate(checker.spec.users):
        home = home_directory(user.name, user.home, storage)
        fs = filesystem_of(home, storage)
        parts: list[str | int] = ["users", index, *(["home"] if user.home else [])]
        if fs is None:
            mounts = ", ".join(f.mount for f in storage)
            checker.fail(
                parts,
                f"home {home} is on no shared filesystem of cluster.storage ({mounts}): jobs on other "
                "hosts would not find it. Mark the filesystem of the homes `home: true`, or set this "
                "user's `home` on one",
            )
        elif home == fs.mount:
            checker.fail(
                parts,
                f"home {home} is the mount point of `{fs.name}` itself: give the user a directory of its own",
            )


def check_storage(checker: CheckContext) -> None:
    mounts: dict[str, int] = {}
    names: dict[str, int] = {}
    for index, fs in enumerate(checker.spec.storage):
        if fs.name in names:
            checker.fail(
                ["storage", index, "name"],
                f"filesystem `{fs.name}` is defined twice (also cluster.storage[{names[fs.name]}])",
            )
            continue
        names[fs.name] = index
        hosts = resolve_hosts(checker, index, fs)
        check_backing(checker, index, fs, hosts)
        check_mount_point(checker, index, fs, mounts)
        if fs.kubernetes is not None and checker.spec.kubernetes is None:
            checker.fail(
                ["storage", index, "kubernetes"], "needs the `kubernetes:` section (with `kubernetes.slurm`)"
            )
        if fs.cloud is not None and checker.spec.cloud is None:
            checker.fail(
                ["storage", index, "cloud"], "needs the `cloud:` section (the stack that creates it)"
            )
        checker.cluster.storage_hosts[fs.name] = hosts
    check_homes(checker)
