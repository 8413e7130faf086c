"""gpucluster-power (gpucluster/programs/gpucluster_power.py) without Slurm or a cloud: its host
lists, its Redfish provider against the lab's Redfish service over real HTTPS (the service's power
states kept in memory instead of podman's containers; the lab tests run it on containers), the IPMI
fallback's command, and an action's decisions (DOWN with the provider's reason and jobs requeued,
never a node with a job powered off, a playbook's hold) with scontrol answered by a recorder."""

from __future__ import annotations

import importlib.util
import json
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from gpucluster.lab.bmc import certificates
from gpucluster.lab.redfish import LabBmc, handler_for
from gpucluster.render.power import program_path

spec = importlib.util.spec_from_file_location("gpucluster_power", program_path())
assert spec and spec.loader
power = importlib.util.module_from_spec(spec)
sys.modules["gpucluster_power"] = power
spec.loader.exec_module(power)


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("gpu05", ["gpu05"]),
        ("gpu[05-06]", ["gpu05", "gpu06"]),
        ("gpu[05-06,09],login1", ["gpu05", "gpu06", "gpu09", "login1"]),
        ("rack[1-2]-n[01-02]", ["rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"]),
        ("a[8-10]", ["a8", "a9", "a10"]),
    ],
)
def test_host_lists_expand_as_slurm_writes_them(text: str, names: list[str]) -> None:
    assert power.expand_hostlist(text) == names


@pytest.mark.parametrize("bad", ["gpu[05-06", "gpu[a-b]"])
def test_a_bad_host_list_is_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        power.expand_hostlist(bad)


class MemoryBmc(LabBmc):
    """The lab's Redfish service with power states in memory (the lab's own flips containers)."""

    def __init__(self, systems: dict[str, str], username: str, password: str) -> None:
        super().__init__(systems, username, password)
        self.on: dict[str, bool] = dict.fromkeys(systems, False)
        self.resets: list[tuple[str, str]] = []

    def power_state(self, system: str) -> str:
        return "On" if self.on[system] else "Off"

    def reset(self, system: str, reset_type: str) -> None:
        self.resets.append((system, reset_type))
        self.on[system] = reset_type in ("On", "ForceRestart")


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("bmc")
    certificates(directory, "localhost")
    return directory


@pytest.fixture
def bmc(tls: Path) -> Iterator[tuple[MemoryBmc, str]]:
    service = MemoryBmc({"gpu05": "c-gpu05", "gpu06": "c-gpu06"}, "admin", "s3cret")
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler_for(service))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tls / "server.pem", tls / "server.key")
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield service, f"https://localhost:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def node(endpoint: str, name: str = "gpu05", **settings: Any) -> Any:
    return power.NodeConfig(
        name, "saved", "bmc", 60, 30, {"endpoint": endpoint, "system": "{host}", **settings}
    )


SECRETS = {
    "bmc": {
        "gpu05": {"username": "admin", "password": "s3cret"},
        "gpu06": {"username": "admin", "password": "s3cret"},
    }
}


def redfish(tls: Path, secrets: dict[str, Any] = SECRETS) -> Any:
    return power.Redfish(secrets, str(tls / "ca.pem"), poll=0.05)


def test_redfish_powers_a_node_on_once_and_off_gracefully(bmc: tuple[MemoryBmc, str], tls: Path) -> None:
    service, endpoint = bmc
    provider = redfish(tls)
    target = node(endpoint)
    assert provider.state(target) == "Off"
    assert "Off -> On (ComputerSystem.Reset On)" in provider.on(target).done
    assert provider.on(target).done == "already On"  # idempotent: no second reset
    assert "On -> Off (ComputerSystem.Reset GracefulShutdown)" in provider.off(target, grace=5).done
    assert service.resets == [("gpu05", "On"), ("gpu05", "GracefulShutdown")]


