# ruff: noqa: E402  (Ansible plugins keep DOCUMENTATION above the imports)
"""Run tasks in a local podman container by entering its namespaces (nsenter), not `podman exec`.

`podman exec` costs about 0.2 s per call on this kind of host (the podman binary, then conmon and
runc setting up the exec session); a lab converge makes some 200 of them. nsenter into the
container's init process costs a few milliseconds. The container's init PID is read once with
`podman inspect` and kept in a per-user cache file, checked against the process's start time on
every use (a restarted container has a new init, so a stale entry is never used).

Commands run with the environment of the container's init (what `podman exec` gives), as root
with the host's capabilities: this transport is for throwaway test containers (the lab, Molecule)
only. Real hosts are reached over ssh.
"""

from __future__ import annotations

DOCUMENTATION = """
    name: podman_nsenter
    short_description: Run tasks in a local podman container through nsenter, modules piped on stdin
    author: gpucluster maintainers (!UNKNOWN)
    description:
        - Enters every namespace of the container's init process and runs the command there with
          that process's environment. Modules are piped through stdin (pipelining); files are
          copied through the same channel.
        - Needs root on the host running Ansible, and the util-linux nsenter program.
    options:
      remote_addr:
        description: Name or ID of the container (the last of these variables that is set).
        default: inventory_hostname
        vars:
          - name: inventory_hostname
          - name: ansible_host
          - name: ansible_podman_host
      podman_executable:
        description: The podman program (only used to find the container's init process).
        default: podman
        vars:
          - name: ansible_podman_executable
        env:
          - name: ANSIBLE_PODMAN_EXECUTABLE
      pipelining:
        description: Pipe modules through stdin.
        type: boolean
        default: true
        ini:
          - section: connection
            key: pipelining
        env:
          - name: ANSIBLE_PIPELINING
        vars:
          - name: ansible_pipelining
"""

EXAMPLES = r"""
# An inventory host that is a podman container on the machine running Ansible (as root):
#   gcnode01:
#     ansible_connection: gpucluster.cluster.podman_nsenter
#     ansible_python_interpreter: /usr/bin/python3
- name: Run a command in the container
  hosts: gcnode01
  gather_facts: false
  tasks:
    - name: Ask for the kernel release
      ansible.builtin.command: uname -r
      changed_when: false
"""

import os
import re
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from ansible.errors import AnsibleConnectionFailure, AnsibleError, AnsibleFileNotFound
from ansible.module_utils.common.text.converters import to_bytes, to_native
from ansible.plugins.connection import ConnectionBase, ensure_connect

NSENTER = "/usr/bin/nsenter"
ENV = "/usr/bin/env"


def _start_time(pid: int) -> str | None:
    """Field 22 of /proc/PID/stat (start time in clock ticks since boot), None if no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: count from the last ')'.
    return stat[stat.rindex(")") + 2 :].split()[19]


def _cache_dir() -> Path:
    directory = Path(tempfile.gettempdir()) / f"gpucluster-podman-pids-{os.getuid()}"
    directory.mkdir(mode=0o700, exist_ok=True)
    info = directory.stat()
    if info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise AnsibleError(f"{directory} is not private to this user: remove it")
    return directory


class Connection(ConnectionBase):  # type: ignore[misc]
    transport = "podman_nsenter"
    has_pipelining = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._pid: int | None = None
        self._environment: list[str] = []

    def _connect(self) -> Any:
        super()._connect()
        if self._pid is None:
            self._pid = self._container_pid()
            self._environment = self._init_environment(self._pid)
        self._connected = True
        return self

    def _container_pid(self) -> int:
        name = self.get_option("remote_addr")
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name):
            raise AnsibleConnectionFailure(f"not a container name: {name!r}")
        cached = _cache_dir() / name
        try:
            pid_text, start = cached.read_text(encoding="ascii").split()
            if _start_time(int(pid_text)) == start:
                return int(pid_text)
        except (OSError, ValueError):
            pass
        podman = shutil.which(self.get_option("podman_executable")) or self.get_option("podman_executable")
        proc = subprocess.run(
            [podman, "inspect", "--type=container", "--format={{.State.Pid}}", name],
            capture_output=True,
            text=True,
            check=False,
        )
        pid = int(proc.stdout.strip() or 0) if proc.returncode == 0 else 0
        start_time = _start_time(pid) if pid > 0 else None
        if start_time is None:
            raise AnsibleConnectionFailure(f"container {name} is not running: {proc.stderr.strip()}")
        partial = cached.with_suffix(f".{os.getpid()}")
        partial.write_text(f"{pid} {start_time}\n", encoding="ascii")
        partial.replace(cached)
        return pid

    @staticmethod
    def _init_environment(pid: int) -> list[str]:
        """The container's configured environment, as its init process holds it."""
        try:
            raw = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError as exc:
            raise AnsibleConnectionFailure(f"cannot read the container's environment: {exc}") from exc
        return [item.decode("utf-8", "replace") for item in raw.split(b"\0") if b"=" in item]

    def _run(self, args: list[str], in_data: bytes | None) -> tuple[int, bytes, bytes]:
        if self._pid is None:
            raise AnsibleConnectionFailure("podman_nsenter: not connected")
        command = [NSENTER, f"--target={self._pid}", "--all", ENV, "-i", *self._environment, *args]
        self._display.vvv(f"NSENTER {shlex.join(args)}", host=self.get_option("remote_addr"))
        proc = subprocess.run(
            [to_bytes(part, errors="surrogate_or_strict") for part in command],
            input=in_data,
            stdin=None if in_data is not None else subprocess.DEVNULL,
            capture_output=True,
            check=False,
        )
        return proc.returncode, proc.stdout, proc.stderr

    @ensure_connect  # type: ignore[misc]
    def exec_command(self, cmd: str, in_data: bytes | None = None, sudoable: bool = False) -> Any:
        super().exec_command(cmd, in_data=in_data, sudoable=sudoable)
        # Split as `podman exec` does; entering the mount namespace leaves the working directory
        # at the container's root, as `podman exec` has it.
        return self._run(shlex.split(to_native(cmd, errors="surrogate_or_strict")), in_data)

    @ensure_connect  # type: ignore[misc]
    def put_file(self, in_path: str, out_path: str) -> None:
        super().put_file(in_path, out_path)
        try:
            data = Path(in_path).read_bytes()
        except OSError as exc:
            raise AnsibleFileNotFound(f"cannot read {in_path}: {exc}") from exc
        # Through the container's own filesystem view: /proc/PID/root would follow the
        # container's absolute symlinks on the host.
        code, _stdout, stderr = self._run(["/bin/sh", "-c", f"cat > {shlex.quote(out_path)}"], data)
        if code != 0:
            raise AnsibleError(f"failed to write {out_path}: {to_native(stderr)}")

    @ensure_connect  # type: ignore[misc]
    def fetch_file(self, in_path: str, out_path: str) -> None:
        super().fetch_file(in_path, out_path)
        code, stdout, stderr = self._run(["/bin/cat", "--", in_path], None)
        if code != 0:
            raise AnsibleError(f"failed to read {in_path}: {to_native(stderr)}")
        Path(out_path).write_bytes(stdout)

    def close(self) -> None:
        super().close()
        self._connected = False
