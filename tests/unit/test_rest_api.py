"""cluster.slurm.rest_api on the hosts: the JWT lines of slurm.conf, where each key holder keeps
the key, the OpenAPI plugins, what a change needs, and how the trial treats auth/jwt."""

from __future__ import annotations

import copy
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucluster.changes.plan import plan
from gpucluster.layers import load_cluster
from gpucluster.model.base import Update
from gpucluster.rendering import render_files
from gpucluster.slurm.restapi import rest_api_settings
from gpucluster.trial import slurmctld as trial
from tests.conftest import SMALL_CLUSTER, SMALL_HOSTS, InventoryFactory

BASE = yaml.safe_load(textwrap.dedent(SMALL_CLUSTER))
# The small inventory with a login host and a host of its own for slurmdbd.
HOSTS = SMALL_HOSTS.replace(
    "    all:\n      children:\n",
    "    all:\n      children:\n        login:\n          hosts:\n            login01:\n"
    "        dbd:\n          hosts:\n            dbd01:\n",
)


def inventory(inventories: InventoryFactory, name: str = "inv", **slurm: Any) -> Path:
    data = copy.deepcopy(BASE)
    data["cluster"]["slurm"].update(slurm)
    if len(slurm.get("controller", [])) > 1:
        # Both controllers mount the filesystem of the shared state.
        mount = "/" + slurm["state_save_location"].strip("/").split("/")[0]
        data["cluster"]["storage"] = [
            {"name": "home", "mount": "/home", "site_managed": True, "home": True},
            {"name": "slurm-state", "mount": mount, "site_managed": True, "hosts": slurm["controller"]},
        ]
    text = yaml.safe_dump(data, sort_keys=False)
    # A host of hosts.yml must have a part in cluster.yml: login01 and dbd01 only where named.
    hosts = HOSTS
    for host, block in (("login01", "        login:\n          hosts:\n            login01:\n"),
                        ("dbd01", "        dbd:\n          hosts:\n            dbd01:\n")):  # fmt: skip
        if host not in text:
            hosts = hosts.replace(block, "")
    return inventories.make(hosts, text, name=name)


def auth_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("AuthAlt")]


def test_slurm_conf_accepts_jwt_with_the_key_in_state_save_location(inventories: InventoryFactory) -> None:
    shared = {"state_save_location": "/shared/ctld", "controller": ["head", "login01"], "login": ["login01"]}
    cluster = load_cluster(inventory(inventories, rest_api={"host": "login01"}, **shared))
    assert auth_lines(render_files(cluster)["slurm/slurm.conf"]) == [
        "AuthAltTypes=auth/jwt",
        "AuthAltParameters=jwt_key=/shared/ctld/jwt_hs256.key",
    ]


def test_no_jwt_without_the_rest_api(inventories: InventoryFactory) -> None:
    cluster = load_cluster(inventory(inventories))
    assert auth_lines(render_files(cluster)["slurm/slurm.conf"]) == []
    assert rest_api_settings(cluster) is None


def test_each_key_holder_and_where_it_keeps_the_key(inventories: InventoryFactory) -> None:
    cluster = load_cluster(
        inventory(inventories, rest_api={"host": "head", "port": 7000}, accounting={"host": "dbd01"})
    )
    assert rest_api_settings(cluster) == {
        "host": "head",
        "port": 7000,
        "listen": "0.0.0.0:7000",
        "openapi_plugins": ["openapi/v0.0.38", "openapi/dbv0.0.38"],
        "data_parser": None,
        "url_version": "v0.0.38",
        "key_host": "head",
        # slurmdbd's host is no controller: it has no StateSaveLocation, so a copy of its own.
        "key_paths": {
            "head": "/var/lib/slurm/slurmctld/jwt_hs256.key",
            "dbd01": "/var/lib/slurm/jwt_hs256.key",
        },
    }


def test_a_controller_running_slurmdbd_reads_the_shared_key(inventories: InventoryFactory) -> None:
    settings = rest_api_settings(load_cluster(inventory(inventories, rest_api={"host": "head"})))
    assert settings is not None
    assert settings["key_paths"] == {"head": "/var/lib/slurm/slurmctld/jwt_hs256.key"}


def test_openapi_plugins_follow_accounting_and_the_release(inventories: InventoryFactory) -> None:
    no_dbd = load_cluster(inventory(inventories, "no-dbd", rest_api={"host": "head"}, accounting=None))
    assert (rest_api_settings(no_dbd) or {})["openapi_plugins"] == ["openapi/v0.0.38"]
    # 23.11 and later: unversioned plugins, the API version is the data parser's.
    for version, parser in (("24.11", "v0.0.42"), ("26.05", "v0.0.44")):
        newer = rest_api_settings(
            load_cluster(inventory(inventories, version, rest_api={"host": "head"}, version=version))
        )
        assert newer is not None
        assert newer["openapi_plugins"] == ["openapi/slurmctld", "openapi/slurmdbd"]
        assert (newer["data_parser"], newer["url_version"]) == (f"data_parser/{parser}", parser)


def test_turning_the_api_on_restarts_and_moving_it_restarts_only_slurmrestd(
    inventories: InventoryFactory,
) -> None:
    off = load_cluster(inventory(inventories, "off"))
    on = load_cluster(inventory(inventories, "on", rest_api={"host": "head"}, login=["login01"]))
    moved = load_cluster(
        inventory(inventories, "moved", rest_api={"host": "login01", "port": 7000}, login=["login01"])
    )
    assert {c.path: c.update for c in plan(off, on) if "rest_api" in c.path} == {
        "cluster.slurm.rest_api": Update.RESTART
    }
    assert {c.path: c.update for c in plan(on, moved)} == {
        "cluster.slurm.rest_api.host": Update.SERVICE,
        "cluster.slurm.rest_api.port": Update.SERVICE,
    }


CONF = "ClusterName=x\nAuthAltTypes=auth/jwt\nAuthAltParameters=jwt_key=/shared/ctld/jwt_hs256.key\nNodeName=n1\n"


def test_trial_gives_slurmctld_a_throwaway_key_in_its_private_state(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trial, "jwt_plugin_installed", lambda: True)
    conf, key, notes = trial._jwt(CONF)
    assert key == "/var/lib/slurm/slurmctld/jwt_hs256.key"
    assert f"AuthAltParameters=jwt_key={key}\n" in conf and "/shared" not in conf and notes == []
    assert auth_lines(trial._slurmdbd_conf(key)) == [
        "AuthAltTypes=auth/jwt",
        f"AuthAltParameters=jwt_key={key}",
    ]


def test_trial_without_the_plugin_leaves_jwt_out_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trial, "jwt_plugin_installed", lambda: False)
    conf, key, notes = trial._jwt(CONF)
    assert conf == "ClusterName=x\nNodeName=n1\n" and key is None
    assert notes == [trial.JWT_NOT_TRIED]
    assert auth_lines(trial._slurmdbd_conf(None)) == []


def test_trial_leaves_a_config_without_jwt_alone() -> None:
    assert trial._jwt("ClusterName=x\n") == ("ClusterName=x\n", None, [])
