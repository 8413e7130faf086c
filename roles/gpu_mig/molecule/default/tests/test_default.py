"""gpu_mig on the Molecule container: the program, the node's layout and the boot-time unit
installed (enabled, not started: starting it outside a drained node would re-partition GPUs under
jobs), and the exact nvidia-smi commands gpucluster-mig runs for two H100s in each state, read
from NVIDIA's output shapes (no GPU here)."""

from __future__ import annotations

import json

PROGRAM = "/usr/local/sbin/gpucluster-mig"
OBSERVED = "/opt/gpucluster-mig-observed"
SEVEN = ",".join(["1g.10gb"] * 7)


def test_program_layout_and_unit(host) -> None:
    program = host.file(PROGRAM)
    assert program.exists and program.mode == 0o755
    layout = json.loads(host.file("/etc/gpucluster/mig.json").content_string)
    assert layout == {"gpus": {"0": {"3g.40gb": 2}, "1": {"1g.10gb": 7}}}
    unit = host.file("/etc/systemd/system/gpucluster-mig.service").content_string
    assert f"ExecStart={PROGRAM} apply --config /etc/gpucluster/mig.json" in unit
    assert "Before=slurmd.service" in unit
    assert host.run("systemctl is-enabled gpucluster-mig.service").stdout.strip() == "enabled"
    assert host.run("systemctl is-active gpucluster-mig.service").stdout.strip() == "inactive"


def test_a_node_with_its_layout_needs_nothing(host) -> None:
    for action in ("plan", "check"):
        result = host.run(f"{PROGRAM} {action} --observed {OBSERVED}/observed-matching")
        assert (result.rc, result.stdout) == (0, ""), result.stderr


def test_mig_off_is_enabled_reset_and_partitioned(host) -> None:
    result = host.run(f"{PROGRAM} plan --observed {OBSERVED}/observed-mig-off")
    assert result.rc == 10
    assert result.stdout.splitlines() == [
        "nvidia-smi -i 0 -mig 1",
        "nvidia-smi -i 0 -r",
        "nvidia-smi mig -i 0 -cgi 3g.40gb,3g.40gb -C",
        "nvidia-smi -i 1 -mig 1",
        "nvidia-smi -i 1 -r",
        f"nvidia-smi mig -i 1 -cgi {SEVEN} -C",
    ]
    check = host.run(f"{PROGRAM} check --observed {OBSERVED}/observed-mig-off")
    assert check.rc == 1 and "GPU 0: MIG mode off (declared: 2 x 3g.40gb)" in check.stdout


def test_another_layout_is_destroyed_and_created_again(host) -> None:
    result = host.run(f"{PROGRAM} plan --observed {OBSERVED}/observed-other-layout")
    assert result.rc == 10
    assert result.stdout.splitlines() == [
        "nvidia-smi mig -i 1 -dci",
        "nvidia-smi mig -i 1 -dgi",
        f"nvidia-smi mig -i 1 -cgi {SEVEN} -C",
    ]
    check = host.run(f"{PROGRAM} check --observed {OBSERVED}/observed-other-layout")
    assert check.rc == 1 and "GPU 1: 1 x 7g.80gb (declared: 7 x 1g.10gb)" in check.stdout


def test_apply_refuses_recorded_output(host) -> None:
    result = host.run(f"{PROGRAM} apply --observed {OBSERVED}/observed-mig-off")
    assert result.rc == 2 and "apply needs the GPUs" in result.stderr
