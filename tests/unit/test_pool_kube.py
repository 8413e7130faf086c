"""The shared pool's Kubernetes calls (gpucluster/pool/kube.py) at the request level.

No API server can run here. The official client talks to a loopback HTTP server that keeps the
objects, applies the JSON Patches as the API server does (RFC 6902, a failed `test` refused with
422) and records every request; each object the calls leave behind is then validated as the
pinned API server would (kubernetes-validate for Node and Eviction at 1.34, the pinned Kueue CRD
with its CEL rules for ClusterQueue). The ClusterQueue is the one gpucluster renders for the
superpod example.
"""

from __future__ import annotations

import copy
import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

import kubernetes_validate
import pytest
import yaml
from kubernetes import client

from gpucluster.pool.kube import POOL_TAINT_KEY, KubernetesError, PoolKubernetes, PoolQueues, split_gpus
from tests.json_http import JsonHandler
from tests.k8s.conftest import documents
from tests.k8s.crd import validate_custom_resource

KUBE_VERSION = "1.34.0"
GPU = "nvidia.com/gpu"


def _pointer(path: str) -> list[str]:
    return [part.replace("~1", "/").replace("~0", "~") for part in path.lstrip("/").split("/")]


class PatchFailed(Exception):
    pass


def apply_json_patch(obj: Any, ops: list[dict[str, Any]]) -> Any:
    """RFC 6902 as the API server applies it: all or nothing."""
    doc = copy.deepcopy(obj)
    for op in ops:
        *parents, last = _pointer(op["path"])
        target = doc
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        kind = op["op"]
        if kind == "test":
            current = target[int(last)] if isinstance(target, list) else target.get(last)
            if current != op["value"]:
                raise PatchFailed(f"testing value {op['path']} failed")
        elif kind == "add":
            if isinstance(target, list):
                target.insert(len(target) if last == "-" else int(last), op["value"])
            else:
                target[last] = op["value"]
        elif kind == "replace":
            if isinstance(target, list):
                target[int(last)] = op["value"]
            elif last not in target:
                raise PatchFailed(f"replace of missing {op['path']}")
            else:
                target[last] = op["value"]
        elif kind == "remove":
            del target[int(last) if isinstance(target, list) else last]
        else:
            raise PatchFailed(f"unknown op {kind}")
    return doc


