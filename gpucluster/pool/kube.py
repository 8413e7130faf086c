"""The Kubernetes calls of a shared pool's moves, one method per Kubernetes step of steps.py
(lower-quota, cordon, wait-pods, evict, uncordon, raise-quota), through the official client.

The client (`kubernetes`) is imported when a PoolKubernetes is made from a kubeconfig, as the
power program imports a cloud's SDK: the rest of pool/ stays standard library only, and the
tests hand in an ApiClient of their own that talks to a loopback server.

Every change applies only to the version of the object it was computed from: two programs moving
two nodes of one pool at once never lose each other's quota change or taint; the one that loses
the race reads the object again and retries. Nodes get a JSON Patch (RFC 6902) that first tests
the resourceVersion (a dict body the client would send as a strategic merge patch, whose taint
list replaces the node's whole); ClusterQueues a merge patch carrying the resourceVersion (the
only kind the client sends a custom resource; the API server answers 409 to a stale one).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# The taint a pool node carries while Slurm owns it (set by cordon before the node returns,
# removed by uncordon once it is lent): Kubernetes schedules nothing there meanwhile, not even a
# pod that tolerates cordoned nodes.
POOL_TAINT_KEY = "gpucluster.io/pool"
POOL_TAINT = {"key": POOL_TAINT_KEY, "value": "slurm", "effect": "NoSchedule"}
# The return-to-service gate's taint (gpucluster.model.gate.KUBERNETES_TAINT; its value the way
# back): the gate's pod on the node burns it in and removes the taint on a pass.
GATE_TAINT_KEY = "gpucluster.io/gate"
GATE_TAINT = {"key": GATE_TAINT_KEY, "value": "move", "effect": "NoSchedule"}
GPU_RESOURCE = "nvidia.com/gpu"
KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSION = "v1beta2"
CONFLICT_RETRIES = 5
# Phases of pods that still hold their node's GPUs.
ENDED_PHASES = ("Succeeded", "Failed")


class KubernetesError(Exception):
    """A call the API server refused, or a ClusterQueue without the pool's flavor and resource."""


@dataclass(frozen=True)
class PoolQueues:
    """Where a lent node's GPUs are counted: the flavor, the resource, and the ClusterQueues with
    their weights (a node's GPUs are split among them in proportion; see split_gpus)."""

    flavor: str
    weights: Mapping[str, int]
    resource: str = GPU_RESOURCE


def split_gpus(gpus: int, weights: Mapping[str, int]) -> dict[str, int]:
    """A node's GPUs split among the ClusterQueues in proportion to their weights, whole GPUs
    (largest remainder; a tie goes to the queue listed first). The same split is added when the
    node is lent and taken away when it returns, so the quotas come back exactly."""
    total = sum(weights.values())
    if gpus < 0 or total <= 0 or any(w < 0 for w in weights.values()):
        raise ValueError(f"cannot split {gpus} GPUs by weights {dict(weights)}")
    exact = {queue: gpus * weight / total for queue, weight in weights.items()}
    shares = {queue: int(value) for queue, value in exact.items()}
    order = sorted(weights, key=lambda q: (-(exact[q] - shares[q]), list(weights).index(q)))
    for queue in order[: gpus - sum(shares.values())]:
        shares[queue] += 1
    return shares


def _quantity(value: Any) -> int:
    """A whole-number quantity ("8", 8); GPUs are counted whole."""
    text = str(value)
    if not text.isdigit():
        raise KubernetesError(f"nominalQuota {value!r} is not a whole number of GPUs")
    return int(text)


def _status(exc: Exception) -> int | None:
    status = getattr(exc, "status", None)
    return status if isinstance(status, int) else None


