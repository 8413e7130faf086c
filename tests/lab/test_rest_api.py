"""The REST API (cluster.slurm.rest_api: slurmrestd on ctl01:6820 with JWT), used from the login
node as automation would: tokens from `scontrol token`, the target release's API version (v0.0.38
on 22.05, v0.0.42 on 24.11, v0.0.44 on 26.05)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from .conftest import Lab, plain_gres

pytestmark = pytest.mark.lab

LOGIN = "login01"


def api(lab: Lab) -> str:
    return f"http://ctl01:6820/slurm/{lab.cluster.release.rest_api.url_version}"


# The lab image has no curl: the login node's python3 makes the request (status line, then body).
REQUEST = """
import sys, urllib.request, urllib.error
method, url, body = sys.argv[1], sys.argv[2], sys.argv[3]
headers = dict(h.split(": ", 1) for h in sys.argv[4:])
headers["Content-Type"] = "application/json"
request = urllib.request.Request(url, method=method, data=body.encode() or None, headers=headers)
try:
    with urllib.request.urlopen(request, timeout=30) as answer:
        print(answer.status); print(answer.read().decode())
except urllib.error.HTTPError as error:
    print(error.code); print(error.read().decode(errors="replace"))
"""


SCRIPT = "#!/bin/bash\nsleep 300\n"


def token(lab: Lab, user: str) -> str:
    out = lab.ok("scontrol", "token", "lifespan=300", user=user, host=LOGIN).strip()
    assert out.startswith("SLURM_JWT="), out
    return out.removeprefix("SLURM_JWT=")


def call(
    lab: Lab, method: str, path: str, user: str | None = None, jwt: str | None = None, body: Any = None
) -> tuple[int, dict[str, Any]]:
    """One request from the login node as `user` (the Unix user too); no token when `jwt` is None."""
    headers = [] if jwt is None else [f"X-SLURM-USER-NAME: {user}", f"X-SLURM-USER-TOKEN: {jwt}"]
    payload = "" if body is None else json.dumps(body)
    out = lab.ok("python3", "-c", REQUEST, method, api(lab) + path, payload, *headers, user=user, host=LOGIN)
    status, _, text = out.partition("\n")
    try:
        data = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError:
        data = {"raw": text}
    return int(status), data


def job_state(lab: Lab, job: int) -> str:
    return lab.ok("squeue", "-h", "-j", str(job), "-o", "%T").strip()


def submit_as(lab: Lab, user: str, jwt: str) -> int:
    job: dict[str, Any] = {
        "name": "rest-api-test",
        "current_working_directory": f"/home/{user}",
        "standard_output": "/dev/null",
    }
    if lab.cluster.release.rest_api.url_version == "v0.0.38":
        body: dict[str, Any] = {"script": SCRIPT, "job": {**job, "environment": {"PATH": "/usr/bin:/bin"}}}
    else:
        # From data_parser v0.0.40 on: the script inside the job, the environment a list.
        body = {"job": {**job, "script": SCRIPT, "environment": ["PATH=/usr/bin:/bin"]}}
    status, data = call(lab, "POST", "/job/submit", user, jwt, body)
    assert status == 200 and not data.get("errors"), data
    return int(data["job_id"])


def test_a_token_lists_the_nodes_with_their_gpus(lab_cluster: Lab) -> None:
    status, data = call(lab_cluster, "GET", "/nodes", "alice", token(lab_cluster, "alice"))
    assert status == 200, data
    gres = {node["name"]: plain_gres(node["gres"]) for node in data["nodes"]}
    assert gres == {f"gpu0{i}": "gpu:h100:8" for i in range(1, 5)}


def test_a_job_submitted_through_the_api_runs_as_its_user(lab_cluster: Lab) -> None:
    job = submit_as(lab_cluster, "alice", token(lab_cluster, "alice"))
    lab_cluster.wait(lambda: job_state(lab_cluster, job) == "RUNNING", 60, f"job {job} to run")
    owner = lab_cluster.ok("squeue", "-h", "-j", str(job), "-o", "%u").strip()
    assert owner == "alice"
    lab_cluster.ok("scancel", str(job))


def test_requests_without_a_token_or_with_another_users_token_are_refused(lab_cluster: Lab) -> None:
    status, _ = call(lab_cluster, "GET", "/nodes", "alice")
    assert status == 401
    # bob's token presented as alice: slurmctld checks the token's user, not the header's.
    status, data = call(lab_cluster, "GET", "/jobs", "alice", token(lab_cluster, "bob"))
    assert status in (401, 403) or data.get("errors"), data


def test_one_users_token_cannot_cancel_another_users_job(lab_cluster: Lab) -> None:
    job = submit_as(lab_cluster, "alice", token(lab_cluster, "alice"))
    lab_cluster.wait(lambda: job_state(lab_cluster, job) in ("RUNNING", "PENDING"), 30, f"job {job} queued")
    status, data = call(lab_cluster, "DELETE", f"/job/{job}", "bob", token(lab_cluster, "bob"))
    # v0.0.38 refuses with an error; v0.0.40 and later answer 200 with the job's own error status.
    refused = (
        status != 200
        or data.get("errors")
        or any(entry.get("error", {}).get("code") for entry in data.get("status", []))
    )
    assert refused, data
    assert job_state(lab_cluster, job) in ("RUNNING", "PENDING")
    # Its owner can.
    status, data = call(lab_cluster, "DELETE", f"/job/{job}", "alice", token(lab_cluster, "alice"))
    assert status == 200 and not data.get("errors"), data
    assert not any(entry.get("error", {}).get("code") for entry in data.get("status", [])), data
    lab_cluster.wait(lambda: job_state(lab_cluster, job) == "", 30, f"job {job} to leave the queue")
