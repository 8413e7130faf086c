"""The verdicts: the cluster model and what was observed -> one result per check.

Pure functions (no I/O): each check says pass, fail or skipped, what it saw, and names the hosts,
partitions, switches, tenants or users a failure is about.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypeVar

from gpucluster.hostlists import compress, expand
from gpucluster.slurm import accounts
from gpucluster.verify import parse
from gpucluster.verify.observed import Command, ControllerSeen, HostSeen, JobRun, Observations
from gpucluster.verify.probes import COALLOCATION, GPUS, NCCL, TOPOLOGY, Job, Plan, Skip
from gpucluster.verify.sharing import SHARING, judge, shares, what_it_sees

T = TypeVar("T")

# sacctmgr --parsable2 columns read (the same the slurm_accounts role reads and sets).
QOS_FIELDS = ("name", "priority", "maxtrespu", "maxtres", "grptres", "maxwall", "preempt")
ASSOC_FIELDS = ("account", "user", "parentname", "fairshare", "grptres", "qos", "defaultqos")
USER_FIELDS = ("user", "defaultaccount")
# What Slurm makes itself and the slurm_accounts role never removes.
BUILTIN_ACCOUNTS = {"root"}
BUILTIN_USERS = {"root"}
BUILTIN_QOS = {"normal"}


class Status(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class CheckResult:
    name: str
    status: Status
    detail: str
    names: tuple[str, ...] = ()  # what a failure is about: hosts, partitions, switches, tenants, users

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": str(self.status),
            "detail": self.detail,
            "names": list(self.names),
        }


@dataclass
class Findings:
    """Problems found by one check, each naming what it is about."""

    problems: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)

    def add(self, message: str, *about: str) -> None:
        self.problems.append(message)
        self.names.extend(n for n in about if n not in self.names)

    def result(self, name: str, passed: str) -> CheckResult:
        if self.problems:
            return CheckResult(name, Status.FAIL, "; ".join(self.problems), tuple(self.names))
        return CheckResult(name, Status.PASS, passed)


def _reference(values: dict[str, T], prefer: str) -> T:
    """The value most hosts have; on a tie, the one of `prefer` (the primary controller) if it is
    among the most common, else the first host's."""
    counts = Counter(values.values())
    top = max(counts.values())
    if prefer in values and counts[values[prefer]] == top:
        return values[prefer]
    return next(v for v in values.values() if counts[v] == top)


def _unreachable(plan: Plan, seen: Observations, hosts: tuple[str, ...], findings: Findings) -> list[str]:
    """Hosts that were observed; the others are problems of the check."""
    reached = []
    for host in hosts:
        host_seen = seen.hosts.get(host, HostSeen(unreachable="not observed"))
        if host_seen.unreachable:
            findings.add(f"{host}: unreachable ({_first_line(host_seen.unreachable)})", host)
        else:
            reached.append(host)
    return reached


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), text)[:200]


# --- drift -----------------------------------------------------------------------------------


def check_versions(plan: Plan, seen: Observations) -> CheckResult:
    """Every Slurm program on every host, and every running slurmd, report one version, of the
    inventory's release."""
    findings = Findings()
    target = plan.cluster.spec.slurm.version
    found: dict[str, str] = {}
    for host in _unreachable(plan, seen, plan.hosts, findings):
        programs = parse.versions(seen.hosts[host].versions)
        if not programs:
            findings.add(f"{host}: no Slurm program reported its version", host)
        for program, version in programs.items():
            found[f"{host} {program}"] = version
    if seen.controller is not None and seen.controller.nodes.ok:
        records = parse.scontrol_records(seen.controller.nodes.stdout, "NodeName")
        for node in plan.cluster.hosts:
            running = records.get(node, {}).get("Version")
            if running and running != "(null)":
                found[f"{node} slurmd (running)"] = running
    if found:
        reference = _reference(found, f"{plan.controller} slurmctld")
        for where, version in found.items():
            if version != reference:
                findings.add(f"{where} {version}, others {reference}", where.split()[0])
        if not reference.startswith(f"{target}."):
            findings.add(f"Slurm {reference} is not the inventory's release {target}", *plan.hosts)
        hosts = len({where.split()[0] for where in found})
        return findings.result("slurm-version", f"Slurm {reference} on all {hosts} hosts")
    return findings.result("slurm-version", "no version seen")


