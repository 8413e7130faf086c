"""The REST API's lines in the files the roles template: slurmdbd.conf (slurm_dbd) and the drop-in
of Debian's slurmrestd unit (slurm_restd)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import jinja2

from tests.conftest import REPO

from .conftest import ROLES

KEY = "/shared/slurmctld/jwt_hs256.key"


def template(role: str, name: str, **variables: Any) -> str:
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(ROLES / role / "templates"),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        keep_trailing_newline=True,
    )
    return environment.get_template(name).render(ansible_managed="managed", **variables)


def slurmdbd_conf(jwt_key: str, slurm_user: str = "slurm") -> str:
    return template(
        "slurm_dbd",
        "slurmdbd.conf.j2",
        inventory_hostname="ctl02",
        slurm_dbd_port=6819,
        slurm_dbd_mysql_loopback=False,
        slurm_dbd_db_name="slurm_acct_db",
        slurm_dbd_db_user="slurm",
        slurm_dbd_db_password="secret",
        slurm_dbd_purge_after="",
        slurm_dbd_jwt_key=jwt_key,
        slurm_dbd_pid_file="/run/slurmdbd/slurmdbd.pid",
        slurm_dbd_slurm_user=slurm_user,
    )


def test_slurmdbd_accepts_jwt_with_the_controllers_key() -> None:
    lines = slurmdbd_conf(KEY).splitlines()
    assert [line for line in lines if line.startswith("Auth")] == [
        "AuthType=auth/munge",
        "AuthAltTypes=auth/jwt",
        f"AuthAltParameters=jwt_key={KEY}",
    ]


def test_slurmdbd_runs_as_slurmctld_s_slurm_user() -> None:
    """slurmdbd.conf(5): slurmdbd's SlurmUser has slurmctld's UID (cluster.slurm.slurm_user)."""
    assert "SlurmUser=slurm" in slurmdbd_conf("").splitlines()
    assert "SlurmUser=root" in slurmdbd_conf("", "root").splitlines()


def test_slurmdbd_has_no_jwt_without_the_rest_api() -> None:
    assert [line for line in slurmdbd_conf("").splitlines() if line.startswith("Auth")] == [
        "AuthType=auth/munge"
    ]


def dropin(plugins: list[str]) -> list[str]:
    settings = {"listen": "0.0.0.0:6820", "openapi_plugins": plugins}
    text = template(
        "slurm_restd",
        "slurmrestd.conf.j2",
        slurm_restd_settings=settings,
        slurm_restd_user="slurmrestd",
        slurm_restd_group="slurmrestd",
        slurm_restd_threads=20,
    )
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def test_slurmrestd_runs_unprivileged_on_tcp_with_jwt_only() -> None:
    assert dropin(["openapi/v0.0.38", "openapi/dbv0.0.38"]) == [
        "[Service]",
        "User=slurmrestd",
        "Group=slurmrestd",
        "NoNewPrivileges=true",
        # Nothing from /etc/default/slurmrestd, and Debian's socket with rest_auth/local is gone.
        "EnvironmentFile=",
        "Environment=SLURM_JWT=daemon",
        "ExecStart=",
        "ExecStart=/usr/sbin/slurmrestd -a rest_auth/jwt -s openapi/v0.0.38,openapi/dbv0.0.38 -t 20 0.0.0.0:6820",
    ]


def test_slurmrestd_loads_its_default_plugins_where_none_are_named() -> None:
    assert dropin([])[-1] == "ExecStart=/usr/sbin/slurmrestd -a rest_auth/jwt -t 20 0.0.0.0:6820"


def test_slurmdbd_writes_its_pid_where_the_release_s_unit_lets_it() -> None:
    assert "PidFile=/run/slurmdbd/slurmdbd.pid" in slurmdbd_conf(KEY).splitlines()


def test_without_the_rest_api_the_role_only_retires(tmp_path: Path) -> None:
    """A cluster without cluster.slurm.rest_api: the playbook's REST API play still runs the role on
    the controllers and login hosts, to stop a slurmrestd it started there before. Its argument
    check templated the check path from the settings that are none then, and the play failed (seen
    bringing up a lab whose inventory has no REST API)."""
    play = tmp_path / "play.yml"
    play.write_text(
        "- name: No REST API\n  hosts: localhost\n  connection: local\n  gather_facts: false\n"
        f'  vars:\n    ansible_python_interpreter: "{{{{ ansible_playbook_python }}}}"\n'
        f"    slurm_restd_settings: null\n    slurm_restd_dropin: {tmp_path}/absent.conf\n"
        "  roles:\n    - role: gpucluster.cluster.slurm_restd\n"
    )
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", str(play)],
        cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Look for this role's drop-in" in proc.stdout and "failed=0" in proc.stdout
