"""The rendered Slurm state collector, run by dash with sinfo, squeue, scontrol, sacctmgr and curl
stood in for by scripts that print what Slurm prints: on a release whose slurmctld serves no
metrics it counts partition and node GPUs and the queue as slurmctld's metrics do, parsing the
GRES and TRES strings of 22.05..26.05, in every awk Debian has (mawk is its default); on 25.11+ it
writes none of them. Its output is checked by promtool's metrics parser."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from gpucluster.layers import load_cluster
from gpucluster.monitoring.collector import TEXTFILE_DIR, collector_metrics
from gpucluster.monitoring.render import render_monitoring
from tests.conftest import INVENTORIES
from tests.monitoring.test_monitoring_render import PROMTOOL, lab_at

# `sinfo -a -N -h -O 'NodeList:0|,PartitionName:0|,StateLong:0|,Gres:0|,GresUsed:0'`: gpu01 in two
# partitions, GRES with sockets, indexes (a list with a comma included), two types, no type, a
# shard beside the GPUs, a node without GRES.
SINFO_GPUS = """\
gpu01|gpu|mixed|gpu:h100:8(S:0)|gpu:h100:3(IDX:0-2)
gpu01|debug|mixed|gpu:h100:8(S:0)|gpu:h100:3(IDX:0-2)
gpu02|gpu|idle|gpu:h100:8(S:0-1)|gpu:h100:0(IDX:N/A)
gpu03|gpu|drained|gpu:h100:4(S:0),gpu:a100:4(S:1)|gpu:h100:0(IDX:N/A),gpu:a100:0(IDX:N/A)
gpu04|gpu|down*|gpu:8,shard:16|gpu:2(IDX:0,5),shard:0
cpu01|cpu|idle|(null)|(null)
"""
# `squeue -a -r -h -t PD,R -O 'StateCompact:0|,Partition:0|,tres-alloc:0'`: allocated TRES of a
# running job, requested ones of pending jobs: typed and untyped GPUs, typed only, none, a job
# that may run in two partitions.
SQUEUE = """\
R|gpu|cpu=2,mem=384M,node=1,billing=2,gres/gpu=3
PD|gpu|cpu=8,mem=4G,node=4,billing=8,gres/gpu=32,gres/gpu:h100=32
PD|gpu,debug|cpu=1,mem=128M,node=1,billing=1,gres/gpu=1
PD|cpu|cpu=1,mem=1G,node=1,billing=1
PD|debug|cpu=1,node=1,billing=1,gres/gpu:h100=2
"""
SINFO_STATES = "gpu01|MIXED|none\ngpu03|DRAINED|maintenance\n"

STUBS = {
    # The node-state line asks with -o, the GPU one with -O.
    "sinfo": f"""case "$*" in *-O*) printf '%s' '{SINFO_GPUS}';; *) printf '%s' '{SINFO_STATES}';; esac""",
    "squeue": f"printf '%s' '{SQUEUE}'",
    "scontrol": "echo 'Slurmctld(primary) at ctl01 is UP'; echo 'Slurmctld(backup) at ctl02 is UP'",
    "sacctmgr": "exit 0",
    "curl": "printf 401",
}
DOWN = {**STUBS, "sinfo": "exit 1", "squeue": "exit 1", "scontrol": "exit 1", "sacctmgr": "exit 1"}

AWKS = [
    pytest.param(("mawk",), id="mawk"),
    pytest.param(("gawk", "--posix"), id="gawk-posix"),
]


def run_collector(script: str, stubs: dict[str, str], awk: tuple[str, ...], tmp_path: Path) -> str:
    if not shutil.which(awk[0]):
        pytest.skip(f"{awk[0]} is not installed here")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in {**stubs, "awk": f'exec {" ".join(awk)} "$@"'}.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    out_dir = tmp_path / "textfile"
    out_dir.mkdir()
    path = tmp_path / "collector.sh"
    path.write_text(script.replace(TEXTFILE_DIR, str(out_dir)))
    proc = subprocess.run(
        ["dash", str(path)],
        env={"PATH": f"{bin_dir}:/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 0 and not proc.stderr, proc.stderr
    assert sorted(p.name for p in out_dir.iterdir()) == ["gpucluster_slurm.prom"], "written whole, renamed"
    text = (out_dir / "gpucluster_slurm.prom").read_text()
    checked = subprocess.run(
        [str(PROMTOOL), "check", "metrics"], input=text, capture_output=True, text=True, check=False
    )
    # 3: lint remarks only (the older families carry no HELP); 1 would be a format error.
    assert checked.returncode in (0, 3) and "error" not in checked.stdout + checked.stderr, checked.stderr
    return text


def samples(text: str, name: str) -> dict[str, int]:
    """`label="value",...` -> value of every sample of one metric."""
    found = {}
    for line in text.splitlines():
        match = re.fullmatch(rf"{name}\{{(.*)\}} (\d+)", line)
        if match:
            found[match.group(1)] = int(match.group(2))
    return found


def collector_at(version: str, tmp_path: Path) -> str:
    cluster = load_cluster(lab_at(tmp_path / "inventory", version))
    return render_monitoring(cluster)["monitoring/slurm-state-collector.sh"]


@pytest.mark.parametrize("awk", AWKS)
@pytest.mark.parametrize("version", ["24.11", "22.05"])
def test_before_25_11_the_collector_counts_partition_gpus_nodes_and_queue(
    version: str, awk: tuple[str, ...], tmp_path: Path
) -> None:
    text = run_collector(collector_at(version, tmp_path), STUBS, awk, tmp_path)
    parts = ('partition="gpu"', 'partition="debug"', 'partition="cpu"')
    # A node in two partitions counts in each, as in slurmctld's slurm_partition_gpus.
    assert samples(text, "gpucluster_slurm_partition_gpus") == dict(zip(parts, (32, 8, 0), strict=True))
    assert samples(text, "gpucluster_slurm_partition_gpus_alloc") == dict(zip(parts, (5, 3, 0), strict=True))
    assert samples(text, "gpucluster_slurm_partition_jobs_pending") == dict(
        zip(parts, (2, 2, 1), strict=True)
    )
    assert samples(text, "gpucluster_slurm_partition_jobs_pending_gpus") == dict(
        zip(parts, (33, 3, 0), strict=True)
    )
    assert samples(text, "gpucluster_slurm_partition_jobs_running") == dict(
        zip(parts, (1, 0, 0), strict=True)
    )
    nodes = {k: v for k, v in samples(text, "gpucluster_slurm_partition_nodes").items() if v}
    assert nodes == {
        'partition="gpu",state="mixed"': 1,
        'partition="gpu",state="idle"': 1,
        'partition="gpu",state="drain"': 1,
        'partition="gpu",state="down"': 1,
        'partition="debug",state="mixed"': 1,
        'partition="cpu",state="idle"': 1,
    }
    assert len(samples(text, "gpucluster_slurm_partition_nodes")) == 3 * 6, "every state, zeros included"
    assert samples(text, "gpucluster_slurm_node_gpus") == {
        f'slurm_node="{n}"': g
        for n, g in (("gpu01", 8), ("gpu02", 8), ("gpu03", 8), ("gpu04", 8), ("cpu01", 0))
    }
    assert samples(text, "gpucluster_slurm_node_gpus_alloc") == {
        f'slurm_node="{n}"': g
        for n, g in (("gpu01", 3), ("gpu02", 0), ("gpu03", 0), ("gpu04", 2), ("cpu01", 0))
    }
    # What it has always written is still there.
    assert 'gpucluster_slurm_node_state{slurm_node="gpu03",state="drained",reason="maintenance"} 1' in text
    assert (
        'gpucluster_slurm_controller_in_control{slurm_controller="ctl01",controller_role="primary"} 1' in text
    )
    written = set(re.findall(r"^(gpucluster_\w+)[{ ]", text, re.MULTILINE))
    assert written == set(collector_metrics(load_cluster(tmp_path / "inventory" / "lab")))


def test_with_slurmctld_unreachable_it_writes_no_partition_metrics(tmp_path: Path) -> None:
    """Neither zeros (an empty queue is not an unknown one) nor a broken file."""
    text = run_collector(collector_at("24.11", tmp_path), DOWN, ("mawk",), tmp_path)
    assert "gpucluster_slurm_partition_gpus{" not in text and "gpucluster_slurm_node_gpus{" not in text
    assert 'controller_role="primary"} 0' in text


def test_on_25_11_and_later_slurmctld_serves_them_and_the_collector_does_not(tmp_path: Path) -> None:
    script = render_monitoring(load_cluster(INVENTORIES / "lab"))["monitoring/slurm-state-collector.sh"]
    assert "squeue" not in script and "gpucluster_slurm_partition" not in script
    text = run_collector(script, STUBS, ("mawk",), tmp_path)
    assert "gpucluster_slurm_partition" not in text and "gpucluster_slurm_node_gpus" not in text
