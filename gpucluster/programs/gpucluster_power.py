#!/usr/bin/python3
"""gpucluster-power: Slurm's ResumeProgram, SuspendProgram and ResumeFailProgram for the power-saved
node groups of a gpucluster inventory (cluster.nodes[].power: bmc or cloud).

slurmctld runs it as SlurmUser on the controller, with one argument, a Slurm host list; the name it
is called by says the action (the slurm_power role links the three names to this file):

- gpucluster-power-resume NODES: power each node on (BMC: Redfish ComputerSystem.Reset, IPMI where
  the BMC has no Redfish; cloud: create or start the instance), then watch until its slurmd
  registers. A node that does not come up within its ResumeTimeout is set DOWN with what the
  provider said, and its jobs requeued: never lost.
- gpucluster-power-suspend NODES: power each idle node off (graceful, then forced; cloud: delete or
  stop the instance). A node with a job is never touched.
- gpucluster-power-resume-fail NODES: nodes slurmctld gave up on: powered off (so a half-booted node
  costs nothing), DOWN with the reason the resume recorded.

Also `gpucluster-power release` (the playbooks' last play: nodes slurmctld counts powered down while
a playbook's hold kept them on are powered off, none with a job), `gpucluster-power status [NODES]`
(each node's power state as its BMC or cloud reports it) and `gpucluster-power check-config`.

Every action is idempotent (a node already on is not reset; an instance that exists is not made
twice), one per node at a time (a lock per node), parallel across nodes, and logged with the node,
its jobs and the reason. What each node is and how to reach it comes from gpucluster-power.json
(rendered by gpucluster); the credentials from the secrets file the slurm_power role writes.
Redfish and IPMI need Python's standard library only; a cloud needs its own SDK (boto3,
google-cloud-compute, azure-mgmt-resource + azure-mgmt-compute, nebius), imported when used.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import fcntl
import json
import os
import re
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_CONFIG = "/etc/slurm/gpucluster-power.json"
PREFIX = "[power]"
ACTIONS = ("resume", "suspend", "resume-fail", "release", "status", "check-config")
# Slurm runs the programs without PATH.
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
MAX_REASON = 200
SCONTROL_TIMEOUT = 20.0
# How often the registration of resumed nodes is polled (one scontrol call for all of them).
WATCH_INTERVAL = 2.0
# Kept back from ResumeTimeout: the program sets the node DOWN with its own reason before
# slurmctld's timer does with a generic one.
RESUME_MARGIN = 10
# A node whose slurmd has registered: no power-saving flag left, responding.
NOT_UP_FLAGS = ("POWERING_UP", "POWERED_DOWN", "NOT_RESPONDING", "POWERING_DOWN")
BUSY_STATES = ("ALLOCATED", "MIXED", "COMPLETING")
HTTP_TIMEOUT = 20.0
MAX_WORKERS = 64
# In the state directory: {"until": epoch, "by": "..."}, written by the playbooks while they
# configure the power-saved nodes that are up (roles/slurm_power tasks hold.yml).
HOLD_FILE = "hold"


class ConfigError(Exception):
    """gpucluster-power.json or the secrets file is missing or malformed (exit 2)."""


class ProviderError(Exception):
    """What the BMC or the cloud said when an action failed; `retry` when trying again may help
    (throttling, capacity that may come back, a BMC busy with another request)."""

    def __init__(self, reason: str, retry: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry = retry


class NoRedfish(ProviderError):
    """The BMC answers no Redfish service (connection refused, no /redfish/v1): IPMI may."""


# ---------------------------------------------------------------------------------------------
# Host lists (Slurm's syntax: gpu[01-04,07],login1)


def expand_hostlist(text: str) -> list[str]:
    """Slurm's host list syntax, expanded in order: `a[1-3,5]b,c[01-02]` and several brackets."""
    names: list[str] = []
    for item in _split_top(text.strip()):
        names += _expand_item(item)
    return list(dict.fromkeys(names))


def _split_top(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in text:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    if depth != 0:
        raise ValueError(f"unbalanced brackets in host list {text!r}")
    parts.append(current)
    return [p for p in parts if p]


def _expand_item(item: str) -> list[str]:
    match = re.search(r"\[([^\]]*)\]", item)
    if match is None:
        return [item]
    head, tail = item[: match.start()], item[match.end() :]
    found = []
    for spec in match.group(1).split(","):
        low, _, high = spec.partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            raise ValueError(f"bad range {spec!r} in host list {item!r}")
        width = len(low)
        for number in range(int(low), int(high or low) + 1):
            found += _expand_item(f"{head}{number:0{width}d}{tail}")
    return found


# ---------------------------------------------------------------------------------------------
# Configuration


@dataclass(frozen=True)
class NodeConfig:
    name: str
    group: str
    kind: str  # bmc | cloud
    resume_timeout: int
    boot_time: int
    settings: dict[str, Any]  # the group's bmc or cloud settings


@dataclass(frozen=True)
class Config:
    cluster: str
    release: str
    nodes: dict[str, NodeConfig]
    log_file: str
    state_dir: str
    secrets: dict[str, Any]
    ca_file: str | None


def load_config(path: str) -> Config:
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: {exc}") from None
    try:
        groups = doc["groups"]
        nodes = {}
        for name, node in doc["nodes"].items():
            group = groups[node["group"]]
            kind = group["kind"]
            nodes[name] = NodeConfig(
                name, node["group"], kind, int(node["resume_timeout"]), int(group["boot_time"]), group[kind]
            )
        secrets = _load_secrets(doc["secrets_file"])
        ca_file = doc.get("ca_file")
        return Config(
            doc["cluster"],
            doc["release"],
            nodes,
            doc["log_file"],
            doc["state_dir"],
            secrets,
            ca_file if ca_file and Path(ca_file).is_file() else None,
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"{path}: missing or malformed {exc}") from None


def _load_secrets(path: str) -> dict[str, Any]:
    """{"bmc": {node: {"username", "password"}}, "default_bmc": {...}, "cloud": {...}}; absent: {}."""
    file = Path(path)
    if not file.is_file():
        return {}
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: not a JSON object")
    return data


# ---------------------------------------------------------------------------------------------
# Logging and per-node state


class Log:
    """One line per event, appended; stderr when the log cannot be written (Slurm drops it)."""

    def __init__(self, path: str, action: str) -> None:
        self.path = path
        self.action = action
        self.lock = threading.Lock()

    def __call__(self, node: str, message: str) -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime())
        line = f"{stamp} {self.action} {node}: {message}\n"
        with self.lock:
            try:
                with open(self.path, "a", encoding="utf-8") as out:
                    out.write(line)
            except OSError:
                sys.stderr.write(line)