def check_munge_key(plan: Plan, seen: Observations) -> CheckResult:
    """One munge key everywhere, compared by sha256 (neither the key nor its checksum is shown)."""
    findings = Findings()
    keys: dict[str, str] = {}
    for host in _unreachable(plan, seen, plan.hosts, findings):
        key = seen.hosts[host].munge_key
        if key is None:
            findings.add(f"{host}: no munge key", host)
        else:
            keys[host] = key
    if keys:
        reference = _reference(keys, plan.controller)
        same = [h for h, k in keys.items() if k == reference]
        for host, key in keys.items():
            if key != reference:
                findings.add(f"{host}: munge key differs from the one of {compress(same)}", host)
    return findings.result("munge-key", f"the same key (by sha256) on all {len(plan.hosts)} hosts")


def check_config(plan: Plan, seen: Observations) -> CheckResult:
    """Every controller and node holds exactly the files `gpucluster render` makes of the inventory;
    a configless node holds the served ones only where its slurmd put what slurmctld sent it."""
    findings = Findings()
    for host in _unreachable(plan, seen, plan.config_hosts, findings):
        fetching = host in plan.fetching_hosts
        wrong: dict[str, list[str]] = {}
        for name, expected in plan.expected_config.items():
            actual = seen.hosts[host].config.get(name)
            if fetching and name in plan.served_config:
                if actual is not None:
                    wrong.setdefault("present, but slurmctld serves them (configless)", []).append(name)
            elif expected is None and actual is not None:
                wrong.setdefault("present, but the inventory renders none", []).append(name)
            elif expected is not None and actual is None:
                wrong.setdefault("missing", []).append(name)
            elif expected != actual:
                wrong.setdefault("differ from the inventory's", []).append(name)
        for name, expected_digest in plan.served_config.items() if fetching else ():
            fetched = seen.hosts[host].served.get(name)
            if fetched is None:
                wrong.setdefault("not fetched from slurmctld (slurmd without --conf-server?)", []).append(
                    name
                )
            elif fetched != expected_digest:
                wrong.setdefault(
                    "fetched, but differ from the inventory's (reconfigure pending?)", []
                ).append(name)
        for how, names in wrong.items():
            findings.add(f"{host}: {', '.join(names)} {how}", host)
    rendered = [name for name, digest in plan.expected_config.items() if digest is not None]
    detail = f"{', '.join(rendered)} as `gpucluster render` makes them, on all {len(plan.config_hosts)} hosts"
    if plan.fetching_hosts:
        detail += f" ({', '.join(plan.served_config)} fetched from slurmctld on {compress(list(plan.fetching_hosts))})"
    return findings.result("slurm-config", detail)


def check_users(plan: Plan, seen: Observations) -> CheckResult:
    """Each declared user has one uid and gid on every controller and node."""
    if not plan.users:
        return CheckResult("users", Status.SKIPPED, "the inventory declares no users")
    findings = Findings()
    ids: dict[str, dict[str, tuple[int, int]]] = {user: {} for user in plan.users}
    for host in _unreachable(plan, seen, plan.user_hosts, findings):
        entries = parse.passwd(seen.hosts[host].passwd or "")
        for user in plan.users:
            if user in entries:
                ids[user][host] = entries[user]
        absent = [user for user in plan.users if user not in entries]
        if absent:
            findings.add(f"{host}: no user {', '.join(absent)}", host)
    for user, by_host in ids.items():
        if not by_host:
            continue
        reference = _reference(by_host, plan.controller)
        for host, (uid, gid) in by_host.items():
            if (uid, gid) != reference:
                findings.add(
                    f"{host}: {user} is uid {uid} gid {gid}, elsewhere uid {reference[0]} gid {reference[1]}",
                    host,
                )
    return findings.result(
        "users", f"{', '.join(plan.users)}: one uid/gid each on all {len(plan.user_hosts)} hosts"
    )


# --- Slurm's view ------------------------------------------------------------------------------


def _controller_failed(name: str, controller: ControllerSeen, command: Command, what: str) -> CheckResult:
    return CheckResult(
        name, Status.FAIL, f"{what} failed on {controller.host}: {command.error()}", (controller.host,)
    )


