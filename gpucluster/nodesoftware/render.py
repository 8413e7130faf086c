"""The `nodes/` folder: the GPU node software of each node type with a managed driver.

nodes/hosts.yaml               host -> node type, for every host with node software
nodes/<type>/software.yaml     what the gpu_driver role installs: packages, services, versions, and
                               the hosts it is for
nodes/<type>/apt/nvidia-cuda.sources, nvidia-driver.pref
                               NVIDIA's repository (deb822, Signed-By the keyring the role
                               installs) and the pin of every driver-versioned package
nodes/<type>/fabricmanager.cfg on NVSwitch node types
nodes/imex/<block>/nodes_config.cfg, config.cfg
                               on NVL72 node types: one IMEX domain per NVLink block, from the
                               blocks topology.yaml is written from
"""

from __future__ import annotations

from typing import Any

from gpucluster.model.cluster import Cluster
from gpucluster.model.powered import cloud_hosts
from gpucluster.nodesoftware import facts
from gpucluster.nodesoftware.stack import KEYRING, Stack, resolve_stacks
from gpucluster.render.templating import header
from gpucluster.yamlout import dump

IMEX_DIR = "/etc/nvidia-imex"
IMEX_PORT = 50000

# fabricmanager.cfg as NVIDIA ships it, with the settings a cluster node needs stated: no
# fabric without every NVSwitch (NVSWITCH_FAILURE_MODE=0 keeps the node out rather than degraded),
# CUDA jobs aborted when the fabric manager exits.
FABRIC_MANAGER = {
    "LOG_LEVEL": "4",
    "LOG_FILE_NAME": "/var/log/fabricmanager.log",
    "LOG_APPEND_TO_LOG": "1",
    "LOG_FILE_MAX_SIZE": "1024",
    "LOG_USE_SYSLOG": "0",
    "DAEMONIZE": "1",
    "BIND_INTERFACE_IP": "127.0.0.1",
    "STARTING_TCP_PORT": "16000",
    "FABRIC_MODE": "0",
    "FABRIC_MODE_RESTART": "0",
    "STATE_FILE_NAME": "/var/tmp/fabricmanager.state",
    "FM_CMD_BIND_INTERFACE": "127.0.0.1",
    "FM_CMD_PORT_NUMBER": "6666",
    "FM_STAY_RESIDENT_ON_FAILURES": "0",
    "ACCESS_LINK_FAILURE_MODE": "0",
    "TRUNK_LINK_FAILURE_MODE": "0",
    "NVSWITCH_FAILURE_MODE": "0",
    "ABORT_CUDA_JOBS_ON_FM_EXIT": "1",
    "TOPOLOGY_FILE_PATH": "/usr/share/nvidia/nvswitch",
    "DATABASE_PATH": "/usr/share/nvidia/nvswitch",
}


def node_address(cluster: Cluster, host: str) -> str:
    """The address IMEX peers reach a host at: its ansible_host, else its name."""
    value = cluster.inventory.hostvars.get(host, {}).get("ansible_host")
    return str(value) if value else host


def imex_blocks(cluster: Cluster, stacks: dict[str, Stack]) -> dict[str, list[str]]:
    """NVLink block -> its hosts of IMEX node types (every block topology.yaml names)."""
    imex_types = {name for name, stack in stacks.items() if stack.imex}
    out: dict[str, list[str]] = {}
    for block, hosts in cluster.blocks.items():
        members = [h for h in hosts if cluster.node_type_of.get(h) in imex_types]
        if members:
            out[block] = members
    return out


