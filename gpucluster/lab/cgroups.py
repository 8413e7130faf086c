"""Lab and Molecule containers: systemd on a cgroup v2 mount, Slurm on the host's v1 controllers.

This host's cgroup hierarchy is hybrid: every controller is bound to a v1 hierarchy and the v2
(unified) one holds none. systemd 257 (trixie) refuses to boot on v1 by default and 262 (forky)
cannot at all, so a container's /sys/fs/cgroup must be a cgroup2 mount; Slurm, for its part, calls
a hybrid hierarchy unsupported (`fatal: Hybrid mode is not supported`) unless cgroup.conf names
`CgroupPlugin=cgroup/v1` and where the v1 controllers are (`CgroupMountpoint`).

So each container starts with a private cgroup namespace and a first process that waits; from
the host, in the container's mount and cgroup namespaces, its v1 controllers (podman mounts them
read-only, each holding only the container's own subtree) move to V1_MOUNTPOINT and become
writable, and a cgroup2 mount - the container's own subtree of the unified hierarchy - takes
/sys/fs/cgroup. Then the waiting process execs systemd. The container keeps podman's default
capabilities; only the host's nsenter mounts. A plain cgroup v2 host needs none of this.
"""

from __future__ import annotations

import sys
from pathlib import Path

from gpucluster.lab.shell import LabError, run

# Where the v1 controllers are inside the containers; the lab inventory's cluster.slurm.cgroup
# names it as CgroupMountpoint.
V1_MOUNTPOINT = "/run/cgroup-v1"
READY_FLAG = "/run/gpucluster-cgroups-ready"
# The container's command: wait until the host has mounted the hierarchies, then become systemd.
INIT_COMMAND = ("/bin/sh", "-c", f"while [ ! -e {READY_FLAG} ]; do sleep 0.1; done; exec /sbin/init")
PODMAN_ARGS = ("--cgroupns=private",)


def read_only_cgroup_mounts(mountinfo: str) -> list[str]:
    """Mount points of the cgroup v1 controllers that `mountinfo` (/proc/PID/mountinfo) shows
    read-only. Named hierarchies (name=systemd) are no controllers."""
    points: list[str] = []
    for line in mountinfo.splitlines():
        fields, _, rest = line.partition(" - ")
        parts, after = fields.split(), rest.split()
        if len(parts) < 6 or len(after) < 3 or after[0] != "cgroup":
            continue
        if "ro" in parts[5].split(",") and not any(o.startswith("name=") for o in after[2].split(",")):
            points.append(parts[4])
    return points


def _nsenter(pid: str, *command: str) -> None:
    run(["nsenter", "-t", pid, "-m", "-C", "--", *command])


def prepare(container: str, podman_env: dict[str, str]) -> None:
    """Mount the container's hierarchies and let its systemd start (once per container start)."""
    pid = run(
        ["podman", "container", "inspect", "--format", "{{.State.Pid}}", container], env=podman_env
    ).stdout.strip()
    if not pid or pid == "0":
        raise LabError(f"{container}: not running")
    root = Path(f"/proc/{pid}/root")
    if (root / READY_FLAG.lstrip("/")).exists():
        return
    mountinfo = Path(f"/proc/{pid}/mountinfo")
    if not any(f" {V1_MOUNTPOINT} " in line for line in mountinfo.read_text(encoding="utf-8").splitlines()):
        _nsenter(pid, "mkdir", "-p", V1_MOUNTPOINT)
        _nsenter(pid, "mount", "--move", "/sys/fs/cgroup", V1_MOUNTPOINT)
    for point in read_only_cgroup_mounts(mountinfo.read_text(encoding="utf-8")):
        _nsenter(pid, "mount", "-o", "remount,bind,rw", point)
    _nsenter(pid, "mount", "-t", "cgroup2", "cgroup2", "/sys/fs/cgroup")
    _nsenter(pid, "touch", READY_FLAG)


def main() -> None:
    """`python -m gpucluster.lab.cgroups CONTAINER...` (Molecule's create playbook)."""
    from gpucluster.lab.paths import podman_env

    for container in sys.argv[1:]:
        prepare(container, podman_env())


if __name__ == "__main__":
    main()
