"""The stack program every `stacks/<cloud>/__main__.py` runs: load, guard, build, export."""

from __future__ import annotations

import importlib
from pathlib import Path

import pulumi

from gpucluster import yamlout
from gpucluster.cloud.config import StackConfig, check_stack, read_stack_config
from gpucluster.cloud.guardrails import enforce
from gpucluster.cloud.outputs import Built, ansible_inventory, pool_facts
from gpucluster.cloud.pools import CloudPlan
from gpucluster.errors import InventoryError
from gpucluster.k8s.model import kubernetes_of
from gpucluster.layers import load_cluster
from gpucluster.model.cluster import Cluster


def guarded_plan(provider: str, stack_dir: Path) -> tuple[Cluster, CloudPlan, StackConfig]:
    """Load the stack's inventory and run every guardrail; stop the program on any problem."""
    stack = read_stack_config(provider, stack_dir)
    try:
        cluster = load_cluster(stack.inventory)
        plan = enforce(cluster)
        problems = check_stack(stack, plan, has_kubernetes=kubernetes_of(cluster) is not None)
        if problems:
            raise InventoryError(problems)
    except InventoryError as exc:
        # RunError ends `pulumi up`/`preview` with this message and no traceback, before any resource.
        raise pulumi.RunError(
            f"gpucluster: the {provider} stack was stopped by the guardrails:\n{exc}"
        ) from None
    return cluster, plan, stack


def run(provider: str, stack_dir: Path) -> None:
    cluster, plan, stack = guarded_plan(provider, stack_dir)
    builder = importlib.import_module(f"gpucluster.cloud.{provider}")
    built: Built = builder.build(plan, stack)
    for key, value in built.outputs.items():
        pulumi.export(key, value)
    pulumi.export("kubeconfig", pulumi.Output.secret(built.kubeconfig))
    pulumi.export("pools", {pool.name: pool_facts(pool) for pool in plan.pools})
    pulumi.export("ansibleInventory", yamlout.dump(ansible_inventory(plan, stack.inventory)))
    if stack.install_kubernetes:
        from gpucluster.cloud.kube_layer import KubernetesLayer

        layer = KubernetesLayer(cluster, built.kubeconfig, built.node_pools)
        pulumi.export("helmReleases", [r.name for r in layer.releases])


def run_burst(stack_dir: Path) -> None:
    """stacks/burst: the templates of the inventory's cloud groups (gpucluster.cloud.burst)."""
    from gpucluster.cloud.burst import BurstConfig, build_aws, build_gcp, stack_groups

    config = pulumi.Config()
    inventory = Path(config.require("inventory"))
    if not inventory.is_absolute():
        inventory = (stack_dir / inventory).resolve()
    try:
        cluster = load_cluster(inventory)
    except InventoryError as exc:
        raise pulumi.RunError(f"gpucluster: the burst stack was stopped by the checks:\n{exc}") from None
    region = pulumi.Config("aws").get("region")
    wrong = [
        g.group
        for g in stack_groups(cluster, "aws")
        if g.power.cloud and region and g.power.cloud.region != region
    ]
    if wrong:
        raise pulumi.RunError(
            f"gpucluster: aws:region is {region}, but the cloud groups {', '.join(wrong)} are elsewhere: "
            "one stack per region (set aws:region to theirs)"
        )
    settings = BurstConfig(
        controller_cidrs=config.get_object("controllerCidrs") or [],
        controller_principal=config.get("controllerPrincipal") or "",
        munge_key=config.require_secret("mungeKey"),
    )
    built = {"aws": build_aws(cluster, settings), "gcp": build_gcp(cluster, settings)}
    for provider, outputs in built.items():
        for key, value in outputs.items():
            pulumi.export(f"{provider}{key[0].upper()}{key[1:]}", value)
    if not any(built.values()):
        pulumi.log.warn("gpucluster: the inventory has no cloud group whose template this stack makes")
