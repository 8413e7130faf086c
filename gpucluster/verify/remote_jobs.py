#!/usr/bin/env python3
"""Runs the verification jobs on the primary controller (the verify playbook, verify.yml beside it, copies it there).

It runs on the controller's own python3 (3.8 or later, as Ansible's modules need) with the
standard library only: it imports nothing of gpucluster. It does not decide anything either: gpucluster plans every command (gpucluster.verify.probes)
and judges what they printed (gpucluster.verify.checks). What it adds is what a playbook task cannot
do well: run one stage's jobs side by side, stop a job that runs past its bound, and cancel every
job of this run at the end, whatever happened.

Argument: the payload as base64 JSON, `{"job_name": str, "stages": [[job, ...], ...],
"found": {node: path of all_reduce_perf or ""}}`, each job `{"id", "argv", "timeout", "needs"}`.
Prints `{"jobs": {id: result}, "cleanup": str}` as JSON.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

# The token of a job's argv replaced by the path of nccl-tests' all_reduce_perf on its nodes.
ALL_REDUCE_PERF = "{all_reduce_perf}"
PARALLEL = 32
OUTPUT_LIMIT = 200_000
# After scancel, how long the jobs of this run may take to leave the queue. The text "no job left"
# is what gpucluster.verify.checks.check_cleanup looks for.
CLEANUP_SECONDS = 30


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    text = data.decode(errors="replace") if isinstance(data, bytes) else data
    return text[-OUTPUT_LIMIT:]


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the job's process group (srun cancels its job on it), SIGKILL if it lingers."""
    for sig, grace in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def with_tool(job: dict[str, Any], found: dict[str, str]) -> tuple[list[str] | None, str | None]:
    """The job's argv with all_reduce_perf's path put in, or why it cannot run."""
    needs = list(job.get("needs") or [])
    argv = [str(word) for word in job["argv"]]
    if not needs:
        return argv, None
    paths = {node: found.get(node) or "" for node in needs}
    missing = [node for node, path in paths.items() if not path]
    if missing:
        return None, f"all_reduce_perf (nccl-tests) not found on {', '.join(missing)}"
    if len(set(paths.values())) != 1:
        where = ", ".join(f"{node}: {path}" for node, path in paths.items())
        return None, f"all_reduce_perf is at different paths ({where})"
    path = next(iter(paths.values()))
    return [path if word == ALL_REDUCE_PERF else word for word in argv], None


def run_job(job: dict[str, Any], found: dict[str, str]) -> dict[str, Any]:
    argv, skipped = with_tool(job, found)
    if argv is None:
        return {"skipped": skipped}
    started = time.monotonic()
    # A session of its own: on timeout the whole group (runuser, srun) is signalled.
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    timed_out = False
    try:
        out, err = proc.communicate(timeout=float(job["timeout"]))
    except subprocess.TimeoutExpired:
        timed_out = True
        _stop(proc)
        out, err = proc.communicate()
    return {
        "rc": None if timed_out else proc.returncode,
        "stdout": _text(out),
        "stderr": _text(err),
        "seconds": round(time.monotonic() - started, 1),
        "timed_out": timed_out,
    }


def cleanup(job_name: str) -> str:
    """Cancel every job of this run (all have its unique name), then wait until none is queued."""
    try:
        subprocess.run(["scancel", f"--name={job_name}"], capture_output=True, timeout=60, check=False)
        deadline = time.monotonic() + CLEANUP_SECONDS
        while True:
            queue = subprocess.run(
                ["squeue", "--noheader", f"--name={job_name}", "--format=%i %N"],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            if queue.returncode != 0:
                lines = queue.stderr.strip().splitlines() or [f"exit {queue.returncode}"]
                return f"squeue failed: {lines[-1][:300]}"
            # Job id and the nodes it still holds (none while pending).
            left = [line.split() for line in queue.stdout.splitlines() if line.strip()]
            if not left or time.monotonic() > deadline:
                break
            time.sleep(1)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"cleanup failed: {exc}"
    if not left:
        return "no job left"
    # A job that cannot end is held where its nodes do not answer: name them (`on NODES`).
    jobs = " ".join(fields[0] for fields in left)
    nodes = ",".join(sorted({fields[1] for fields in left if len(fields) > 1}))
    return f"jobs still queued: {jobs}" + (f" on {nodes}" if nodes else "")


def main(argv: list[str]) -> int:
    payload = json.loads(base64.b64decode(argv[1]))
    found = {str(k): str(v or "") for k, v in (payload.get("found") or {}).items()}
    results: dict[str, Any] = {}
    try:
        for stage in payload["stages"]:
            with ThreadPoolExecutor(max_workers=max(1, min(PARALLEL, len(stage)))) as pool:
                outcomes = list(pool.map(lambda job: run_job(job, found), stage))
            for index, job in enumerate(stage):
                results[job["id"]] = outcomes[index]
    finally:
        cleaned = cleanup(payload["job_name"])
    json.dump({"jobs": results, "cleanup": cleaned}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