def apply_merge_patch(obj: Any, patch: Any) -> Any:
    """RFC 7386: objects merge key by key, null removes, anything else (lists too) replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    merged = copy.deepcopy(obj) if isinstance(obj, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = apply_merge_patch(merged.get(key), value)
    return merged


@dataclass
class ApiServer:
    """The objects, the requests seen, and what to refuse."""

    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    queues: dict[str, dict[str, Any]] = field(default_factory=dict)
    pods: list[dict[str, Any]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    evictions: list[dict[str, Any]] = field(default_factory=list)
    budget_blocks: set[str] = field(default_factory=set)
    # Another writer's change made between a GET and the PATCH that follows it (once per name).
    race: dict[str, Any] = field(default_factory=dict)
    version: int = 100
    url: str = ""

    def bump(self, obj: dict[str, Any]) -> None:
        self.version += 1
        obj["metadata"]["resourceVersion"] = str(self.version)


def _handler(api: ApiServer) -> type[BaseHTTPRequestHandler]:
    class Handler(JsonHandler):
        def _status(self, code: int, reason: str, message: str) -> None:
            self.reply(code, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason,
                              "message": message, "code": code})  # fmt: skip

        def _record(self) -> tuple[str, dict[str, list[str]], Any]:
            url = urlparse(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            api.requests.append({"method": self.command, "path": url.path, "query": parse_qs(url.query),
                                 "content_type": self.headers.get("Content-Type"), "body": body})  # fmt: skip
            return url.path, parse_qs(url.query), body

        def _store(self, path: str) -> tuple[dict[str, dict[str, Any]], str] | None:
            found = re.fullmatch(r"/api/v1/nodes/([^/]+)", path)
            if found:
                return api.nodes, found.group(1)
            found = re.fullmatch(r"/apis/kueue\.x-k8s\.io/v1beta2/clusterqueues/([^/]+)", path)
            if found:
                return api.queues, found.group(1)
            return None

        def do_GET(self) -> None:
            path, query, _ = self._record()
            if path == "/api/v1/pods":
                wanted = dict(
                    item.split("=", 1) for item in query["fieldSelector"][0].split(",") if "!=" not in item
                )
                ended = {
                    item.split("!=", 1)[1] for item in query["fieldSelector"][0].split(",") if "!=" in item
                }
                items = [p for p in api.pods if p["spec"]["nodeName"] == wanted["spec.nodeName"]
                         and p["status"]["phase"] not in ended]  # fmt: skip
                self.reply(200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items})
                return
            store = self._store(path)
            if store is None or store[1] not in store[0]:
                self._status(404, "NotFound", f"{path} not found")
                return
            objects, name = store
            self.reply(200, objects[name])
            if name in api.race:  # the other writer changes the object right after this read
                api.race.pop(name)(objects[name])
                api.bump(objects[name])

        def do_PATCH(self) -> None:
            path, _, body = self._record()
            store = self._store(path)
            if store is None or store[1] not in store[0]:
                self._status(404, "NotFound", f"{path} not found")
                return
            objects, name = store
            kind = self.headers.get("Content-Type")
            try:
                if kind == "application/json-patch+json":
                    patched = apply_json_patch(objects[name], body)
                elif kind == "application/merge-patch+json":
                    patched = apply_merge_patch(objects[name], body)
                    wanted = (body.get("metadata") or {}).get("resourceVersion")
                    if wanted is not None and wanted != objects[name]["metadata"]["resourceVersion"]:
                        self._status(409, "Conflict", "the object has been modified; please apply your "
                                     "changes to the latest version and try again")  # fmt: skip
                        return
                else:  # strategic merge patch: custom resources refuse it
                    self._status(415, "UnsupportedMediaType", f"{kind} is not supported here")
                    return
            except (PatchFailed, KeyError, IndexError, ValueError) as exc:
                self._status(422, "Invalid", str(exc))
                return
            api.bump(patched)
            objects[name] = patched
            self.reply(200, patched)

        def do_POST(self) -> None:
            path, _, body = self._record()
            found = re.fullmatch(r"/api/v1/namespaces/([^/]+)/pods/([^/]+)/eviction", path)
            if found is None:
                self._status(404, "NotFound", path)
                return
            namespace, name = found.groups()
            if name in api.budget_blocks:
                self._status(
                    429,
                    "TooManyRequests",
                    "Cannot evict pod as it would violate the pod's disruption budget.",
                )
                return
            api.evictions.append(body)
            api.pods = [
                p
                for p in api.pods
                if (p["metadata"]["namespace"], p["metadata"]["name"]) != (namespace, name)
            ]
            self.reply(201, {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201})

    return Handler


def _node(name: str, taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"providerID": f"metal://{name}"}
    if taints is not None:
        spec["taints"] = taints
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "resourceVersion": "1",
            "labels": {"kubernetes.io/hostname": name}}, "spec": spec}  # fmt: skip


def _pod(
    name: str, node: str, gpus: int | None, phase: str = "Running", namespace: str = "inference"
) -> dict[str, Any]:
    resources = {"limits": {GPU: str(gpus)}} if gpus else {"requests": {"cpu": "100m"}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"nodeName": node, "containers": [{"name": "main", "image": "x", "resources": resources}]},
            "status": {"phase": phase}}  # fmt: skip


def _rendered_queues() -> dict[str, dict[str, Any]]:
    """gpucluster's ClusterQueues of the superpod example, as the API server stores them."""
    queues = {
        d["metadata"]["name"]: copy.deepcopy(d)
        for _, d in documents("superpod")
        if d["kind"] == "ClusterQueue"
    }
    for queue in queues.values():
        queue["metadata"]["resourceVersion"] = "1"
    return queues


def _gpu_quota(queue: dict[str, Any], flavor: str) -> str:
    for group in queue["spec"]["resourceGroups"]:
        for each in group["flavors"]:
            if each["name"] == flavor:
                return next(str(r["nominalQuota"]) for r in each["resources"] if r["name"] == GPU)
    raise AssertionError(f"no {flavor}")


@pytest.fixture
def api() -> Iterator[ApiServer]:
    state = ApiServer()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