def test_redfish_checks_the_bmc_certificate_and_never_falls_back_to_ipmi_for_it(
    bmc: tuple[MemoryBmc, str], tmp_path: Path
) -> None:
    _, endpoint = bmc
    certificates(tmp_path, "localhost")  # another CA: the BMC's certificate is not signed by it
    ran: list[list[str]] = []
    provider = power.Bmc(
        power.Redfish(SECRETS, str(tmp_path / "ca.pem")),
        power.Ipmi(SECRETS, run=lambda a, **k: ran.append(a)),
    )
    with pytest.raises(power.ProviderError, match=r"certificate of .* is not trusted"):
        provider.on(node(endpoint))
    assert ran == []


def test_redfish_errors_carry_the_bmc_s_own_words(bmc: tuple[MemoryBmc, str], tls: Path) -> None:
    _, endpoint = bmc
    wrong = redfish(tls, {"default_bmc": {"username": "admin", "password": "wrong"}})
    with pytest.raises(
        power.ProviderError, match="redfish 401 credentials refused: There are insufficient privileges"
    ):
        wrong.on(node(endpoint))
    with pytest.raises(
        power.ProviderError, match=r"redfish 404 .*ComputerSystem named 'gpu99' was not found"
    ):
        redfish(tls, {"default_bmc": {"username": "admin", "password": "s3cret"}}).state(
            node(endpoint, "gpu99")
        )
    with pytest.raises(power.ProviderError, match="no BMC credentials for gpu05"):
        redfish(tls, {}).state(node(endpoint))


