"""`lab up / status / run / down`: the steps, in order, each safe to repeat."""

from __future__ import annotations

import ipaddress
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpucluster.hostlists import expand
from gpucluster.lab import bmc, image, network, nodes
from gpucluster.lab.inventory import remove_inventory, vault_password_file, write_inventory
from gpucluster.lab.paths import DEFAULT_INVENTORY, PREFIX, podman_env, state_dir
from gpucluster.lab.playbook import PlaybookRun, run_playbook
from gpucluster.lab.redfish import BMC_HOST, BMC_PORT
from gpucluster.lab.shell import LabError, run
from gpucluster.lab.state import LabState
from gpucluster.layers import load_cluster
from gpucluster.model.cluster import Cluster
from gpucluster.model.powered import always_on, saved_hosts
from gpucluster.model.storage import below
from gpucluster.tools import venv_tool

Progress = Callable[[str], None]
REQUIRED_TOOLS = ("ansible-playbook", "ansible-vault")


@dataclass(frozen=True)
class SmokeResult:
    command: str
    output: str
    ok: bool


def lab_hosts(cluster: Cluster) -> list[str]:
    """Every inventory host: controllers, accounting host and nodes."""
    return list(cluster.inventory.hostvars)


def gpu_devices(cluster: Cluster, host: str) -> list[str]:
    if host not in cluster.node_type_of:
        return []
    gpus = cluster.node_type(host).gpus
    return expand(gpus.devices) if gpus and gpus.devices else []


def shared_dirs(cluster: Cluster, host: str) -> dict[str, str]:
    """Host directory -> mount point, standing in for the shared filesystems real sites mount: the
    controllers' StateSaveLocation when the inventory declares one (a backup controller takes over
    from the state the primary left there), and each site-managed filesystem of cluster.storage on
    the hosts that mount it (this kernel has no NFS client: one host directory, bind-mounted into
    every container, is what an NFS or Lustre mount gives real hosts)."""
    slurm = cluster.spec.slurm
    shared = state_dir() / "shared"
    volumes: dict[str, str] = {}
    state = slurm.state_save_location
    # A state on a site-managed filesystem of cluster.storage comes with that filesystem.
    on_storage = state is not None and any(
        fs.site_managed and below(state, fs.mount) for fs in cluster.spec.storage
    )
    if state is not None and not on_storage and host in slurm.controller:
        volumes[str(shared / state.strip("/").replace("/", "_"))] = state
    for fs in cluster.spec.storage:
        if fs.site_managed and host in cluster.storage_hosts.get(fs.name, []):
            volumes[str(shared / "storage" / fs.name)] = fs.mount
    return volumes


def prepare_shared_dir(source: Path, mount: str, cluster: Cluster) -> None:
    """Create a shared host directory with the mode its filesystem's root has on a real site: the
    homes' root 0755 (root's), any other (scratch) 1777 like /tmp, so every user can write there."""
    source.mkdir(parents=True, exist_ok=True)
    if mount == cluster.spec.slurm.state_save_location:
        return  # slurm_common makes it slurm's, 0755
    if any(fs.mount == mount and not fs.home for fs in cluster.spec.storage):
        source.chmod(0o1777)


def _lab_cluster(state: LabState | None = None) -> Cluster:
    state = state or LabState.load()
    if state is None or not state.inventory:
        raise LabError("no lab is up (run `gpucluster lab up`)")
    return load_cluster(state.inventory)


def controller_container(state: LabState | None = None) -> str:
    return nodes.container_name(_lab_cluster(state).spec.slurm.controller[0])


def run_host(cluster: Cluster, host: str | None = None) -> str:
    """Where `lab run` runs: `host` if given (a lab host), else where users work on a real
    cluster, the first login node, else the first controller."""
    if host is None:
        slurm = cluster.spec.slurm
        return (slurm.login or slurm.controller)[0]
    hosts = lab_hosts(cluster)
    if host not in hosts:
        raise LabError(f"`{host}` is not a host of the lab (hosts: {', '.join(hosts)})")
    return host


def run_container(host: str | None = None, state: LabState | None = None) -> str:
    """The container of `run_host`, for the lab that is up."""
    return nodes.container_name(run_host(_lab_cluster(state), host))