def _pool(api: ApiServer, queues: PoolQueues, log: list[str] | None = None) -> PoolKubernetes:
    configuration = client.Configuration()
    configuration.host = api.url
    sink = log if log is not None else []
    return PoolKubernetes(client.ApiClient(configuration), queues, sink.append)


def _valid_node(node: dict[str, Any]) -> None:
    kubernetes_validate.validate(node, KUBE_VERSION, strict=True)


def test_split_gives_every_gpu_in_proportion_and_back_the_same() -> None:
    assert split_gpus(8, {"a": 1, "b": 1, "c": 1}) == {"a": 3, "b": 3, "c": 2}
    assert split_gpus(8, {"a": 3, "b": 1}) == {"a": 6, "b": 2}
    assert split_gpus(8, {"a": 1, "b": 0}) == {"a": 8, "b": 0}
    assert split_gpus(0, {"a": 1}) == {"a": 0}
    for gpus in range(0, 17):
        for weights in ({"a": 20, "b": 10, "c": 5}, {"x": 1}, {"p": 7, "q": 3}):
            parts = split_gpus(gpus, weights)
            assert sum(parts.values()) == gpus
            total = sum(weights.values())
            assert all(abs(parts[q] - gpus * w / total) < 1 for q, w in weights.items())
    with pytest.raises(ValueError):
        split_gpus(8, {"a": 0})


def test_a_lent_node_raises_the_rendered_queues_quota_and_its_return_lowers_it_back(api: ApiServer) -> None:
    api.queues = _rendered_queues()
    names = sorted(api.queues)
    flavor = api.queues[names[0]]["spec"]["resourceGroups"][0]["flavors"][0]["name"]
    before = {name: _gpu_quota(q, flavor) for name, q in api.queues.items()}
    weights = {name: api.queues[name]["spec"].get("fairSharing", {}).get("weight", 1) for name in names}
    pool = _pool(api, PoolQueues(flavor=flavor, weights=weights))

    raised = pool.change_quota(8)
    parts = split_gpus(8, weights)
    assert raised == {q: int(before[q]) + n for q, n in parts.items() if n}
    for queue in api.queues.values():
        validate_custom_resource(queue)  # the pinned CRD with its CEL rules: raises on a bad object
    patches = [r for r in api.requests if r["method"] == "PATCH"]
    assert len(patches) == len([n for n in parts.values() if n])
    # Each change applies only to the version read; nothing but the resource groups changes.
    for request in patches:
        assert request["content_type"] == "application/merge-patch+json"
        assert request["body"]["metadata"] == {"resourceVersion": "1"}
        assert set(request["body"]) == {"metadata", "spec"} and set(request["body"]["spec"]) == {
            "resourceGroups"
        }

    pool.change_quota(-8)
    assert {name: _gpu_quota(q, flavor) for name, q in api.queues.items()} == before


def test_a_quota_change_made_meanwhile_by_another_move_is_kept(api: ApiServer) -> None:
    api.queues = _rendered_queues()
    name = sorted(api.queues)[0]
    flavor = api.queues[name]["spec"]["resourceGroups"][0]["flavors"][0]["name"]
    start = int(_gpu_quota(api.queues[name], flavor))

    def other_move(queue: dict[str, Any]) -> None:  # another node of the pool lent at the same time
        for each in queue["spec"]["resourceGroups"][0]["flavors"]:
            for resource in each["resources"]:
                if each["name"] == flavor and resource["name"] == GPU:
                    resource["nominalQuota"] = str(int(resource["nominalQuota"]) + 8)

    api.race[name] = other_move
    log: list[str] = []
    assert _pool(api, PoolQueues(flavor=flavor, weights={name: 1}), log).change_quota(8) == {name: start + 16}
    assert int(_gpu_quota(api.queues[name], flavor)) == start + 16
    assert [r["method"] for r in api.requests] == ["GET", "PATCH", "GET", "PATCH"]
    assert any("another writer" in line for line in log)


