# ruff: noqa: E402  (Ansible plugins keep DOCUMENTATION above the imports)
"""containers.podman.podman with pipelining: one `podman exec -i` per task instead of five calls.

The collection's plugin mounts the container on every connection and runs mkdir, chmod, python
and rm as separate `podman exec` calls (about 0.2 s each on a small host), because it never attaches
stdin. Attaching stdin (`-i`) lets Ansible pipe the module into the remote python, as it does over
ssh. Only the lab and the Molecule scenarios use it: real hosts are reached over ssh.
"""

from __future__ import annotations

DOCUMENTATION = """
    name: podman_pipelined
    short_description: Run tasks in a local podman container, piping modules through stdin
    description:
        - Same options as containers.podman.podman; adds pipelining by attaching stdin to
          C(podman exec), and mounts the container only when a file is copied.
    options:
      remote_addr:
        description: Name or ID of the container.
        default: inventory_hostname
        vars:
          - name: ansible_host
          - name: inventory_hostname
          - name: ansible_podman_host
      remote_user:
        description: User (name or UID) the commands run as inside the container.
        ini:
          - section: defaults
            key: remote_user
        env:
          - name: ANSIBLE_REMOTE_USER
        vars:
          - name: ansible_user
      podman_extra_args:
        description: Extra arguments given to every podman command.
        default: ''
        ini:
          - section: defaults
            key: podman_extra_args
        vars:
          - name: ansible_podman_extra_args
        env:
          - name: ANSIBLE_PODMAN_EXTRA_ARGS
      podman_executable:
        description: The podman program.
        default: podman
        vars:
          - name: ansible_podman_executable
        env:
          - name: ANSIBLE_PODMAN_EXECUTABLE
      pipelining:
        description: Pipe modules through stdin (the point of this plugin).
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

import shlex
from typing import Any

from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.connection import ConnectionBase, ensure_connect
from ansible_collections.containers.podman.plugins.connection.podman import (
    Connection as PodmanConnection,
)


class Connection(PodmanConnection):  # type: ignore[misc]
    transport = "podman_pipelined"
    has_pipelining = True

    def _connect(self) -> Any:
        # No `podman mount` here: most tasks copy no file, and the mount costs a podman call.
        ConnectionBase._connect(self)
        self._connected = True
        return self

    def _ensure_mounted(self) -> None:
        if self._mount_point is None:
            PodmanConnection._connect(self)

    @ensure_connect  # type: ignore[misc]
    def exec_command(self, cmd: str, in_data: bytes | None = None, sudoable: bool = False) -> Any:
        ConnectionBase.exec_command(self, cmd, in_data=in_data, sudoable=sudoable)
        exec_args = ["exec"]
        if in_data is not None:
            exec_args.append("--interactive")
        if self.user:
            exec_args.extend(("--user", self.user))
        args = shlex.split(to_native(cmd, errors="surrogate_or_strict"))
        return self._podman(exec_args, args, in_data)

    def put_file(self, in_path: str, out_path: str) -> None:
        self._ensure_mounted()
        super().put_file(in_path, out_path)

    def fetch_file(self, in_path: str, out_path: str) -> None:
        self._ensure_mounted()
        super().fetch_file(in_path, out_path)
