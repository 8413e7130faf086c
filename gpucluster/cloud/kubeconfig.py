"""Kubeconfig for clouds whose API server takes a short-lived token from a client-go exec plugin.

One cluster, one user, one context, all named after the cluster; only the server address and the
plugin command differ between clouds.
"""

from __future__ import annotations

from dataclasses import dataclass

_KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- name: {name}
  cluster:
    server: {server}
    certificate-authority-data: {ca}
contexts:
- name: {name}
  context: {{cluster: {name}, user: {name}}}
current-context: {name}
users:
- name: {name}
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
{exec}"""


@dataclass(frozen=True)
class ExecPlugin:
    """The credential plugin kubectl runs for a token (the cloud's CLI or auth helper)."""

    command: str
    args: tuple[str, ...] = ()
    provide_cluster_info: bool = False

    def yaml_lines(self) -> str:
        """The plugin's keys under `user.exec`, indented to sit there."""
        lines = [f"command: {self.command}"]
        if self.args:
            lines.append(f"args: [{', '.join(self.args)}]")
        if self.provide_cluster_info:
            lines.append("provideClusterInfo: true")
        return "".join(f"      {line}\n" for line in lines)


def exec_kubeconfig(name: str, server: str, ca: str, plugin: ExecPlugin) -> str:
    """A kubeconfig for cluster `name` at `server` (https URL), trusting the base64 CA bundle `ca`."""
    return _KUBECONFIG.format(name=name, server=server, ca=ca, exec=plugin.yaml_lines())
