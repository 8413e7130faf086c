"""monitoring_node_exporter on the Molecule container: node-exporter on its port, the collector's
timer runs it, and node-exporter serves what it wrote (no Slurm daemons here: no node lines, the
controllers not in control, slurmdbd and slurmrestd unreachable)."""

from __future__ import annotations

import time


def test_node_exporter_serves_the_collectors_metrics(host) -> None:
    assert host.service("prometheus-node-exporter").is_running
    assert host.service("gpucluster-slurm-state.timer").is_enabled
    deadline = time.monotonic() + 60
    while True:
        metrics = host.check_output("curl -sS -m 5 http://localhost:9100/metrics")
        if "gpucluster_slurmdbd_up" in metrics:
            break
        assert time.monotonic() < deadline, "node-exporter never served the collector's file"
        time.sleep(2)
    assert (
        'gpucluster_slurm_controller_in_control{controller_role="primary",slurm_controller="ctl01"} 0'
        in metrics
    )
    assert "gpucluster_slurmdbd_up 0" in metrics
    assert "gpucluster_slurmrestd_up 0" in metrics
