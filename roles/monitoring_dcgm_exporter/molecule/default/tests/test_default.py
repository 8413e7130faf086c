"""monitoring_dcgm_exporter on the Molecule containers (settings rendered from
molecule/inventory/moldcgm, a stand-in for NVIDIA's package): the job mapping's prolog and epilog
where slurm.conf names them, writing and clearing one file per GPU; dcgm-exporter enabled on both
nodes, running with the rendered settings where the driver counts as loaded (gcdcgm01) and not
started where it is not (gcdcgm02)."""

from __future__ import annotations

import os
from pathlib import Path

MAPPING = "/var/lib/dcgm-exporter/job-mapping"
PROLOG = "/usr/local/sbin/gpucluster-dcgm-job-prolog"
EPILOG = "/usr/local/sbin/gpucluster-dcgm-job-epilog"
RENDERED = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "build"


def test_slurm_conf_names_the_scripts_the_role_installed(host) -> None:
    conf = (RENDERED / "slurm" / "slurm.conf").read_text()
    assert f"Prolog={PROLOG}\n" in conf and f"Epilog={EPILOG}\n" in conf
    for path, kind in ((PROLOG, "prolog"), (EPILOG, "epilog")):
        script = host.file(path)
        assert script.mode == 0o755 and script.user == "root"
        assert (
            script.content_string == (RENDERED / "monitoring" / "dcgm" / f"job-mapping-{kind}.sh").read_text()
        )
    assert host.file(MAPPING).is_directory


def test_the_prolog_names_each_gpus_job_and_the_epilog_clears_only_its_own(host) -> None:
    host.check_output(f"rm -f {MAPPING}/*")
    host.check_output(f"env SLURM_JOB_ID=42 SLURM_JOB_GPUS=0,1 {PROLOG}")
    assert host.file(f"{MAPPING}/0").content_string == "42\n"
    assert host.file(f"{MAPPING}/1").content_string == "42\n"
    # Another job's epilog leaves job 42's files; job 42's removes them.
    host.check_output(f"env SLURM_JOB_ID=43 SLURM_JOB_GPUS=0 {EPILOG}")
    assert host.file(f"{MAPPING}/0").exists
    host.check_output(f"env SLURM_JOB_ID=42 SLURM_JOB_GPUS=0,1 {EPILOG}")
    assert not host.file(f"{MAPPING}/0").exists and not host.file(f"{MAPPING}/1").exists
    # A job without GPUs: nothing to write, and success (a failing Prolog drains the node).
    assert host.run(f"env SLURM_JOB_ID=44 {PROLOG}").rc == 0
    assert host.check_output(f"ls -A {MAPPING}") == ""


def test_the_unit_reads_the_rendered_settings(host) -> None:
    settings = host.file("/etc/default/dcgm-exporter")
    assert settings.content_string == (RENDERED / "monitoring" / "dcgm" / "dcgm-exporter.env").read_text()
    shown = host.check_output("systemctl show nvidia-dcgm-exporter.service -p EnvironmentFiles -p ExecStart")
    assert "/etc/default/dcgm-exporter" in shown
    assert "/usr/bin/dcgm-exporter -f /etc/dcgm-exporter/default-counters.csv" in shown


def test_enabled_on_both_running_only_where_the_driver_is_loaded(host) -> None:
    service = host.service("nvidia-dcgm-exporter.service")
    assert service.is_enabled
    if host.check_output("hostname") == "gcdcgm01":
        assert service.is_running
        started = host.file("/run/dcgm-exporter-started").content_string
        assert "args: -f /etc/dcgm-exporter/default-counters.csv" in started
        assert "DCGM_EXPORTER_LISTEN=:9400\n" in started
        assert f"DCGM_HPC_JOB_MAPPING_DIR={MAPPING}\n" in started
    else:
        assert not service.is_running
        assert not host.file("/run/dcgm-exporter-started").exists