def check_nodes(plan: Plan, seen: Observations) -> CheckResult:
    """Every node is known to Slurm as its node type says, in its partitions, and takes jobs."""
    assert seen.controller is not None
    command = seen.controller.nodes
    if not command.ok:
        return _controller_failed("nodes", seen.controller, command, "scontrol show node")
    cluster = plan.cluster
    records = parse.scontrol_records(command.stdout, "NodeName")
    findings = Findings()
    for node in cluster.hosts:
        fields = records.get(node)
        if fields is None:
            findings.add(f"{node}: unknown to Slurm", node)
            continue
        node_type = cluster.node_type(node)
        gpus = node_type.gpus
        want = {
            "CPUs": (str(node_type.total_cpus), fields.get("CPUTot")),
            "memory": (str(node_type.memory_mb or 1), fields.get("RealMemory")),
            "GRES": (
                # Its GPUs (or MIG instances), shards and MPS shares, as slurm.conf's Gres= says them.
                ",".join(
                    sorted({f"{name}:{count}" for name, count in gpus.gres().entries} if gpus else set())
                ),
                ",".join(sorted(parse.gres(fields.get("Gres")))),
            ),
            "features": (
                ",".join(sorted(node_type.features)),
                ",".join(sorted(parse.names(fields.get("AvailableFeatures")))),
            ),
            "partitions": (
                ",".join(sorted(p for p, hosts in cluster.partitions.items() if node in hosts)),
                ",".join(sorted(parse.names(fields.get("Partitions")))),
            ),
        }
        for what, (expected, actual) in want.items():
            if expected != actual:
                findings.add(f"{node}: {what} {actual or 'none'}, inventory {expected or 'none'}", node)
        state = parse.NodeState.parse(fields.get("State", "UNKNOWN"))
        if node in plan.power_saved:
            # Off, or on its way up or down, is what a power-saved node is between jobs.
            state = parse.NodeState(state.base, tuple(f for f in state.flags if f not in parse.POWER_FLAGS))
        if not parse.usable(state):
            reason = fields.get("Reason")
            findings.add(
                f"{node}: {fields.get('State', 'UNKNOWN')}"
                + (f" ({reason})" if reason else " (no reason given)"),
                node,
            )
    for extra in sorted(set(records) - set(cluster.hosts)):
        findings.add(f"{extra}: known to Slurm but not a Slurm node of the inventory", extra)
    counts = Counter(
        parse.NodeState.parse(records[n].get("State", "")).base.lower() for n in cluster.hosts if n in records
    )
    states = ", ".join(f"{count} {state}" for state, count in sorted(counts.items()))
    power = _power_states(plan, records)
    return findings.result(
        "nodes",
        f"{len(cluster.hosts)} nodes as the inventory (CPUs, memory, GRES, features, partitions); {states}{power}",
    )


def _power_states(plan: Plan, records: dict[str, dict[str, str]]) -> str:
    """`; power-saved: gpu05 powered down, gpu06 up` (what each power-saved node is now)."""
    if not plan.power_saved:
        return ""
    words = []
    for node in plan.power_saved:
        flags = parse.NodeState.parse(records.get(node, {}).get("State", "UNKNOWN")).flags
        now = next((text for flag, text in parse.POWER_FLAGS.items() if flag in flags), "up")
        words.append(f"{node} {now}")
    return "; power-saved: " + ", ".join(words)


def check_topology(plan: Plan, seen: Observations) -> CheckResult:
    """Slurm's switch tree is the inventory's, and a `--switches=1` job of each leaf's size runs
    under that leaf."""
    cluster = plan.cluster
    if not cluster.switches:
        return CheckResult("topology", Status.SKIPPED, "the inventory has no switch tree")
    assert seen.controller is not None
    command = seen.controller.topology
    if not command.ok:
        return _controller_failed("topology", seen.controller, command, "scontrol show topology")
    shown = parse.topology(command.stdout)
    findings = Findings()
    for switch in cluster.switches:
        slurm = shown.get(switch.name)
        if slurm is None:
            findings.add(f"switch {switch.name}: unknown to Slurm", switch.name)
        elif switch.nodes and sorted(slurm.nodes) != sorted(switch.nodes):
            findings.add(
                f"leaf {switch.name}: Slurm has {compress(slurm.nodes) or 'no nodes'}, inventory {compress(switch.nodes)}",
                switch.name,
            )
        elif not switch.nodes and sorted(slurm.switches) != sorted(switch.switches):
            findings.add(
                f"switch {switch.name}: Slurm has switches {','.join(sorted(slurm.switches)) or 'none'}, "
                f"inventory {','.join(sorted(switch.switches))}",
                switch.name,
            )
    for extra in sorted(set(shown) - {s.name for s in cluster.switches}):
        findings.add(f"switch {extra}: in Slurm, not in the inventory", extra)
    leaves = [s.name for s in cluster.switches if s.nodes]
    if seen.controller.jobs is None:
        if seen.controller.jobs_error:
            findings.add(
                f"the job runner failed on {seen.controller.host}: {seen.controller.jobs_error}",
                seen.controller.host,
            )
        return findings.result("topology", "switch tree as the inventory; jobs not run (check mode)")
    ran = _job_results(plan, seen, seen.controller.jobs, TOPOLOGY, findings, _judge_leaf_job)
    return _with_skips(
        findings.result(
            "topology", f"switch tree as the inventory; --switches=1 jobs ran under {', '.join(ran)} alone"
        ),
        plan,
        TOPOLOGY,
        leaves,
    )


