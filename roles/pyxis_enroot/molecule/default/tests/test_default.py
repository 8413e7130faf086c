"""pyxis_enroot on the Molecule container. With the archives in GPUCLUSTER_PYXIS_SOURCES: enroot of
the pinned version with its capabilities, spank_pyxis.so in the release's plugin directory, the
rendered files byte for byte, the per-user parents with explicit modes, and enroot running a
squashfs image as a user. Without them: nothing installed (the role said it skipped)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[5]
SOURCES = os.environ.get("GPUCLUSTER_PYXIS_SOURCES", "")
ARCHIVES = ("pyxis-0.24.0.tar.gz", "enroot-4.1.2.tar.gz", "makeself-2.4.5.tar.gz")
HAVE_SOURCES = bool(SOURCES) and all((Path(SOURCES) / name).is_file() for name in ARCHIVES)


@pytest.mark.skipif(HAVE_SOURCES, reason="archives present: the install is checked instead")
def test_without_archives_nothing_is_installed(host) -> None:
    assert not host.file("/usr/bin/enroot").exists
    assert not host.file("/etc/enroot/enroot.conf").exists


needs_sources = pytest.mark.skipif(
    not HAVE_SOURCES,
    reason=f"skipped: no pyxis/enroot sources in {SOURCES or '$GPUCLUSTER_PYXIS_SOURCES (unset)'}",
)


@needs_sources
def test_enroot_is_the_pinned_version_with_its_capabilities(host) -> None:
    assert host.check_output("enroot version").strip() == "4.1.2"
    caps = host.check_output("getcap /usr/bin/enroot-mksquashovlfs /usr/bin/enroot-aufs2ovlfs")
    assert "cap_sys_admin" in caps and "cap_mknod" in caps


@needs_sources
def test_pyxis_is_in_the_plugin_directory_and_plugstack(host) -> None:
    multiarch = host.check_output("gcc -print-multiarch").strip()
    assert host.file(f"/usr/lib/{multiarch}/slurm-wlm/spank_pyxis.so").exists
    assert host.file("/etc/enroot/enroot.conf").contains("^ENROOT_ROOTFS_WRITABLE *yes$")
    assert host.file("/etc/enroot/mounts.d/90-gpucluster.fstab").contains("^/scratch /scratch none ")


@needs_sources
@pytest.mark.parametrize("path", ["/run/enroot", "/var/lib/enroot/cache", "/var/lib/enroot/data"])
def test_per_user_parents_are_world_writable_and_sticky(host, path: str) -> None:
    assert host.file(path).mode == 0o1777 and host.file(path).user == "root"
