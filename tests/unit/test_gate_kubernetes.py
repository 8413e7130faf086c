"""The gate on Kubernetes' GPU nodes (gpucluster-healthcheck --kubernetes-gate), at the request
level: no API server runs here, so a small HTTP server answers as the API server does for the few
calls the gate makes (GET and JSON-Patch a Node; create, read and delete a Lease, 409 Conflict on
a name that exists), applying RFC 6902 patches to the node and holding every body to the
Kubernetes client's own models (V1Node, V1Lease). The burn-in itself is the one of Slurm's nodes
(tests/unit/test_gate.py); the objects that run it are validated in tests/k8s."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import ApiClient

from gpucluster.k8s.gate import gate_objects, taint_command
from gpucluster.k8s.model import kubernetes_of
from gpucluster.layers import load_cluster
from tests.conftest import INVENTORIES
from tests.json_http import JsonHandler
from tests.unit.test_gate import GateNode
from tests.unit.test_healthcheck import hc

TAINT = "gpucluster.io/gate"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/gpucluster-gate/leases"


def as_model(data: dict[str, Any], kind: str) -> Any:
    """A body as the Kubernetes client reads it (unknown fields are dropped, wrong types raise)."""
    return ApiClient()._ApiClient__deserialize(data, kind)  # type: ignore[attr-defined]


def json_patch(doc: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """RFC 6902's test, add, remove and replace on a copy of `doc` (ValueError: the patch fails)."""
    doc = json.loads(json.dumps(doc))
    for op in ops:
        *parents, last = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        target: Any = doc
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        key: Any = last if isinstance(target, dict) else (len(target) if last == "-" else int(last))
        if op["op"] == "test":
            if target[key] != op["value"]:
                raise ValueError(f"test failed at {op['path']}")
        elif op["op"] == "add":
            if isinstance(target, list):
                target.insert(key, op["value"])
            else:
                target[key] = op["value"]
        elif op["op"] == "remove":
            del target[key]
        elif op["op"] == "replace":
            target[key] = op["value"]
    return doc


class FakeApiServer:
    """One node and the Leases of the gate's namespace, as the API server keeps and answers them."""

    def __init__(self, node: str) -> None:
        self.node: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": node,
                "resourceVersion": "100",
                "labels": {"gpucluster.io/owner": "kubernetes"},
            },
            "spec": {},
        }
        self.leases: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, str]] = []
        server = self

        class Handler(JsonHandler):
            def body(self) -> Any:
                return json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"null")

            def do_GET(self) -> None:
                self.reply(*server.handle("GET", self.path, None, self.headers))

            def do_POST(self) -> None:
                self.reply(*server.handle("POST", self.path, self.body(), self.headers))

            def do_PATCH(self) -> None:
                self.reply(*server.handle("PATCH", self.path, self.body(), self.headers))

            def do_DELETE(self) -> None:
                self.reply(*server.handle("DELETE", self.path, None, self.headers))

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    @staticmethod
    def status(code: int, reason: str, message: str) -> tuple[int, dict[str, Any]]:
        return code, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason,
                      "message": message, "code": code}  # fmt: skip

    def handle(self, method: str, path: str, body: Any, headers: Any) -> tuple[int, dict[str, Any]]:
        self.calls.append((method, path))
        assert headers["Authorization"].startswith("Bearer ")
        name = self.node["metadata"]["name"]
        if path == f"/api/v1/nodes/{name}" and method == "GET":
            return 200, self.node
        if path == f"/api/v1/nodes/{name}" and method == "PATCH":
            assert headers["Content-Type"] == "application/json-patch+json"
            try:
                patched = json_patch(self.node, body)
            except (ValueError, KeyError, IndexError) as exc:
                return self.status(422, "Invalid", f"the server rejected our request: {exc}")
            as_model(patched, "V1Node")
            patched["metadata"]["resourceVersion"] = str(int(self.node["metadata"]["resourceVersion"]) + 1)
            self.node = patched
            return 200, self.node
        if path == LEASES and method == "POST":
            lease = as_model(body, "V1Lease")
            assert lease.spec.holder_identity and lease.spec.lease_duration_seconds > 0
            if body["metadata"]["name"] in self.leases:
                return self.status(
                    409, "AlreadyExists", f'leases "{body["metadata"]["name"]}" already exists'
                )
            self.leases[body["metadata"]["name"]] = body
            return 201, body
        if path.startswith(LEASES + "/"):
            lease_name = path.rsplit("/", 1)[1]
            if lease_name not in self.leases:
                return self.status(404, "NotFound", f'leases "{lease_name}" not found')
            if method == "DELETE":
                del self.leases[lease_name]
                return 200, {"kind": "Status", "status": "Success"}
            return 200, self.leases[lease_name]
        return self.status(404, "NotFound", path)

    def taint(self, value: str) -> None:
        self.node["spec"]["taints"] = [
            {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},
            {"key": TAINT, "value": value, "effect": "NoSchedule"},
        ]

    def gate_taint(self) -> dict[str, Any] | None:
        return next((t for t in self.node["spec"].get("taints") or [] if t["key"] == TAINT), None)

    def annotation(self, key: str) -> str | None:
        value: str | None = (self.node["metadata"].get("annotations") or {}).get(key)
        return value


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> GateNode:
    """A node with 8 GPU device files, in a cluster with a gate (tests/unit/test_gate.py's)."""
    return GateNode(tmp_path, monkeypatch)


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    server = FakeApiServer("gpu02")
    yield server
    server.http.shutdown()


