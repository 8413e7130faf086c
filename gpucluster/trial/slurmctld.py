"""Load rendered Slurm files into a throwaway slurmctld (and slurmdbd) in private namespaces.

Slurm 22.05 has no `slurmctld -t`, and a bad file makes live daemons exit on reconfigure, so the
only faithful check is to start the real daemon on the files and read what it says. Everything runs
under `unshare` (mount, UTS, network, PID): only loopback inside a fresh network namespace is used and
every process dies with the namespace.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from gpucluster.cluster import Cluster
from gpucluster.hostlists import expand
from gpucluster.model import DEFAULT_STATE_SAVE_LOCATION
from gpucluster.modelbase import Owner
from gpucluster.slurm.releases import SlurmVersion
from gpucluster.slurm.restapi import JWT_KEY_NAME

# Lines of a daemon log that mean the configuration is not accepted as is.
_BAD_LINE = re.compile(r"\b(fatal|error)\b", re.IGNORECASE)
# A brand-new StateSaveLocation has no state files; slurmctld reports each missing one as an
# error on every first start. They say nothing about the configuration.
_FIRST_START = re.compile(
    r"(Could not open \w+ state file|Trying backup state save file|No fed_mgr state file)"
)
_SWITCH_LINE = re.compile(r"SwitchName=(\S+)")


class TrialUnavailable(RuntimeError):
    """The machine cannot run the trial (not root, Slurm missing, or version mismatch)."""


@dataclass
class TrialResult:
    started: bool
    log: list[str]
    bad_lines: list[str]
    topology: dict[str, tuple[frozenset[str], frozenset[str]]] = field(default_factory=dict)
    partitions: str = ""
    nodes: str = ""
    # What the trial could not try on this machine (the files are not at fault).
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.started and not self.bad_lines


def _expected_noise(cluster: Cluster, line: str) -> bool:
    """Errors the trial itself causes, not the files: missing first-start state files, and the
    primary's start-up notice to backup controllers, which the trial does not run."""
    if _FIRST_START.search(line):
        return True
    backups = cluster.spec.slurm.controller[1:]
    return any(f"_shutdown_bu_thread:send/recv {host}:" in line for host in backups)


