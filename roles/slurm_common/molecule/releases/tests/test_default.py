"""playbooks/slurm.yml on an older release (GPUCLUSTER_SLURM_RELEASE): every daemon is that
release, pinned; the node runs a tenant's GPU job submitted on the login host; accounting holds
the tenant; slurmrestd answers a token with the release's API version."""

import json
import os
import shlex

import testinfra

RELEASE = os.environ["GPUCLUSTER_SLURM_RELEASE"]
NODE = testinfra.get_host("podman://gcrel02")
API = {"22.05": "v0.0.38", "24.11": "v0.0.42"}[RELEASE]
REQUEST = """
import sys, urllib.request, urllib.error
request = urllib.request.Request(sys.argv[1], headers=dict(h.split(": ", 1) for h in sys.argv[2:]))
try:
    with urllib.request.urlopen(request, timeout=20) as answer:
        print(answer.status); print(answer.read().decode())
except urllib.error.HTTPError as error:
    print(error.code); print(error.read().decode(errors="replace"))
"""


def get(host, path, *headers):
    out = host.check_output(
        " ".join(shlex.quote(a) for a in ["python3", "-c", REQUEST, f"http://127.0.0.1:6820{path}", *headers])
    )
    status, _, body = out.partition("\n")
    return int(status), body


def test_every_daemon_is_the_release_and_its_packages_are_pinned(host):
    for program in ("slurmctld", "slurmdbd", "sinfo"):
        assert host.check_output(f"{program} -V").split()[-1].startswith(f"{RELEASE}."), program
    assert NODE.check_output("slurmd -V").split()[-1].startswith(f"{RELEASE}.")
    pin = host.file("/etc/apt/preferences.d/gpucluster-slurm.pref").content_string
    assert f"Pin: version {RELEASE}.*" in pin


def test_the_node_runs_a_tenants_gpu_job_submitted_on_the_login_host(host):
    assert host.check_output("sinfo --noheader --Node --format='%N %T %G'").split() == [
        "gcrel02",
        "idle",
        "gpu:h100:2(S:0)",  # gres.conf binds the GPUs to the node's one socket (Cores=)
    ]
    out = host.check_output(
        "runuser -u alice -- srun --gres=gpu:h100:1 --chdir=/tmp sh -c 'hostname; echo $CUDA_VISIBLE_DEVICES'"
    )
    assert out.split() == ["gcrel02", "0"]


def test_accounting_holds_the_tenant(host):
    assoc = host.check_output(
        "sacctmgr --noheader --parsable2 show assoc format=account,user where user=alice"
    )
    assert assoc.split() == ["team-a|alice"]


def test_slurmrestd_answers_a_token_with_the_release_api(host):
    assert get(host, f"/slurm/{API}/ping")[0] == 401
    token = host.check_output("scontrol token lifespan=120").removeprefix("SLURM_JWT=").strip()
    status, body = get(host, f"/slurm/{API}/nodes", "X-SLURM-USER-NAME: root", f"X-SLURM-USER-TOKEN: {token}")
    assert status == 200, body
    assert [node["name"] for node in json.loads(body)["nodes"]] == ["gcrel02"]


def test_the_node_fetched_its_configuration(host):
    assert not NODE.file("/etc/slurm/slurm.conf").exists
    assert (
        NODE.file("/run/slurm/conf/slurm.conf").content_string
        == host.file("/etc/slurm/slurm.conf").content_string
    )