def check_coallocation(plan: Plan, seen: Observations) -> CheckResult:
    """One job over all nodes of each partition: one job id, every node running a task of it."""
    assert seen.controller is not None
    if seen.controller.jobs is None:
        return _jobs_missing("co-allocation", seen.controller)
    findings = Findings()
    ran = _job_results(plan, seen, seen.controller.jobs, COALLOCATION, findings, _judge_coallocation)
    return _with_skips(
        findings.result(
            "co-allocation", "; ".join(f"partition {p}: one job, every node running" for p in ran)
        ),
        plan,
        COALLOCATION,
        list(plan.cluster.partitions),
    )


def check_gpus(plan: Plan, seen: Observations) -> CheckResult:
    """In a job holding all GPUs of a node, the job sees exactly the node type's GPUs."""
    if not plan.gpu_nodes:
        return CheckResult("gpu-visibility", Status.SKIPPED, "no GPU nodes in the inventory")
    assert seen.controller is not None
    if seen.controller.jobs is None:
        return _jobs_missing("gpu-visibility", seen.controller)
    findings = Findings()
    ran = _job_results(plan, seen, seen.controller.jobs, GPUS, findings, _judge_gpus)
    return _with_skips(
        findings.result("gpu-visibility", f"{compress(ran)}: each job sees its node type's GPUs"),
        plan,
        GPUS,
        list(plan.gpu_nodes),
    )


def check_sharing(plan: Plan, seen: Observations) -> CheckResult:
    """A job asking for one share of each kind of shared GPUs sees it (verify/sharing.py)."""
    wanted = {share.job_id: share for share in shares(plan.cluster)}
    if not wanted:
        return CheckResult(SHARING, Status.SKIPPED, "no node shares its GPUs (gpus.sharing)")
    assert seen.controller is not None
    if seen.controller.jobs is None:
        return _jobs_missing(SHARING, seen.controller)
    findings = Findings()

    def judge_share(job: Job, run: JobRun, found: Findings) -> bool:
        share = wanted[job.id]
        problems = judge(share, run.stdout)
        for problem in problems:
            found.add(f"{share.node} {share.kind} ({share.gres}): {problem}", share.node)
        return not problems

    ran = _job_results(plan, seen, seen.controller.jobs, SHARING, findings, judge_share)
    seen_ok = [f"{s.node} {s.gres}: {what_it_sees(s)}" for s in wanted.values() if s.node in ran]
    return _with_skips(
        findings.result(SHARING, "; ".join(seen_ok)), plan, SHARING, sorted({s.node for s in wanted.values()})
    )


