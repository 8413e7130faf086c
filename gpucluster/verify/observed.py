"""What the verify playbook (verify.yml) saw, as written to its output file, read into typed records.

The playbook writes plain JSON: `{"hosts": {host: seen}, "controller": {...} | null}`; a host
Ansible could not reach is `{"unreachable": message}`. Nothing here judges anything.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


class VerifyError(RuntimeError):
    """Verification could not run at all (no playbook, controller unreachable): one line for the user."""


@dataclass(frozen=True)
class Command:
    rc: int | None
    stdout: str = ""
    stderr: str = ""

    @property
    def ok(self) -> bool:
        return self.rc == 0

    def error(self) -> str:
        """The line that explains a failure best (Slurm's `fatal:`, else its first `error:`)."""
        lines = [line.strip() for line in (self.stderr + "\n" + self.stdout).splitlines() if line.strip()]
        for marker in ("fatal:", "error:"):
            hit = next((line for line in lines if marker in line), None)
            if hit is not None:
                return hit[:300]
        return lines[0][:300] if lines else f"exit {self.rc}"


@dataclass(frozen=True)
class HostSeen:
    unreachable: str | None = None
    versions: str = ""
    munge_key: str | None = None  # sha256 of the key; None when there is no key file
    config: dict[str, str | None] = field(default_factory=dict)  # file -> sha256, None: absent
    served: dict[str, str | None] = field(default_factory=dict)  # configless: fetched file -> sha256
    passwd: str | None = None  # `getent passwd <declared users>`
    all_reduce_perf: str = ""  # path of nccl-tests' all_reduce_perf on a GPU node, "" if none
    containers: str = ""  # gpucluster.verify.container_probe.CONTAINER_PROBE's output, "" if not probed
    gpu_stack: str = ""  # the node software probe's lines (gpucluster.verify.nodesoftware)


@dataclass(frozen=True)
class JobRun:
    rc: int | None = None
    stdout: str = ""
    stderr: str = ""
    seconds: float = 0.0
    timed_out: bool = False
    skipped: str | None = None  # the job was not started, and why

    def error(self) -> str:
        return Command(self.rc, self.stdout, self.stderr).error()


@dataclass(frozen=True)
class ControllerSeen:
    host: str
    nodes: Command
    topology: Command
    qos: Command | None = None  # None: no accounting in the inventory
    assoc: Command | None = None
    users: Command | None = None
    jobs: dict[str, JobRun] | None = None  # None: the jobs were not run (check mode)
    jobs_error: str | None = None  # the job runner itself failed
    cleanup: str = ""


@dataclass(frozen=True)
class Observations:
    hosts: dict[str, HostSeen]
    controller: ControllerSeen | None  # None: the primary controller was not reached


def _str(value: Any) -> str:
    return "" if value is None else str(value)


def _command(value: Any) -> Command | None:
    if not isinstance(value, dict):
        return None
    rc = value.get("rc")
    return Command(int(rc) if rc is not None else None, _str(value.get("stdout")), _str(value.get("stderr")))


def _host(value: Any) -> HostSeen:
    if not isinstance(value, dict):
        return HostSeen(unreachable="not observed")
    if value.get("unreachable"):
        return HostSeen(unreachable=_str(value["unreachable"]))
    config = value.get("config") or {}
    served = value.get("served") or {}
    key = value.get("munge_key")
    passwd = value.get("passwd")
    return HostSeen(
        versions=_str(value.get("versions")),
        munge_key=str(key) if key else None,
        config={str(k): (str(v) if v else None) for k, v in config.items()},
        served={str(k): (str(v) if v else None) for k, v in served.items()},
        passwd=None if passwd is None else str(passwd),
        all_reduce_perf=_str(value.get("all_reduce_perf")).strip(),
        containers=_str(value.get("containers")),
        gpu_stack=_str(value.get("gpu_stack")),
    )


def _jobs(value: Any) -> tuple[dict[str, JobRun] | None, str | None, str]:
    """The runner's report; (None, None, "") when it did not run, (None, error, "") when it failed."""
    command = _command(value)
    if command is None:
        return None, None, ""
    try:
        doc = json.loads(command.stdout) if command.ok else None
    except json.JSONDecodeError:
        doc = None
    if not isinstance(doc, dict) or not isinstance(doc.get("jobs"), dict):
        lines = [line for line in command.stderr.splitlines() if line.strip()]
        return None, (lines[-1].strip() if lines else command.error()), ""
    runs = {}
    for job_id, run in doc["jobs"].items():
        run = run if isinstance(run, dict) else {}
        rc = run.get("rc")
        runs[str(job_id)] = JobRun(
            rc=int(rc) if rc is not None else None,
            stdout=_str(run.get("stdout")),
            stderr=_str(run.get("stderr")),
            seconds=float(run.get("seconds") or 0),
            timed_out=bool(run.get("timed_out")),
            skipped=_str(run["skipped"]) if run.get("skipped") else None,
        )
    return runs, None, _str(doc.get("cleanup"))


def read_observations(doc: Any, controller: str) -> Observations:
    """The playbook's output document (parsed JSON) as records."""
    if not isinstance(doc, dict) or not isinstance(doc.get("hosts"), dict):
        raise VerifyError("the verify playbook wrote no observations")
    hosts = {str(h): _host(v) for h, v in doc["hosts"].items()}
    seen = doc.get("controller")
    if not isinstance(seen, dict) or hosts.get(controller, HostSeen(unreachable="?")).unreachable:
        return Observations(hosts, None)
    jobs, jobs_error, cleanup = _jobs(seen.get("jobs"))
    return Observations(
        hosts,
        ControllerSeen(
            host=controller,
            nodes=_command(seen.get("nodes")) or Command(None, stderr="not run"),
            topology=_command(seen.get("topology")) or Command(None, stderr="not run"),
            qos=_command(seen.get("qos")),
            assoc=_command(seen.get("assoc")),
            users=_command(seen.get("users")),
            jobs=jobs,
            jobs_error=jobs_error,
            cleanup=cleanup,
        ),
    )