def up(
    inventory: Path = DEFAULT_INVENTORY, progress: Progress = print, rebuild_image: bool = False
) -> PlaybookRun:
    """Build or reuse the image, start the hosts, run playbooks/slurm.yml; idempotent."""
    cluster = load_cluster(inventory)
    # Before anything is built: the playbook needs these, and a lab without them is half made.
    for tool in REQUIRED_TOOLS:
        venv_tool(tool)
    # Refused before anything is created: the lab runs Debian's packages of the target release.
    suite = image.suite_of(cluster.release.name)
    state = LabState.load() or LabState()
    source = str(inventory.resolve())
    if state.inventory and state.inventory != source:
        raise LabError(f"a lab from {state.inventory} is up; run `gpucluster lab down` first")
    state.inventory = source
    state.subnet = state.subnet or network.DEFAULT_SUBNET
    state.save()
    tag, _ = image.ensure_image(progress, suite, rebuild=rebuild_image)
    state.image = tag
    hosts = lab_hosts(cluster)
    with_bmc = bmc.needed(cluster)
    # The lab's BMC takes the address after the hosts' (theirs stay what they were without it).
    state.addresses = network.plan_addresses([*hosts, *([BMC_HOST] if with_bmc else [])], state.subnet)
    state.save()
    prefix_len = ipaddress.ip_network(state.subnet).prefixlen
    progress(f"network: bridge {network.BRIDGE}, {len(hosts)} namespaces on {state.subnet}")
    network.ensure_bridge(state)
    for index, host in enumerate(hosts):
        network.ensure_node_network(state, index, host, state.addresses[host], prefix_len)
    if with_bmc:
        bmc.ensure(state, cluster, len(hosts), state.addresses[BMC_HOST], prefix_len)
        progress(
            f"BMC: Redfish at https://{BMC_HOST}:{BMC_PORT} ({state.addresses[BMC_HOST]}) for {', '.join(sorted(bmc.systems(cluster)))}"
        )
    saved = set(saved_hosts(cluster))
    for host in hosts:
        volumes = shared_dirs(cluster, host)
        for source, mount in volumes.items():
            prepare_shared_dir(Path(source), mount, cluster)
            state.remember("files", str(Path(source).parent))
        created = nodes.start_node(
            state,
            host,
            tag,
            state.addresses,
            gpu_devices(cluster, host),
            volumes,
            powered_by_slurm=host in saved,
        )
        running = nodes.container_running(nodes.container_name(host))
        shown = "started" if created else "running" if running else "powered off by Slurm"
        progress(f"node {host}: {shown} ({state.addresses[host]})")
        if not created and nodes.container_image(nodes.container_name(host)) != tag:
            progress(f"node {host}: runs an older image; `lab down` then `lab up` to use {tag}")
    # The Unix users (cluster.users) come from the playbook's users play, as on real hosts.
    progress("nodes: waiting for systemd")
    for host in hosts:
        if nodes.container_running(nodes.container_name(host)):
            nodes.wait_for_systemd(nodes.container_name(host))
    target = write_inventory(inventory, cluster)
    state.remember("files", str(target))
    state.remember("files", str(vault_password_file()))
    progress(f"playbook: ansible-playbook -i {target} playbooks/slurm.yml")
    return _converge(state, target, progress)


def _converge(state: LabState, target: Path, progress: Progress) -> PlaybookRun:
    state.converged = False
    state.save()
    result = run_playbook(target, progress)
    state.converged = True
    state.save()
    return result


def converge(progress: Progress = print) -> PlaybookRun:
    """Run the playbook again against the lab that is up."""
    state = LabState.load()
    if state is None or not state.inventory:
        raise LabError("no lab is up (run `gpucluster lab up`)")
    cluster = load_cluster(state.inventory)
    target = write_inventory(Path(state.inventory), cluster)
    return _converge(state, target, progress)


def exec_in_controller(
    command: Sequence[str], user: str | None = None, timeout: float | None = 300, check: bool = False
) -> subprocess.CompletedProcess[str]:
    args = [
        "podman",
        "exec",
        "--workdir=/tmp",
        *(["--user", user] if user else []),
        controller_container(),
        *command,
    ]
    return run(args, env=podman_env(), check=check, timeout=timeout)


def default_partition_nodes(cluster: Cluster) -> list[str]:
    """The nodes a job without -p runs on that are always on (a power-saved node would boot first)."""
    default = next((p.name for p in cluster.spec.partitions if p.default), None)
    return always_on(cluster, cluster.partitions.get(default, cluster.hosts) if default else cluster.hosts)