def look(node: GateNode, api: FakeApiServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """One look of the gate's pod at its node."""
    monkeypatch.setenv("KUBE_TOKEN", "token-of-the-gate-sa")
    assert node.run("--kubernetes-gate", "--once", "--api", api.url) == 0


def test_a_node_in_service_is_only_looked_at(node: GateNode, api: FakeApiServer,
                                             monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    look(node, api, monkeypatch)
    assert api.calls == [("GET", "/api/v1/nodes/gpu02")]


def test_a_repaired_node_is_burnt_in_and_its_taint_lifted(node: GateNode, api: FakeApiServer,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    api.taint("repaired")
    look(node, api, monkeypatch)
    assert api.gate_taint() is None
    # The other taints stay (a cordon's here).
    assert api.node["spec"]["taints"] == [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]
    record = json.loads(api.annotation("gpucluster.io/gate-record") or "{}")
    assert (record["trigger"], record["level"], record["result"]) == ("repaired", "deep", "pass")
    # The slot was taken and given back.
    assert ("POST", LEASES) in api.calls and api.leases == {}
    assert ("DELETE", f"{LEASES}/gpucluster-burnin-h100-1") in api.calls


def test_two_failures_turn_the_taint_to_out(node: GateNode, api: FakeApiServer,
                                            monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    api.taint("move")
    node.device(6).unlink()
    look(node, api, monkeypatch)
    assert api.gate_taint() == {"key": TAINT, "value": "move", "effect": "NoSchedule"}
    assert api.annotation("gpucluster.io/gate-attempts") == "1"
    look(node, api, monkeypatch)
    assert api.gate_taint() == {"key": TAINT, "value": "out", "effect": "NoSchedule"}
    record = json.loads(api.annotation("gpucluster.io/gate-record") or "{}")
    assert record["failed"] == "gpu count: 7 of 8 (missing /dev/nvidia6)" and record["level"] == "standard"
    # Out: left alone until repaired (the command `gpucluster node repaired` prints).
    calls = len(api.calls)
    look(node, api, monkeypatch)
    assert api.calls[calls:] == [("GET", "/api/v1/nodes/gpu02")]
    assert taint_command(["gpu02"], "repaired") == (
        "kubectl annotate node gpu02 gpucluster.io/gate-attempts- ; "
        "kubectl taint node gpu02 gpucluster.io/gate=repaired:NoSchedule --overwrite"
    )


def test_a_slot_another_node_holds_keeps_it_waiting_until_the_lease_expires(
    node: GateNode, api: FakeApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    api.taint("repaired")
    now = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
    api.leases["gpucluster-burnin-h100-1"] = {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "gpucluster-burnin-h100-1"},
        "spec": {"holderIdentity": "gpu03", "leaseDurationSeconds": 3600, "renewTime": now},
    }  # fmt: skip
    look(node, api, monkeypatch)
    assert api.gate_taint() is not None and api.annotation("gpucluster.io/gate-record") is None
    # gpu03 died mid burn-in: its lease ran out, and the slot is free again.
    api.leases["gpucluster-burnin-h100-1"]["spec"]["renewTime"] = "2020-01-01T00:00:00.000000Z"
    look(node, api, monkeypatch)
    assert api.gate_taint() is None


def test_a_reboot_puts_the_taint_on(
    node: GateNode, api: FakeApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    api.node["spec"]["taints"] = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    look(node, api, monkeypatch)
    node.boot("boot-2")
    node.device(1).unlink()  # so that the burn-in fails and the taint stays to be seen
    look(node, api, monkeypatch)
    assert api.gate_taint() == {"key": TAINT, "value": "reboot", "effect": "NoSchedule"}
    assert api.node["spec"]["taints"][0]["key"] == "nvidia.com/gpu"


def test_the_daemon_set_runs_the_program_where_kubernetes_owns_gpu_nodes() -> None:
    cluster = load_cluster(INVENTORIES / "superpod")
    k8s = kubernetes_of(cluster)
    assert k8s is not None
    objects = {o["kind"]: o for o in gate_objects(cluster, k8s)}
    assert set(objects) == {"Namespace", "ConfigMap", "ServiceAccount", "ClusterRole", "ClusterRoleBinding",
                            "Role", "RoleBinding", "DaemonSet"}  # fmt: skip
    conf = objects["ConfigMap"]["data"]["healthcheck.conf"]
    assert "nodes = dgx097" in conf and "slots = dgx-h100:2" in conf
    pod = objects["DaemonSet"]["spec"]["template"]["spec"]
    assert {"key": TAINT, "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    assert "--kubernetes-gate" in pod["containers"][0]["command"]
    assert objects["ConfigMap"]["data"]["gpucluster_healthcheck.py"] == hc.Path(hc.__file__).read_text()


def test_no_daemon_set_without_a_gate_or_without_kubernetes_gpu_nodes() -> None:
    cluster = load_cluster(INVENTORIES / "nvl72")
    k8s = kubernetes_of(cluster)
    assert k8s is not None and cluster.spec.gate is None
    assert gate_objects(cluster, k8s) == []
