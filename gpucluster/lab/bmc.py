"""The lab's BMC (gpucluster.lab.redfish) as `lab up` makes it and `lab down` removes it: a network
namespace with an address on the lab bridge, a CA and a certificate for the name `lab-bmc`, random
credentials (vaulted into the lab's inventory for the slurm_power role), and the service process."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

from gpucluster.lab import network, nodes
from gpucluster.lab.paths import state_dir
from gpucluster.lab.redfish import BMC_HOST, BMC_PORT
from gpucluster.lab.shell import LabError, run
from gpucluster.lab.state import LabState
from gpucluster.model.cluster import Cluster
from gpucluster.model.powered import power_groups

USERNAME = "lab-admin"


def bmc_dir() -> Path:
    return state_dir() / "bmc"


def systems(cluster: Cluster) -> dict[str, str]:
    """Redfish system id -> container, for the power-saved hosts whose BMC is the lab's."""
    found: dict[str, str] = {}
    for group in power_groups(cluster):
        bmc = group.power.bmc
        if bmc is None or f"//{BMC_HOST}" not in bmc.endpoint:
            continue
        for host in group.hosts:
            found[bmc.system.replace("{host}", host)] = nodes.container_name(host)
    return found


def needed(cluster: Cluster) -> bool:
    return bool(systems(cluster))


def certificates(directory: Path, name: str = BMC_HOST) -> None:
    """A CA of the lab's own and the BMC's certificate for `name`, signed by it (once)."""
    if (directory / "server.pem").is_file():
        return
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca, key, csr, cert = (
        directory / n for n in ("ca.key", "ca.pem", "server.key", "server.csr", "server.pem")
    )
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run(["openssl", "req", "-x509", *ec, "-keyout", str(ca_key), "-out", str(ca), "-days", "30",
         "-subj", "/CN=gpucluster lab BMC CA", "-addext", "basicConstraints=critical,CA:TRUE",
         "-addext", "keyUsage=critical,keyCertSign,cRLSign"])  # fmt: skip
    run(["openssl", "req", "-new", *ec, "-keyout", str(key), "-out", str(csr), "-subj", f"/CN={name}"])
    extensions = directory / "server.ext"
    extensions.write_text(
        f"subjectAltName=DNS:{name}\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n",
        encoding="utf-8",
    )
    run(["openssl", "x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial",
         "-out", str(cert), "-days", "30", "-extfile", str(extensions)])  # fmt: skip
    for path in (ca_key, key):
        path.chmod(0o600)


def credentials() -> dict[str, str]:
    path = bmc_dir() / "credentials.json"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            json.dumps({"username": USERNAME, "password": secrets.token_urlsafe(18)}), encoding="utf-8"
        )
        path.chmod(0o600)
    data: dict[str, str] = json.loads(path.read_text(encoding="utf-8"))
    return data


def ca_pem() -> str:
    return (bmc_dir() / "ca.pem").read_text(encoding="utf-8")


def _alive(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"gpucluster.lab.redfish" in cmdline


def ensure(state: LabState, cluster: Cluster, index: int, address: str, prefix_len: int) -> None:
    """The BMC's namespace, certificate and credentials, and its service running."""
    directory = bmc_dir()
    state.remember("files", str(directory))
    network.ensure_node_network(state, index, BMC_HOST, address, prefix_len)
    certificates(directory)
    login = credentials()
    config = directory / "service.json"
    config.write_text(json.dumps({"systems": systems(cluster), **login}), encoding="utf-8")
    config.chmod(0o600)
    if state.bmc_pid and _alive(state.bmc_pid):
        return
    ready = directory / "ready"
    ready.unlink(missing_ok=True)
    log = (directory / "service.log").open("a", encoding="utf-8")
    argv = [sys.executable, "-m", "gpucluster.lab.redfish", "--config", str(config),
            "--cert", str(directory / "server.pem"), "--key", str(directory / "server.key"),
            "--address", address, "--port", str(BMC_PORT), "--netns", network.netns_name(BMC_HOST),
            "--ready", str(ready)]  # fmt: skip
    process = subprocess.Popen(argv, stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
    state.bmc_pid = process.pid
    state.save()
    deadline = time.monotonic() + 20
    while not ready.is_file():
        if process.poll() is not None or time.monotonic() > deadline:
            raise LabError(f"the lab's BMC did not start (log: {directory / 'service.log'})")
        time.sleep(0.1)


def service_pids(netns: str) -> list[int]:
    """The lab BMC services serving the namespace `netns`, found by their command line (`-m
    gpucluster.lab.redfish ... --netns NAME`): the service binds its socket in that namespace from
    one thread and runs in the host's, so `ip netns pids` does not list it."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        pairs = set(itertools.pairwise(a.decode("utf-8", "replace") for a in argv))
        if ("-m", "gpucluster.lab.redfish") in pairs and ("--netns", netns) in pairs:
            found.append(int(entry.name))
    return sorted(found)


def stop(state: LabState) -> list[str]:
    if not state.bmc_pid:
        return []
    pid = state.bmc_pid
    removed = []
    if _alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        for _ in range(50):
            if not _alive(pid):
                break
            time.sleep(0.1)
        removed.append(f"BMC service (pid {pid})")
    state.bmc_pid = 0
    state.save()
    return removed
