"""Typed stack configuration: the one place the stacks read `pulumi.Config`.

Project-level keys (declared with types in each Pulumi.yaml, so namespaced by the project name):
`inventory` (path of the inventory directory, relative to the stack folder) and
`installKubernetes` (install the Kubernetes layer through Helm releases). Provider keys such as
`aws:region` are optional; when set they must agree with the inventory, which is authoritative.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pulumi

from gpucluster.cloud.pools import CloudPlan
from gpucluster.errors import Problem

# Provider config keys that name where resources go, compared with the inventory's cloud section.
LOCATION_KEYS = {
    "aws": ("aws", "region"),
    "gcp": ("gcp", "region"),
    "azure": ("azure-native", "location"),
}
PROJECT_KEYS = {"gcp": ("gcp", "project")}


@dataclass(frozen=True)
class StackConfig:
    provider: str
    project: str
    stack: str
    inventory: Path
    install_kubernetes: bool
    location: str | None  # provider config region/location, if set
    cloud_project: str | None  # gcp:project, if set

    @property
    def stack_file(self) -> str:
        return f"stacks/{self.provider}/Pulumi.{self.stack}.yaml"


def read_stack_config(provider: str, stack_dir: Path) -> StackConfig:
    """Read this stack's configuration; the inventory path is relative to the stack folder."""
    config = pulumi.Config()
    inventory = Path(config.require("inventory"))
    if not inventory.is_absolute():
        inventory = (stack_dir / inventory).resolve()
    return StackConfig(
        provider=provider,
        project=pulumi.get_project(),
        stack=pulumi.get_stack(),
        inventory=inventory,
        install_kubernetes=config.get_bool("installKubernetes") or False,
        location=_provider_setting(LOCATION_KEYS, provider),
        cloud_project=_provider_setting(PROJECT_KEYS, provider),
    )


def _provider_setting(keys: dict[str, tuple[str, str]], provider: str) -> str | None:
    """The cloud provider's own stack setting that `keys` names for `provider` (e.g. `aws:region`)."""
    if provider not in keys:
        return None
    namespace, key = keys[provider]
    return pulumi.Config(namespace).get(key)


def check_stack(stack: StackConfig, plan: CloudPlan, has_kubernetes: bool) -> list[Problem]:
    """The stack must build the cloud its inventory names, where the inventory says."""
    problems = []
    if stack.install_kubernetes and not has_kubernetes:
        problems.append(
            Problem(
                stack.stack_file,
                f"{stack.project}:installKubernetes",
                f"the inventory {stack.inventory.name} has no `kubernetes:` section to install",
            )
        )
    cloud = plan.cloud
    if cloud.provider != stack.provider:
        problems.append(
            Problem(
                stack.stack_file,
                f"{stack.project}:inventory",
                f"inventory {stack.inventory.name} is for cloud.provider {cloud.provider}, "
                f"but this is the {stack.provider} stack",
            )
        )
    if stack.location is not None and stack.location != cloud.region:
        namespace, key = LOCATION_KEYS[stack.provider]
        problems.append(
            Problem(
                stack.stack_file,
                f"{namespace}:{key}",
                f"{stack.location} differs from cluster.cloud.region {cloud.region} of the inventory",
            )
        )
    if stack.cloud_project is not None and cloud.gcp is not None and stack.cloud_project != cloud.gcp.project:
        problems.append(
            Problem(
                stack.stack_file,
                "gcp:project",
                f"{stack.cloud_project} differs from cluster.cloud.gcp.project {cloud.gcp.project}",
            )
        )
    return problems