class NodeState:
    """What the last action on a node found, kept for resume-fail and status."""

    def __init__(self, directory: str) -> None:
        self.directory = Path(directory)

    def path(self, node: str) -> Path:
        return self.directory / f"{node}.json"

    def read(self, node: str) -> dict[str, Any]:
        try:
            data = json.loads(self.path(node).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def write(self, node: str, **values: Any) -> None:
        with contextlib.suppress(OSError):
            self.directory.mkdir(parents=True, exist_ok=True)
            tmp = self.path(node).with_suffix(".tmp")
            tmp.write_text(json.dumps({**values, "time": int(time.time())}), encoding="utf-8")
            os.replace(tmp, self.path(node))

    @contextlib.contextmanager
    def lock(self, node: str) -> Iterator[None]:
        """One action per node at a time (slurmctld may run resume while a suspend still runs)."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            handle = open(self.directory / f"{node}.lock", "w")  # noqa: SIM115
        except OSError:
            yield
            return
        with handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            yield


# ---------------------------------------------------------------------------------------------
# Slurm


@dataclass
class SlurmNode:
    name: str
    state: str  # IDLE+CLOUD+POWERING_UP
    reason: str = ""

    @property
    def flags(self) -> set[str]:
        return set(self.state.split("+"))

    @property
    def registered(self) -> bool:
        return not (self.flags & set(NOT_UP_FLAGS)) and "DOWN" not in self.flags

    @property
    def busy(self) -> bool:
        return bool(self.flags & set(BUSY_STATES))


class Slurm:
    """scontrol and squeue, each call with a timeout; the program's only way to Slurm."""

    def __init__(self, run: Callable[[list[str]], subprocess.CompletedProcess[str]] | None = None) -> None:
        self.run = run or _run_tool

    def nodes(self, names: list[str]) -> dict[str, SlurmNode]:
        proc = self.run(["scontrol", "show", "node", "--oneliner", ",".join(names)])
        found = {}
        for line in proc.stdout.splitlines():
            fields = dict(re.findall(r"(\w+)=(\S*)", line))
            if "NodeName" in fields:
                reason = line.split(" Reason=", 1)[1] if " Reason=" in line else ""
                found[fields["NodeName"]] = SlurmNode(fields["NodeName"], fields.get("State", ""), reason)
        return found

    def jobs_on(self, names: list[str]) -> dict[str, list[str]]:
        """Node -> the ids of the jobs Slurm has on it (any state but pending)."""
        proc = self.run(["squeue", "--noheader", "--nodelist", ",".join(names), "--format=%i %N"])
        jobs: dict[str, list[str]] = {}
        for line in proc.stdout.splitlines():
            job, _, nodelist = line.strip().partition(" ")
            if job and nodelist:
                for node in expand_hostlist(nodelist):
                    jobs.setdefault(node, []).append(job)
        return jobs

    def set_down(self, node: str, reason: str) -> None:
        self.run(["scontrol", "update", f"NodeName={node}", "State=DOWN", f"Reason={reason}"])

    def set_address(self, node: str, address: str) -> None:
        self.run(["scontrol", "update", f"NodeName={node}", f"NodeAddr={address}", f"NodeHostname={node}"])

    def requeue(self, jobs: list[str]) -> None:
        if jobs:
            self.run(["scontrol", "requeue", ",".join(jobs)])


def _run_tool(argv: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": os.environ.get("PATH") or DEFAULT_PATH}
    try:
        return subprocess.run(
            argv, capture_output=True, text=True, timeout=SCONTROL_TIMEOUT, env=env, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return subprocess.CompletedProcess(argv, 1, "", str(exc))


def resume_jobs() -> dict[str, list[str]]:
    """Node -> job ids, from the job-to-node map slurmctld hands a ResumeProgram (SLURM_RESUME_FILE,
    read first: it is gone when slurmctld restarts)."""
    path = os.environ.get("SLURM_RESUME_FILE")
    if not path:
        return {}
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    jobs: dict[str, list[str]] = {}
    for job in doc.get("jobs") or []:
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            for node in expand_hostlist(job.get("nodes_resume") or ""):
                jobs.setdefault(node, []).append(str(job["job_id"]))
    return jobs


def short_reason(text: str) -> str:
    text = " ".join(f"{PREFIX} {text}".split())
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 3] + "..."


# ---------------------------------------------------------------------------------------------
# Providers: what each kind of group does to power a node on and off. `on` and `off` return what
# was done (for the log); they raise ProviderError with the provider's own words.


@dataclass
class Result:
    done: str
    address: str | None = None  # a cloud node's private address, for slurmctld


class Provider:
    kind = "provider"

    def state(self, node: NodeConfig) -> str:
        raise NotImplementedError

    def on(self, node: NodeConfig) -> Result:
        raise NotImplementedError

    def off(self, node: NodeConfig, grace: float) -> Result:
        raise NotImplementedError


def _template(text: str, node: str) -> str:
    return text.replace("{host}", node)


class Redfish(Provider):
    """DMTF Redfish: GET /redfish/v1/Systems/<id> (PowerState), POST its
    Actions/#ComputerSystem.Reset target with a ResetType the resource allows. HTTPS with the BMC's
    certificate checked (the controllers' CAs, or the CA file the slurm_power role installs); HTTP
    Basic authentication with the node's credentials."""

    kind = "redfish"

    def __init__(self, secrets: dict[str, Any], ca_file: str | None, poll: float = 2.0) -> None:
        self.secrets = secrets
        self.context = ssl.create_default_context(cafile=ca_file)
        self.poll = poll

    def _credentials(self, node: str) -> tuple[str, str]:
        entry = (self.secrets.get("bmc") or {}).get(node) or self.secrets.get("default_bmc") or {}
        if not entry.get("username"):
            raise ProviderError(
                f"no BMC credentials for {node} in the secrets file (slurm_power_bmc_username)"
            )
        return str(entry["username"]), str(entry.get("password", ""))

    def system_url(self, node: NodeConfig) -> str:
        base = _template(node.settings["endpoint"], node.name).rstrip("/")
        return f"{base}/redfish/v1/Systems/{_template(node.settings.get('system', '1'), node.name)}"

    def request(self, node: str, method: str, url: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        user, password = self._credentials(node)
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Authorization", f"Basic {token}")
        req.add_header("Accept", "application/json")
        req.add_header("OData-Version", "4.0")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=HTTP_TIMEOUT, context=self.context) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            raise _redfish_error(exc, url) from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, ssl.SSLCertVerificationError):
                raise ProviderError(
                    f"redfish: the certificate of {url} is not trusted ({exc.reason.verify_message})"
                ) from None
            if isinstance(exc.reason, (ConnectionRefusedError, OSError)) and not isinstance(
                exc.reason, ssl.SSLError
            ):
                raise NoRedfish(f"redfish: {url}: {exc.reason}") from None
            raise ProviderError(f"redfish: {url}: {exc.reason}", retry=True) from None
        except TimeoutError:
            raise ProviderError(f"redfish: {url}: no answer in {HTTP_TIMEOUT:.0f} s", retry=True) from None
        if not raw:
            return {}
        try:
            parsed = json.loads(raw)
        except ValueError:
            raise ProviderError(f"redfish: {url}: not JSON") from None
        return parsed if isinstance(parsed, dict) else {}

    def state(self, node: NodeConfig) -> str:
        return str(self.request(node.name, "GET", self.system_url(node)).get("PowerState", "Unknown"))

    def reset(self, node: NodeConfig, wanted: tuple[str, ...]) -> str:
        """POST the first ResetType of `wanted` the system allows; returns it."""
        system = self.request(node.name, "GET", self.system_url(node))
        action = (system.get("Actions") or {}).get("#ComputerSystem.Reset") or {}
        target = action.get("target") or f"{self.system_url(node)}/Actions/ComputerSystem.Reset"
        if target.startswith("/"):
            parts = urllib.parse.urlsplit(self.system_url(node))
            target = f"{parts.scheme}://{parts.netloc}{target}"
        allowed = action.get("ResetType@Redfish.AllowableValues") or list(wanted)
        choice = next((t for t in wanted if t in allowed), None)
        if choice is None:
            raise ProviderError(
                f"redfish: {node.name} allows no ResetType of {', '.join(wanted)} ({', '.join(allowed)})"
            )
        self.request(node.name, "POST", target, {"ResetType": choice})
        return choice

    def wait_for(self, node: NodeConfig, wanted: str, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while True:
            if self.state(node) == wanted:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(self.poll)

    def on(self, node: NodeConfig) -> Result:
        before = self.state(node)
        if before == "On":
            return Result("already On")
        reset = self.reset(node, ("On", "ForceOn"))
        if not self.wait_for(node, "On", 60):
            raise ProviderError(
                f"redfish: {node.name} still {self.state(node)} 60 s after ResetType {reset}", retry=True
            )
        return Result(f"PowerState {before} -> On (ComputerSystem.Reset {reset})")

    def off(self, node: NodeConfig, grace: float) -> Result:
        before = self.state(node)
        if before == "Off":
            return Result("already Off")
        if grace > 0:
            try:
                reset = self.reset(node, ("GracefulShutdown",))
                if self.wait_for(node, "Off", grace):
                    return Result(f"PowerState {before} -> Off (ComputerSystem.Reset {reset})")
            except ProviderError:
                pass
        reset = self.reset(node, ("ForceOff",))
        if not self.wait_for(node, "Off", 30):
            raise ProviderError(
                f"redfish: {node.name} still {self.state(node)} after ResetType ForceOff", retry=True
            )
        return Result(f"PowerState {before} -> Off (ComputerSystem.Reset {reset})")


def _redfish_error(exc: urllib.error.HTTPError, url: str) -> ProviderError:
    """A Redfish error response: {"error": {"code", "message", "@Message.ExtendedInfo": [...]}}."""
    detail = ""
    with contextlib.suppress(Exception):
        error = json.loads(exc.read()).get("error") or {}
        infos = error.get("@Message.ExtendedInfo") or []
        messages = [i.get("Message") or i.get("MessageId") for i in infos if isinstance(i, dict)]
        detail = "; ".join(str(m) for m in messages if m) or str(
            error.get("message") or error.get("code") or ""
        )
    if exc.code == 404 and url.rstrip("/").endswith("/redfish/v1"):
        return NoRedfish(f"redfish: no service at {url}")
    retry = exc.code in (429, 500, 502, 503, 504)
    what = {401: "credentials refused", 403: "not allowed"}.get(exc.code, exc.reason)
    return ProviderError(f"redfish {exc.code} {what}{': ' + detail if detail else ''}", retry=retry)


class Ipmi(Provider):
    """IPMI over LAN (ipmitool -I lanplus ... chassis power): for BMCs without Redfish. The
    password goes through the environment (-E), never the command line."""

    kind = "ipmi"

    def __init__(
        self, secrets: dict[str, Any], run: Callable[..., subprocess.CompletedProcess[str]] | None = None
    ) -> None:
        self.secrets = secrets
        self.run = run or subprocess.run

    def address(self, node: NodeConfig) -> str:
        given = node.settings.get("ipmi_address")
        if given:
            return _template(given, node.name)
        netloc = urllib.parse.urlsplit(_template(node.settings["endpoint"], node.name)).hostname
        return netloc or node.name

    def ipmitool(self, node: NodeConfig, *words: str) -> str:
        entry = (self.secrets.get("bmc") or {}).get(node.name) or self.secrets.get("default_bmc") or {}
        argv = [
            "ipmitool",
            "-I",
            "lanplus",
            "-H",
            self.address(node),
            "-U",
            str(entry.get("username", "")),
            "-E",
            *words,
        ]
        env = {
            **os.environ,
            "IPMI_PASSWORD": str(entry.get("password", "")),
            "PATH": os.environ.get("PATH") or DEFAULT_PATH,
        }
        try:
            proc = self.run(argv, capture_output=True, text=True, timeout=30, env=env, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ProviderError(f"ipmi: {exc}", retry=True) from None
        if proc.returncode != 0:
            raise ProviderError(
                f"ipmi: {' '.join(words)}: {(proc.stderr or proc.stdout).strip()[:120]}", retry=True
            )
        return str(proc.stdout)

    def state(self, node: NodeConfig) -> str:
        out = self.ipmitool(node, "chassis", "power", "status").lower()
        return "On" if "is on" in out else "Off" if "is off" in out else "Unknown"

    def on(self, node: NodeConfig) -> Result:
        if self.state(node) == "On":
            return Result("already on (ipmi)")
        self.ipmitool(node, "chassis", "power", "on")
        return Result("chassis power on (ipmi)")

    def off(self, node: NodeConfig, grace: float) -> Result:
        if self.state(node) == "Off":
            return Result("already off (ipmi)")
        if grace <= 0:
            self.ipmitool(node, "chassis", "power", "off")
            return Result("chassis power off (ipmi)")
        self.ipmitool(node, "chassis", "power", "soft")
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if self.state(node) == "Off":
                return Result("chassis power soft (ipmi)")
            time.sleep(2)
        self.ipmitool(node, "chassis", "power", "off")
        return Result("chassis power off (ipmi, after soft)")


class Bmc(Provider):
    """Redfish, and IPMI for a BMC that answers no Redfish service (where the group allows)."""

    kind = "bmc"

    def __init__(self, redfish: Redfish, ipmi: Ipmi) -> None:
        self.redfish = redfish
        self.ipmi = ipmi

    def _either(self, node: NodeConfig, call: Callable[[Provider], Any]) -> Any:
        try:
            return call(self.redfish)
        except NoRedfish:
            if not node.settings.get("ipmi_fallback", True):
                raise
            return call(self.ipmi)

    def state(self, node: NodeConfig) -> str:
        return str(self._either(node, lambda p: p.state(node)))

    def on(self, node: NodeConfig) -> Result:
        result: Result = self._either(node, lambda p: p.on(node))
        return result

    def off(self, node: NodeConfig, grace: float) -> Result:
        result: Result = self._either(node, lambda p: p.off(node, grace))
        return result


# Cloud API error codes -> whether trying again may help (the rest end the node's resume at once).
AWS_RETRY = {
    "RequestLimitExceeded", "Throttling", "ThrottlingException", "InsufficientInstanceCapacity",
    "InternalError", "ServiceUnavailable", "Unavailable", "InsufficientCapacityOnHost",
}  # fmt: skip
GCP_RETRY_CODES = {
    "ZONE_RESOURCE_POOL_EXHAUSTED",
    "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
    "RESOURCE_NOT_READY",
}


def cloud_tags(cluster: str, node: NodeConfig) -> dict[str, str]:
    """What every instance carries: the cluster, the Slurm node it is, its group."""
    return {"gpucluster-cluster": cluster, "gpucluster-node": node.name, "gpucluster-group": node.group}


class Aws(Provider):
    """EC2: one instance per node from the group's launch template (RunInstances: the node's name
    in its tags from the first moment; a capacity reservation or Capacity Block targeted, spot as
    asked), terminated or stopped when suspended. `client` is boto3's EC2 client."""

    kind = "aws"

    def __init__(self, cluster: str, client: Any) -> None:
        self.cluster = cluster
        self.client = client

    @classmethod
    def for_region(cls, cluster: str, region: str) -> Aws:
        import boto3
        from botocore.config import Config as BotoConfig

        retries = BotoConfig(retries={"mode": "standard", "max_attempts": 5})
        return cls(cluster, boto3.client("ec2", region_name=region, config=retries))

    def _call(self, method: str, **params: Any) -> dict[str, Any]:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            result: dict[str, Any] = getattr(self.client, method)(**params)
            return result
        except ClientError as exc:
            error = exc.response.get("Error", {})
            code = error.get("Code", "Unknown")
            raise ProviderError(f"aws {code}: {error.get('Message', '')}", retry=code in AWS_RETRY) from None
        except BotoCoreError as exc:
            raise ProviderError(f"aws: {exc}", retry=True) from None

    def find(self, node: NodeConfig) -> dict[str, Any] | None:
        """The node's instance that is not terminated, if any."""
        found = self._call(
            "describe_instances",
            Filters=[
                {"Name": "tag:gpucluster-cluster", "Values": [self.cluster]},
                {"Name": "tag:gpucluster-node", "Values": [node.name]},
                {"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped"]},
            ],
        )
        instances = [i for r in found.get("Reservations", []) for i in r.get("Instances", [])]
        return instances[0] if instances else None

    def state(self, node: NodeConfig) -> str:
        instance = self.find(node)
        return "Absent" if instance is None else str(instance["State"]["Name"])

    def run_params(self, node: NodeConfig) -> dict[str, Any]:
        cloud = node.settings
        template = cloud["template"]
        spec = (
            {"LaunchTemplateId": template} if template.startswith("lt-") else {"LaunchTemplateName": template}
        )
        tags = [
            {"Key": k, "Value": v} for k, v in {"Name": node.name, **cloud_tags(self.cluster, node)}.items()
        ]
        params: dict[str, Any] = {
            "MinCount": 1,
            "MaxCount": 1,
            "LaunchTemplate": {**spec, "Version": "$Default"},
            "TagSpecifications": [{"ResourceType": kind, "Tags": tags} for kind in ("instance", "volume")],
        }
        if cloud.get("instance_type"):
            params["InstanceType"] = cloud["instance_type"]
        capacity = cloud.get("capacity", "on-demand")
        if capacity == "spot":
            params["InstanceMarketOptions"] = {
                "MarketType": "spot",
                "SpotOptions": {"SpotInstanceType": "one-time", "InstanceInterruptionBehavior": "terminate"},
            }
        elif capacity == "capacity-block":
            params["InstanceMarketOptions"] = {"MarketType": "capacity-block"}
        if capacity in ("reservation", "capacity-block"):
            params["CapacityReservationSpecification"] = {
                "CapacityReservationTarget": {"CapacityReservationId": cloud["reservation"]}
            }
        return params

    def on(self, node: NodeConfig) -> Result:
        instance = self.find(node)
        if instance is not None and instance["State"]["Name"] in ("pending", "running"):
            return Result(
                f"instance {instance['InstanceId']} already {instance['State']['Name']}",
                instance.get("PrivateIpAddress"),
            )
        if instance is not None and instance["State"]["Name"] in ("stopped", "stopping"):
            self._call("start_instances", InstanceIds=[instance["InstanceId"]])
            return Result(f"instance {instance['InstanceId']} started", instance.get("PrivateIpAddress"))
        made = self._call("run_instances", **self.run_params(node))["Instances"][0]
        what = f"instance {made['InstanceId']} ({made.get('InstanceType', '?')}) created"
        return Result(what, made.get("PrivateIpAddress"))

    def off(self, node: NodeConfig, grace: float) -> Result:
        instance = self.find(node)
        if instance is None:
            return Result("no instance")
        ident = instance["InstanceId"]
        if node.settings.get("on_suspend") == "stop":
            if instance["State"]["Name"] in ("stopped", "stopping"):
                return Result(f"instance {ident} already {instance['State']['Name']}")
            self._call("stop_instances", InstanceIds=[ident])
            return Result(f"instance {ident} stopped")
        self._call("terminate_instances", InstanceIds=[ident])
        return Result(f"instance {ident} terminated")


class Gcp(Provider):
    """Compute Engine: instances named after the nodes, made by instances.bulkInsert from the
    group's instance template (its placement policy, reservation affinity and service account
    come with it), deleted or stopped when suspended. `client` is google-cloud-compute's
    InstancesClient."""

    kind = "gcp"

    def __init__(self, cluster: str, client: Any) -> None:
        self.cluster = cluster
        self.client = client

    @classmethod
    def default(cls, cluster: str) -> Gcp:
        from google.cloud import compute_v1

        return cls(cluster, compute_v1.InstancesClient())

    def _call(self, method: str, **params: Any) -> Any:
        from google.api_core import exceptions

        try:
            # The SDK's own retries (up to 10 min on 503) would outlast the node's ResumeTimeout:
            # retrying is with_retries' job, within the node's time.
            operation = getattr(self.client, method)(retry=None, **params)
            if hasattr(operation, "result"):
                operation.result(timeout=300)
            return operation
        except exceptions.NotFound:
            raise
        except exceptions.GoogleAPICallError as exc:
            retry = isinstance(exc, exceptions.TooManyRequests | exceptions.ServiceUnavailable) or any(
                code in str(exc) for code in GCP_RETRY_CODES
            )
            text = re.sub(r"^[A-Z]+ https?://\S+: ", "", str(exc.message))  # the SDK prefixes the request
            raise ProviderError(f"gcp {exc.code}: {text}", retry=retry) from None

    def _where(self, node: NodeConfig) -> dict[str, str]:
        return {"project": node.settings["project"], "zone": node.settings["zone"]}

    def get(self, node: NodeConfig) -> Any | None:
        from google.api_core import exceptions

        try:
            return self._call("get", instance=node.name, **self._where(node))
        except exceptions.NotFound:
            return None

    def state(self, node: NodeConfig) -> str:
        instance = self.get(node)
        return "Absent" if instance is None else str(instance.status)

    def bulk_request(self, nodes: list[NodeConfig]) -> Any:
        from google.cloud import compute_v1

        first = nodes[0]
        template = first.settings["template"]
        if "/" not in template:
            template = f"projects/{first.settings['project']}/global/instanceTemplates/{template}"
        return compute_v1.BulkInsertInstanceResource(
            count=len(nodes),
            min_count=len(nodes),
            source_instance_template=template,
            per_instance_properties={
                n.name: compute_v1.BulkInsertInstanceResourcePerInstanceProperties(name=n.name) for n in nodes
            },
        )

    def on(self, node: NodeConfig) -> Result:
        instance = self.get(node)
        if instance is not None and instance.status in ("PROVISIONING", "STAGING", "RUNNING"):
            return Result(f"instance {node.name} already {instance.status}", _gcp_address(instance))
        if instance is not None:
            self._call("start", instance=node.name, **self._where(node))
            return Result(f"instance {node.name} started", _gcp_address(self.get(node)))
        self._call(
            "bulk_insert",
            bulk_insert_instance_resource_resource=self.bulk_request([node]),
            **self._where(node),
        )
        return Result(f"instance {node.name} created (bulkInsert)", _gcp_address(self.get(node)))

    def off(self, node: NodeConfig, grace: float) -> Result:
        instance = self.get(node)
        if instance is None:
            return Result("no instance")
        if node.settings.get("on_suspend") == "stop":
            self._call("stop", instance=node.name, **self._where(node))
            return Result(f"instance {node.name} stopped")
        self._call("delete", instance=node.name, **self._where(node))
        return Result(f"instance {node.name} deleted")


def _gcp_address(instance: Any) -> str | None:
    interfaces = list(getattr(instance, "network_interfaces", None) or [])
    return str(interfaces[0].network_i_p) if interfaces and interfaces[0].network_i_p else None


def _boot_config(node: NodeConfig) -> str:
    """The cloud-init user data a site gives a group without a stack-made template (its `template`:
    a file on the controllers)."""
    path = Path(node.settings["template"])
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ProviderError(f"boot config {path}: {exc.strerror}") from None


class Azure(Provider):
    """Azure: one VM per node, its NIC made with it and deleted with it (networkApiVersion,
    deleteOption Delete), from the group's image, subnet, size and zone, with the site's boot config
    as custom data; deleted or deallocated when suspended. `client` is azure-mgmt-compute's
    ComputeManagementClient."""

    kind = "azure"
    NETWORK_API = "2022-11-01"

    def __init__(self, cluster: str, client: Any, settings: dict[str, Any]) -> None:
        self.cluster = cluster
        self.client = client
        self.settings = settings  # the secrets file's `azure` section: admin key, identity

    @classmethod
    def default(cls, cluster: str, secrets: dict[str, Any]) -> Azure:
        from azure.identity import DefaultAzureCredential
        from azure.mgmt.compute import ComputeManagementClient

        settings = secrets.get("azure") or {}
        return cls(
            cluster,
            ComputeManagementClient(DefaultAzureCredential(), settings.get("subscription_id", "")),
            settings,
        )

    def _call(self, call: Callable[[], Any]) -> Any:
        from azure.core.exceptions import AzureError, HttpResponseError, ResourceNotFoundError

        try:
            result = call()
            return result.result() if hasattr(result, "result") else result
        except ResourceNotFoundError:
            raise
        except HttpResponseError as exc:
            code = getattr(exc.error, "code", None) or exc.status_code
            retry = exc.status_code in (429, 503) or code in (
                "AllocationFailed",
                "ZonalAllocationFailed",
                "OverconstrainedAllocationRequest",
            )
            raise ProviderError(
                f"azure {code}: {exc.message.splitlines()[0] if exc.message else ''}", retry=retry
            ) from None
        except AzureError as exc:
            raise ProviderError(f"azure: {exc}", retry=True) from None

    def vm_body(self, node: NodeConfig) -> dict[str, Any]:
        """The VM as Azure's REST API takes it (every SDK version sends this JSON as given)."""
        cloud = node.settings
        key = self.settings.get("admin_ssh_public_key")
        if not key:
            raise ProviderError(
                "azure: no admin SSH key in the secrets file (slurm_power_azure.admin_ssh_public_key)"
            )
        image = cloud["image"]
        if image.startswith("/"):
            reference = {"id": image}
        else:
            publisher, offer, sku, version = image.split(":")
            reference = {"publisher": publisher, "offer": offer, "sku": sku, "version": version}
        nic = {
            "name": f"{node.name}-nic",
            "properties": {
                "primary": True,
                "deleteOption": "Delete",
                "enableAcceleratedNetworking": True,
                "ipConfigurations": [
                    {"name": "ipconfig1", "properties": {"subnet": {"id": cloud["subnet"]}}}
                ],
            },
        }
        properties: dict[str, Any] = {
            "hardwareProfile": {"vmSize": cloud["instance_type"]},
            "storageProfile": {
                "imageReference": reference,
                "osDisk": {
                    "createOption": "FromImage",
                    "deleteOption": "Delete",
                    "diskSizeGB": cloud.get("disk_gb", 200),
                },
            },
            "osProfile": {
                "computerName": node.name,
                "adminUsername": "gpucluster",
                "customData": base64.b64encode(_boot_config(node).encode()).decode(),
                "linuxConfiguration": {
                    "disablePasswordAuthentication": True,
                    "ssh": {
                        "publicKeys": [{"path": "/home/gpucluster/.ssh/authorized_keys", "keyData": key}]
                    },
                },
            },
            "networkProfile": {
                "networkApiVersion": self.NETWORK_API,
                "networkInterfaceConfigurations": [nic],
            },
        }
        if cloud.get("capacity") == "spot":
            properties.update({"priority": "Spot", "evictionPolicy": "Delete"})
        if cloud.get("capacity") == "reservation":
            properties["capacityReservation"] = {"capacityReservationGroup": {"id": cloud["reservation"]}}
        body: dict[str, Any] = {
            "location": cloud["region"],
            "tags": cloud_tags(self.cluster, node),
            "properties": properties,
        }
        if cloud.get("zone"):
            body["zones"] = [cloud["zone"]]
        if self.settings.get("identity"):
            body["identity"] = {
                "type": "UserAssigned",
                "userAssignedIdentities": {self.settings["identity"]: {}},
            }
        return body

    def _power_state(self, node: NodeConfig) -> str | None:
        from azure.core.exceptions import ResourceNotFoundError

        try:
            view = self._call(
                lambda: self.client.virtual_machines.instance_view(node.settings["project"], node.name)
            )
        except ResourceNotFoundError:
            return None
        states = [s.code for s in (view.statuses or []) if s.code and s.code.startswith("PowerState/")]
        return states[0].split("/", 1)[1] if states else "unknown"

    def state(self, node: NodeConfig) -> str:
        return self._power_state(node) or "Absent"

    def on(self, node: NodeConfig) -> Result:
        group = node.settings["project"]
        state = self._power_state(node)
        if state in ("running", "starting"):
            return Result(f"VM {node.name} already {state}")
        if state is not None:
            self._call(lambda: self.client.virtual_machines.begin_start(group, node.name))
            return Result(f"VM {node.name} started (was {state})")
        body = self.vm_body(node)
        self._call(lambda: self.client.virtual_machines.begin_create_or_update(group, node.name, body))
        return Result(f"VM {node.name} ({node.settings['instance_type']}) created")

    def off(self, node: NodeConfig, grace: float) -> Result:
        group = node.settings["project"]
        if self._power_state(node) is None:
            return Result("no VM")
        if node.settings.get("on_suspend") == "stop":
            self._call(lambda: self.client.virtual_machines.begin_deallocate(group, node.name))
            return Result(f"VM {node.name} deallocated")
        self._call(lambda: self.client.virtual_machines.begin_delete(group, node.name))
        return Result(f"VM {node.name} deleted (its NIC and disk with it)")


class Nebius(Provider):
    """Nebius AI Cloud: one compute instance per node (platform/preset from the instance type, a
    boot disk made from the image with it, the subnet, the site's boot config as cloud-init user
    data), deleted or stopped when suspended. `client` is the nebius SDK's InstanceServiceClient."""

    kind = "nebius"

    def __init__(self, cluster: str, client: Any) -> None:
        self.cluster = cluster
        self.client = client

    @classmethod
    def default(cls, cluster: str) -> Nebius:
        from nebius.api.nebius.compute.v1 import InstanceServiceClient
        from nebius.sdk import SDK

        return cls(cluster, InstanceServiceClient(SDK()))

    def _call(self, call: Callable[[], Any]) -> Any:
        from nebius.aio.service_error import RequestError

        try:
            result = call()
            if hasattr(result, "wait"):
                result = result.wait()
            if hasattr(result, "wait"):
                result.wait()
            return result
        except RequestError as exc:
            text = str(exc)
            raise NebiusError(
                text, retry=any(c in text for c in ("RESOURCE_EXHAUSTED", "UNAVAILABLE"))
            ) from None

    def create_request(self, node: NodeConfig) -> Any:
        from nebius.api.nebius.common.v1 import ResourceMetadata
        from nebius.api.nebius.compute.v1 import (
            AttachedDiskSpec,
            CreateInstanceRequest,
            DiskSpec,
            InstanceSpec,
            IPAddress,
            ManagedDisk,
            NetworkInterfaceSpec,
            PreemptibleSpec,
            ResourcesSpec,
        )

        cloud = node.settings
        platform, _, preset = cloud["instance_type"].partition("/")
        spec = InstanceSpec(
            hostname=node.name,
            resources=ResourcesSpec(platform=platform, preset=preset),
            boot_disk=AttachedDiskSpec(
                attach_mode=AttachedDiskSpec.AttachMode.READ_WRITE,
                managed_disk=ManagedDisk(
                    name=f"{node.name}-boot",
                    spec=DiskSpec(
                        size_gibibytes=cloud.get("disk_gb", 200),
                        type=DiskSpec.DiskType.NETWORK_SSD,
                        source_image_id=cloud["image"],
                    ),
                ),
            ),
            network_interfaces=[
                NetworkInterfaceSpec(name="eth0", subnet_id=cloud["subnet"], ip_address=IPAddress())
            ],
            cloud_init_user_data=_boot_config(node),
        )
        if cloud.get("capacity") == "spot":
            spec.preemptible = PreemptibleSpec(
                on_preemption=PreemptibleSpec.PreemptionPolicy.STOP, priority=3
            )
        metadata = ResourceMetadata(
            parent_id=cloud["project"], name=node.name, labels=cloud_tags(self.cluster, node)
        )
        return CreateInstanceRequest(metadata=metadata, spec=spec)

    def get(self, node: NodeConfig) -> Any | None:
        from nebius.api.nebius.common.v1 import GetByNameRequest

        try:
            return self._call(
                lambda: self.client.get_by_name(
                    GetByNameRequest(parent_id=node.settings["project"], name=node.name)
                )
            )
        except NebiusError as exc:
            if "NOT_FOUND" in exc.reason:
                return None
            raise

    def state(self, node: NodeConfig) -> str:
        instance = self.get(node)
        return "Absent" if instance is None else str(instance.status.state.name)

    def on(self, node: NodeConfig) -> Result:
        from nebius.api.nebius.compute.v1 import StartInstanceRequest

        instance = self.get(node)
        if instance is not None:
            if instance.status.state.name in ("STOPPED", "STOPPING"):
                self._call(lambda: self.client.start(StartInstanceRequest(id=instance.metadata.id)))
                return Result(f"instance {instance.metadata.id} started")
            return Result(f"instance {instance.metadata.id} already {instance.status.state.name}")
        request = self.create_request(node)
        self._call(lambda: self.client.create(request))
        return Result(f"instance {node.name} ({node.settings['instance_type']}) created")

    def off(self, node: NodeConfig, grace: float) -> Result:
        from nebius.api.nebius.compute.v1 import DeleteInstanceRequest, StopInstanceRequest

        instance = self.get(node)
        if instance is None:
            return Result("no instance")
        ident = instance.metadata.id
        if node.settings.get("on_suspend") == "stop":
            self._call(lambda: self.client.stop(StopInstanceRequest(id=ident)))
            return Result(f"instance {ident} stopped")
        self._call(lambda: self.client.delete(DeleteInstanceRequest(id=ident)))
        return Result(f"instance {ident} deleted")


class NebiusError(ProviderError):
    def __init__(self, text: str, retry: bool = False) -> None:
        super().__init__(f"nebius: {text.splitlines()[0] if text else 'error'}", retry)


# ---------------------------------------------------------------------------------------------
# The actions


class Providers:
    """One provider per kind and cloud (a cloud SDK is imported the first time its group acts)."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.made: dict[str, Provider] = {}
        self.lock = threading.Lock()

    def of(self, node: NodeConfig) -> Provider:
        key = (
            node.kind if node.kind == "bmc" else f"{node.settings['provider']}:{node.settings.get('region')}"
        )
        with self.lock:
            if key not in self.made:
                self.made[key] = self._make(node)
            return self.made[key]

    def _make(self, node: NodeConfig) -> Provider:
        config = self.config
        if node.kind == "bmc":
            return Bmc(Redfish(config.secrets, config.ca_file), Ipmi(config.secrets))
        provider = node.settings["provider"]
        try:
            if provider == "aws":
                return Aws.for_region(config.cluster, node.settings["region"])
            if provider == "gcp":
                return Gcp.default(config.cluster)
            if provider == "azure":
                return Azure.default(config.cluster, config.secrets)
            if provider == "nebius":
                return Nebius.default(config.cluster)
        except ImportError as exc:
            raise ProviderError(
                f"{provider}: its SDK is not installed on this controller ({exc.name})"
            ) from None
        raise ProviderError(f"unknown provider {provider}")


def with_retries(call: Callable[[], Result], deadline: float, log: Callable[[str], None]) -> Result:
    """`call`, tried again after a growing pause while the provider says it may help and the
    node's time allows."""
    pause = 2.0
    while True:
        try:
            return call()
        except ProviderError as exc:
            if not exc.retry or time.monotonic() + pause >= deadline:
                raise
            log(f"{exc.reason}; trying again in {pause:.0f} s")
            time.sleep(pause)
            pause = min(pause * 2, 30)


@dataclass
class Run:
    """One invocation: its configuration, Slurm, the providers, the log, and what it measured."""

    config: Config
    action: str
    slurm: Slurm = field(default_factory=Slurm)
    providers: Providers | None = None
    log: Log | None = None
    state: NodeState | None = None
    provider_seconds: dict[str, float] = field(default_factory=dict)
    # Spent waiting for slurmd to register (the node's boot), not working.
    waited: float = 0.0

    def __post_init__(self) -> None:
        self.providers = self.providers or Providers(self.config)
        self.log = self.log or Log(self.config.log_file, self.action)
        self.state = self.state or NodeState(self.config.state_dir)

    def timed(self, node: str, call: Callable[[], Result]) -> Result:
        started = time.monotonic()
        try:
            return call()
        finally:
            self.provider_seconds[node] = self.provider_seconds.get(node, 0.0) + time.monotonic() - started

    def note(self, node: str, message: str) -> None:
        assert self.log is not None
        self.log(node, message)


def resume(run: Run, names: list[str]) -> int:
    """Power on, then watch each node until its slurmd registers; DOWN with the reason otherwise."""
    assert run.providers is not None and run.state is not None
    started = time.monotonic()
    jobs = resume_jobs()
    nodes = [run.config.nodes[n] for n in names]
    deadlines = {n.name: started + max(n.resume_timeout - RESUME_MARGIN, 5) for n in nodes}
    failed: dict[str, str] = {}

    def power_on(node: NodeConfig) -> None:
        assert run.providers is not None and run.state is not None
        with run.state.lock(node.name):
            provider = run.providers.of(node)
            try:
                result = run.timed(
                    node.name,
                    lambda: with_retries(
                        lambda: provider.on(node), deadlines[node.name], lambda m: run.note(node.name, m)
                    ),
                )
            except ProviderError as exc:
                failed[node.name] = f"{provider.kind}: {exc.reason}"
                return
            if result.address:
                run.slurm.set_address(node.name, result.address)
            run.state.write(node.name, action="resume", result="powered on", detail=result.done)
            job_text = f" for job(s) {','.join(jobs[node.name])}" if node.name in jobs else ""
            run.note(node.name, f"{provider.kind}: {result.done}{job_text}")

    with ThreadPoolExecutor(max_workers=min(MAX_WORKERS, len(nodes) or 1)) as pool:
        list(pool.map(power_on, nodes))
    waiting = [n.name for n in nodes if n.name not in failed]
    failed.update(watch(run, waiting, deadlines))
    for name, reason in failed.items():
        give_up(run, name, reason, jobs.get(name, []))
    for name in names:
        if name not in failed:
            run.state.write(name, action="resume", result="registered")
            took = time.monotonic() - started
            spent = run.provider_seconds.get(name, 0.0)
            program = max(took - spent - run.waited, 0.0)
            run.note(
                name,
                f"slurmd registered after {took:.1f} s (provider {spent:.2f} s, boot {run.waited:.1f} s, program {program:.2f} s)",
            )
    return 0


def watch(run: Run, names: list[str], deadlines: dict[str, float]) -> dict[str, str]:
    """Poll Slurm (one call for all) until each node's slurmd has registered or its time is up;
    returns the nodes that did not come up, with why."""
    pending = set(names)
    failed: dict[str, str] = {}
    while pending:
        seen = run.slurm.nodes(sorted(pending))
        now = time.monotonic()
        for name in sorted(pending):
            node = seen.get(name)
            if node is not None and node.registered:
                pending.discard(name)
            elif node is not None and "DOWN" in node.flags and "POWERING_UP" not in node.flags:
                failed[name] = f"set DOWN while powering up ({node.reason or 'no reason'})"
                pending.discard(name)
            elif now >= deadlines[name]:
                state = node.state if node else "unknown to Slurm"
                kind = run.config.nodes[name].kind
                failed[name] = (
                    f"{kind}: powered on, but slurmd did not register within its ResumeTimeout ({state})"
                )
                pending.discard(name)
        if pending:
            time.sleep(WATCH_INTERVAL)
            run.waited += WATCH_INTERVAL
    return failed


def give_up(run: Run, name: str, reason: str, jobs: list[str]) -> None:
    """A node that did not come up: DOWN with the reason (slurmctld requeues its jobs), its jobs
    requeued if slurmctld has not, and powered off so that it costs nothing while it waits."""
    assert run.state is not None and run.providers is not None
    text = short_reason(reason)
    run.slurm.set_down(name, text)
    left = run.slurm.jobs_on([name]).get(name, [])
    run.slurm.requeue([j for j in left if j in jobs or not jobs])
    run.state.write(name, action="resume", result="failed", reason=text)
    node = run.config.nodes[name]
    try:
        done = run.timed(
            name, lambda: run.providers.of(node).off(node, grace=0) if run.providers else Result("-")
        )
        off = f"; {done.done}"
    except ProviderError as exc:
        off = f"; power off failed too: {exc.reason}"
    run.note(name, f"DOWN: {text}{' (jobs requeued: ' + ','.join(left) + ')' if left else ''}{off}")


def held(run: Run) -> str | None:
    """Why nodes must stay on now: a playbook configuring them wrote the hold file (until when)."""
    path = Path(run.config.state_dir) / HOLD_FILE
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        until = float(doc["until"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if until < time.time():
        return None
    return f"{doc.get('by', 'a playbook')} holds power-saved nodes on until {time.strftime('%H:%M:%S', time.localtime(until))}"


def keep_on(run: Run, name: str, why: str) -> None:
    """Refuse to power a node off, and tell slurmctld so: left POWERING_DOWN, it would count the
    node as off after SuspendTimeout while it runs. RESUME clears the power-down request."""
    run.slurm.run(["scontrol", "update", f"NodeName={name}", "State=RESUME"])
    run.note(name, f"not powered off: {why}; left up (State=RESUME)")


def suspend(run: Run, names: list[str], grace: float = 60.0) -> int:
    """Power off each node that runs no job (none while a playbook holds them on)."""
    busy = run.slurm.jobs_on(names)
    seen = run.slurm.nodes(names)
    hold = held(run) if run.action == "suspend" else None

    def power_off(name: str) -> None:
        assert run.providers is not None and run.state is not None
        node = run.config.nodes[name]
        slurm_node = seen.get(name)
        if busy.get(name) or (slurm_node is not None and slurm_node.busy):
            what = ",".join(busy.get(name, [])) or (slurm_node.state if slurm_node else "")
            if run.action == "suspend":
                keep_on(run, name, f"it has a job ({what})")
            else:
                run.note(name, f"not powered off: it has a job ({what})")
            return
        if hold is not None:
            keep_on(run, name, hold)
            return
        with run.state.lock(name):
            provider = run.providers.of(node)
            started = time.monotonic()
            try:
                result = run.timed(
                    name,
                    lambda: with_retries(
                        lambda: provider.off(node, grace), started + grace + 60, lambda m: run.note(name, m)
                    ),
                )
            except ProviderError as exc:
                run.state.write(name, action="suspend", result="failed", reason=exc.reason)
                run.note(name, f"{provider.kind}: power off failed: {exc.reason}")
                return
            run.state.write(name, action="suspend", result="powered off", detail=result.done)
            run.note(name, f"{provider.kind}: {result.done} ({time.monotonic() - started:.1f} s)")

    with ThreadPoolExecutor(max_workers=min(MAX_WORKERS, len(names) or 1)) as pool:
        list(pool.map(power_off, names))
    return 0


def release(run: Run, names: list[str]) -> int:
    """The end of a playbook's hold. A node whose SuspendProgram ran during the hold was kept on,
    yet slurmctld counts it powered down once SuspendTimeout passes (seen on 26.05: IDLE+POWERED_DOWN
    with the machine up), and calls no SuspendProgram for a node it counts off: such a node, with
    no job, is powered off now, so that it costs nothing and its next resume boots it."""
    seen = run.slurm.nodes(names)
    busy = run.slurm.jobs_on(names)
    counted_off = [
        name
        for name in names
        if name in seen
        and "POWERED_DOWN" in seen[name].flags
        and "POWERING_UP" not in seen[name].flags
        and not busy.get(name)
    ]
    for name in counted_off:
        run.note(name, "released: Slurm counts it powered down; powered off unless it is off already")
    suspend(run, counted_off)
    for name in counted_off:
        recorded = run.state.read(name) if run.state else {}
        print(f"{name}: {recorded.get('detail') or recorded.get('reason') or 'left as it was'}")
    return 0


def resume_fail(run: Run, names: list[str]) -> int:
    """Nodes slurmctld gave up on (ResumeTimeout): DOWN with what the resume recorded, powered off
    unless a job is on them."""
    assert run.state is not None
    for name in names:
        recorded = run.state.read(name)
        reason = (
            recorded.get("reason")
            or f"did not register within ResumeTimeout (last: {recorded.get('detail', 'no record')})"
        )
        if str(reason).startswith(PREFIX):
            reason = str(reason)[len(PREFIX) :].strip()
        run.state.write(name, action="resume-fail", result="failed", reason=short_reason(str(reason)))
    return suspend_and_down(run, names)


def suspend_and_down(run: Run, names: list[str]) -> int:
    assert run.state is not None
    # Read before the power-off, whose own record has no reason: the node keeps the resume's.
    reasons = {name: run.state.read(name).get("reason") or short_reason("resume failed") for name in names}
    suspend(run, names, grace=0)
    for name in names:
        run.state.write(name, action=run.action, result="failed", reason=reasons[name])
        run.slurm.set_down(name, str(reasons[name]))
        run.note(name, f"DOWN: {reasons[name]}")
    return 0


def status(run: Run, names: list[str]) -> int:
    """Each node's power as its BMC or cloud reports it: `node kind state`."""
    assert run.providers is not None

    def one(name: str) -> str:
        node = run.config.nodes[name]
        try:
            return f"{name} {node.kind} {run.providers.of(node).state(node) if run.providers else '?'}"
        except ProviderError as exc:
            return f"{name} {node.kind} error: {exc.reason}"

    with ThreadPoolExecutor(max_workers=min(MAX_WORKERS, len(names) or 1)) as pool:
        for line in pool.map(one, names):
            print(line)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv if argv is None else argv)
    called = Path(argv[0]).name
    implied = next((a for a in ("resume-fail", "resume", "suspend") if called.endswith(f"-{a}")), None)
    parser = argparse.ArgumentParser(prog=called, description="gpucluster's power program for Slurm")
    if implied is None:
        parser.add_argument("action", choices=ACTIONS)
    parser.add_argument("nodes", nargs="?", default="", help="Slurm host list (default: every node)")
    parser.add_argument("--config", default=os.environ.get("GPUCLUSTER_POWER_CONFIG", DEFAULT_CONFIG))
    args = parser.parse_args(argv[1:])
    action = implied or args.action
    try:
        config = load_config(args.config)
        names = expand_hostlist(args.nodes) if args.nodes else sorted(config.nodes)
    except (ConfigError, ValueError) as exc:
        print(f"{called}: {exc}", file=sys.stderr)
        return 2
    run = Run(config, action)
    unknown = [n for n in names if n not in config.nodes]
    for name in unknown:
        run.note(name, f"not a power-saved node of {args.config}: left alone")
    names = [n for n in names if n in config.nodes]
    if action == "check-config":
        print(f"{args.config}: {len(config.nodes)} power-saved node(s), cluster {config.cluster}")
        return 0 if not unknown else 2
    actions: dict[str, Callable[[Run, list[str]], int]] = {
        "resume": resume, "suspend": suspend, "resume-fail": resume_fail, "release": release, "status": status,
    }  # fmt: skip
    return actions[action](run, names)


if __name__ == "__main__":
    sys.exit(main())
