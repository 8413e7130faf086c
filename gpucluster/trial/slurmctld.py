"""Load rendered Slurm files into a throwaway slurmctld (and slurmdbd) in private namespaces.

Slurm 22.05 has no `slurmctld -t`, and a bad file makes live daemons exit on reconfigure, so the
only faithful check is to start the real daemon on the files and read what it says. Everything runs
under `unshare` (mount, UTS, network, PID): only loopback inside a fresh network namespace is used and
every process dies with the namespace.
"""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from gpucluster.hostlists import expand
from gpucluster.lab.paths import podman_env
from gpucluster.model.base import Owner
from gpucluster.model.cluster import Cluster
from gpucluster.model.releases import PROVEN, SlurmVersion
from gpucluster.model.spec import DEFAULT_STATE_SAVE_LOCATION, SLURM_ADDRESS_VARS
from gpucluster.slurm.restapi import JWT_KEY_NAME

# Lines of a daemon log that mean the configuration is not accepted as is.
_BAD_LINE = re.compile(r"\b(fatal|error)\b", re.IGNORECASE)
# A brand-new StateSaveLocation has no state files; slurmctld reports each missing one as an
# error on every first start. They say nothing about the configuration.
_FIRST_START = re.compile(
    r"(Could not open \w+ state file|Trying backup state save file|No fed_mgr state file"
    # 24.11's slurmdbd, while slurmctld registers a cluster just added to an empty database.
    r"|We can't find assoc 1 on cluster)"
)
_SWITCH_LINE = re.compile(r"SwitchName=(\S+)")
# The address of the sandbox's second network namespace (sandbox.sh).
PEER_ADDRESS = "10.223.0.2"


class TrialUnavailable(RuntimeError):
    """The machine cannot run the trial (not root, Slurm missing, or version mismatch)."""


@dataclass
class TrialResult:
    started: bool
    log: list[str]
    bad_lines: list[str]
    topology: dict[str, tuple[frozenset[str], frozenset[str]]] = field(default_factory=dict)
    # NVLink blocks as slurmctld lists them: block -> nodes (aggregated blocks aside).
    blocks: dict[str, frozenset[str]] = field(default_factory=dict)
    partitions: str = ""
    nodes: str = ""
    # What the trial could not try on this machine (the files are not at fault).
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.started and not self.bad_lines


# slurmctld times 1000 gettimeofday() calls at start-up and logs an error past its threshold.
_SLOW_CLOCK = re.compile(r"error: High latency for 1000 calls to gettimeofday\(\)")


def _expected_noise(cluster: Cluster, line: str) -> bool:
    """Errors the trial itself causes, not the files: missing first-start state files, the
    primary's start-up notice to backup controllers, which the trial does not run, and slurmctld's
    clock check on a machine busy with other work (its timing, not the configuration)."""
    if _FIRST_START.search(line) or _SLOW_CLOCK.search(line):
        return True
    backups = cluster.spec.slurm.controller[1:]
    if any(f"_shutdown_bu_thread:send/recv {host}:" in line for host in backups):
        return True
    return _said_on_purpose(cluster, line)


def _said_on_purpose(cluster: Cluster, line: str) -> bool:
    """What slurmctld logs as an error of a site's way that the inventory states on purpose (and
    validate warns of): hosts outside the switch tree, names in topology.conf no node has, no
    default partition."""
    spec = cluster.spec
    fabric = spec.fabric
    if fabric.outside_tree and "switches lack access to" in line:
        return True
    if fabric.placeholder_nodes and "Invalid hostnames in switch configuration" in line:
        return True
    return not any(p.default for p in spec.partitions) and "default partition not set" in line