class PoolKubernetes:
    """The Kubernetes side of one pool's moves. `api_client` is a kubernetes.client.ApiClient."""

    def __init__(
        self, api_client: Any, queues: PoolQueues, log: Callable[[str], None] = lambda m: None
    ) -> None:
        from kubernetes import client  # the official client; imported when used

        self.core = client.CoreV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self.client = client
        self.queues = queues
        self.log = log

    @classmethod
    def from_kubeconfig(
        cls, path: str | None, queues: PoolQueues, log: Callable[[str], None]
    ) -> PoolKubernetes:
        """From a kubeconfig file (the controllers'), or the service account's when `path` is None."""
        from kubernetes import client, config

        configuration = client.Configuration()
        if path is None:
            config.load_incluster_config(client_configuration=configuration)
        else:
            config.load_kube_config(config_file=path, client_configuration=configuration)
        return cls(client.ApiClient(configuration), queues, log)

    # --- retries on a lost race ---------------------------------------------------------------

    def _patched(self, what: str, read: Callable[[], Any], patch_of: Callable[[Any], Any],
                 send: Callable[[Any], Any]) -> bool:  # fmt: skip
        """Read, build the patch (none: nothing to change), send; again on a conflict. True when
        something was changed."""
        for _ in range(CONFLICT_RETRIES):
            current = read()
            patch = patch_of(current)
            if not patch:
                return False
            try:
                send(patch)
                return True
            except self.client.ApiException as exc:
                # 409: another writer's change came first; 422: the resourceVersion test failed.
                if _status(exc) not in (409, 422):
                    raise KubernetesError(f"{what}: {exc.status} {exc.reason}: {exc.body}") from None
                self.log(f"{what}: changed by another writer meanwhile; reading it again")
        raise KubernetesError(f"{what}: still changed by another writer after {CONFLICT_RETRIES} tries")

    # --- nodes ------------------------------------------------------------------------------------

    def _node(self, name: str) -> dict[str, Any]:
        try:
            node = self.core.read_node(name, _preload_content=False)
        except self.client.ApiException as exc:
            raise KubernetesError(f"node {name}: {exc.status} {exc.reason}") from None
        return _json(node)

    def cordon(self, name: str) -> bool:
        """Step `cordon`: unschedulable, and the pool's taint (a DaemonSet's pods tolerate cordons,
        not this taint). True when the node changed."""
        changed = self._add_taint(name, POOL_TAINT, unschedulable=True)
        self.log(f"{name}: cordoned and tainted {POOL_TAINT_KEY}" if changed else f"{name}: already cordoned")
        return changed

    def enter_gate(self, name: str) -> bool:
        """The lend's `gate` step: the gate's taint (way back `move`) before the pool's goes, so
        that no pod but the gate's burn-in lands there until it passes."""
        changed = self._add_taint(name, GATE_TAINT, unschedulable=False)
        self.log(
            f"{name}: in the gate ({GATE_TAINT_KEY}=move)" if changed else f"{name}: already in the gate"
        )
        return changed

    def _add_taint(self, name: str, wanted: dict[str, str], unschedulable: bool) -> bool:
        def patch_of(node: dict[str, Any]) -> list[dict[str, Any]]:
            spec = node.get("spec") or {}
            taints = spec.get("taints") or []
            ops: list[dict[str, Any]] = []
            if unschedulable and not spec.get("unschedulable"):
                ops.append({"op": "add", "path": "/spec/unschedulable", "value": True})
            if not any(t.get("key") == wanted["key"] and t.get("effect") == wanted["effect"] for t in taints):
                if "taints" in spec and spec["taints"] is not None:
                    ops.append({"op": "add", "path": "/spec/taints/-", "value": wanted})
                else:
                    ops.append({"op": "add", "path": "/spec/taints", "value": [wanted]})
            return _tested(node, ops)

        return self._patched(f"taint {name} {wanted['key']}", lambda: self._node(name), patch_of,
                             lambda p: self.core.patch_node(name, p))  # fmt: skip

    def uncordon(self, name: str) -> bool:
        """Step `untaint` (and the return's undo `uncordon`): the pool's taint removed, schedulable."""

        def patch_of(node: dict[str, Any]) -> list[dict[str, Any]]:
            spec = node.get("spec") or {}
            ops: list[dict[str, Any]] = []
            # Removed from the end so that the indexes of the ones before stay right.
            for index in reversed(range(len(spec.get("taints") or []))):
                taint = spec["taints"][index]
                if taint.get("key") == POOL_TAINT_KEY:
                    ops.append({"op": "test", "path": f"/spec/taints/{index}", "value": taint})
                    ops.append({"op": "remove", "path": f"/spec/taints/{index}"})
            if spec.get("unschedulable"):
                ops.append({"op": "replace", "path": "/spec/unschedulable", "value": False})
            return _tested(node, ops)

        changed = self._patched(f"uncordon {name}", lambda: self._node(name), patch_of,
                                lambda p: self.core.patch_node(name, p))  # fmt: skip
        self.log(
            f"{name}: uncordoned, {POOL_TAINT_KEY} removed" if changed else f"{name}: already schedulable"
        )
        return changed

    # --- pods -------------------------------------------------------------------------------------

    def gpu_pods(self, name: str) -> list[tuple[str, str]]:
        """Step `wait-pods`: (namespace, name) of the pods on the node that hold GPUs (a request or
        limit of the pool's resource in any container) and have not ended."""
        selector = f"spec.nodeName={name}," + ",".join(f"status.phase!={p}" for p in ENDED_PHASES)
        try:
            listing = _json(
                self.core.list_pod_for_all_namespaces(field_selector=selector, _preload_content=False)
            )
        except self.client.ApiException as exc:
            raise KubernetesError(f"pods of {name}: {exc.status} {exc.reason}") from None
        found = []
        for pod in listing.get("items", []):
            containers = [*(pod["spec"].get("containers") or []), *(pod["spec"].get("initContainers") or [])]
            if any(self.queues.resource in _resources(c) for c in containers):
                found.append((pod["metadata"]["namespace"], pod["metadata"]["name"]))
        return sorted(found)

    def evict(self, namespace: str, pod: str) -> bool:
        """The return's eviction (only where the pool allows it): the Eviction API, so that the pod's
        PodDisruptionBudget holds. False when the budget refuses it for now (429)."""
        body = self.client.V1Eviction(
            api_version="policy/v1",
            kind="Eviction",
            metadata=self.client.V1ObjectMeta(name=pod, namespace=namespace),
        )
        try:
            self.core.create_namespaced_pod_eviction(pod, namespace, body)
        except self.client.ApiException as exc:
            if _status(exc) == 429:
                self.log(f"{namespace}/{pod}: eviction refused by its disruption budget for now")
                return False
            if _status(exc) == 404:
                return True  # already gone
            raise KubernetesError(f"evict {namespace}/{pod}: {exc.status} {exc.reason}") from None
        self.log(f"{namespace}/{pod}: evicted")
        return True

    # --- quotas -----------------------------------------------------------------------------------

    def _queue(self, name: str) -> dict[str, Any]:
        try:
            return dict(
                self.custom.get_cluster_custom_object(KUEUE_GROUP, KUEUE_VERSION, "clusterqueues", name)
            )
        except self.client.ApiException as exc:
            raise KubernetesError(f"ClusterQueue {name}: {exc.status} {exc.reason}") from None

    def change_quota(self, gpus: int) -> dict[str, int]:
        """Steps `raise-quota` (gpus > 0: a node lent) and `lower-quota` (gpus < 0: before it
        returns): each ClusterQueue's nominal quota of the flavor's resource changed by its part of
        the node's GPUs. Returns each queue's new quota."""
        parts = split_gpus(abs(gpus), self.queues.weights)
        sign = 1 if gpus >= 0 else -1
        result: dict[str, int] = {}
        for queue, part in parts.items():
            if part == 0:
                continue

            def patch_of(obj: dict[str, Any], queue: str = queue, part: int = part) -> dict[str, Any]:
                groups = copy.deepcopy(obj.get("spec", {}).get("resourceGroups") or [])
                resource = self._quota_of(queue, groups)
                quota = _quantity(resource.get("nominalQuota", 0))
                new = quota + sign * part
                if new < 0:
                    raise KubernetesError(
                        f"ClusterQueue {queue}: nominalQuota of {self.queues.resource} on flavor "
                        f"{self.queues.flavor} is {quota}; lowering it by {part} would go below 0"
                    )
                resource["nominalQuota"] = str(new)
                result[queue] = new
                # A merge patch (the client sends custom resources no other kind) replaces the
                # list whole; the resourceVersion in it makes the API server refuse it (409) if
                # the queue changed since it was read.
                version = obj.get("metadata", {}).get("resourceVersion")
                return {"metadata": {"resourceVersion": version}, "spec": {"resourceGroups": groups}}

            self._patched(
                f"ClusterQueue {queue}",
                lambda queue=queue: self._queue(queue),  # type: ignore[misc]
                patch_of,
                lambda p, queue=queue: self.custom.patch_cluster_custom_object(  # type: ignore[misc]
                    KUEUE_GROUP, KUEUE_VERSION, "clusterqueues", queue, p
                ),
            )
            self.log(
                f"ClusterQueue {queue}: nominalQuota of {self.queues.resource} {sign * part:+d} -> {result[queue]}"
            )
        return result

    def _quota_of(self, queue: str, groups: list[dict[str, Any]]) -> dict[str, Any]:
        """The flavor's resource entry (name, nominalQuota, ...) in a ClusterQueue's resourceGroups."""
        for group in groups:
            for flavor in group.get("flavors") or []:
                if flavor.get("name") != self.queues.flavor:
                    continue
                for resource in flavor.get("resources") or []:
                    if resource.get("name") == self.queues.resource:
                        return dict_of(resource)
        raise KubernetesError(
            f"ClusterQueue {queue} has no {self.queues.resource} on flavor {self.queues.flavor}: "
            "the pool's `kubernetes.flavor` and `cluster_queues` must name a flavor the queue covers"
        )


def dict_of(value: Any) -> dict[str, Any]:
    """`value` itself, typed: a JSON object of the response."""
    if not isinstance(value, dict):
        raise KubernetesError(f"expected an object, got {value!r}")
    return value


def _tested(obj: Mapping[str, Any], ops: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The patch, applied only to the version read (none when there is nothing to change)."""
    if not ops:
        return []
    version = obj.get("metadata", {}).get("resourceVersion")
    return [{"op": "test", "path": "/metadata/resourceVersion", "value": version}, *ops]


def _resources(container: Mapping[str, Any]) -> set[str]:
    resources = container.get("resources") or {}
    return {*(resources.get("requests") or {}), *(resources.get("limits") or {})}


def _json(response: Any) -> dict[str, Any]:
    """An unparsed response (_preload_content=False) as JSON: the node and pod objects stay plain
    data, as the API server sent them."""
    import json

    return dict(json.loads(response.data))
