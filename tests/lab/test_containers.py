"""Containers in jobs, as a lab user (cluster.slurm.containers): an OCI bundle run by Slurm's own
OCI support with rootless crun (`srun --container`, `sbatch --container`), and, when Pyxis and
enroot sources are in the directory GPUCLUSTER_PYXIS_SOURCES names, `srun --container-image`
with a local squashfs image, a named writable container reused across steps, site and job mounts,
and `sbatch --container-image`. About 40 s with Pyxis (the OCI part alone about 15 s).

The bundle and the image are built as alice on the login node from a small root filesystem of the
node's own programs, in /scratch (shared by every lab host), so no registry is needed.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpucluster.model.containers import archive_name

from .conftest import Lab

pytestmark = pytest.mark.lab

USER = "alice"
LOGIN = "login01"
WORK = "/scratch/containers-test"
ROOTFS = f"{WORK}/rootfs"
BUNDLE = f"{WORK}/bundle"
IMAGE = f"{WORK}/image.sqsh"
MARKER = "inside the gpucluster test image"
# Programs the jobs run inside the containers, with the libraries they need.
PROGRAMS = ("sh", "cat", "id", "echo", "ls", "touch", "hostname", "uname", "env")

# A root filesystem of the node's own programs; a rootless OCI bundle of it (crun spec --rootless,
# without the cgroup mount, which a rootless container cannot have here, without a terminal: Slurm
# gives the step no tty, and without crun's own hostname: the job keeps the node's, and a podman
# lab node may not set one); and a squashfs image of it for enroot.
BUILD = f"""
set -eu
rm -rf {WORK}/rootfs {WORK}/bundle {IMAGE}
mkdir -p {ROOTFS}/usr/bin {ROOTFS}/usr/lib {ROOTFS}/usr/lib64 {ROOTFS}/etc {ROOTFS}/tmp {ROOTFS}/proc {ROOTFS}/dev {ROOTFS}/sys {ROOTFS}/mnt
ln -s usr/bin {ROOTFS}/bin; ln -s usr/lib {ROOTFS}/lib; ln -s usr/lib64 {ROOTFS}/lib64
for program in {" ".join(PROGRAMS)}; do
  path=/usr/bin/$program
  cp -L "$path" {ROOTFS}/usr/bin/
  for lib in $(ldd "$path" | grep -o '/[^ ]*'); do
    mkdir -p {ROOTFS}$(dirname $(realpath -s $lib))
    cp -L $lib {ROOTFS}$(realpath -s $lib)
  done
