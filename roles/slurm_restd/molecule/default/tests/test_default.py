"""slurm_restd on the Molecule container: gcrest01 runs slurmctld, slurmdbd and slurmrestd; tokens
from `scontrol token` open the API, requests without one or with a forged one are refused."""

import json
import shlex

KEY = "/var/lib/slurm/slurmctld/jwt_hs256.key"
PORT = 6820
# The image has no curl: the request is made by the container's python3 (status, then the body).
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
    url = f"http://127.0.0.1:{PORT}{path}"
    out = host.check_output(" ".join(shlex.quote(a) for a in ["python3", "-c", REQUEST, url, *headers]))
    status, _, body = out.partition("\n")
    return int(status), body


def token(host, user="root"):
    out = host.check_output(f"scontrol token username={user} lifespan=120")
    assert out.startswith("SLURM_JWT=")
    return out.removeprefix("SLURM_JWT=").strip()


def test_slurmrestd_runs_at_boot_as_its_own_unprivileged_user(host):
    service = host.service("slurmrestd")
    assert service.is_running and service.is_enabled
    users = host.check_output("ps -o user= -C slurmrestd").split()
    assert users and set(users) == {"slurmrestd"}
    account = host.user("slurmrestd")
    assert account.uid < 1000 and account.shell == "/usr/sbin/nologin" and account.group == "slurmrestd"


def test_slurmrestd_listens_on_every_ipv4_address_with_jwt_only(host):
    # The socket's owner (ss shows no process names here: podman exec may not read other /proc).
    listeners = host.check_output(
        f"ss --listening --tcp --numeric --extended 'sport = :{PORT}'"
    ).splitlines()[1:]
    assert len(listeners) == 1 and listeners[0].split()[3] == f"0.0.0.0:{PORT}"
    assert f" uid:{host.user('slurmrestd').uid} " in listeners[0]
    command = host.check_output("ps -o args= -C slurmrestd")
    assert "-a rest_auth/jwt" in command and "rest_auth/local" not in command
    # Slurm 26.05 (the scenario's release): the unversioned plugins and one data parser.
    assert "-s openapi/slurmctld,openapi/slurmdbd -d data_parser/v0.0.44" in command
    # No Unix socket with local authentication (Debian's default).
    assert not host.file("/run/slurmrestd.socket").exists


def test_jwt_key_is_private_to_slurm(host):
    key = host.file(KEY)
    assert key.user == "slurm" and key.group == "slurm" and key.mode == 0o600 and key.size == 32


def test_slurmctld_and_slurmdbd_accept_jwt(host):
    assert f"AuthAltParameters=jwt_key={KEY}" in host.file("/etc/slurm/slurm.conf").content_string
    assert "AuthAltTypes=auth/jwt" in host.file("/etc/slurm/slurm.conf").content_string
    # slurmdbd.conf holds the database password: only the JWT lines are read back.
    dbd = host.check_output("grep ^AuthAlt /etc/slurm/slurmdbd.conf").splitlines()
    assert dbd == ["AuthAltTypes=auth/jwt", f"AuthAltParameters=jwt_key={KEY}"]
    config = host.check_output("scontrol show config")
    assert "auth/jwt" in config


def test_a_request_without_a_token_is_refused(host):
    status, _ = get(host, "/slurm/v0.0.44/ping")
    assert status == 401


def test_a_token_from_scontrol_opens_the_api(host):
    headers = ("X-SLURM-USER-NAME: root", f"X-SLURM-USER-TOKEN: {token(host)}")
    status, body = get(host, "/slurm/v0.0.44/ping", *headers)
    assert status == 200, body
    assert json.loads(body)["pings"][0]["hostname"] == "gcrest01"
    status, body = get(host, "/slurm/v0.0.44/nodes", *headers)
    assert status == 200, body
    assert [node["name"] for node in json.loads(body)["nodes"]] == ["gcnode-absent"]
    # Through slurmdbd: the cluster's accounting with the same token.
    status, body = get(host, "/slurmdb/v0.0.44/config", *headers)
    assert status == 200, body


def test_a_forged_token_is_refused(host):
    # A token signed with another key: header and claims of a real one, the signature changed.
    real = token(host)
    head, claims, signature = real.split(".")
    forged = ".".join([head, claims, ("A" if signature[0] != "A" else "B") + signature[1:]])
    status, body = get(
        host, "/slurm/v0.0.44/nodes", "X-SLURM-USER-NAME: root", f"X-SLURM-USER-TOKEN: {forged}"
    )
    assert status != 200, body
    assert "gcnode-absent" not in body