def check_nccl(plan: Plan, seen: Observations) -> CheckResult:
    """An all-reduce across two nodes with nccl-tests, and the transport NCCL chose."""
    skip = next((s for s in plan.skipped if s.kind == NCCL), None)
    if skip is not None:
        return CheckResult("nccl", Status.SKIPPED, skip.reason)
    job = next(j for j in plan.jobs if j.kind == NCCL)
    assert seen.controller is not None
    runs = seen.controller.jobs
    if runs is None:
        return _jobs_missing("nccl", seen.controller)
    run = runs.get(job.id)
    if run is None:
        return CheckResult("nccl", Status.FAIL, "the job runner did not run the all-reduce", (job.subject,))
    if run.skipped:
        return CheckResult(
            "nccl", Status.SKIPPED, f"{run.skipped}: install nccl-tests to measure an all-reduce"
        )
    pair = ",".join(job.nodes)
    if run.timed_out or run.rc != 0:
        return CheckResult("nccl", Status.FAIL, f"all_reduce_perf on {pair}: {_job_failure(run)}", job.nodes)
    result = parse.nccl(run.stdout + "\n" + run.stderr)
    problems = []
    if result.bus_bandwidth is None:
        problems.append("no bandwidth reported")
    if result.wrong:
        problems.append(f"{result.wrong} wrong values")
    hosts = set(result.ranks.values())
    if result.duplicate_ranks or not set(job.nodes) <= hosts:
        problems.append(
            f"not one all-reduce across {pair} (ranks seen on {','.join(sorted(hosts)) or 'no host'}; "
            "is all_reduce_perf built with MPI=1?)"
        )
    transport = result.network or "unknown"
    via = f" ({', '.join(result.transports)})" if result.transports else ""
    seen_text = f"{len(result.ranks)} ranks on {pair}, transport {transport}{via}"
    if result.bus_bandwidth is not None:
        seen_text += f", bus bandwidth {result.bus_bandwidth:g} GB/s"
    if problems:
        return CheckResult("nccl", Status.FAIL, f"{seen_text}: {'; '.join(problems)}", job.nodes)
    return CheckResult("nccl", Status.PASS, seen_text)


# --- jobs --------------------------------------------------------------------------------------


def _jobs_missing(name: str, controller: ControllerSeen) -> CheckResult:
    if controller.jobs_error:
        return CheckResult(
            name,
            Status.FAIL,
            f"the job runner failed on {controller.host}: {controller.jobs_error}",
            (controller.host,),
        )
    return CheckResult(name, Status.SKIPPED, "jobs not run (check mode)")


def _job_failure(run: JobRun) -> str:
    if run.timed_out:
        return f"stopped after {run.seconds:g}s ({_first_line(run.stderr) if run.stderr.strip() else 'no output'})"
    return f"exit {run.rc}: {run.error()}"


Judge = Callable[[Job, JobRun, Findings], bool]


def _unusable_nodes(seen: Observations) -> dict[str, str]:
    """Nodes slurmctld says take no job, with their state and reason: why a job on them failed."""
    if seen.controller is None or not seen.controller.nodes.ok:
        return {}
    unusable = {}
    for node, fields in parse.scontrol_records(seen.controller.nodes.stdout, "NodeName").items():
        state = fields.get("State", "UNKNOWN")
        if not parse.usable(parse.NodeState.parse(state)):
            reason = fields.get("Reason")
            unusable[node] = state + (f" ({reason})" if reason else "")
    return unusable


def _job_results(
    plan: Plan, seen: Observations, runs: dict[str, JobRun], kind: str, findings: Findings, judge: Judge
) -> list[str]:
    """Judge each job of a kind; the subjects whose job passed. A job that failed names the nodes
    that printed nothing and those slurmctld reports down or drained."""
    unusable = _unusable_nodes(seen)
    passed = []
    for job in (j for j in plan.jobs if j.kind == kind):
        run = runs.get(job.id)
        if run is None:
            findings.add(f"{job.subject}: job not run", job.subject)
        elif run.skipped:
            findings.add(f"{job.subject}: {run.skipped}", job.subject)
        elif run.timed_out or run.rc != 0:
            blocked = [n for n in job.nodes if n in unusable]
            why = f" ({'; '.join(f'{n} is {unusable[n]}' for n in blocked)})" if blocked else ""
            findings.add(
                f"{_label(job)}: {_job_failure(run)}{why}", job.subject, *_silent_nodes(job, run), *blocked
            )
        elif judge(job, run, findings):
            passed.append(job.subject)
    return passed


def _label(job: Job) -> str:
    return {COALLOCATION: f"partition {job.subject}", TOPOLOGY: f"leaf {job.subject}"}.get(
        job.kind, job.subject
    )


def _silent_nodes(job: Job, run: JobRun) -> list[str]:
    """Nodes of a failed multi-node job that printed nothing, or that srun's errors name
    (`Task launch for StepId=63.0 failed on node g3: ...`)."""
    if len(job.nodes) < 2:
        return []
    answered = set(parse.task_lines(run.stdout).nodes)
    named = [n for n in job.nodes if re.search(rf"(?<![\w.-]){re.escape(n)}(?![\w.-])", run.stderr)]
    silent = [n for n in job.nodes if n not in answered] if answered else []
    return list(dict.fromkeys([*named, *silent]))