done
echo "root:x:0:0:root:/root:/bin/sh" > {ROOTFS}/etc/passwd
echo "root:x:0:" > {ROOTFS}/etc/group
echo "{MARKER}" > {ROOTFS}/etc/gpucluster-test
mkdir -p {BUNDLE}
cp -a {ROOTFS} {BUNDLE}/rootfs
cd {BUNDLE}
crun spec --rootless
jq 'del(.hostname) | .mounts |= map(select(.type != "cgroup")) | .process.terminal = false' config.json > config.json.new
mv config.json.new config.json
mksquashfs {ROOTFS} {IMAGE} -quiet -noappend -all-root
"""


@pytest.fixture(scope="module")
def images(lab_env: Lab) -> Iterator[None]:
    lab_env.ok("mkdir", "-p", WORK)
    lab_env.ok("chown", f"{USER}:", WORK)
    lab_env.ok("sh", "-c", BUILD, user=USER, host=LOGIN)
    yield
    lab_env.sh("rm", "-rf", WORK)


def run(lab: Lab, *command: str) -> str:
    """A command as the lab user on the login node, its output (stdout and stderr)."""
    proc = lab.sh(*command, user=USER, host=LOGIN, timeout=180)
    assert proc.returncode == 0, (
        f"{shlex.join(command)} failed ({proc.returncode}): {proc.stdout}{proc.stderr}"
    )
    return proc.stdout + proc.stderr


def batch(lab: Lab, name: str, *options: str, script: str) -> str:
    """sbatch as the lab user; waits for the job and returns its output file."""
    output = f"{WORK}/{name}.out"
    job = (
        run(lab, "sbatch", "--parsable", f"--output={output}", *options, "--wrap", script)
        .strip()
        .split(";")[0]
    )
    lab.wait(lambda: lab.ok("squeue", "-h", "-j", job).strip() == "", 120, f"batch job {job} to end")
    state = lab.ok("sacct", "-n", "-X", "-P", "-j", job, "-o", "State,ExitCode").strip()
    text = lab.ok("cat", output, host=LOGIN)
    assert state.startswith("COMPLETED"), f"job {job}: {state}\n{text}"
    return text


def test_an_oci_bundle_runs_as_the_user_with_srun_and_sbatch(lab_cluster: Lab, images: None) -> None:
    uid = run(lab_cluster, "id", "-u").strip()
    # Inside the bundle's root filesystem; root there is the user outside (the bundle's user
    # namespace maps container uid 0 to the job's uid, and nothing else).
    script = "cat /etc/gpucluster-test; cat /proc/self/uid_map"
    out = run(lab_cluster, "srun", f"--container={BUNDLE}", "sh", "-c", script)
    assert MARKER in out and ["0", uid, "1"] in [line.split() for line in out.splitlines()], out

    text = batch(lab_cluster, "oci-batch", f"--container={BUNDLE}", script=script)
    assert MARKER in text and ["0", uid, "1"] in [line.split() for line in text.splitlines()], text


def pyxis_sources() -> Path | None:
    """The directory of Pyxis/enroot sources the lab was given, if it holds every archive."""
    named = os.environ.get("GPUCLUSTER_PYXIS_SOURCES", "")
    return Path(named) if named else None


def require_pyxis(lab: Lab) -> None:
    sources = pyxis_sources()
    pyxis = lab.cluster.spec.slurm.containers.pyxis if lab.cluster.spec.slurm.containers else None
    assert pyxis is not None, "the lab inventory sets no cluster.slurm.containers.pyxis"
    files = [
        archive_name("pyxis", pyxis.pyxis_version),
        archive_name("enroot", pyxis.enroot_version),
        archive_name("makeself", pyxis.makeself_version),
    ]
    if sources is None or not all((sources / name).is_file() for name in files):
        pytest.skip(f"skipped: no pyxis/enroot sources in {sources or '$GPUCLUSTER_PYXIS_SOURCES (unset)'}")
    # With sources, the lab must have built Pyxis: srun offers its options.
    help_text = run(lab, "srun", "--help")
    assert "--container-image" in help_text, (
        f"sources are in {sources} but srun on {LOGIN} lists no --container-image: "
        "bring the lab up with GPUCLUSTER_PYXIS_SOURCES set"
    )


def test_pyxis_runs_a_squashfs_image_as_the_user(lab_cluster: Lab, images: None) -> None:
    require_pyxis(lab_cluster)
    uid = run(lab_cluster, "id", "-u").strip()
    out = run(
        lab_cluster, "srun", f"--container-image={IMAGE}", "sh", "-c", "cat /etc/gpucluster-test; id -u"
    )
    assert MARKER in out and uid in out.split(), out


def test_pyxis_named_writable_container_is_kept_between_steps_and_mounts_are_seen(
    lab_cluster: Lab, images: None
) -> None:
    require_pyxis(lab_cluster)
    lab_cluster.ok("sh", "-c", f"echo from-the-host > {WORK}/mounted.txt", user=USER, host=LOGIN)
    steps = (
        f"srun --container-image={IMAGE} --container-name=kept --container-writable "
        "sh -c 'echo written-in-step-one > /kept.txt' && "
        "srun --container-name=kept cat /kept.txt && "
        f"srun --container-image={IMAGE} --container-mounts={WORK}:/mnt/work cat /mnt/work/mounted.txt && "
        # The site's mount (cluster.slurm.containers.pyxis.mounts, /scratch) in every container.
        f"srun --container-image={IMAGE} cat {WORK}/mounted.txt"
    )
    out = run(lab_cluster, "salloc", "--nodes=1", "--time=5", "sh", "-c", steps)
    assert "written-in-step-one" in out, out
    assert out.count("from-the-host") == 2, out


def test_pyxis_batch_script_runs_inside_the_image(lab_cluster: Lab, images: None) -> None:
    require_pyxis(lab_cluster)
    text = batch(lab_cluster, "pyxis-batch", f"--container-image={IMAGE}", script="cat /etc/gpucluster-test")
    assert MARKER in text, text
