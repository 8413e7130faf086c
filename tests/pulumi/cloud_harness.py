"""Run a stack's real `__main__.py` under Pulumi mocks and collect what it registered.

Resources are recorded by the mocks (type, name, inputs); provider functions are answered by exact
token, and a call nobody answers fails the run instead of returning `{}` silently.
"""

from __future__ import annotations

import base64
import json
import runpy
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import yaml
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import settings
from pulumi.runtime.proto import resource_pb2

REPO = Path(__file__).resolve().parents[2]
STACKS = REPO / "stacks"
PROJECTS = {
    "aws": "gpucluster-aws",
    "gcp": "gpucluster-gcp",
    "azure": "gpucluster-azure",
    "nebius": "gpucluster-nebius",
}
KUBECONFIG_B64 = base64.b64encode(b"apiVersion: v1\nkind: Config\n").decode()

# Provider functions the stacks call, answered by exact token.
CALLS: dict[str, dict[str, Any]] = {
    "aws:ec2/getInstanceType:getInstanceType": {"efaSupported": True, "maximumNetworkCards": 32},
    "aws:eks/getCluster:getCluster": {"vpcConfig": {"clusterSecurityGroupId": "sg-eks-cluster"}},
    "azure-native:containerservice:listManagedClusterUserCredentials": {
        "kubeconfigs": [{"name": "clusterUser", "value": KUBECONFIG_B64}]
    },
}

# Outputs that the clouds compute and the programs read, per resource type.
COMPUTED: dict[str, dict[str, Any]] = {
    "eks:index:Cluster": {"kubeconfigJson": '{"apiVersion": "v1"}'},
    "aws:ec2/launchTemplate:LaunchTemplate": {"latestVersion": 1},
    "gcp:container/cluster:Cluster": {
        "endpoint": "203.0.113.10",
        "masterAuth": {"clusterCaCertificate": "Q0E="},
    },
    "nebius:index/mk8sV1Cluster:Mk8sV1Cluster": {
        "status": {
            "controlPlane": {
                "endpoints": {"publicEndpoint": "https://203.0.113.20"},
                "auth": {"clusterCaCertificate": "Q0E="},
            }
        }
    },
}


@dataclass
class Registered:
    typ: str
    name: str
    inputs: dict[str, Any]


@dataclass
class StackRun:
    resources: list[Registered] = field(default_factory=list)
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)
    secret_outputs: set[str] = field(default_factory=set)

    def of_type(self, typ: str) -> list[Registered]:
        return [r for r in self.resources if r.typ == typ]

    def one(self, typ: str, name: str) -> Registered:
        found = [r for r in self.resources if r.typ == typ and r.name == name]
        assert len(found) == 1, f"expected one {typ} named {name}, got {[r.name for r in self.of_type(typ)]}"
        return found[0]


class RecordingMocks(pulumi.runtime.Mocks):
    def __init__(self, run: StackRun) -> None:
        self.run = run

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        self.run.resources.append(Registered(args.typ, args.name, dict(args.inputs)))
        # Remote components (pulumi-eks) have no inputs echoed back: their outputs are computed.
        state = {} if args.typ.startswith("eks:") else dict(args.inputs)
        state.update(COMPUTED.get(args.typ, {}))
        return f"{args.name}-id", state

    def call(self, args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:
        self.run.calls.append((args.token, dict(args.args)))
        if args.token not in CALLS:
            raise AssertionError(f"unanswered provider call {args.token}")
        return CALLS[args.token]


class ReferencelessMonitor(pulumi_mocks.MockMonitor):
    """Resource inputs arrive as URNs/ids instead of references: rehydrating a reference inside the
    mock monitor starts a `getResource` on another event loop, which the mocks cannot await."""

    def GetDeploymentInfo(self, request: Any) -> Any:
        info = super().GetDeploymentInfo(request)
        features = [
            f
            for f in info.supportedFeatures
            if f != resource_pb2.RESOURCE_MONITOR_FEATURE_RESOURCE_REFERENCES
        ]
        return resource_pb2.DeploymentInfo(supportedFeatures=features)


def stack_config(cloud: str, stack: str) -> dict[str, Any]:
    data = yaml.safe_load((STACKS / cloud / f"Pulumi.{stack}.yaml").read_text())
    return dict(data["config"])


def run_stack(
    cloud: str, stack: str, config: dict[str, Any] | None = None, run: StackRun | None = None
) -> StackRun:
    """Run stacks/<cloud>/__main__.py for a stack, with its Pulumi.<stack>.yaml config (plus overrides).

    Pass `run` to inspect what was registered when the program stops with an error.
    """
    run = run if run is not None else StackRun()
    mocks = RecordingMocks(run)
    settings.ROOT.set(None)
    pulumi.runtime.set_mocks(
        mocks, project=PROJECTS[cloud], stack=stack, preview=False, monitor=ReferencelessMonitor(mocks)
    )
    values = {**stack_config(cloud, stack), **(config or {})}
    # As the CLI passes them: booleans lowercase, arrays and objects as JSON.
    pulumi.runtime.set_all_config(
        {
            k: str(v).lower()
            if isinstance(v, bool)
            else json.dumps(v)
            if isinstance(v, list | dict)
            else str(v)
            for k, v in values.items()
        }
    )
    runpy.run_path(str(STACKS / cloud / "__main__.py"), run_name="__main__")
    root = settings.get_root_resource()
    assert root is not None
    exported = {k: pulumi.Output.from_input(v) for k, v in root.outputs.items()}  # type: ignore[attr-defined]

    async def secrets() -> set[str]:
        return {k for k, v in exported.items() if await v.is_secret()}

    @pulumi.runtime.test
    def resolve() -> pulumi.Output[Any]:
        return pulumi.Output.all(pulumi.Output.from_input(secrets()), pulumi.Output.all(**exported)).apply(
            lambda both: (run.secret_outputs.update(both[0]), run.outputs.update(both[1]))
        )

    resolve()
    return run


def inventory_copy(tmp_path: Path, name: str, edit: Callable[[dict[str, Any]], None]) -> Path:
    """Copy inventories/<name> to `tmp_path` and apply `edit` to its `cluster` mapping."""
    target = tmp_path / name
    shutil.copytree(REPO / "inventories" / name, target)
    cluster_file = target / "group_vars" / "all" / "cluster.yml"
    data = yaml.safe_load(cluster_file.read_text())
    edit(data["cluster"])
    cluster_file.write_text(yaml.safe_dump(data, sort_keys=False))
    return target