def installed_version() -> SlurmVersion | None:
    try:
        out = subprocess.run(["slurmctld", "-V"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    match = re.search(r"(\d+)\.(\d+)\.(\d+)", out)
    return SlurmVersion(*(int(g) for g in match.groups())) if match else None


@dataclass(frozen=True)
class Runner:
    """Where the trial runs: the host's own Slurm when it is the target release, else the lab
    image of the release's Debian suite (podman, no network: loopback only)."""

    image: str | None  # None: the host
    # The container's name, to remove it if the trial overruns its time.
    name: str = field(default_factory=lambda: f"gpucluster-trial-{os.getpid()}-{time.monotonic_ns()}")

    def command(self, script: str, work: Path, args: list[str]) -> list[str]:
        sandbox = ["unshare", "--mount", "--uts", "--net", "--pid", "--fork", "--mount-proc", "bash"]
        if self.image is None:
            return [*sandbox, script, str(work), *args]
        return [
            "podman", "run", "--rm", "--name", self.name, "--network=none", "--pull=never",
            # mount and ip inside the container's own namespaces, as unshare does on the host
            "--cap-add=SYS_ADMIN", "--cap-add=NET_ADMIN",
            "--volume", f"{work}:/trial", "--volume", f"{script}:/trial-sandbox.sh:ro",
            self.image, *sandbox, "/trial-sandbox.sh", "/trial", *args,
        ]  # fmt: skip


def check_available(cluster: Cluster, progress: Callable[[str], None] | None = None) -> Runner:
    """How to run the trial of this inventory's release here (TrialUnavailable: not at all)."""
    if not cluster.hosts_owned_by(Owner.SLURM):
        raise TrialUnavailable(
            "bare-metal Slurm owns no host of this inventory: there is no slurm.conf to try"
        )
    if shutil.which("unshare") is None:
        raise TrialUnavailable("unshare not installed (Debian: util-linux)")
    if os.geteuid() != 0:
        raise TrialUnavailable("the trial needs root (it creates namespaces and mounts)")
    target = cluster.release
    installed = installed_version()
    if installed is not None and installed.release == target.name:
        return Runner(None)
    if not target.proven:
        raise TrialUnavailable(
            f"no real Slurm {target.name} daemons here: the trial runs Debian's packages of "
            f"{', '.join(PROVEN)} (the host's own or a lab image)"
        )
    if shutil.which("podman") is None or shutil.which("debootstrap") is None:
        have = "none" if installed is None else str(installed)
        raise TrialUnavailable(
            f"target Slurm is {cluster.spec.slurm.version} but the installed slurmctld is {have}, and "
            "podman/debootstrap are missing for the lab image of that release"
        )
    from gpucluster.lab import image

    tag, _ = image.ensure_image(progress or (lambda message: None), image.suite_of(target.name))
    return Runner(tag)


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


def parse_blocks(text: str) -> dict[str, frozenset[str]]:
    """`scontrol show topology` of a block topology -> block -> its nodes."""
    blocks: dict[str, frozenset[str]] = {}
    for line in text.splitlines():
        fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
        if "BlockName" in fields:
            blocks[fields["BlockName"]] = (
                frozenset(expand(fields["Nodes"])) if fields.get("Nodes") else frozenset()
            )
    return blocks


def _slurm_gets(cluster: Cluster, kind: str) -> bool:
    """Whether Slurm gets this kind of topology: every one from 25.05 (topology.yaml), before only
    the default one (topology.conf)."""
    from gpucluster.slurm.render import topology_kind

    return cluster.release.topology_yaml or topology_kind(cluster.owned_by(Owner.SLURM)) == kind


def expected_blocks(cluster: Cluster) -> dict[str, frozenset[str]]:
    """The NVLink blocks of the hosts bare-metal Slurm owns, where Slurm gets them."""
    if not _slurm_gets(cluster, "block"):
        return {}
    return {name: frozenset(hosts) for name, hosts in cluster.owned_by(Owner.SLURM).blocks.items()}


def topology_matches(cluster: Cluster, result: TrialResult) -> bool:
    """slurmctld shows the inventory's switch tree and NVLink blocks, no more, no less."""
    return result.topology == expected_topology(cluster) and result.blocks == expected_blocks(cluster)


def expected_topology(cluster: Cluster) -> dict[str, tuple[frozenset[str], frozenset[str]]]:
    """What `scontrol show topology` should list: each switch's child switches and, as Slurm
    reports it, every node below the switch, for the hosts bare-metal Slurm owns."""
    if not _slurm_gets(cluster, "tree"):
        return {}
    cluster = cluster.owned_by(Owner.SLURM)
    by_name = {s.name: s for s in cluster.switches}
    below: dict[str, frozenset[str]] = {}

    def nodes_below(name: str) -> frozenset[str]:
        if name not in below:
            switch = by_name[name]
            below[name] = frozenset(switch.nodes).union(*(nodes_below(c) for c in switch.switches))
        return below[name]

    return {s.name: (frozenset(s.switches), nodes_below(s.name)) for s in cluster.switches}


def _slurmdbd_conf(
    jwt_key: str | None, pid_file: str = "/run/slurmdbd.pid", slurm_user: str = "slurm"
) -> str:
    # Trial-only slurmdbd: socket-authenticated MariaDB user (SlurmUser, as which slurmdbd runs),
    # no password on disk.
    jwt = ["AuthAltTypes=auth/jwt", f"AuthAltParameters=jwt_key={jwt_key}"] if jwt_key else []
    return "\n".join(
        [
            "AuthType=auth/munge",
            *jwt,
            "DbdHost=localhost",
            f"SlurmUser={slurm_user}",
            f"PidFile={pid_file}",
            "LogFile=/var/log/slurm/slurmdbd.log",
            "StorageType=accounting_storage/mysql",
            "StorageHost=localhost",
            f"StorageUser={slurm_user}",
            "StorageLoc=slurm_acct_db",
            "",
        ]
    )


# Files slurmctld writes, and where the sandbox keeps them (its private tmpfs).
_PRIVATE_PATHS = {
    "StateSaveLocation": DEFAULT_STATE_SAVE_LOCATION,
    "SlurmctldLogFile": "/var/log/slurm/slurmctld.log",
    "SlurmSchedLogFile": "/var/log/slurm/sched.log",
}


def _private_state_dir(slurm_conf: str) -> str:
    """The sandbox keeps slurmctld's state and logs in its private tmpfs: a site's shared
    StateSaveLocation (e.g. /shared/slurmctld) or a log under /opt does not exist here, and
    creating them would touch the real filesystem."""
    for key, path in _PRIVATE_PATHS.items():
        slurm_conf = re.sub(rf"^{key}=.*$", f"{key}={path}", slurm_conf, flags=re.M)
    if not re.search(r"^SlurmctldLogFile=", slurm_conf, flags=re.M):
        # Left out, slurmctld logs to syslog: the trial reads its verdict from the file.
        slurm_conf += f"SlurmctldLogFile={_PRIVATE_PATHS['SlurmctldLogFile']}\n"
    return slurm_conf


def jwt_plugin_installed() -> bool:
    """auth/jwt, which slurm.conf names with cluster.slurm.rest_api (Debian: slurm-wlm-jwt-plugin)."""
    return any(Path("/usr/lib").glob("*/slurm-wlm/auth_jwt.so")) or any(
        Path("/usr/lib").glob("slurm*/auth_jwt.so")
    )


JWT_NOT_TRIED = (
    "trial: auth/jwt (cluster.slurm.rest_api) not tried: the JWT plugin is not installed here "
    "(Debian: slurm-wlm-jwt-plugin); AuthAltTypes and AuthAltParameters left out"
)


def _jwt(slurm_conf: str, in_image: bool = False) -> tuple[str, str | None, list[str]]:
    """slurm.conf for the sandbox with the REST API's JWT lines, the key path the sandbox fills
    with a throwaway key (in its private state directory), and what the trial says about them.
    Without the plugin on this machine the lines are left out, and the trial says so."""
    if not re.search(r"^AuthAltTypes=.*auth/jwt", slurm_conf, flags=re.M):
        return slurm_conf, None, []
    # The lab images carry the plugin.
    if not in_image and not jwt_plugin_installed():
        return re.sub(r"^AuthAlt(Types|Parameters)=.*\n", "", slurm_conf, flags=re.M), None, [JWT_NOT_TRIED]
    key = f"{DEFAULT_STATE_SAVE_LOCATION}/{JWT_KEY_NAME}"
    private = re.sub(r"^AuthAltParameters=.*$", f"AuthAltParameters=jwt_key={key}", slurm_conf, flags=re.M)
    return private, key, []


def _apart(cluster: Cluster) -> set[str]:
    """The hosts the sandbox puts in its peer namespace: the backup controllers and a slurmdbd
    host of its own."""
    slurm = cluster.spec.slurm
    apart = set(slurm.controller[1:])
    if slurm.accounting and slurm.accounting.host != slurm.controller[0]:
        apart.add(slurm.accounting.host)
    return apart


def _addresses(cluster: Cluster) -> dict[str, set[str]]:
    """The addresses hosts.yml gives Slurm's daemons (model.spec.SLURM_ADDRESS_VARS), each where
    its host is in the sandbox: `local` or `peer`."""
    apart = _apart(cluster)
    found: dict[str, set[str]] = {"local": set(), "peer": set()}
    for host, variables in cluster.inventory.hostvars.items():
        for var in SLURM_ADDRESS_VARS:
            value = variables.get(var)
            if isinstance(value, str) and value != host:
                found["peer" if host in apart else "local"].add(value)
    return found


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _hosts_file(cluster: Cluster) -> str:
    """The primary controller and the nodes on loopback; the backup controllers and a slurmdbd host
    of its own on the sandbox's peer address (sandbox.sh), where no slurmctld listens. The names
    hosts.yml gives as their addresses alike (an IP address is given to the namespace itself)."""
    primary = cluster.spec.slurm.controller[0]
    apart = _apart(cluster)
    names = _addresses(cluster)
    local = (set(cluster.hosts) | {primary}) - apart
    local |= {n for n in names["local"] if not _is_ip(n)}
    lines = ["127.0.0.1 localhost " + " ".join(sorted(local)), "::1 localhost"]
    apart |= {n for n in names["peer"] if not _is_ip(n)}
    if apart:
        lines.append(f"{PEER_ADDRESS} " + " ".join(sorted(apart)))
    return "\n".join(lines) + "\n"


def _ip_addresses(cluster: Cluster) -> str:
    """`local|peer ADDRESS` lines: the IPv4 addresses hosts.yml gives, for sandbox.sh to add to the
    loopback device of the namespace their host is in (nothing outside the sandbox is reached)."""
    found = _addresses(cluster)
    lines = [
        f"{where} {address}"
        for where in ("local", "peer")
        for address in sorted(found[where])
        if _is_ip(address) and ipaddress.ip_address(address).version == 4
    ]
    return "".join(f"{line}\n" for line in lines)


def _seed(cluster: Cluster, files: dict[str, str], work: Path, accounting: bool) -> list[str]:
    """The sandbox's inputs beside the files: the sacctmgr commands that give slurmdbd the
    inventory's accounts, users and QOS (sacctmgr.commands), and the programs slurm.conf names
    (programs/, listed in programs.list: path, then the file to install there). What the trial
    says of them."""
    from gpucluster.trial import seeding

    notes: list[str] = []
    if accounting:
        commands, notes = seeding.seed_commands(files.get("slurm/accounts.yaml"))
        if commands:
            (work / "sacctmgr.commands").write_text(seeding.commands_file(commands), encoding="utf-8")
    found = seeding.programs(cluster, files.get("slurm/slurm.conf", ""))
    (work / "programs").mkdir()
    listed = []
    for number, (path, (key, whose, content)) in enumerate(sorted(found.items())):
        source = work / "programs" / f"program-{number}"
        source.write_text(content, encoding="utf-8")
        source.chmod(0o755)
        listed.append(f"{path}\t{source.name}\t{whose}\t{key}\n")
    (work / "programs.list").write_text("".join(listed), encoding="utf-8")
    return notes


def run_trial(
    cluster: Cluster,
    files: dict[str, str],
    seconds: int = 3,
    timeout: int = 120,
    progress: Callable[[str], None] | None = None,
) -> TrialResult:
    """Start slurmctld on the rendered `slurm/` files and report what it logged and shows."""
    runner = check_available(cluster, progress)
    with tempfile.TemporaryDirectory(prefix="gpucluster-trial-") as tmp:
        work = Path(tmp)
        conf = work / "conf"
        conf.mkdir()
        jwt_key: str | None = None
        notes: list[str] = []
        for rel, content in files.items():
            if rel.startswith("slurm/") and rel.count("/") == 1:
                if rel == "slurm/slurm.conf":
                    content, jwt_key, notes = _jwt(_private_state_dir(content), runner.image is not None)
                (conf / rel.split("/", 1)[1]).write_text(content, encoding="utf-8")
        accounting = cluster.spec.slurm.accounting is not None
        slurm_user = cluster.spec.slurm.slurm_user
        notes += _seed(cluster, files, work, accounting)
        if accounting:
            dbd = conf / "slurmdbd.conf"
            dbd.write_text(
                _slurmdbd_conf(jwt_key, cluster.release.packaging.slurmdbd_pid_file, slurm_user),
                encoding="utf-8",
            )
            dbd.chmod(0o600)  # sandbox.sh gives it to SlurmUser (which may exist only there)
        (work / "hosts").write_text(_hosts_file(cluster), encoding="utf-8")
        (work / "addresses").write_text(_ip_addresses(cluster), encoding="utf-8")
        script = resources.files("gpucluster.trial").joinpath("sandbox.sh")
        # As the roles run them: the packages' units run the daemons as slurm from trixie on, and
        # as SlurmUser with their drop-in; before, root starts them and they become SlurmUser.
        daemon_user = slurm_user if cluster.release.packaging.daemons_run_as_slurm else "root"
        dbd_apart = accounting and cluster.spec.slurm.accounting.host != cluster.spec.slurm.controller[0]  # type: ignore[union-attr]
        args = [
            cluster.spec.slurm.controller[0], str(seconds), "yes" if accounting else "no", daemon_user,
            "yes" if dbd_apart else "no", slurm_user, "install" if runner.image else "overlay",
        ]  # fmt: skip
        env = podman_env() if runner.image else None
        try:
            proc = subprocess.run(
                runner.command(str(script), work, args),
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
                env=env,
            )
        except subprocess.TimeoutExpired:
            if runner.image:
                subprocess.run(
                    ["podman", "rm", "--force", "--time=0", runner.name],
                    env=env,
                    capture_output=True,
                    check=False,
                )
            message = f"trial: slurmctld did not finish its trial within {timeout} s"
            return TrialResult(started=False, log=[message], bad_lines=[message])
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

        from gpucluster.trial.seeding import stand_in_notes

        notes += stand_in_notes(read("programs.log"))

        # Every topology slurmctld showed: the default one, and each of topology.yaml by name.
        shown = "\n".join(read(path.name) for path in sorted(out.glob("topology*")))
        return TrialResult(
            started=state == "running",
            log=log,
            bad_lines=[line for line in log if _BAD_LINE.search(line) and not _expected_noise(cluster, line)],
            topology=parse_topology(shown),
            blocks=parse_blocks(shown),
            partitions=read("partitions"),
            nodes=read("nodes"),
            notes=notes,
        )