def test_a_bmc_without_redfish_is_powered_through_ipmi_with_the_password_in_the_environment(
    tls: Path,
) -> None:
    calls: list[tuple[list[str], dict[str, str]]] = []

    def ipmitool(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        calls.append((argv, kwargs["env"]))
        out = "Chassis Power is off\n" if argv[-1] == "status" else "Chassis Power Control: Up/On\n"
        return subprocess.CompletedProcess(argv, 0, out, "")

    # Nothing listens on port 9 of localhost: the BMC has no Redfish service.
    provider = power.Bmc(redfish(tls), power.Ipmi(SECRETS, run=ipmitool))
    assert provider.on(node("https://localhost:9")).done == "chassis power on (ipmi)"
    argv, env = calls[-1]
    assert argv == [
        "ipmitool",
        "-I",
        "lanplus",
        "-H",
        "localhost",
        "-U",
        "admin",
        "-E",
        "chassis",
        "power",
        "on",
    ]
    assert env["IPMI_PASSWORD"] == "s3cret" and "s3cret" not in argv
    with pytest.raises(power.NoRedfish):
        power.Bmc(redfish(tls), power.Ipmi(SECRETS, run=ipmitool)).on(
            node("https://localhost:9", ipmi_fallback=False)
        )


class SlurmRecorder:
    """scontrol and squeue as the program calls them: node states and jobs given, commands kept."""

    def __init__(self, states: dict[str, list[str]], jobs: dict[str, str] | None = None) -> None:
        self.states = states  # node -> the states slurmctld reports, one per query (the last repeats)
        self.jobs = jobs or {}
        self.commands: list[list[str]] = []

    def __call__(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        self.commands.append(argv)
        if argv[:3] == ["scontrol", "show", "node"]:
            lines = []
            for name in power.expand_hostlist(argv[-1]):
                seen = self.states[name]
                state = seen.pop(0) if len(seen) > 1 else seen[0]
                lines.append(f"NodeName={name} Arch=x86_64 State={state} Partitions=burst")
            return subprocess.CompletedProcess(argv, 0, "\n".join(lines), "")
        if argv[0] == "squeue":
            out = "\n".join(f"{job} {name}" for name, job in self.jobs.items())
            return subprocess.CompletedProcess(argv, 0, out, "")
        return subprocess.CompletedProcess(argv, 0, "", "")


def make_run(
    tmp_path: Path, endpoint: str, tls: Path, slurm: SlurmRecorder, action: str, timeout: int = 60
) -> Any:
    nodes = {
        n: power.NodeConfig(n, "saved", "bmc", timeout, 5, {"endpoint": endpoint, "system": "{host}"})
        for n in ("gpu05", "gpu06")
    }
    config = power.Config(
        "lab",
        "26.05",
        nodes,
        str(tmp_path / "power.log"),
        str(tmp_path / "state"),
        SECRETS,
        str(tls / "ca.pem"),
    )
    return power.Run(config, action, slurm=power.Slurm(slurm))


def test_resume_powers_on_and_returns_when_slurmd_registers(
    bmc: tuple[MemoryBmc, str], tls: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    service, endpoint = bmc
    monkeypatch.setattr(power, "WATCH_INTERVAL", 0.05)
    slurm = SlurmRecorder({n: ["IDLE+POWERING_UP", "IDLE+POWERING_UP", "IDLE"] for n in ("gpu05", "gpu06")})
    run = make_run(tmp_path, endpoint, tls, slurm, "resume")
    assert power.resume(run, ["gpu05", "gpu06"]) == 0
    assert service.on == {"gpu05": True, "gpu06": True}
    log = (tmp_path / "power.log").read_text()
    assert "resume gpu05: bmc: PowerState Off -> On (ComputerSystem.Reset On)" in log
    assert "resume gpu06: slurmd registered after" in log and "program " in log
    assert not [c for c in slurm.commands if "State=DOWN" in c]


def test_a_node_that_does_not_come_up_is_down_with_the_reason_and_its_jobs_requeued(
    bmc: tuple[MemoryBmc, str], tls: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    service, endpoint = bmc
    monkeypatch.setattr(power, "WATCH_INTERVAL", 0.05)
    monkeypatch.setattr(power, "RESUME_MARGIN", 0)
    resume_file = tmp_path / "resume.json"
    resume_file.write_text(
        json.dumps({"all_nodes_resume": "gpu06", "jobs": [{"job_id": 42, "nodes_resume": "gpu06"}]})
    )
    monkeypatch.setenv("SLURM_RESUME_FILE", str(resume_file))
    slurm = SlurmRecorder({"gpu06": ["IDLE+POWERING_UP"]}, jobs={"gpu06": "42"})
    run = make_run(tmp_path, endpoint, tls, slurm, "resume", timeout=1)
    power.resume(run, ["gpu06"])
    down = next(c for c in slurm.commands if "State=DOWN" in c)
    assert down[:3] == ["scontrol", "update", "NodeName=gpu06"]
    assert down[-1].startswith(
        "Reason=[power] bmc: powered on, but slurmd did not register within its ResumeTimeout"
    )
    assert ["scontrol", "requeue", "42"] in slurm.commands
    # Off again, so that a node that cannot serve costs no power while it waits for repair.
    assert service.on["gpu06"] is False and service.resets[-1] == ("gpu06", "ForceOff")
    assert json.loads((tmp_path / "state" / "gpu06.json").read_text())["result"] == "failed"


def test_slurmctlds_own_give_up_keeps_the_reason_the_resume_found(
    bmc: tuple[MemoryBmc, str], tls: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """slurmctld calls ResumeFailProgram at ResumeTimeout, after the program set the node DOWN
    with its reason: the node stays DOWN with that reason, not a generic one (seen in the lab:
    `[power] resume failed` replaced it)."""
    _, endpoint = bmc
    monkeypatch.setattr(power, "WATCH_INTERVAL", 0.05)
    monkeypatch.setattr(power, "RESUME_MARGIN", 0)
    slurm = SlurmRecorder({"gpu06": ["IDLE+POWERING_UP"]})
    power.resume(make_run(tmp_path, endpoint, tls, slurm, "resume", timeout=1), ["gpu06"])
    slurm.states["gpu06"] = ["DOWN+POWERED_DOWN"]
    power.resume_fail(make_run(tmp_path, endpoint, tls, slurm, "resume-fail"), ["gpu06"])
    downs = [c[-1] for c in slurm.commands if "State=DOWN" in c]
    assert len(downs) == 2 and downs[0] == downs[1], downs
    assert downs[1].startswith("Reason=[power] bmc: powered on, but slurmd did not register"), downs
    log = (tmp_path / "power.log").read_text()
    assert "resume-fail gpu06: DOWN: [power] bmc: powered on, but slurmd did not register" in log, log


def test_suspend_never_powers_off_a_node_with_a_job_and_tells_slurm_it_is_up(
    bmc: tuple[MemoryBmc, str], tls: Path, tmp_path: Path
) -> None:
    service, endpoint = bmc
    service.on.update(gpu05=True, gpu06=True)
    slurm = SlurmRecorder({"gpu05": ["IDLE+POWERING_DOWN"], "gpu06": ["MIXED"]}, jobs={"gpu06": "7"})
    run = make_run(tmp_path, endpoint, tls, slurm, "suspend")
    power.suspend(run, ["gpu05", "gpu06"], grace=5)
    assert service.on == {"gpu05": False, "gpu06": True}
    assert ["scontrol", "update", "NodeName=gpu06", "State=RESUME"] in slurm.commands
    assert "suspend gpu06: not powered off: it has a job (7)" in (tmp_path / "power.log").read_text()


def test_a_playbook_s_hold_keeps_idle_nodes_up(bmc: tuple[MemoryBmc, str], tls: Path, tmp_path: Path) -> None:
    service, endpoint = bmc
    service.on.update(gpu05=True)
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "hold").write_text(json.dumps({"until": 2**40, "by": "Slurm playbook"}))
    slurm = SlurmRecorder({"gpu05": ["IDLE+POWERING_DOWN"]})
    power.suspend(make_run(tmp_path, endpoint, tls, slurm, "suspend"), ["gpu05"], grace=5)
    assert service.on["gpu05"] is True
    assert ["scontrol", "update", "NodeName=gpu05", "State=RESUME"] in slurm.commands
    # An expired hold (a playbook that stopped before releasing it) holds nothing.
    (tmp_path / "state" / "hold").write_text(json.dumps({"until": 1, "by": "Slurm playbook"}))
    power.suspend(make_run(tmp_path, endpoint, tls, slurm, "suspend"), ["gpu05"], grace=5)
    assert service.on["gpu05"] is False


def test_release_powers_off_what_slurm_counted_off_during_the_hold(
    bmc: tuple[MemoryBmc, str], tls: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A node kept on by the hold that slurmctld nevertheless counts POWERED_DOWN is powered off at
    the release; a node Slurm counts on is left to SuspendTime, one with a job is never touched."""
    service, endpoint = bmc
    service.on.update(gpu05=True, gpu06=True)
    (tmp_path / "state").mkdir()
    slurm = SlurmRecorder({"gpu05": ["IDLE+POWERED_DOWN"], "gpu06": ["IDLE"]})
    assert power.release(make_run(tmp_path, endpoint, tls, slurm, "release"), ["gpu05", "gpu06"]) == 0
    assert service.on == {"gpu05": False, "gpu06": True}
    assert capsys.readouterr().out.splitlines() == [
        "gpu05: PowerState On -> Off (ComputerSystem.Reset GracefulShutdown)"
    ]
    # Counted off and off already: nothing to do; counted off with a job on it: left on.
    service.on.update(gpu06=True)
    slurm = SlurmRecorder(
        {"gpu05": ["IDLE+POWERED_DOWN"], "gpu06": ["MIXED+POWERED_DOWN"]}, jobs={"gpu06": "9"}
    )
    power.release(make_run(tmp_path, endpoint, tls, slurm, "release"), ["gpu05", "gpu06"])
    assert service.on == {"gpu05": False, "gpu06": True}
    assert capsys.readouterr().out.splitlines() == ["gpu05: already Off"]
    # A release keeps no hold in mind: the hold file is gone by then, and not asked.
    assert not [c for c in slurm.commands if "State=RESUME" in c]


def test_the_program_refuses_a_missing_configuration_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert power.main(["gpucluster-power-resume", "gpu05", "--config", str(tmp_path / "none.json")]) == 2
    assert "none.json" in capsys.readouterr().err
