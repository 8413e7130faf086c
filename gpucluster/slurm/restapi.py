"""What cluster.slurm.rest_api means on the hosts: where the JWT key lives, what slurmrestd listens
on and which OpenAPI plugins it loads. One place for slurm.conf (the renderer) and the playbook
(the gpucluster_render module hands it to the slurm_dbd and slurm_restd roles)."""

from __future__ import annotations

from typing import Any

from gpucluster.model.cluster import Cluster
from gpucluster.model.spec import SlurmSettings

JWT_KEY_NAME = "jwt_hs256.key"
# A slurmdbd host that is no controller has no StateSaveLocation: its copy of the key lives here
# (Debian's /var/lib/slurm belongs to the slurm user).
DBD_ONLY_KEY_DIR = "/var/lib/slurm"


def controller_key_path(slurm: SlurmSettings) -> str:
    """The key slurmctld reads (AuthAltParameters in slurm.conf): in StateSaveLocation, which every
    controller shares, so a backup controller holds the same key."""
    return f"{slurm.state_dir}/{JWT_KEY_NAME}"


def key_paths(cluster: Cluster) -> dict[str, str]:
    """Host -> path of its copy of the key: every controller, and the slurmdbd host (its own copy
    unless it is a controller too)."""
    slurm = cluster.spec.slurm
    paths = {host: controller_key_path(slurm) for host in slurm.controller}
    if slurm.accounting and slurm.accounting.host not in paths:
        paths[slurm.accounting.host] = f"{DBD_ONLY_KEY_DIR}/{JWT_KEY_NAME}"
    return paths


def openapi_plugins(slurm: SlurmSettings) -> list[str]:
    """The OpenAPI plugins slurmrestd loads (`-s`): the release's current ones only, so the API
    surface is what is tested; the accounting ones only with slurmdbd."""
    rest = slurm.release.rest_api
    return [*rest.plugins, *(rest.db_plugins if slurm.accounting else ())]


def rest_api_settings(cluster: Cluster) -> dict[str, Any] | None:
    """What the roles need to run the REST API; None when it is off."""
    slurm = cluster.spec.slurm
    if slurm.rest_api is None:
        return None
    return {
        "host": slurm.rest_api.host,
        "port": slurm.rest_api.port,
        # Every IPv4 address: a host's name may resolve to a loopback address on itself (Debian's
        # 127.0.1.1), which clients on other hosts could not reach.
        "listen": f"0.0.0.0:{slurm.rest_api.port}",
        "openapi_plugins": openapi_plugins(slurm),
        # 23.11+: the API version is the data parser's (`-d`); before, the plugins' own.
        "data_parser": slurm.release.rest_api.data_parser,
        # Clients call http://<host>:<port>/slurm/<url_version>/... and /slurmdb/<url_version>/...
        "url_version": slurm.release.rest_api.url_version,
        "key_host": slurm.controller[0],
        "key_paths": key_paths(cluster),
    }