def smoke(cluster: Cluster) -> list[SmokeResult]:
    """A few jobs that show the lab works: every node, one leaf, GPUs as a tenant user."""
    tenant_user = next((u for t in cluster.spec.tenants for u in t.users), None)
    gpus = next((t.gpus for t in cluster.spec.node_types.values() if t.gpus), None)
    checks: list[tuple[str | None, list[str]]] = [
        (None, ["sinfo", "--Node", "--format=%N %T %G"]),
        (None, ["srun", f"-N{len(default_partition_nodes(cluster))}", "--label", "hostname"]),
    ]
    if cluster.switches:
        checks.append((None, ["srun", "-N2", "--switches=1", "--label", "hostname"]))
    if gpus and tenant_user:
        checks.append(
            (
                tenant_user,
                [
                    "srun",
                    f"--gres=gpu:{gpus.model}:2",
                    "sh",
                    "-c",
                    'echo "$(hostname) CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"',
                ],
            )
        )
    results = []
    for user, command in checks:
        proc = exec_in_controller(command, user=user, timeout=120)
        shown = " ".join(command) if user is None else f"(as {user}) " + " ".join(command)
        results.append(SmokeResult(shown, (proc.stdout + proc.stderr).strip(), proc.returncode == 0))
    return results


def down(progress: Progress = print, remove_image: bool = False, left: bool = False) -> list[str]:
    """Remove what the state file lists (containers, namespaces, veths, bridge, files), nothing else.
    Without a state file, `left` removes a lab of this prefix whose state went with its folder (a
    killed run's checkout, say); without `left` such a lab is only named."""
    state = LabState.load()
    if state is None:
        state = left_behind()
        if state is None:
            progress("no lab state: nothing to remove")
            return []
        found = ", ".join(sorted(state.containers) or state.netns or [state.bridge])
        if not left:
            progress(
                f"no lab state here, but a lab with prefix {PREFIX} is on this host ({found}); if no "
                "checkout of yours runs it, `gpucluster lab down --left-behind` removes it"
            )
            return []
        progress(f"no lab state: removing the lab with prefix {PREFIX} left behind ({found})")
    removed = bmc.stop(state)
    removed += nodes.remove_containers(state)
    removed += network.remove_network(state)
    for path in list(state.files):
        target = Path(path)
        if target.is_dir():
            shutil.rmtree(target, ignore_errors=True)
        else:
            target.unlink(missing_ok=True)
        removed.append(f"file {path}")
        state.files.remove(path)
        state.save()
    if state.inventory:
        remove_inventory(Path(state.inventory).name)
    if remove_image and state.image and image.image_exists(state.image):
        nodes.podman("rmi", state.image)
        removed.append(f"image {state.image}")
    for leftover in ("ansible.log", "containers.conf"):
        (state_dir() / leftover).unlink(missing_ok=True)
    LabState.path().unlink(missing_ok=True)
    for line in removed:
        progress(f"removed {line}")
    return removed


def left_behind() -> LabState | None:
    """What a lab of this prefix left on the host once its state file is gone, found by the marks
    only the lab gives: containers labelled io.gpucluster.lab named <prefix>-<host>, their
    namespaces <prefix>-<host>, the veths on the bridge <prefix>0 and that bridge."""
    names = nodes.podman(
        "ps", "--all", "--filter", f"label={nodes.LABEL}", "--format", "{{.Names}}", check=False
    ).split()
    containers = sorted(name for name in names if name.startswith(f"{PREFIX}-"))
    hosts = [name[len(PREFIX) + 1 :] for name in containers]
    namespaces = [
        network.netns_name(host) for host in [*hosts, BMC_HOST] if network.netns_path(host).exists()
    ]
    bridge = network.BRIDGE if network.link_exists(network.BRIDGE) else ""
    veths = network.bridge_ports(bridge) if bridge else []
    services = bmc.service_pids(network.netns_name(BMC_HOST))
    if not (containers or namespaces or bridge or services):
        return None
    state = LabState(
        bridge=bridge,
        netns=namespaces,
        veths=veths,
        containers=dict.fromkeys(containers, ""),
    )
    # The BMC service of this prefix's lab (its command line names the lab's BMC namespace).
    state.bmc_pid = services[0] if services else 0
    return state


def wait_until(predicate: Callable[[], bool], timeout: float, interval: float = 1.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()
