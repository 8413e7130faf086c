"""The lab's own Ansible inventory: the source inventory's files plus podman connection vars.

The directory keeps the source's basename (`lab`): the playbooks' build directory is named after it.
"""

from __future__ import annotations

import secrets
import shutil
from pathlib import Path

from gpucluster import yamlout
from gpucluster.lab import bmc
from gpucluster.lab.nodes import container_name
from gpucluster.lab.paths import state_dir
from gpucluster.lab.shell import run
from gpucluster.model.cluster import Cluster
from gpucluster.tools import venv_tool

VAULT_PASSWORD_FILE = "vault-password"


def inventory_dir(source: Path) -> Path:
    return state_dir() / "inventory" / source.resolve().name


def vault_password_file() -> Path:
    return state_dir() / VAULT_PASSWORD_FILE


def _write(path: Path, text: str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")
    path.chmod(mode)


def _vaulted_db_password(target: Path) -> None:
    """A random slurmdbd database password, encrypted with a vault password kept in the state dir."""
    vault_file = vault_password_file()
    if not vault_file.is_file():
        _write(vault_file, secrets.token_urlsafe(32) + "\n", 0o600)
    if target.is_file():
        return
    # The password goes through stdin: on the command line it would show in `ps` and in error
    # messages, and a value starting with "-" would be parsed as an option.
    encrypted = run(
        [
            venv_tool("ansible-vault"), "encrypt_string",
            "--vault-password-file", str(vault_file),
            "--stdin-name", "slurm_dbd_db_password",
        ],
        input_text=secrets.token_urlsafe(24),
    ).stdout  # fmt: skip
    _write(
        target,
        "---\n# Written by gpucluster lab (vault password: ../../../vault-password).\n" + encrypted,
        0o600,
    )


def _bmc_vars(target: Path) -> None:
    """The lab BMC's credentials (the password vaulted) and its CA, for the slurm_power role."""
    if target.is_file():
        return
    login = bmc.credentials()
    bmc.certificates(bmc.bmc_dir())
    encrypted = run(
        [
            venv_tool("ansible-vault"), "encrypt_string",
            "--vault-password-file", str(vault_password_file()),
            "--stdin-name", "slurm_power_bmc_password",
        ],
        input_text=login["password"],
    ).stdout  # fmt: skip
    ca = yamlout.dump({"slurm_power_bmc_username": login["username"], "slurm_power_bmc_ca": bmc.ca_pem()})
    _write(target, "---\n# Written by gpucluster lab: the lab BMC's login and CA.\n" + ca + encrypted, 0o600)


def write_inventory(source: Path, cluster: Cluster) -> Path:
    """Copy hosts.yml and the group_vars of every group (a group's own settings, such as the
    slurmd options of the power-saved nodes); add host_vars that reach each host through podman."""
    target = inventory_dir(source)
    hosts_file = next(p for p in (source / "hosts.yml", source / "hosts.yaml") if p.is_file())
    _write(target / "hosts.yml", hosts_file.read_text(encoding="utf-8"))
    source_vars = source / "group_vars"
    for path in sorted(source_vars.rglob("*.y*ml")) if source_vars.is_dir() else []:
        _write(target / path.relative_to(source), path.read_text(encoding="utf-8"))
    _vaulted_db_password(target / "group_vars" / "all" / "lab-vault.yml")
    if bmc.needed(cluster):
        _bmc_vars(target / "group_vars" / "all" / "lab-bmc.yml")
    # host_vars, not group_vars/all: the implicit localhost (where rendering runs) must stay local.
    for host in cluster.inventory.hostvars:
        doc = {
            "ansible_connection": "podman_nsenter",
            "ansible_host": container_name(host),
            "ansible_python_interpreter": "/usr/bin/python3",
            # An absolute path saves a call per task (no `echo ~`); not /tmp, a tmpfs inside the
            # container.
            "ansible_remote_tmp": "/root/.ansible/tmp",
        }
        _write(target / "host_vars" / f"{host}.yml", "---\n" + yamlout.dump(doc, sort_keys=True))
    return target


def remove_inventory(source_name: str) -> None:
    parent = state_dir() / "inventory"
    shutil.rmtree(parent / source_name, ignore_errors=True)
    if parent.is_dir() and not any(parent.iterdir()):
        parent.rmdir()


__all__ = ["inventory_dir", "remove_inventory", "vault_password_file", "write_inventory"]