def test_a_queue_without_the_pools_flavor_or_below_zero_is_refused_by_name(api: ApiServer) -> None:
    api.queues = _rendered_queues()
    name = sorted(api.queues)[0]
    with pytest.raises(KubernetesError, match=f"ClusterQueue {name} has no nvidia.com/gpu on flavor nowhere"):
        _pool(api, PoolQueues(flavor="nowhere", weights={name: 1})).change_quota(8)
    flavor = api.queues[name]["spec"]["resourceGroups"][0]["flavors"][0]["name"]
    quota = int(_gpu_quota(api.queues[name], flavor))
    with pytest.raises(KubernetesError, match="would go below 0"):
        _pool(api, PoolQueues(flavor=flavor, weights={name: 1})).change_quota(-(quota + 8))
    assert not [r for r in api.requests if r["method"] == "PATCH"]
    with pytest.raises(KubernetesError, match="ClusterQueue absent: 404"):
        _pool(api, PoolQueues(flavor=flavor, weights={"absent": 1})).change_quota(8)


def test_cordon_keeps_the_nodes_own_taints_and_uncordon_removes_only_the_pools(api: ApiServer) -> None:
    own = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    api.nodes = {"gpu01": _node("gpu01", [own]), "gpu02": _node("gpu02")}
    pool = _pool(api, PoolQueues(flavor="f", weights={"q": 1}))

    assert pool.cordon("gpu01") and pool.cordon("gpu02")
    for node in api.nodes.values():
        _valid_node(node)
        assert node["spec"]["unschedulable"] is True
        assert [t["key"] for t in node["spec"]["taints"]][-1] == POOL_TAINT_KEY
    assert api.nodes["gpu01"]["spec"]["taints"][0] == own
    requests = len(api.requests)
    assert not pool.cordon("gpu01")  # already: read, nothing sent
    assert [r["method"] for r in api.requests[requests:]] == ["GET"]

    assert pool.uncordon("gpu01") and pool.uncordon("gpu02")
    assert api.nodes["gpu01"]["spec"]["taints"] == [own]
    assert api.nodes["gpu02"]["spec"]["taints"] == []
    for node in api.nodes.values():
        _valid_node(node)
        assert node["spec"]["unschedulable"] is False
    assert not pool.uncordon("gpu02")


def test_a_taint_added_meanwhile_by_someone_else_survives_the_cordon(api: ApiServer) -> None:
    api.nodes = {"gpu01": _node("gpu01", [])}
    maintenance = {"key": "example.com/maintenance", "effect": "NoExecute"}
    api.race["gpu01"] = lambda node: node["spec"]["taints"].append(maintenance)
    assert _pool(api, PoolQueues(flavor="f", weights={"q": 1})).cordon("gpu01")
    taints = api.nodes["gpu01"]["spec"]["taints"]
    assert maintenance in taints and taints[-1]["key"] == POOL_TAINT_KEY
    _valid_node(api.nodes["gpu01"])


def test_only_the_nodes_running_gpu_pods_are_awaited(api: ApiServer) -> None:
    api.pods = [
        _pod("train-0", "gpu01", 8),
        _pod("dcgm-exporter-x", "gpu01", None, namespace="gpu-operator"),
        _pod("done", "gpu01", 8, phase="Succeeded"),
        _pod("elsewhere", "gpu02", 8),
    ]
    pool = _pool(api, PoolQueues(flavor="f", weights={"q": 1}))
    assert pool.gpu_pods("gpu01") == [("inference", "train-0")]
    listing = api.requests[-1]
    assert listing["path"] == "/api/v1/pods"
    assert listing["query"]["fieldSelector"] == [
        "spec.nodeName=gpu01,status.phase!=Succeeded,status.phase!=Failed"
    ]


def test_eviction_goes_through_the_eviction_api_and_a_budget_that_refuses_is_waited_for(
    api: ApiServer,
) -> None:
    api.pods = [_pod("serve-0", "gpu01", 1), _pod("serve-1", "gpu01", 1)]
    api.budget_blocks = {"serve-1"}
    pool = _pool(api, PoolQueues(flavor="f", weights={"q": 1}))
    assert pool.evict("inference", "serve-0") is True
    assert pool.evict("inference", "serve-1") is False
    assert pool.gpu_pods("gpu01") == [("inference", "serve-1")]
    (eviction,) = api.evictions
    assert eviction["apiVersion"] == "policy/v1" and eviction["kind"] == "Eviction"
    kubernetes_validate.validate(eviction, KUBE_VERSION, strict=True)


# --- the rendered RBAC allows each call the moves make, and nothing outside the pool ----------------


