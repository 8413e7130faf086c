"""Lab hosts as podman containers running systemd, each in its own network namespace."""

from __future__ import annotations

import time

from gpucluster.lab import cgroups
from gpucluster.lab.network import netns_path
from gpucluster.lab.paths import PREFIX, podman_env
from gpucluster.lab.shell import LabError, run
from gpucluster.lab.state import LabState

LABEL = "io.gpucluster.lab"


def container_name(host: str) -> str:
    return f"{PREFIX}-{host}"


def podman(*args: str, check: bool = True, timeout: float | None = None) -> str:
    return run(["podman", *args], env=podman_env(), check=check, timeout=timeout).stdout


def container_running(name: str) -> bool:
    out = run(
        ["podman", "container", "inspect", "--format", "{{.State.Running}}", name],
        env=podman_env(),
        check=False,
    )
    return out.returncode == 0 and out.stdout.strip() == "true"


def container_image(name: str) -> str:
    """The image name the container was created from."""
    return podman("container", "inspect", "--format", "{{.ImageName}}", name, check=False).strip()


def container_exists(name: str) -> bool:
    return run(["podman", "container", "exists", name], env=podman_env(), check=False).returncode == 0


def start_node(
    state: LabState,
    host: str,
    image: str,
    addresses: dict[str, str],
    devices: list[str],
    volumes: dict[str, str] | None = None,
    powered_by_slurm: bool = False,
) -> bool:
    """Run (or start again) the container of `host`; True if it had to be created.
    `volumes` maps a host directory to the path it is mounted at inside the container. A
    power-saved node's stopped container stays stopped: Slurm powered it off (its BMC starts it)."""
    name = container_name(host)
    if container_exists(name):
        if name not in state.containers:
            raise LabError(
                f"container {name} exists but this lab did not create it; `gpucluster lab down "
                "--left-behind` removes a lab of this prefix left behind"
            )
        if not container_running(name):
            if powered_by_slurm:
                return False
            start_container(name)
        cgroups.prepare(name, podman_env())
        return False
    args = [
        "run", "-d", "--name", name, "--hostname", host,
        "--label", f"{LABEL}={host}",
        "--network", f"ns:{netns_path(host)}",
        "--systemd=always", "--pull=never", *cgroups.PODMAN_ARGS,
        # slurmstepd (root) pins a user's tasks to their CPUs (task/affinity): sched_setaffinity on
        # another user's process needs CAP_SYS_NICE, which root has on a host and podman drops.
        "--cap-add", "SYS_NICE",
        # A container job (`srun --container`, rootless crun) mounts a new procfs in a user
        # namespace; the kernel refuses that while podman's masked paths cover parts of this
        # container's /proc ("mount `proc` to `proc`: Operation not permitted"). A host has none.
        "--security-opt", "unmask=ALL",
    ]  # fmt: skip
    for other, address in addresses.items():
        args += ["--add-host", f"{other}:{address}"]
    # Simulated GPUs: character devices named as gres.conf File= lists them.
    for device in devices:
        args += ["--device", f"/dev/null:{device}:rwm"]
    for source, target in (volumes or {}).items():
        args += ["--volume", f"{source}:{target}:rw"]
    state.containers[name] = host
    state.save()
    podman(*args, image, *cgroups.INIT_COMMAND)
    cgroups.prepare(name, podman_env())
    return True


def start_container(name: str) -> None:
    """Start a stopped lab container: its systemd boots once its cgroups are mounted."""
    podman("start", name)
    cgroups.prepare(name, podman_env())


def wait_for_systemd(name: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    status = ""
    while time.monotonic() < deadline:
        out = run(["podman", "exec", name, "systemctl", "is-system-running"], env=podman_env(), check=False)
        status = out.stdout.strip()
        if status in ("running", "degraded"):
            return
        time.sleep(0.5)
    raise LabError(f"{name}: systemd did not finish booting in {timeout:.0f}s (state: {status or 'unknown'})")


def remove_containers(state: LabState) -> list[str]:
    removed: list[str] = []
    for name in list(state.containers):
        if container_exists(name):
            podman("rm", "--force", "--time", "0", name, timeout=120)
            removed.append(f"container {name}")
        del state.containers[name]
        state.save()
    return removed
