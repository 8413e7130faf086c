"""The `containers/` folder and oci.conf: containers in jobs (cluster.slurm.containers).

- slurm/oci.conf (render_oci, through render_slurm): Slurm's OCI support with rootless crun.
- containers/enroot.conf, mounts.fstab: enroot's site
  configuration, installed by the pyxis_enroot role.
- containers/settings.yaml: what the roles need beyond the files (versions, archives and their
  checksums, the hosts of each role).
"""

from __future__ import annotations

from typing import Any

from gpucluster import yamlout
from gpucluster.model.base import Owner
from gpucluster.model.cluster import Cluster
from gpucluster.model.containers import MOUNT_RE, ContainerSettings, PyxisEnroot, archive_name
from gpucluster.render.templating import header, render_template

SETTINGS_FILE = "containers/settings.yaml"


def container_settings(cluster: Cluster) -> ContainerSettings | None:
    return cluster.spec.slurm.containers


def container_nodes(cluster: Cluster) -> list[str]:
    """The compute nodes that run container jobs: those of the listed node types, or all."""
    settings = container_settings(cluster)
    if settings is None:
        return []
    cluster = cluster.owned_by(Owner.SLURM)
    wanted = set(settings.node_types)
    return [h for h in cluster.node_type_of if not wanted or cluster.node_type_of[h] in wanted]


def pyxis_hosts(cluster: Cluster) -> list[str]:
    """Where Pyxis is built: the container nodes, and every host srun runs on (controllers and
    login hosts): srun loads the plugin named in plugstack.conf and fails without it."""
    slurm = cluster.spec.slurm
    hosts = [*container_nodes(cluster), *slurm.controller, *slurm.login]
    return list(dict.fromkeys(hosts))


def render_oci(cluster: Cluster) -> dict[str, str]:
    settings = container_settings(cluster)
    if settings is None or not settings.oci:
        return {}
    text = render_template("slurm/oci.conf.j2", header=header(cluster.name), release=cluster.release)
    return {"slurm/oci.conf": text}


def mount_lines(pyxis: PyxisEnroot) -> list[tuple[str, str, str]]:
    """enroot fstab entries for `mounts` (SRC:DST[:FLAGS], Pyxis' syntax)."""
    lines = []
    for value in pyxis.mounts:
        found = MOUNT_RE.fullmatch(value)
        assert found is not None  # the model validated it
        flags = (found.group("flags") or "").split("+") if found.group("flags") else []
        options = ",".join(["x-create=dir", "rbind", "nosuid", *flags])
        lines.append((found.group("src"), found.group("dst"), options))
    return lines


def _archives(pyxis: PyxisEnroot) -> dict[str, dict[str, str]]:
    versions = {
        "pyxis": (pyxis.pyxis_version, pyxis.pyxis_sha256),
        "enroot": (pyxis.enroot_version, pyxis.enroot_sha256),
        "makeself": (pyxis.makeself_version, pyxis.makeself_sha256),
    }
    return {
        name: {
            "version": version,
            "file": archive_name(name, version),
            "url": pyxis.archive_url(name),
            "sha256": sha256,
        }
        for name, (version, sha256) in versions.items()
    }


def settings_data(cluster: Cluster) -> dict[str, Any]:
    settings = container_settings(cluster)
    assert settings is not None
    pyxis = settings.pyxis
    data: dict[str, Any] = {
        "oci": settings.oci,
        "nodes": container_nodes(cluster),
        # Who gets a lasting /run/user/<uid> for rootless crun (the declared Unix users; a
        # directory service's users get it from pam_systemd or the site's linger).
        "users": [user.name for user in cluster.spec.users] if settings.oci else [],
        "pyxis": None,
    }
    if pyxis is not None:
        local = pyxis.sources is not None and pyxis.sources.startswith("/")
        data["pyxis"] = {
            "hosts": pyxis_hosts(cluster),
            # A directory on the Ansible controller (copied), or None: each host downloads.
            "sources_dir": pyxis.sources if local else None,
            "archives": _archives(pyxis),
            "plugin_subdir": cluster.release.packaging.plugin_subdir,
            "runtime_path": pyxis.runtime_path,
            "cache_path": pyxis.cache_path,
            "data_path": pyxis.data_path,
        }
    return data


def render_containers(cluster: Cluster) -> dict[str, str]:
    """Nothing when the inventory has no containers in jobs."""
    settings = container_settings(cluster)
    if settings is None or not cluster.owned_by(Owner.SLURM).hosts:
        return {}
    head = header(cluster.name)
    files = {SETTINGS_FILE: head + "\n" + yamlout.dump(settings_data(cluster), width=4096)}
    pyxis = settings.pyxis
    if pyxis is not None:
        files["containers/enroot.conf"] = render_template(
            "containers/enroot.conf.j2", header=head, pyxis=pyxis
        )
        if pyxis.mounts:
            files["containers/mounts.fstab"] = render_template(
                "containers/mounts.fstab.j2", header=head, mounts=mount_lines(pyxis)
            )
    return files