def _request_attributes(request: dict[str, Any]) -> tuple[str, str, str, str | None]:
    """(verb, API group, resource, name) of a request, as the API server's authorizer sees it."""
    path = request["path"]
    verb = {"GET": "get", "PATCH": "patch", "POST": "create"}[request["method"]]
    found = re.fullmatch(r"/api/v1/namespaces/[^/]+/pods/([^/]+)/eviction", path)
    if found:
        return verb, "", "pods/eviction", found.group(1)
    found = re.fullmatch(r"/api/v1/(nodes|pods)(?:/([^/]+))?", path)
    if found:
        return (verb if found.group(2) else "list"), "", found.group(1), found.group(2)
    found = re.fullmatch(r"/apis/([^/]+)/[^/]+/([^/]+)/([^/]+)", path)
    assert found, path
    return verb, found.group(1), found.group(2), found.group(3)


def _allowed(rules: list[dict[str, Any]], request: dict[str, Any]) -> bool:
    verb, group, resource, name = _request_attributes(request)
    return any(
        group in rule["apiGroups"]
        and resource in rule["resources"]
        and verb in rule["verbs"]
        and ("resourceNames" not in rule or name in rule["resourceNames"])
        for rule in rules
    )


def _pooled_render(inventories: Any, evict: bool) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    from gpucluster.layers import load_cluster
    from gpucluster.rendering import render_files
    from tests.unit.test_shared_pool import pool, write

    def evicting(c: dict[str, Any]) -> None:
        pool(c)["evict_pods"] = evict

    files = render_files(
        load_cluster(write(inventories, evicting, name=f"evict-{evict}")), only=["kubernetes"]
    )
    rbac = [d for d in yaml.safe_load_all(files["kubernetes/pools/rbac.yaml"]) if d]
    queues = [d for d in yaml.safe_load_all(files["kubernetes/kueue/cluster-queues.yaml"]) if d]
    return {q["metadata"]["name"]: q for q in queues}, rbac


def test_the_pools_rbac_allows_every_call_of_a_move_and_no_node_or_queue_outside_it(
    api: ApiServer, inventories: Any
) -> None:
    queues, rbac = _pooled_render(inventories, evict=True)
    for doc in rbac:
        kubernetes_validate.validate(doc, KUBE_VERSION, strict=True)
    (role,) = [d for d in rbac if d["kind"] == "ClusterRole"]
    assert role["metadata"]["name"] == "gpucluster-pool-flex"
    (binding,) = [d for d in rbac if d["kind"] == "ClusterRoleBinding"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "gpucluster-pool-flex", "namespace": "gpucluster-pools"}
    ]

    api.queues = copy.deepcopy(queues)
    for queue in api.queues.values():
        queue["metadata"]["resourceVersion"] = "1"
    flavor = "h100"
    api.nodes = {n: _node(n) for n in ("n01", "n05", "n06")}
    api.pods = [_pod("train-0", "n05", 8, namespace="team-a")]
    pool = _pool(api, PoolQueues(flavor=flavor, weights={"team-a": 1}))
    # A return, then a lend: every Kubernetes call of the steps.
    pool.change_quota(-8)
    pool.cordon("n05")
    assert pool.gpu_pods("n05") == [("team-a", "train-0")]
    assert pool.evict("team-a", "train-0")
    pool.uncordon("n05")
    pool.change_quota(8)
    refused = [r for r in api.requests if not _allowed(role["rules"], r)]
    assert not refused, refused

    # Outside the pool: a node Kubernetes owns, another tenant's queue.
    outside = [
        {"method": "PATCH", "path": "/api/v1/nodes/n01"},
        {"method": "PATCH", "path": "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/team-b"},
        {"method": "GET", "path": "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/team-b"},
    ]
    assert not any(_allowed(role["rules"], r) for r in outside)


def test_without_evict_pods_the_pool_may_not_evict(inventories: Any) -> None:
    _, rbac = _pooled_render(inventories, evict=False)
    (role,) = [d for d in rbac if d["kind"] == "ClusterRole"]
    eviction = {"method": "POST", "path": "/api/v1/namespaces/team-a/pods/train-0/eviction"}
    assert not _allowed(role["rules"], eviction)
    assert all("pods/eviction" not in rule["resources"] for rule in role["rules"])