def _judge_coallocation(job: Job, run: JobRun, findings: Findings) -> bool:
    tasks = parse.task_lines(run.stdout)
    ok = True
    missing = [n for n in job.nodes if n not in tasks.nodes]
    if missing:
        findings.add(f"partition {job.subject}: no task ran on {compress(missing)}", job.subject, *missing)
        ok = False
    if len(tasks.jobs) != 1:
        findings.add(
            f"partition {job.subject}: {len(tasks.jobs)} job ids ({', '.join(sorted(tasks.jobs))}), expected one",
            job.subject,
        )
        ok = False
    state = next((line for line in tasks.lines if "state" in line), None)
    if state is None:
        findings.add(f"partition {job.subject}: squeue did not show the job from inside it", job.subject)
        return False
    listed = set(expand(state.get("nodes", ""))) if state.get("nodes") else set()
    if state["state"] != "RUNNING" or listed != set(job.nodes):
        findings.add(
            f"partition {job.subject}: squeue shows {state['state']} on {compress(listed) or 'no nodes'}",
            job.subject,
            *sorted(set(job.nodes) - listed),
        )
        ok = False
    return ok


def _judge_leaf_job(job: Job, run: JobRun, findings: Findings) -> bool:
    tasks = parse.task_lines(run.stdout)
    if sorted(tasks.nodes) != sorted(job.nodes) or len(tasks.jobs) != 1:
        findings.add(
            f"leaf {job.subject}: the --switches=1 job ran on {compress(tasks.nodes) or 'no node'}, "
            f"expected {compress(job.nodes)}",
            job.subject,
        )
        return False
    return True


def _judge_gpus(job: Job, run: JobRun, findings: Findings) -> bool:
    node = job.subject
    tasks = parse.task_lines(run.stdout)
    fields: dict[str, list[str]] = {}
    for line in tasks.lines:
        for key, value in line.items():
            fields.setdefault(key, []).append(value)
    return _gpu_verdict(node, _expected_gpus(job), fields, findings)


def _expected_gpus(job: Job) -> int:
    gres = next(a for a in job.argv if a.startswith("--gres=gpu:"))
    return int(gres.rsplit(":", 1)[1])


def _gpu_verdict(node: str, count: int, fields: dict[str, list[str]], findings: Findings) -> bool:
    if node not in fields.get("node", []):
        findings.add(f"{node}: the job printed nothing from the node", node)
        return False
    problems = []
    cuda = [d for d in (fields.get("cuda") or [""])[0].split(",") if d]
    if len(cuda) != count:
        problems.append(f"CUDA_VISIBLE_DEVICES has {len(cuda)} GPUs")
    usable = fields.get("usable", [])
    unusable = fields.get("unusable", [])
    if len(usable) != count or unusable:
        gone = f" ({', '.join(unusable)} missing or not usable)" if unusable else ""
        problems.append(f"{len(usable)} of {count} GPU devices usable{gone}")
    smi = fields.get("nvidia-smi")
    if smi and smi[0].isdigit() and int(smi[0]) != count:
        problems.append(f"nvidia-smi lists {smi[0]} GPUs")
    if problems:
        findings.add(f"{node}: {'; '.join(problems)}, node type has {count}", node)
        return False
    return True


def _with_skips(result: CheckResult, plan: Plan, kind: str, subjects: list[str]) -> CheckResult:
    """Jobs that could not be planned: said in the detail; all of them skipped: the row is skipped."""
    skips: list[Skip] = [s for s in plan.skipped if s.kind == kind]
    if not skips:
        return result
    said = "; ".join(f"{s.subject}: not tried, {s.reason}" for s in skips)
    if len(skips) == len(subjects) and result.status == Status.PASS:
        return CheckResult(result.name, Status.SKIPPED, said)
    return CheckResult(result.name, result.status, f"{result.detail}; {said}", result.names)


# --- accounting --------------------------------------------------------------------------------


