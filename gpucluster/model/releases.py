"""The Slurm releases gpucluster targets, and what each supports and requires: the one table.

Checks, renderers, the roles' variables (through the gpucluster_render module), plan, verify,
the lab and the trial read these facts; no other module compares release numbers.

Where a fact comes from:
- `proven`: the release runs here from Debian's package (bookworm 22.05.8, trixie 24.11.5,
  forky 26.05.5); the lab, Molecule and `gpucluster trial` run its real daemons.
- otherwise: Slurm's own documentation at the release (RELEASE_NOTES, man pages, upgrades.shtml,
  rest_api.shtml); gpucluster renders for it but nothing here has run it. `gpucluster show` says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import total_ordering


@total_ordering
@dataclass(frozen=True)
class SlurmVersion:
    """A release (`25.11`) or a maintenance version of it (`25.11.3`)."""

    year: int
    month: int
    patch: int | None = None

    @classmethod
    def parse(cls, text: str) -> SlurmVersion:
        match = VERSION_RE.fullmatch(text)
        if match is None:
            raise ValueError(f"{text!r} is not a Slurm version (YY.MM or YY.MM.P, e.g. 25.11 or 25.05.2)")
        year, month, patch = match.groups()
        return cls(int(year), int(month), None if patch is None else int(patch))

    @property
    def release(self) -> str:
        return f"{self.year:02d}.{self.month:02d}"

    @property
    def key(self) -> tuple[int, int, int]:
        # An unknown patch counts as the release's first: a fact that needs a later patch is only
        # true when the inventory says which one it runs.
        return (self.year, self.month, self.patch or 0)

    def __lt__(self, other: SlurmVersion) -> bool:
        return self.key < other.key

    def __str__(self) -> str:
        return self.release if self.patch is None else f"{self.release}.{self.patch}"


VERSION_RE = re.compile(r"(\d{2})\.(\d{2})(?:\.(\d{1,3}))?")


@dataclass(frozen=True)
class Packaging:
    """How the packages of a release install and run its daemons (Debian's packaging for the
    proven releases; the same layout is expected from a site's repository for the others)."""

    # Debian suite that carries the release; None: a site repository must (cluster.slurm.packages).
    debian_suite: str | None
    # The exact Debian version, for the lab and the notes.
    debian_version: str | None
    # slurmctld and slurmdbd units run as SlurmUser (User=slurm, RuntimeDirectory=slurmctld/slurmdbd):
    # their pid files must be in those directories, and their files owned by slurm.
    daemons_run_as_slurm: bool
    slurmctld_pid_file: str
    slurmdbd_pid_file: str
    # MariaDB of the suite is 11.6.2 or newer: innodb_snapshot_isolation defaults to ON there,
    # which slurmdbd cannot run with.
    mariadb_snapshot_isolation_off: bool
    # The mpi/pmix plugin is packaged (else srun --mpi offers pmi2 and cray_shasta only).
    pmix: bool
    # munge is only a Recommends of the Slurm packages: install it explicitly.
    munge_explicit: bool = True
    # sackd is packaged (login nodes in configless mode).
    sackd: bool = False
    # Where the plugins are, under /usr/lib/<multiarch>/ (Debian: slurm-wlm); SPANK plugins such
    # as Pyxis' spank_pyxis.so are installed there.
    plugin_subdir: str = "slurm-wlm"
    # slurm-wlm-nvml-plugin (contrib) is packaged: gres.conf AutoDetect=nvml works with the suite's
    # packages (forky has none: only sid carries 26.05's).
    nvml_plugin: bool = False


BOOKWORM = Packaging(
    debian_suite="bookworm",
    debian_version="22.05.8-4+deb12u3",
    daemons_run_as_slurm=False,
    slurmctld_pid_file="/run/slurmctld.pid",
    slurmdbd_pid_file="/run/slurmdbd.pid",
    mariadb_snapshot_isolation_off=False,
    pmix=True,
    nvml_plugin=True,
)
TRIXIE = Packaging(
    debian_suite="trixie",
    debian_version="24.11.5-4+deb13u1",
    daemons_run_as_slurm=True,
    slurmctld_pid_file="/run/slurmctld/slurmctld.pid",
    slurmdbd_pid_file="/run/slurmdbd/slurmdbd.pid",
    mariadb_snapshot_isolation_off=True,
    pmix=True,
    sackd=True,
    nvml_plugin=True,
)
FORKY = Packaging(
    debian_suite="forky",
    debian_version="26.05.5-1",
    daemons_run_as_slurm=True,
    slurmctld_pid_file="/run/slurmctld/slurmctld.pid",
    slurmdbd_pid_file="/run/slurmdbd/slurmdbd.pid",
    mariadb_snapshot_isolation_off=True,
    pmix=False,
    sackd=True,
)


def _site_packaging(like: Packaging, sackd: bool) -> Packaging:
    """A release Debian does not carry: the site's repository, laid out like Debian's packaging of
    the nearest proven release (MariaDB unknown: the setting is written so that an older server
    ignores it)."""
    return Packaging(
        debian_suite=None,
        debian_version=None,
        daemons_run_as_slurm=like.daemons_run_as_slurm,
        slurmctld_pid_file=like.slurmctld_pid_file,
        slurmdbd_pid_file=like.slurmdbd_pid_file,
        mariadb_snapshot_isolation_off=True,
        pmix=like.pmix,
        sackd=sackd,
    )


@dataclass(frozen=True)
class RestApi:
    """slurmrestd's OpenAPI plugins and the URL version clients use."""

    # `-s` plugins; 23.11 replaced the versioned openapi/vX plugins with openapi/slurmctld and
    # openapi/slurmdbd, the version being the data parser (`-d data_parser/vX`).
    plugins: tuple[str, ...]
    db_plugins: tuple[str, ...]
    data_parser: str | None
    # URL version: /slurm/<version>/..., /slurmdb/<version>/...
    url_version: str


@dataclass(frozen=True)
class Release:
    name: str
    proven: bool
    # Releases whose state files and database this one reads (upgrades.shtml: two releases back
    # up to 24.05, three from 24.11 on).
    upgrades_from: tuple[str, ...]
    packaging: Packaging
    rest_api: RestApi
    # Node-list changes (nodes added or removed) take `scontrol reconfigure`, not a restart of
    # slurmctld and every slurmd.
    reconfigure_node_changes: bool
    # slurmctld re-executes itself on reconfigure (23.11+): a bad file is refused by the new
    # process and the old one keeps running.
    reconfigure_reexec: bool
    block_topology: bool
    # BlockSizes (24.05+; 23.11 had BlockLevels).
    block_sizes: bool
    topology_yaml: bool
    # The name of "no topology" (topology/none, renamed topology/default in 23.11, topology/flat in 25.05).
    flat_topology_plugin: str
    sackd: bool
    # HealthCheckNodeState values the release knows.
    health_node_states: tuple[str, ...]
    health_check_timeout: bool
    # The health check program is killed after this many seconds (HealthCheckTimeout's default
    # from 26.05 on).
    health_check_kill_after: int
    # Partition key Exclusive=NO|NODE|USER|TOPO (26.05) instead of OverSubscribe=EXCLUSIVE.
    exclusive_key: bool
    # select/cons_res still exists (removed in 23.11).
    cons_res: bool
    # gres.conf AutoDetect=nvidia (no NVML library needed).
    autodetect_nvidia: bool
    # slurmctld answers HTTP on its port (/livez, /readyz, /metrics with metrics/openmetrics).
    slurmctld_http: bool
    # configless slurmctld also serves Prolog/Epilog scripts named without a path.
    configless_serves_prolog: bool
    # MetricsType=metrics/openmetrics (25.11+): slurmctld serves /metrics/{jobs,nodes,partitions,
    # scheduler,jobs-users-accts} on its port (PrivateData must be unset); before, the monitoring
    # layer's state collector gives the partition, node-GPU and queue metrics from sinfo and squeue.
    openmetrics: bool = False
    # First version whose configless slurmctld serves topology.yaml (None: never).
    configless_topology_yaml_since: SlurmVersion | None = None
    # Prolog= and Epilog= may be given on several lines, each a program (24.05+; before, one
    # line, which may be a glob).
    several_prologs: bool = False
    # The `none` plugins exist (jobacct_gather/none, task/none, ...); 23.11 removed them: no
    # plugin is named by leaving the key out.
    none_plugins: bool = False
    # oci.conf knows EnvExclude and RunTimeEnvExclude (23.02+): SLURM_CONF of the submitting
    # host stays out of the container and of the runtime's environment.
    oci_env_exclude: bool = True
    # PrologFlags values the release knows.
    prolog_flags: tuple[str, ...] = ("Alloc", "Contain", "DeferBatch", "NoHold", "Serial", "X11")
    # gres/shard of MIG instances: no release documents it (gres.shtml's Sharding divides whole
    # GPUs, checked at 24.11 and 26.05), so none is assumed to.
    shard_on_mig: bool = False
    # A job asking for more shards (or MPS) than one GPU of a node holds is refused at submission
    # unless SelectTypeParameters has MULTIPLE_SHARING_GRES_PJ (23.11.1, CHANGELOG/slurm-23.11.md);
    # before, it waited.
    sharing_gres_one_gpu_refused: bool = True
    # Power saving (CHANGELOG/slurm-<release>.md, slurm.conf(5), scontrol(1)):
    # `scontrol power up|down [asap|force] NODES` (24.05+); before, `scontrol update NodeName=NODES
    # State=POWER_UP|POWER_DOWN_FORCE|...`, which later releases still read.
    scontrol_power: bool = True
    # `scontrol power down ... Reason=` (25.05+).
    power_reason: bool = True
    # SuspendExcStates (23.02+).
    suspend_exc_states: bool = True
    # SlurmctldParameters=cloud_reg_addrs is needed for a CLOUD node's address to come from its
    # registration (before 23.11, which made it the default and removed the flag).
    cloud_reg_addrs: bool = False
    # Unresolvable CLOUD nodes need fan-out off (TreeWidth=65533) before 23.11.
    cloud_tree_width: int | None = None
    # SlurmctldParameters=max_powered_nodes (24.05+).
    max_powered_nodes: bool = True
    # SchedulerParameters=requeue_on_resume_failure (25.05+): batch jobs are requeued when their
    # nodes fail to resume even if they asked for no requeue.
    requeue_on_resume_failure: bool = True
    # Where the facts were read.
    source: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def version(self) -> SlurmVersion:
        return SlurmVersion.parse(self.name)


_HEALTH_22_05 = ("ALLOC", "ANY", "CYCLE", "IDLE", "MIXED")
_HEALTH_23_02 = (*_HEALTH_22_05, "NONDRAINED_IDLE")
_HEALTH_25_11 = (*_HEALTH_23_02, "START_ONLY")
_HEALTH_26_05 = (*_HEALTH_25_11, "REBOOT_ONLY")
_PROLOG_FLAGS_23_02 = ("Alloc", "Contain", "DeferBatch", "NoHold", "ForceRequeueOnFail", "Serial", "X11")
_PROLOG_FLAGS_24_05 = (*_PROLOG_FLAGS_23_02, "RunInJob")


def _rest(parser: str) -> RestApi:
    return RestApi(("openapi/slurmctld",), ("openapi/slurmdbd",), f"data_parser/{parser}", parser)


_DOCS = "Slurm's RELEASE_NOTES, man pages and upgrades.shtml at the release"

RELEASES: dict[str, Release] = {
    r.name: r
    for r in (
        Release(
            name="22.05",
            proven=True,
            upgrades_from=("20.11", "21.08"),
            packaging=BOOKWORM,
            rest_api=RestApi(("openapi/v0.0.38",), ("openapi/dbv0.0.38",), None, "v0.0.38"),
            reconfigure_node_changes=False,
            reconfigure_reexec=False,
            block_topology=False,
            block_sizes=False,
            topology_yaml=False,
            flat_topology_plugin="topology/none",
            sackd=False,
            health_node_states=_HEALTH_22_05,
            health_check_timeout=False,
            health_check_kill_after=60,
            exclusive_key=False,
            cons_res=True,
            autodetect_nvidia=False,
            slurmctld_http=False,
            configless_serves_prolog=False,
            none_plugins=True,
            oci_env_exclude=False,
            sharing_gres_one_gpu_refused=False,
            scontrol_power=False,
            power_reason=False,
            max_powered_nodes=False,
            requeue_on_resume_failure=False,
            suspend_exc_states=False,
            cloud_reg_addrs=True,
            cloud_tree_width=65533,
            source="Debian bookworm 22.05.8 (real daemons)",
        ),
        Release(
            name="23.02",
            proven=False,
            upgrades_from=("21.08", "22.05"),
            packaging=_site_packaging(BOOKWORM, sackd=False),
            rest_api=RestApi(("openapi/v0.0.39",), ("openapi/dbv0.0.39",), None, "v0.0.39"),
            reconfigure_node_changes=False,
            reconfigure_reexec=False,
            block_topology=False,
            block_sizes=False,
            topology_yaml=False,
            flat_topology_plugin="topology/none",
            sackd=False,
            health_node_states=_HEALTH_23_02,
            health_check_timeout=False,
            health_check_kill_after=60,
            exclusive_key=False,
            cons_res=True,
            autodetect_nvidia=False,
            slurmctld_http=False,
            configless_serves_prolog=False,
            prolog_flags=_PROLOG_FLAGS_23_02,
            none_plugins=True,
            sharing_gres_one_gpu_refused=False,
            scontrol_power=False,
            power_reason=False,
            max_powered_nodes=False,
            requeue_on_resume_failure=False,
            cloud_reg_addrs=True,
            cloud_tree_width=65533,
            source=_DOCS,
        ),
        Release(
            name="23.11",
            proven=False,
            upgrades_from=("22.05", "23.02"),
            packaging=_site_packaging(TRIXIE, sackd=True),
            rest_api=_rest("v0.0.40"),
            reconfigure_node_changes=False,
            reconfigure_reexec=True,
            block_topology=True,
            block_sizes=False,
            topology_yaml=False,
            flat_topology_plugin="topology/default",
            sackd=True,
            health_node_states=_HEALTH_23_02,
            health_check_timeout=False,
            health_check_kill_after=60,
            exclusive_key=False,
            cons_res=False,
            autodetect_nvidia=False,
            slurmctld_http=False,
            configless_serves_prolog=True,
            prolog_flags=_PROLOG_FLAGS_23_02,
            scontrol_power=False,
            power_reason=False,
            max_powered_nodes=False,
            requeue_on_resume_failure=False,
            source=_DOCS,
        ),
        Release(
            name="24.05",
            proven=False,
            upgrades_from=("23.02", "23.11"),
            packaging=_site_packaging(TRIXIE, sackd=True),
            rest_api=_rest("v0.0.41"),
            reconfigure_node_changes=False,
            reconfigure_reexec=True,
            block_topology=True,
            block_sizes=True,
            topology_yaml=False,
            flat_topology_plugin="topology/default",
            sackd=True,
            health_node_states=_HEALTH_23_02,
            health_check_timeout=False,
            health_check_kill_after=60,
            exclusive_key=False,
            cons_res=False,
            autodetect_nvidia=False,
            slurmctld_http=False,
            configless_serves_prolog=True,
            several_prologs=True,
            prolog_flags=_PROLOG_FLAGS_24_05,
            power_reason=False,
            requeue_on_resume_failure=False,
            source=_DOCS,
        ),
        Release(
            name="24.11",
            proven=True,
            upgrades_from=("23.02", "23.11", "24.05"),
            packaging=TRIXIE,
            rest_api=_rest("v0.0.42"),
            reconfigure_node_changes=True,
            reconfigure_reexec=True,
            block_topology=True,
            block_sizes=True,
            topology_yaml=False,
            flat_topology_plugin="topology/default",
            sackd=True,
            health_node_states=_HEALTH_23_02,
            health_check_timeout=False,
            health_check_kill_after=60,
            exclusive_key=False,
            cons_res=False,
            autodetect_nvidia=True,
            slurmctld_http=False,
            configless_serves_prolog=True,
            several_prologs=True,
            prolog_flags=_PROLOG_FLAGS_24_05,
            power_reason=False,
            requeue_on_resume_failure=False,
            source="Debian trixie 24.11.5 (real daemons)",
        ),
        Release(
            name="25.05",
            proven=False,
            upgrades_from=("23.11", "24.05", "24.11"),
            packaging=_site_packaging(TRIXIE, sackd=True),
            rest_api=_rest("v0.0.43"),
            reconfigure_node_changes=True,
            reconfigure_reexec=True,
            block_topology=True,
            block_sizes=True,
            topology_yaml=True,
            flat_topology_plugin="topology/flat",
            sackd=True,
            health_node_states=_HEALTH_23_02,
            health_check_timeout=False,
            health_check_kill_after=60,
            exclusive_key=False,
            cons_res=False,
            autodetect_nvidia=True,
            slurmctld_http=False,
            configless_serves_prolog=True,
            configless_topology_yaml_since=SlurmVersion(25, 5, 2),
            several_prologs=True,
            prolog_flags=_PROLOG_FLAGS_24_05,
            source=_DOCS,
        ),
        Release(
            name="25.11",
            proven=False,
            upgrades_from=("24.05", "24.11", "25.05"),
            packaging=_site_packaging(FORKY, sackd=True),
            rest_api=_rest("v0.0.44"),
            reconfigure_node_changes=True,
            reconfigure_reexec=True,
            block_topology=True,
            block_sizes=True,
            topology_yaml=True,
            flat_topology_plugin="topology/flat",
            sackd=True,
            health_node_states=_HEALTH_25_11,
            health_check_timeout=False,
            health_check_kill_after=60,
            exclusive_key=False,
            cons_res=False,
            autodetect_nvidia=True,
            slurmctld_http=True,
            configless_serves_prolog=True,
            openmetrics=True,
            configless_topology_yaml_since=SlurmVersion(25, 11),
            several_prologs=True,
            prolog_flags=_PROLOG_FLAGS_24_05,
            source=_DOCS,
        ),
        Release(
            name="26.05",
            proven=True,
            upgrades_from=("24.11", "25.05", "25.11"),
            packaging=FORKY,
            rest_api=_rest("v0.0.44"),
            reconfigure_node_changes=True,
            reconfigure_reexec=True,
            block_topology=True,
            block_sizes=True,
            topology_yaml=True,
            flat_topology_plugin="topology/flat",
            sackd=True,
            health_node_states=_HEALTH_26_05,
            health_check_timeout=True,
            health_check_kill_after=60,
            exclusive_key=True,
            cons_res=False,
            autodetect_nvidia=True,
            slurmctld_http=True,
            configless_serves_prolog=True,
            openmetrics=True,
            configless_topology_yaml_since=SlurmVersion(26, 5),
            several_prologs=True,
            prolog_flags=_PROLOG_FLAGS_24_05,
            source="Debian forky 26.05.5 (real daemons)",
            notes=(
                "26.05.3 and later refuse (fatal) a BlockSizes entry that is not the base size times a power of two",
            ),
        ),
    )
}

OLDEST = min(RELEASES.values(), key=lambda r: r.version)
NEWEST = max(RELEASES.values(), key=lambda r: r.version)
PROVEN = tuple(name for name, r in RELEASES.items() if r.proven)


def known_text() -> str:
    """The releases gpucluster knows, for error messages: `22.05, 23.02, ... 26.05`."""
    return ", ".join(RELEASES)


def release(version: str | SlurmVersion) -> Release:
    """The facts of the release a version belongs to (KeyError for one gpucluster does not know)."""
    parsed = version if isinstance(version, SlurmVersion) else SlurmVersion.parse(version)
    return RELEASES[parsed.release]


def by_suite(suite: str) -> Release | None:
    return next((r for r in RELEASES.values() if r.packaging.debian_suite == suite), None)


def configless_serves_topology_yaml(version: SlurmVersion) -> bool:
    since = release(version).configless_topology_yaml_since
    return since is not None and version >= since


def upgrade_path(old: str, new: str) -> tuple[str, ...] | None:
    """Releases to step through between `old` and `new` (exclusive), None when `new` reads `old`
    directly. Raises ValueError for a downgrade or a same-release "upgrade"."""
    before, after = RELEASES[old], RELEASES[new]
    if after.version <= before.version:
        raise ValueError(f"Slurm cannot go from {old} back to {new}")
    if old in after.upgrades_from:
        return None
    # Shortest chain of direct upgrades, each step the newest release that still reads the last.
    chain: list[str] = []
    current = old
    ordered = sorted(RELEASES.values(), key=lambda r: r.version)
    while current not in after.upgrades_from:
        step = max(
            (r for r in ordered if current in r.upgrades_from and r.version < after.version),
            key=lambda r: r.version,
            default=None,
        )
        if step is None:
            raise ValueError(f"no known release reads {current}'s state on the way to {new}")
        chain.append(step.name)
        current = step.name
    return tuple(chain)


def stepping_stones(old: str, new: str) -> tuple[str, ...]:
    """Releases that read `old` directly and that `new` reads directly: where to go first."""
    after = RELEASES[new]
    return tuple(name for name in after.upgrades_from if old in RELEASES[name].upgrades_from)


def upgrade_refusal(old: str | SlurmVersion, new: str | SlurmVersion) -> str | None:
    """Why Slurm cannot go from `old` to `new` on a live cluster (None: it can, in one step).

    Slurm never goes back (slurmdbd converts the database, slurmctld rewrites its state, and no
    older release reads either), and a release reads the database and state of the releases in
    its window only (`upgrades_from`): a jump past it names the releases to step through."""
    before = old if isinstance(old, SlurmVersion) else SlurmVersion.parse(old)
    after = new if isinstance(new, SlurmVersion) else SlurmVersion.parse(new)
    if after < before:
        return (
            f"Slurm cannot go back from {before} to {after}: slurmdbd converts the accounting database and "
            f"slurmctld rewrites its state for {before.release}, and no older release reads them; keep "
            f"slurm.version at {before} (a backup taken before an upgrade restores only with every daemon "
            "stopped, losing what ran since)"
        )
    target = RELEASES[after.release]
    if before.release == after.release or before.release in target.upgrades_from:
        return None
    window = list(target.upgrades_from)
    reads = ", ".join(window[:-1]) + f" and {window[-1]}" if len(window) > 1 else window[0]
    stones = stepping_stones(before.release, after.release)
    if stones:
        first = " or ".join(stones) if len(stones) < 3 else ", ".join(stones[:-1]) + f" or {stones[-1]}"
        reads_old = "it reads" if len(stones) == 1 else "each reads"
        how = f"upgrade to {first} first ({reads_old} {before.release}'s), then to {after.release}"
    else:
        try:
            chain = upgrade_path(before.release, after.release) or ()
        except ValueError:
            chain = ()
        how = (
            f"upgrade through {', then '.join(chain)} first (an inventory at each release, applied), "
            f"then to {after.release}"
            if chain
            else "upgrade one release at a time"
        )
    return (
        f"Slurm {after.release} reads the accounting database and the state of {reads} only, not "
        f"{before.release}'s (its slurmdbd stops: the database schema is too old): {how}"
    )


def power_command(facts: Release, action: str, nodes: str, reason: str | None = None) -> list[str]:
    """The scontrol command that asks slurmctld to power `nodes` up (`up`) or down (`down`,
    `down asap`, `down force`) on this release; the reason where the release takes one."""
    if facts.scontrol_power:
        words = ["scontrol", "power", *action.split(), nodes]
        if reason and action.startswith("down") and facts.power_reason:
            words.append(f"Reason={reason}")
        return words
    state = "POWER_" + action.upper().replace(" ", "_")
    return ["scontrol", "update", f"NodeName={nodes}", f"State={state}"]
