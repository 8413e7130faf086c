"""cluster.storage in Slurm on Kubernetes: each filesystem with a `kubernetes:` volume is mounted at
its mount point in the slurmd pods of every NodeSet and in the login pods (Slinky), or as a jail
submount of every worker NodeSet (Soperator), from a PersistentVolumeClaim: one gpucluster renders
(ReadWriteMany, of the entry's StorageClass and size) or an existing one the entry names."""

from __future__ import annotations

from typing import Any

from gpucluster.k8s.names import MANAGED_BY
from gpucluster.model.cluster import Cluster
from gpucluster.model.storage import SharedFilesystem

Values = dict[str, Any]


def volume_name(fs: SharedFilesystem) -> str:
    """The pod volume and the rendered claim: prefixed, so no chart volume has the same name."""
    return f"shared-{fs.name}"


def claim_name(fs: SharedFilesystem) -> str:
    assert fs.kubernetes is not None
    return fs.kubernetes.claim or volume_name(fs)


def kubernetes_filesystems(cluster: Cluster) -> list[SharedFilesystem]:
    return [fs for fs in cluster.spec.storage if fs.kubernetes is not None]


def rendered_claims(cluster: Cluster) -> list[Values]:
    """The claims gpucluster renders (in the Slurm namespace, through the chart's extraObjects)."""
    claims = []
    for fs in kubernetes_filesystems(cluster):
        volume = fs.kubernetes
        assert volume is not None
        if volume.claim is not None:
            continue
        claims.append(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": volume_name(fs), "labels": dict(MANAGED_BY)},
                "spec": {
                    "accessModes": ["ReadWriteMany"],
                    "storageClassName": volume.storage_class,
                    "resources": {"requests": {"storage": volume.size}},
                },
            }
        )
    return claims


def pod_volumes(cluster: Cluster) -> list[Values]:
    return [
        {"name": volume_name(fs), "persistentVolumeClaim": {"claimName": claim_name(fs)}}
        for fs in kubernetes_filesystems(cluster)
    ]


def container_mounts(cluster: Cluster) -> list[Values]:
    return [{"name": volume_name(fs), "mountPath": fs.mount} for fs in kubernetes_filesystems(cluster)]


def mount_in_pod(cluster: Cluster, podspec: Values, container: Values) -> None:
    """Add the filesystems to a pod spec and its container (after volumes already there)."""
    volumes = pod_volumes(cluster)
    if volumes:
        podspec["volumes"] = [*podspec.get("volumes", []), *volumes]
        container["volumeMounts"] = [*container.get("volumeMounts", []), *container_mounts(cluster)]


def soperator_jail_submounts(cluster: Cluster) -> list[Values]:
    """Soperator's NodeSet jail submounts (`slurmd.volumes.jailSubMounts`, source inlined)."""
    return [
        {
            "name": volume_name(fs),
            "mountPath": fs.mount,
            "volumeSource": {"persistentVolumeClaim": {"claimName": claim_name(fs)}},
        }
        for fs in kubernetes_filesystems(cluster)
    ]
