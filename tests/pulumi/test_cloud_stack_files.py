"""The stack folders as the Pulumi CLI reads them: project files, stack config, entry points."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest
import yaml
from cloud_harness import REPO, STACKS

from gpucluster.layers import load_cluster

CLOUDS = ["aws", "gcp", "azure", "nebius"]
PROVIDER_KEYS = {"aws:region", "gcp:project", "gcp:region", "azure-native:location"}
YAML_TYPES = {"string": str, "boolean": bool, "integer": int}
SDK_DISTRIBUTIONS = {
    "pulumi": "pulumi",
    "pulumi_aws": "pulumi-aws",
    "pulumi_eks": "pulumi-eks",
    "pulumi_gcp": "pulumi-gcp",
    "pulumi_azure_native": "pulumi-azure-native",
    "pulumi_kubernetes": "pulumi-kubernetes",
    "pulumi_nebius": "pulumi-nebius",
}


def project(cloud: str) -> dict[str, object]:
    data = yaml.safe_load((STACKS / cloud / "Pulumi.yaml").read_text())
    assert isinstance(data, dict)
    return data


@pytest.mark.parametrize("cloud", CLOUDS)
def test_project_file_declares_typed_project_keys_only(cloud: str) -> None:
    data = project(cloud)
    assert data["name"] == f"gpucluster-{cloud}"
    assert data["runtime"] == {"name": "python", "options": {"toolchain": "pip", "virtualenv": "../../.venv"}}
    config = data["config"]
    assert isinstance(config, dict) and "inventory" in config
    for key, schema in config.items():
        # The CLI refuses a `type` on keys outside the project namespace.
        assert ":" not in key or key.startswith(f"{data['name']}:"), key
        assert schema["type"] in YAML_TYPES and schema["description"]


@pytest.mark.parametrize("cloud", CLOUDS)
@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_stack_file_sets_declared_keys_and_a_valid_inventory(cloud: str, stack: str) -> None:
    name = str(project(cloud)["name"])
    declared = project(cloud)["config"]
    assert isinstance(declared, dict)
    config = yaml.safe_load((STACKS / cloud / f"Pulumi.{stack}.yaml").read_text())["config"]
    for key, value in config.items():
        if key in PROVIDER_KEYS:
            continue
        namespace, _, short = key.partition(":")
        assert namespace == name and short in declared, f"{key} is not declared in Pulumi.yaml"
        assert isinstance(value, YAML_TYPES[declared[short]["type"]])
    inventory = (STACKS / cloud / config[f"{name}:inventory"]).resolve()
    cluster = load_cluster(inventory)
    assert cluster.spec.cloud is not None and cluster.spec.cloud.provider == cloud
    assert inventory.name == f"{cloud}-{stack}"


@pytest.mark.parametrize("cloud", CLOUDS)
def test_entry_point_is_thin_and_requirements_install_the_cloud_extra(cloud: str) -> None:
    main = (STACKS / cloud / "__main__.py").read_text()
    tree = ast.parse(main)
    imports = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imports == {"pathlib", "gpucluster.cloud.program"}
    assert f'run("{cloud}", Path(__file__).resolve().parent)' in main
    assert "-e ../..[cloud]" in (STACKS / cloud / "requirements.txt").read_text().splitlines()


def test_cloud_extra_lists_every_sdk_the_components_import() -> None:
    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["cloud"]
    pinned = {re.split(r"[<>=!~ ]", req, maxsplit=1)[0] for req in extra}
    used: set[str] = set()
    for module in Path(REPO / "gpucluster" / "cloud").glob("*.py"):
        for node in ast.walk(ast.parse(module.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            used |= {
                SDK_DISTRIBUTIONS[n.split(".")[0]] for n in names if n.split(".")[0] in SDK_DISTRIBUTIONS
            }
    assert used and used <= pinned, f"missing from the cloud extra: {used - pinned}"
