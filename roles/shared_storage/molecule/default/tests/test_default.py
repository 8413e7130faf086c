"""shared_storage on the Molecule container: /etc/fstab holds the inventory's filesystems (the NFS
server's own export as a bind mount), the site-managed one is left to the site, the record lists
what the role wrote, and what it did not write is untouched."""

import json


def fstab(host):
    lines = host.file("/etc/fstab").content_string.splitlines()
    return {fields[1]: fields for line in lines if (fields := line.split()) and not fields[0].startswith("#")}


def test_fstab_holds_the_inventory_filesystems(host):
    entries = fstab(host)
    # gcmol01 serves `home`: it binds the export rather than mounting itself over NFS.
    assert entries["/home"][:4] == ["/srv/nfs/home", "/home", "none", "bind"]
    assert entries["/projects"][:4] == [
        "10.213.78.2:/export/projects",
        "/projects",
        "nfs",
        "defaults,_netdev",
    ]
    assert entries["/scratch"][:4] == [
        "10.213.78.3@tcp:/scratch",
        "/scratch",
        "lustre",
        "defaults,_netdev,flock",
    ]
    for mount in ("/home", "/projects", "/scratch"):
        assert host.file(mount).is_directory


def test_site_managed_filesystem_is_checked_not_written(host):
    # /tmp: the tmpfs podman mounts in a systemd container stands for the site's mount.
    assert "/tmp" not in fstab(host)
    assert host.run("findmnt --noheadings --output FSTYPE /tmp").stdout.strip() == "tmpfs"


def test_record_lists_what_the_role_wrote(host):
    record = host.file("/var/lib/gpucluster/storage/mounted.json")
    assert record.user == "root" and record.mode == 0o644
    # /old: written by an earlier run, no longer in the inventory, kept (remove_absent is off).
    assert json.loads(record.content_string) == {"mounts": ["/home", "/old", "/projects", "/scratch"]}


def test_mounts_the_role_did_not_write_are_left_alone(host):
    entries = fstab(host)
    assert entries["/srv/local"] == ["LABEL=local", "/srv/local", "ext4", "defaults,nofail", "0", "2"]
    assert entries["/old"][:3] == ["10.213.78.9:/old", "/old", "nfs"]


def test_nfs_client_installed(host):
    assert host.package("nfs-common").is_installed
