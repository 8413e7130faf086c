"""The verify row `scrape-targets`: judged from Prometheus' targets API answer."""

from __future__ import annotations

import json

from gpucluster.layers import load_cluster
from gpucluster.verify.checks import Status
from gpucluster.verify.monitoring import expected_targets, judge
from tests.conftest import INVENTORIES


def _answer(targets: list[tuple[str, str, str]]) -> dict[str, object]:
    active = [
        {
            "labels": {"job": job, "instance": address},
            "health": health,
            "lastError": "" if health == "up" else "connection refused",
        }
        for job, address, health in targets
    ]
    return {
        "rc": 0,
        "stdout": json.dumps({"status": "success", "data": {"activeTargets": active}}),
        "stderr": "",
    }


def test_lab_expects_every_host_and_both_controllers() -> None:
    expected = expected_targets(load_cluster(INVENTORIES / "lab"))
    assert ("node", "gpu04:9100") in expected and ("slurmctld_nodes", "ctl02:6817") in expected
    # prometheus, alertmanager, 7 hosts, 5 endpoints x 2 controllers; no DCGM in the lab
    assert len(expected) == 2 + 7 + 5 * 2 and not any(job == "dcgm" for job, _ in expected)


def test_all_up_passes_and_a_down_or_missing_target_fails_naming_its_host() -> None:
    expected = [("node", "gpu01:9100"), ("node", "gpu02:9100"), ("slurmctld_nodes", "ctl01:6817")]
    passed = judge(expected, _answer([(j, a, "up") for j, a in expected]), "login01")
    assert passed.status == Status.PASS and passed.detail == "all 3 scrape targets up"
    failed = judge(
        expected, _answer([("node", "gpu01:9100", "up"), ("node", "gpu02:9100", "down")]), "login01"
    )
    assert failed.status == Status.FAIL
    assert "gpu02:9100: down (connection refused)" in failed.detail
    assert "slurmctld_nodes ctl01:6817: not scraped" in failed.detail
    assert failed.names == ("gpu02", "ctl01")


def test_prometheus_not_answering_fails() -> None:
    result = judge(
        [("node", "a:9100")], {"rc": 7, "stdout": "", "stderr": "curl: (7) Failed to connect"}, "login01"
    )
    assert result.status == Status.FAIL and "login01 does not answer: curl: (7)" in result.detail


def test_a_power_saved_nodes_target_down_passes_and_is_named() -> None:
    expected = [("node", "gpu03:9100"), ("node", "gpu11:9100")]
    answer = _answer([("node", "gpu03:9100", "up"), ("node", "gpu11:9100", "down")])
    stdout = json.loads(str(answer["stdout"]))
    stdout["data"]["activeTargets"][1]["labels"]["power"] = "bmc"
    answer["stdout"] = json.dumps(stdout)
    result = judge(expected, answer, "login01")
    assert result.status == Status.PASS
    assert result.detail == "1 scrape targets up; down while power-saved: gpu11:9100"
    # Unlabelled, the same down target is a fault.
    plain = judge(
        expected, _answer([("node", "gpu03:9100", "up"), ("node", "gpu11:9100", "down")]), "login01"
    )
    assert plain.status == Status.FAIL and plain.names == ("gpu11",)