def software_vars(cluster: Cluster, stack: Stack) -> dict[str, Any]:
    hosts = cluster.hosts_by_type.get(stack.node_type, [])
    data: dict[str, Any] = {
        "node_type": stack.node_type,
        "hosts": hosts,
        "source": stack.source,
        "suite": stack.suite,
        "driver_version": stack.version,
        "driver_branch": stack.branch,
        "kernel_modules": stack.kernel_modules,
        "generation": stack.generation,
        "cuda_major": stack.cuda_major,
        "packages": list(stack.packages),
        "kernel_packages": list(stack.kernel_packages),
        "services": list(stack.services),
        "fabric_manager": stack.fabric_manager,
        "imex": stack.imex,
        "dcgm": stack.dcgm,
        "container_toolkit": stack.container_toolkit,
        "nvml_plugin": stack.nvml_plugin,
    }
    if stack.source == "nvidia":
        data["repository"] = {"url": stack.repository_url, "key": stack.repository_key, "keyring": KEYRING}
    if stack.imex:
        data["imex_block_of"] = {h: cluster.block_of[h] for h in hosts if h in cluster.block_of}
    return data


def apt_sources(stack: Stack, head: str) -> str:
    return (
        head
        + "# NVIDIA's CUDA repository: trusted with its own key only.\n"
        + "Types: deb\n"
        + f"URIs: {stack.repository_url}\n"
        + "Suites: /\n"
        + f"Signed-By: {KEYRING}\n"
    )


def apt_pin(stack: Stack, head: str) -> str:
    """Every driver-versioned package held at the driver's version (or branch); the repository
    itself below Debian's for everything else."""
    lines = [head.rstrip("\n")]
    lines += [
        f"# Driver {stack.version or stack.branch}: the driver, its libraries, fabric manager and IMEX "
        "at this version only (1001: even over a newer one).",
        f"Package: {' '.join(facts.NVIDIA_DRIVER_PINNED)}",
        f"Pin: version {stack.pin_version}",
        "Pin-Priority: 1001",
        "",
        "# Everything else from NVIDIA's repository (DCGM, the container toolkit) installs when asked,",
        "# and never replaces a Debian package or upgrades itself unasked.",
        "Package: *",
        f"Pin: origin {_host_of(stack.repository_url or '')}",
        "Pin-Priority: 100",
    ]
    return "\n".join(lines) + "\n"


def _host_of(url: str) -> str:
    rest = url.split("://", 1)[-1]
    return rest.split("/", 1)[0]


def fabric_manager_cfg(head: str) -> str:
    body = "".join(f"{key}={value}\n" for key, value in FABRIC_MANAGER.items())
    return head + body


def imex_config(head: str) -> str:
    return (
        head
        + "IMEX_NODE_CONFIG_FILE=/etc/nvidia-imex/nodes_config.cfg\n"
        + f"SERVER_PORT={IMEX_PORT}\n"
        + "LOG_FILE_NAME=/var/log/nvidia-imex.log\n"
        + "LOG_LEVEL=4\n"
    )


def render_nodes(cluster: Cluster) -> dict[str, str]:
    stacks = resolve_stacks(cluster).stacks
    head = header(cluster.name) + "\n"
    files: dict[str, str] = {}
    for name, stack in stacks.items():
        files[f"nodes/{name}/software.yaml"] = head + dump(software_vars(cluster, stack))
        if stack.source == "nvidia":
            files[f"nodes/{name}/apt/nvidia-cuda.sources"] = apt_sources(stack, head)
            files[f"nodes/{name}/apt/nvidia-driver.pref"] = apt_pin(stack, head)
        if stack.fabric_manager:
            files[f"nodes/{name}/fabricmanager.cfg"] = fabric_manager_cfg(head)
    if stacks:
        # Host -> node type: how the role finds its host's stack.
        owners = {h: t for t, hosts in cluster.hosts_by_type.items() if t in stacks for h in hosts}
        # Not the instances of cloud groups: their image carries the driver stack.
        instances = set(cloud_hosts(cluster))
        files["nodes/hosts.yaml"] = head + dump(
            {h: owners[h] for h in cluster.hosts if h in owners and h not in instances}
        )
    blocks = imex_blocks(cluster, stacks)
    for block, hosts in blocks.items():
        # One peer address a line; `#` lines are comments.
        files[f"nodes/imex/{block}/nodes_config.cfg"] = head + "".join(
            f"{node_address(cluster, h)}\n" for h in hosts
        )
        files[f"nodes/imex/{block}/config.cfg"] = imex_config(head)
    return files
