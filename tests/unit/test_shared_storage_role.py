"""The shared_storage role's plan (shared_mounts_plan): it mounts what the inventory gives its host,
binds the export on the NFS server, only checks site-managed mounts, never takes over a mount point
someone else holds, unmounts only what it recorded and only when told. The role's tasks run in its
Molecule scenario."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.roles.conftest import load_module, load_module_utils

mounts = load_module("shared_mounts_plan")
records = load_module_utils("record")

HOME: dict[str, Any] = {
    "name": "home",
    "mount": "/home",
    "site_managed": False,
    "source": "10.0.0.5:/srv/home",
    "type": "nfs",
    "options": "defaults,_netdev",
    "server": "nfs01",
    "export": "/srv/home",
    "hosts": ["gpu01", "nfs01"],
}
DATA: dict[str, Any] = {
    "name": "data",
    "mount": "/data",
    "site_managed": True,
    "server": None,
    "export": None,
    "hosts": ["gpu01"],
}
NOTHING: dict[str, list[str]] = {"mounts": []}
ROOT_ONLY = {"/": "overlay"}


def test_a_client_mounts_the_source_and_records_it_first() -> None:
    plan = mounts.plan([HOME], {}, ROOT_ONLY, NOTHING, "gpu01")
    assert not plan.errors and not plan.notes
    assert plan.mounts == [
        {"mount": "/home", "src": "10.0.0.5:/srv/home", "fstype": "nfs", "opts": "defaults,_netdev"}
    ]
    assert plan.record_before == plan.record_after == {"mounts": ["/home"]}


def test_the_server_binds_its_export() -> None:
    plan = mounts.plan([HOME], {}, ROOT_ONLY, NOTHING, "nfs01")
    assert plan.mounts == [{"mount": "/home", "src": "/srv/home", "fstype": "none", "opts": "bind"}]


def test_a_host_not_listed_mounts_nothing() -> None:
    plan = mounts.plan([HOME, DATA], {}, ROOT_ONLY, NOTHING, "login01")
    assert plan.mounts == [] and plan.site_managed == [] and plan.record_before == NOTHING


def test_a_site_managed_filesystem_must_be_mounted_and_is_never_written() -> None:
    plan = mounts.plan([DATA], {}, {**ROOT_ONLY, "/data": "filer:/data"}, NOTHING, "gpu01")
    assert plan.site_managed == ["/data"] and plan.mounts == [] and plan.record_before == NOTHING
    missing = mounts.plan([DATA], {}, ROOT_ONLY, NOTHING, "gpu01")
    assert missing.errors == [
        "gpu01: /data is not a mounted filesystem; cluster.storage `data` says the site mounts it there (site_managed)"
    ]


def test_a_mount_point_in_fstab_with_another_source_is_refused() -> None:
    plan = mounts.plan([HOME], {"/home": ("filer:/home", "nfs4")}, ROOT_ONLY, NOTHING, "gpu01")
    assert plan.errors == [
        "gpu01: /home is in /etc/fstab as filer:/home (nfs4), not written by the shared_storage role; "
        "the inventory wants 10.0.0.5:/srv/home (nfs)"
    ]


def test_a_mount_point_mounted_by_someone_else_is_refused() -> None:
    plan = mounts.plan([HOME], {}, {**ROOT_ONLY, "/home": "/dev/sda3"}, NOTHING, "gpu01")
    assert plan.errors == [
        "gpu01: /dev/sda3 is mounted at /home, not by the shared_storage role; the inventory wants "
        "10.0.0.5:/srv/home (nfs) there"
    ]


def test_the_same_entry_written_by_someone_else_is_left_alone() -> None:
    plan = mounts.plan([HOME], {"/home": ("10.0.0.5:/srv/home", "nfs")}, ROOT_ONLY, NOTHING, "gpu01")
    assert not plan.errors and plan.mounts == [] and plan.record_before == NOTHING
    assert plan.notes == [
        "gpu01: /home is in /etc/fstab already (10.0.0.5:/srv/home, nfs), not written by the "
        "shared_storage role: left alone"
    ]


def test_its_own_mount_is_managed_whatever_fstab_says() -> None:
    recorded = {"mounts": ["/home"]}
    plan = mounts.plan(
        [HOME], {"/home": ("old:/home", "nfs")}, {**ROOT_ONLY, "/home": "old:/home"}, recorded, "gpu01"
    )
    assert not plan.errors and [m["src"] for m in plan.mounts] == ["10.0.0.5:/srv/home"]


def test_a_dropped_mount_is_kept_unless_told() -> None:
    recorded = {"mounts": ["/home", "/old"]}
    kept = mounts.plan([HOME], {}, ROOT_ONLY, recorded, "gpu01")
    assert kept.remove == [] and kept.record_after == {"mounts": ["/home", "/old"]}
    assert kept.notes == [
        "gpu01: /old is no longer in the inventory for this host: kept mounted "
        "(shared_storage_remove_absent: true unmounts it)"
    ]
    removed = mounts.plan([HOME], {}, ROOT_ONLY, recorded, "gpu01", remove_absent=True)
    assert removed.remove == ["/old"]
    assert removed.record_before == {"mounts": ["/home", "/old"]} and removed.record_after == {
        "mounts": ["/home"]
    }


def test_fstab_and_mountinfo_are_read_with_their_escapes(tmp_path: Path) -> None:
    fstab = tmp_path / "fstab"
    fstab.write_text(
        "# comment\nUUID=1 / ext4 defaults 0 1\nfiler:/a\\040b /mnt/a\\040b nfs defaults 0 0\n\n"
    )
    assert mounts.read_fstab(str(fstab)) == {"/": ("UUID=1", "ext4"), "/mnt/a b": ("filer:/a b", "nfs")}
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(
        "22 1 0:21 / / rw,relatime shared:1 - overlay overlay rw\n"
        "30 22 0:25 / /data rw,nosuid - tmpfs tmpfs rw,size=16384k\n"
    )
    assert mounts.read_mounted(str(mountinfo)) == {"/": "overlay", "/data": "tmpfs"}
    assert records.read_record(str(tmp_path / "absent.json"), mounts.RECORD_KEYS) == NOTHING