def installed_version() -> SlurmVersion | None:
    try:
        out = subprocess.run(["slurmctld", "-V"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    match = re.search(r"(\d+)\.(\d+)\.(\d+)", out)
    return SlurmVersion(*(int(g) for g in match.groups())) if match else None


def check_available(cluster: Cluster) -> None:
    if not cluster.hosts_owned_by(Owner.SLURM):
        raise TrialUnavailable(
            "bare-metal Slurm owns no host of this inventory: there is no slurm.conf to try"
        )
    if shutil.which("unshare") is None or shutil.which("slurmctld") is None:
        raise TrialUnavailable("slurmctld/unshare not installed (Debian: slurm-wlm, util-linux)")
    if os.geteuid() != 0:
        raise TrialUnavailable("the trial needs root (it creates namespaces and mounts)")
    version = installed_version()
    if version is None or version.release != cluster.version.release:
        have = "none" if version is None else str(version)
        raise TrialUnavailable(
            f"target Slurm is {cluster.spec.slurm.version} but the installed slurmctld is {have}; "
            "a trial proves a config only against the release it targets"
        )


def parse_topology(text: str) -> dict[str, tuple[frozenset[str], frozenset[str]]]:
    """`scontrol show topology` -> switch -> (child switches, nodes)."""
    switches: dict[str, tuple[frozenset[str], frozenset[str]]] = {}
    for line in text.splitlines():
        match = _SWITCH_LINE.search(line)
        if not match:
            continue
        fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
        children = frozenset(expand(fields["Switches"])) if fields.get("Switches") else frozenset()
        nodes = frozenset(expand(fields["Nodes"])) if fields.get("Nodes") else frozenset()
        switches[match.group(1)] = (children, nodes)
    return switches


def expected_topology(cluster: Cluster) -> dict[str, tuple[frozenset[str], frozenset[str]]]:
    """What `scontrol show topology` should list: each switch's child switches and, as Slurm
    reports it, every node below the switch, for the hosts bare-metal Slurm owns."""
    cluster = cluster.owned_by(Owner.SLURM)
    by_name = {s.name: s for s in cluster.switches}
    below: dict[str, frozenset[str]] = {}

    def nodes_below(name: str) -> frozenset[str]:
        if name not in below:
            switch = by_name[name]
            below[name] = frozenset(switch.nodes).union(*(nodes_below(c) for c in switch.switches))
        return below[name]

    return {s.name: (frozenset(s.switches), nodes_below(s.name)) for s in cluster.switches}


def _slurmdbd_conf(jwt_key: str | None) -> str:
    # Trial-only slurmdbd: socket-authenticated MariaDB user, no password on disk.
    jwt = ["AuthAltTypes=auth/jwt", f"AuthAltParameters=jwt_key={jwt_key}"] if jwt_key else []
    return "\n".join(
        [
            "AuthType=auth/munge",
            *jwt,
            "DbdHost=localhost",
            "SlurmUser=slurm",
            "PidFile=/run/slurmdbd.pid",
            "LogFile=/var/log/slurm/slurmdbd.log",
            "StorageType=accounting_storage/mysql",
            "StorageHost=localhost",
            "StorageUser=slurm",
            "StorageLoc=slurm_acct_db",
            "",
        ]
    )


def _private_state_dir(slurm_conf: str) -> str:
    """The sandbox keeps slurmctld's state in its private tmpfs: a site's shared StateSaveLocation
    (e.g. /shared/slurmctld) does not exist here, and creating it would touch the real filesystem."""
    return re.sub(
        r"^StateSaveLocation=.*$", f"StateSaveLocation={DEFAULT_STATE_SAVE_LOCATION}", slurm_conf, flags=re.M
    )


def jwt_plugin_installed() -> bool:
    """auth/jwt, which slurm.conf names with cluster.slurm.rest_api (Debian: slurm-wlm-jwt-plugin)."""
    return any(Path("/usr/lib").glob("*/slurm-wlm/auth_jwt.so")) or any(
        Path("/usr/lib").glob("slurm*/auth_jwt.so")
    )


JWT_NOT_TRIED = (
    "trial: auth/jwt (cluster.slurm.rest_api) not tried: the JWT plugin is not installed here "
    "(Debian: slurm-wlm-jwt-plugin); AuthAltTypes and AuthAltParameters left out"
)


def _jwt(slurm_conf: str) -> tuple[str, str | None, list[str]]:
    """slurm.conf for the sandbox with the REST API's JWT lines, the key path the sandbox fills
    with a throwaway key (in its private state directory), and what the trial says about them.
    Without the plugin on this machine the lines are left out, and the trial says so."""
    if not re.search(r"^AuthAltTypes=.*auth/jwt", slurm_conf, flags=re.M):
        return slurm_conf, None, []
    if not jwt_plugin_installed():
        return re.sub(r"^AuthAlt(Types|Parameters)=.*\n", "", slurm_conf, flags=re.M), None, [JWT_NOT_TRIED]
    key = f"{DEFAULT_STATE_SAVE_LOCATION}/{JWT_KEY_NAME}"
    private = re.sub(r"^AuthAltParameters=.*$", f"AuthAltParameters=jwt_key={key}", slurm_conf, flags=re.M)
    return private, key, []


def _hosts_file(cluster: Cluster) -> str:
    names = set(cluster.hosts) | set(cluster.spec.slurm.controller)
    if cluster.spec.slurm.accounting:
        names.add(cluster.spec.slurm.accounting.host)
    return "127.0.0.1 localhost " + " ".join(sorted(names)) + "\n::1 localhost\n"


def run_trial(cluster: Cluster, files: dict[str, str], seconds: int = 3, timeout: int = 120) -> TrialResult:
    """Start slurmctld on the rendered `slurm/` files and report what it logged and shows."""
    check_available(cluster)
    with tempfile.TemporaryDirectory(prefix="gpucluster-trial-") as tmp:
        work = Path(tmp)
        conf = work / "conf"
        conf.mkdir()
        jwt_key: str | None = None
        notes: list[str] = []
        for rel, content in files.items():
            if rel.startswith("slurm/") and rel.count("/") == 1:
                if rel == "slurm/slurm.conf":
                    content, jwt_key, notes = _jwt(_private_state_dir(content))
                (conf / rel.split("/", 1)[1]).write_text(content, encoding="utf-8")
        accounting = cluster.spec.slurm.accounting is not None
        if accounting:
            dbd = conf / "slurmdbd.conf"
            dbd.write_text(_slurmdbd_conf(jwt_key), encoding="utf-8")
            dbd.chmod(0o600)
            shutil.chown(dbd, "slurm", "slurm")
        (work / "hosts").write_text(_hosts_file(cluster), encoding="utf-8")
        script = resources.files("gpucluster.trial").joinpath("sandbox.sh")
        command = [
            "unshare", "--mount", "--uts", "--net", "--pid", "--fork", "--mount-proc",
            "bash", str(script), str(work), cluster.spec.slurm.controller[0], str(seconds),
            "yes" if accounting else "no",
        ]  # fmt: skip
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
        out = work / "out"
        state = (out / "state").read_text().strip() if (out / "state").is_file() else "none"
        log: list[str] = []
        for name in ("slurmctld.startup.log", "slurmdbd.log", "sacctmgr.log"):
            path = out / name
            if path.is_file():
                log += [
                    f"{name.split('.')[0]}: {line}" for line in path.read_text(errors="replace").splitlines()
                ]
        if proc.returncode != 0:
            log += [f"sandbox exited {proc.returncode}: {line}" for line in proc.stderr.splitlines()[-20:]]

        def read(name: str) -> str:
            return (out / name).read_text(errors="replace") if (out / name).is_file() else ""

        return TrialResult(
            started=state == "running",
            log=log,
            bad_lines=[line for line in log if _BAD_LINE.search(line) and not _expected_noise(cluster, line)],
            topology=parse_topology(read("topology")),
            partitions=read("partitions"),
            nodes=read("nodes"),
            notes=notes,
        )