def check_accounts(plan: Plan, seen: Observations) -> CheckResult:
    """Accounts, users, QOS, limits and fair-share in slurmdbd equal the inventory's tenants (the
    associations slurm_accounts makes, gpucluster.slurm.accounts)."""
    if not plan.accounting:
        return CheckResult("accounts", Status.SKIPPED, "the inventory has no accounting (slurm.accounting)")
    controller = seen.controller
    assert controller is not None
    for command, what in ((controller.qos, "qos"), (controller.assoc, "assoc"), (controller.users, "user")):
        if command is None or not command.ok:
            return _controller_failed(
                "accounts", controller, command or Command(None, stderr="not run"), f"sacctmgr show {what}"
            )
    assert controller.qos is not None and controller.assoc is not None and controller.users is not None
    desired = accounts.desired_associations(plan.cluster)
    findings = Findings()
    _compare_qos(desired, parse.parsable_rows(controller.qos.stdout, QOS_FIELDS), findings)
    rows = parse.parsable_rows(controller.assoc.stdout, ASSOC_FIELDS)
    defaults = {
        r["user"]: r["defaultaccount"] for r in parse.parsable_rows(controller.users.stdout, USER_FIELDS)
    }
    _compare_accounts(desired, rows, findings)
    _compare_users(desired, rows, defaults, findings)
    tenants = [a["name"] for a in desired["accounts"]]
    return findings.result(
        "accounts",
        f"tenants {', '.join(tenants)}, their users, {len(desired['qos'])} QOS, limits and fair-share as the inventory",
    )


def _gpu_limit(value: str | None) -> str | None:
    return parse.tres(value)


def _compare_qos(desired: dict[str, Any], rows: list[dict[str, str]], findings: Findings) -> None:
    have = {r["name"]: r for r in rows}
    for want in desired["qos"]:
        name = want["name"]
        row = have.get(name)
        if row is None:
            findings.add(f"QOS {name}: missing", name)
            continue
        checks = [
            ("Priority", str(want.get("priority", 0)), row["priority"] or "0"),
            ("MaxTRESPerUser", _gpu_limit(want.get("max_tres_per_user")), _gpu_limit(row["maxtrespu"])),
            ("MaxTRESPerJob", _gpu_limit(want.get("max_tres_per_job")), _gpu_limit(row["maxtres"])),
            ("GrpTRES", _gpu_limit(want.get("grp_tres")), _gpu_limit(row["grptres"])),
            ("MaxWall", parse.slurm_minutes(want.get("max_wall")), parse.slurm_minutes(row["maxwall"])),
            ("Preempt", sorted(want.get("preempt") or []), sorted(parse.names(row["preempt"]))),
        ]
        for what, expected, actual in checks:
            if expected != actual:
                findings.add(f"QOS {name}: {what} {_shown(actual)}, inventory {_shown(expected)}", name)
    wanted = {q["name"] for q in desired["qos"]} | BUILTIN_QOS
    for extra in sorted(set(have) - wanted):
        findings.add(f"QOS {extra}: in slurmdbd, not in the inventory", extra)


def _shown(value: object) -> str:
    if value is None or value == "" or value == []:
        return "none"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)


def _compare_accounts(desired: dict[str, Any], rows: list[dict[str, str]], findings: Findings) -> None:
    have = {r["account"]: r for r in rows if not r["user"]}
    for want in desired["accounts"]:
        name = want["name"]
        row = have.get(name)
        if row is None:
            findings.add(f"tenant {name}: no account in slurmdbd", name)
            continue
        checks: list[tuple[str, object, object]] = [
            ("parent", want["parent"], row["parentname"]),
            ("Fairshare", str(want["fairshare"]), row["fairshare"]),
            ("GrpTRES", _gpu_limit(want["grp_tres"]), _gpu_limit(row["grptres"])),
        ]
        # As slurm_accounts: an account with no QOS in the inventory keeps what Slurm gives it.
        if want["qos"]:
            checks.append(("QOS", sorted(want["qos"]), sorted(parse.names(row["qos"]))))
        if want["default_qos"]:
            checks.append(("DefaultQOS", want["default_qos"], row["defaultqos"]))
        for what, expected, actual in checks:
            if expected != actual:
                findings.add(f"tenant {name}: {what} {_shown(actual)}, inventory {_shown(expected)}", name)
    wanted = {a["name"] for a in desired["accounts"]} | BUILTIN_ACCOUNTS
    for extra in sorted(set(have) - wanted):
        findings.add(f"account {extra}: in slurmdbd, not a tenant of the inventory", extra)


