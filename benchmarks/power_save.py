"""Power saving in the lab, timed: submit-to-start of a job needing 1, 2 and 4 powered-down nodes,
idle-to-off of the nodes it used, and gpucluster-power's own time per node (outside the BMC's calls
and the boot it waits for).

It brings up a lab of its own from the lab inventory with four power-saved nodes (gpu[11-14], the
lab's Redfish BMC powering their containers on and off), runs the jobs one after the other (each
waits for every node to be off again), prints the table and takes the lab down. Heavy: run it
under the machine's heavy lock, with a lab prefix, subnet and directory of its own, e.g.

    GPUCLUSTER_LAB_PREFIX=gcpwr GPUCLUSTER_LAB_SUBNET=10.213.80.0/24 GPUCLUSTER_LAB_DIR=/tmp/pwr \\
        .venv/bin/python benchmarks/power_save.py [--sizes 1 2 4] [--keep]

Submit-to-start is Slurm's own record (sacct Submit and Start, whole seconds); idle-to-off is from
the job's end (sacct End) to the last of its nodes' containers stopped (polled every second).
A container boots in seconds where a GPU server takes minutes: these are the program's and Slurm's
overheads, not a site's boot times.
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gpucluster.lab import nodes  # noqa: E402
from gpucluster.lab.paths import podman_env  # noqa: E402

GPUCLUSTER = REPO / ".venv" / "bin" / "gpucluster"
SAVED = ["gpu11", "gpu12", "gpu13", "gpu14"]
LOG = "/var/log/slurm/gpucluster-power.log"


def inventory(root: Path) -> Path:
    """The lab inventory with four power-saved nodes."""
    target = root / "lab"
    shutil.copytree(REPO / "inventories" / "lab", target)
    hosts = target / "hosts.yml"
    text = hosts.read_text()
    assert "gpu[11:12]:" in text
    hosts.write_text(text.replace("gpu[11:12]:", "gpu[11:14]:"))
    return target


def sh(*argv: str, timeout: float = 120) -> str:
    proc = subprocess.run(
        ["podman", "exec", nodes.container_name("ctl01"), *argv],
        env=podman_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return proc.stdout


def states() -> dict[str, str]:
    out = sh("sinfo", "--noheader", "--Node", "--format=%N %T")
    return dict(line.split() for line in out.splitlines() if len(line.split()) == 2)


def all_off(hosts: list[str]) -> bool:
    seen = states()
    return all(
        seen.get(h, "").endswith("~") and not nodes.container_running(nodes.container_name(h)) for h in hosts
    )


def wait(predicate: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(1)
    raise SystemExit(f"timed out after {timeout:.0f} s waiting for {what}")


def sacct(job: str) -> dict[str, str]:
    out = sh("sacct", "--noheader", "--allocations", "--parsable2", f"--jobs={job}",
             "--format=State,Submit,Start,End,NodeList")  # fmt: skip
    state, submit, start, end, nodelist = out.strip().splitlines()[-1].split("|")
    return {"state": state, "submit": submit, "start": start, "end": end, "nodes": nodelist}


def stamp(text: str) -> float:
    return datetime.datetime.fromisoformat(text).timestamp()


def run_size(size: int) -> tuple[float, float, list[float]]:
    before = len(sh("cat", LOG).splitlines())
    job = sh("sbatch", "--parsable", "--output=/dev/null", "--partition=burst", f"--nodes={size}",
             f"--nodelist={','.join(SAVED[:size])}", "--wrap=srun true").strip().split(";")[0]  # fmt: skip
    wait(lambda: sacct(job)["state"] == "COMPLETED", 300, f"job {job}")
    record = sacct(job)
    start_delay = stamp(record["start"]) - stamp(record["submit"])
    hosts = SAVED[:size]
    wait(lambda: all_off(hosts), 300, f"{hosts} off")
    off = time.time() - stamp(record["end"])
    lines = sh("cat", LOG).splitlines()[before:]
    program = [float(m.group(1)) for line in lines if (m := re.search(r"program ([\d.]+) s\)", line))]
    return start_delay, off, program


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--keep", action="store_true", help="leave the lab up")
    args = parser.parse_args()
    if not os.environ.get("GPUCLUSTER_LAB_PREFIX"):
        raise SystemExit("give the benchmark a lab of its own: GPUCLUSTER_LAB_PREFIX, _SUBNET and _DIR")
    root = Path(tempfile.mkdtemp(prefix="gpucluster-power-bench-"))
    try:
        up = subprocess.run([str(GPUCLUSTER), "lab", "up", str(inventory(root))], cwd=REPO, check=False)
        if up.returncode != 0:
            raise SystemExit("lab up failed")
        wait(lambda: all_off(SAVED), 300, "the power-saved nodes to be off")
        rows = []
        for size in args.sizes:
            rows.append((size, *run_size(size)))
        print(
            f"\n{'nodes':>5}  {'submit-to-start':>15}  {'idle-to-off':>11}  program per node (outside BMC calls and boot)"
        )
        for size, start, off, program in rows:
            worst = max(program) if program else float("nan")
            print(
                f"{size:>5}  {start:>13.0f} s  {off:>9.0f} s  max {worst:.2f} s over {len(program)} node(s)"
            )
        return 0
    finally:
        if not args.keep:
            subprocess.run([str(GPUCLUSTER), "lab", "down"], cwd=REPO, check=False)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
