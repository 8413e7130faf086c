"""Optional: the Kubernetes layer installed by the stack as Helm releases (stack config
`installKubernetes: true`), with exactly the charts, versions and values the `helm` renderer writes.

Releases go in the renderer's install order, each after the one before it and after the node pools
(the GPU Operator needs GPU nodes to become ready). The Kubernetes objects (queues, flavors,
topologies) stay with the Ansible `gpu_workloads` role, which retries webhook calls right after
install; the stack's `ansibleInventory` output points it at this cluster.
"""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_kubernetes as k8s

from gpucluster.k8s.mirror import chart_source
from gpucluster.k8s.model import kubernetes_of
from gpucluster.k8s.render import releases
from gpucluster.model.cluster import Cluster


class KubernetesLayer(pulumi.ComponentResource):
    """The add-on Helm releases of the inventory's `kubernetes:` section."""

    def __init__(
        self,
        cluster: Cluster,
        kubeconfig: pulumi.Input[str],
        after: Sequence[pulumi.Resource],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpucluster:kubernetes:Layer", cluster.name, None, opts)
        spec = kubernetes_of(cluster)
        if spec is None:
            raise pulumi.RunError(
                f"{cluster.inventory.cluster_file.file}: cluster.kubernetes: installKubernetes is set "
                "but the inventory has no `kubernetes:` section"
            )
        self.provider = k8s.Provider(
            cluster.name,
            kubeconfig=pulumi.Output.secret(kubeconfig),
            opts=pulumi.ResourceOptions(parent=self),
        )
        previous: list[pulumi.Resource] = list(after)
        self.releases: list[k8s.helm.v3.Release] = []
        for release in releases(cluster, spec):
            chart, repo = chart_source(release.pin, spec.registry_mirror)
            helm_release = k8s.helm.v3.Release(
                release.name,
                name=release.name,
                chart=chart,
                version=release.pin.version,
                repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=repo) if repo else None,
                namespace=release.namespace,
                create_namespace=True,
                values=release.values,
                atomic=True,
                timeout=900,
                opts=pulumi.ResourceOptions(parent=self, provider=self.provider, depends_on=previous),
            )
            self.releases.append(helm_release)
            previous = [helm_release]
        self.register_outputs({"releases": [r.name for r in self.releases]})