def _compare_users(
    desired: dict[str, Any], rows: list[dict[str, str]], defaults: dict[str, str], findings: Findings
) -> None:
    have: dict[str, set[str]] = {}
    for row in rows:
        if row["user"]:
            have.setdefault(row["user"], set()).add(row["account"])
    wanted: dict[str, set[str]] = {}
    for want in desired["users"]:
        user = want["name"]
        wanted[user] = set(want["accounts"])
        for account in sorted(wanted[user] - have.get(user, set())):
            findings.add(f"tenant {account}: user {user} is not associated with it", account, user)
        if have.get(user) and defaults.get(user) != want["default_account"]:
            findings.add(
                f"user {user}: default account {defaults.get(user) or 'none'}, inventory {want['default_account']}",
                user,
            )
    for user, accounts_of in sorted(have.items()):
        if user in BUILTIN_USERS:
            continue
        for account in sorted(accounts_of - wanted.get(user, set())):
            findings.add(
                f"user {user}: associated with {account}, which the inventory does not say", user, account
            )


def check_cleanup(plan: Plan, seen: Observations) -> CheckResult:
    """No job of this run is left in the queue (the runner cancels them all at the end)."""
    assert seen.controller is not None
    if seen.controller.jobs is None:
        return _jobs_missing("cleanup", seen.controller)
    if seen.controller.cleanup == "no job left":
        return CheckResult("cleanup", Status.PASS, f"no job named {plan.job_name} left in the queue")
    said = seen.controller.cleanup or "the runner did not say"
    # "jobs still queued: 60 61 on gpu[02-03]": the nodes that hold them; else the controller.
    _, on, nodes = said.partition(" on ")
    names = tuple(expand(nodes)) if on and said.startswith("jobs still queued") else (seen.controller.host,)
    return CheckResult("cleanup", Status.FAIL, f"{plan.job_name}: {said}", names)


def check_gate(plan: Plan, seen: Observations) -> CheckResult:
    """The nodes in the return-to-service gate (cluster.gate) and why, from their `[gate]` drain
    reasons; a node that failed its burn-in and stays out fails the row."""
    cluster = plan.cluster
    if cluster.spec.gate is None:
        return CheckResult("gate", Status.SKIPPED, "the inventory has no return-to-service gate")
    assert seen.controller is not None
    command = seen.controller.nodes
    if not command.ok:
        return _controller_failed("gate", seen.controller, command, "scontrol show node")
    records = parse.scontrol_records(command.stdout, "NodeName")
    gated, out = [], []
    for node in cluster.hosts:
        reason = re.sub(r" \[[^\[\]]*@[^\[\]]*\]$", "", records.get(node, {}).get("Reason", ""))
        if not reason.startswith("[gate] "):
            continue
        gated.append(f"{node}: {reason}")
        if re.match(r"\[gate\] \S+ out: ", reason):
            out.append(node)
    if out:
        return CheckResult("gate", Status.FAIL, "; ".join(gated), tuple(out))
    if gated:
        return CheckResult("gate", Status.PASS, f"{len(gated)} node(s) in the gate: " + "; ".join(gated))
    return CheckResult("gate", Status.PASS, "no node in the return-to-service gate")


# --- all ---------------------------------------------------------------------------------------

CHECKS: tuple[Callable[[Plan, Observations], CheckResult], ...] = (
    check_nodes,
    check_gate,
    check_coallocation,
    check_gpus,
    check_sharing,
    check_topology,
    check_accounts,
    check_versions,
    check_munge_key,
    check_config,
    check_users,
    check_nccl,
    check_cleanup,
)
NEED_CONTROLLER = {
    check_nodes,
    check_gate,
    check_coallocation,
    check_gpus,
    check_sharing,
    check_topology,
    check_accounts,
    check_nccl,
    check_cleanup,
}


def run_checks(plan: Plan, seen: Observations) -> list[CheckResult]:
    """Every check, in the report's order. Checks of Slurm's own view need the primary controller;
    without it (unreachable) they fail naming it."""
    results = []
    for check in CHECKS:
        if check is check_sharing and not shares(plan.cluster):
            continue  # a row of clusters sharing GPUs only
        if seen.controller is None and check in NEED_CONTROLLER:
            name = check.__name__.removeprefix("check_")
            results.append(
                CheckResult(
                    _NAMES.get(name, name),
                    Status.FAIL,
                    f"{plan.controller} (primary controller) not reached",
                    (plan.controller,),
                )
            )
            continue
        results.append(check(plan, seen))
    return results


_NAMES = {"coallocation": "co-allocation", "gpus": "gpu-visibility"}
