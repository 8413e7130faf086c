"""cluster.storage: every check reports file, key path and reason; what the renderer writes for the
roles (hosts/storage.yaml, the NFS exports, the shared homes in hosts/users.yaml)."""

from __future__ import annotations

import copy
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucluster.errors import InventoryError
from gpucluster.layers import load_cluster
from gpucluster.rendering import render_files
from tests.conftest import SMALL_CLUSTER, SMALL_HOSTS, InventoryFactory

BASE = yaml.safe_load(textwrap.dedent(SMALL_CLUSTER))
# SMALL_HOSTS plus a storage host and a login host.
HOSTS = (
    SMALL_HOSTS.rstrip()
    + """
        storage:
          hosts:
            nfs01:
              ansible_host: 10.0.0.5
        logins:
          hosts:
            login01:
    """
)
HOME = {
    "name": "home",
    "mount": "/home",
    "home": True,
    "nfs_server": {"host": "nfs01", "export": "/srv/home"},
}
SCRATCH = {"name": "scratch", "mount": "/scratch", "source": "10.0.0.9@o2ib:/scratch", "type": "lustre"}


def write(inventories: InventoryFactory, mutate: Callable[[dict[str, Any]], None]) -> Path:
    data = copy.deepcopy(BASE)
    data["cluster"]["slurm"]["login"] = ["login01"]
    data["cluster"]["storage"] = [copy.deepcopy(HOME), copy.deepcopy(SCRATCH)]
    mutate(data["cluster"])
    return inventories.make(HOSTS, yaml.safe_dump(data, sort_keys=False))


def problems_of(directory: Path) -> list[str]:
    with pytest.raises(InventoryError) as info:
        load_cluster(directory)
    return [str(p) for p in info.value.problems]


def test_hosts_file_has_the_storage_and_login_hosts() -> None:
    assert yaml.safe_load(textwrap.dedent(HOSTS))["all"]["children"]["storage"]["hosts"] == {
        "nfs01": {"ansible_host": "10.0.0.5"}
    }


def storage(c: dict[str, Any], index: int, **changes: Any) -> None:
    c["storage"][index].update(changes)


CASES: list[tuple[str, Callable[[dict[str, Any]], None], str, str]] = [
    (
        "no backing",
        lambda c: c["storage"][1].pop("source") and c["storage"][1].pop("type"),
        "cluster.storage[1]",
        "say what backs the filesystem",
    ),
    (
        "two backings",
        lambda c: storage(c, 0, source="filer:/home", type="nfs"),
        "cluster.storage[0].source",
        "`nfs_server` and `source` both back it",
    ),
    (
        "source without type",
        lambda c: c["storage"][1].pop("type"),
        "cluster.storage[1].type",
        "needs its filesystem `type`",
    ),
    (
        "type without source",
        lambda c: storage(c, 0, type="nfs"),
        "cluster.storage[0].type",
        "`type` is the type of `source`, which is missing",
    ),
    (
        "options of a site-managed filesystem",
        lambda c: c["storage"].__setitem__(
            1, {"name": "scratch", "mount": "/scratch", "site_managed": True, "options": "noatime"}
        ),
        "cluster.storage[1].options",
        "mounted by the site",
    ),
    (
        "server not in the inventory",
        lambda c: storage(c, 0, nfs_server={"host": "nfs09", "export": "/srv/home"}),
        "cluster.storage[0].nfs_server.host",
        "NFS server `nfs09` is not a host of",
    ),
    (
        "same mount point",
        lambda c: storage(c, 1, mount="/home"),
        "cluster.storage[1].mount",
        "/home is also the mount point of `home` (cluster.storage[0])",
    ),
    (
        "nested mount points",
        lambda c: storage(c, 1, mount="/home/scratch"),
        "cluster.storage[1].mount",
        "/home/scratch and /home (`home`, cluster.storage[0]) are nested",
    ),
    (
        "system directory",
        lambda c: storage(c, 1, mount="/usr/local"),
        "cluster.storage[1].mount",
        "a directory of the system (/usr)",
    ),
    (
        "relative mount point",
        lambda c: storage(c, 1, mount="scratch"),
        "cluster.storage[1].mount",
        "not an absolute path",
    ),
    ("root", lambda c: storage(c, 1, mount="/"), "cluster.storage[1].mount", "a directory of the system"),
    (
        "name twice",
        lambda c: storage(c, 1, name="home"),
        "cluster.storage[1].name",
        "filesystem `home` is defined twice",
    ),
    (
        "unknown hosts",
        lambda c: storage(c, 1, hosts=["gpus", "rack9"]),
        "cluster.storage[1].hosts[1]",
        "`rack9` is not a host or group",
    ),
    (
        "nobody mounts it",
        lambda c: storage(c, 1, hosts=[]),
        "cluster.storage[1].hosts",
        "nobody mounts `scratch`",
    ),
    (
        "two home filesystems",
        lambda c: storage(c, 1, home=True),
        "cluster.storage[1].home",
        "`home` (cluster.storage[0]) already holds the homes",
    ),
    (
        "a home on no shared filesystem",
        lambda c: c["users"][1].update(home="/local/bob"),
        "cluster.users[1].home",
        "home /local/bob is on no shared filesystem of cluster.storage (/home, /scratch)",
    ),
    (
        "homes with no home filesystem",
        lambda c: storage(c, 0, home=False, mount="/shared"),
        "cluster.users[0]",
        "home /home/alice is on no shared filesystem",
    ),
    (
        "a home that is a mount point",
        lambda c: c["users"][0].update(home="/scratch"),
        "cluster.users[0].home",
        "the mount point of `scratch` itself",
    ),
    (
        "a kubernetes volume without kubernetes",
        lambda c: storage(c, 1, kubernetes={"claim": "scratch"}),
        "cluster.storage[1].kubernetes",
        "needs the `kubernetes:` section",
    ),
    (
        "a kubernetes volume of two kinds",
        lambda c: storage(c, 1, kubernetes={"claim": "scratch", "storage_class": "x", "size": "1Ti"}),
        "cluster.storage[1].kubernetes",
        "either `claim`",
    ),
    (
        "a kubernetes size that is no quantity",
        lambda c: storage(c, 1, kubernetes={"storage_class": "x", "size": "lots"}),
        "cluster.storage[1].kubernetes.size",
        "pattern",
    ),
    (
        "a managed filesystem without the cloud section",
        lambda c: storage(c, 1, cloud={"service": "filestore", "size_gb": 1024}),
        "cluster.storage[1].cloud",
        "needs the `cloud:` section",
    ),
    ("a typo", lambda c: storage(c, 1, mount_point="/x"), "cluster.storage[1].mount_point", "unknown key"),
]


@pytest.mark.parametrize(("name", "mutate", "path", "reason"), CASES, ids=[c[0] for c in CASES])
def test_bad_storage_is_reported_at_its_key(
    inventories: InventoryFactory, name: str, mutate: Callable[[dict[str, Any]], None], path: str, reason: str
) -> None:
    found = problems_of(write(inventories, mutate))
    assert any(f": {path}: " in p and reason in p for p in found), found
    assert all(p.startswith(str(inventories.root)) and "cluster.yml:" in p for p in found), found


def test_valid_storage_resolves_its_hosts(inventories: InventoryFactory) -> None:
    cluster = load_cluster(write(inventories, lambda c: None))
    slurm_hosts = ["head", "login01", *(f"n{i:02d}" for i in range(1, 9))]
    # Every bare-metal Slurm host by default; the NFS server too, for its bind mount.
    assert cluster.storage_hosts["home"] == [*slurm_hosts, "nfs01"]
    assert cluster.storage_hosts["scratch"] == slurm_hosts


def test_hosts_may_be_one_name(inventories: InventoryFactory) -> None:
    cluster = load_cluster(write(inventories, lambda c: storage(c, 1, hosts="login01")))
    assert cluster.storage_hosts["scratch"] == ["login01"]


def test_a_filesystem_only_for_kubernetes_needs_no_host(inventories: InventoryFactory) -> None:
    def kubernetes_only(c: dict[str, Any]) -> None:
        storage(c, 1, hosts=[], kubernetes={"claim": "scratch"})

    # Refused for want of the kubernetes section, not for want of hosts.
    found = problems_of(write(inventories, kubernetes_only))
    assert not any("nobody mounts" in p for p in found), found


def rendered(
    inventories: InventoryFactory, mutate: Callable[[dict[str, Any]], None] = lambda c: None
) -> dict[str, str]:
    return render_files(load_cluster(write(inventories, mutate)), only=["hosts"])


def body(text: str) -> Any:
    assert text.startswith("# Generated by gpucluster for cluster 'small'.")
    return yaml.safe_load(text)


def test_storage_file_says_what_each_host_mounts(inventories: InventoryFactory) -> None:
    data = body(rendered(inventories)["hosts/storage.yaml"])
    home, scratch = data["filesystems"]
    # Clients mount the server's ansible_host; the server itself binds the export.
    assert home | {"hosts": None} == {
        "name": "home",
        "mount": "/home",
        "site_managed": False,
        "source": "10.0.0.5:/srv/home",
        "type": "nfs",
        "options": "defaults,_netdev",
        "server": "nfs01",
        "export": "/srv/home",
        "hosts": None,
    }
    assert "nfs01" in home["hosts"] and "nfs01" not in scratch["hosts"]
    assert scratch["source"] == "10.0.0.9@o2ib:/scratch" and scratch["type"] == "lustre"
    assert data["exports"] == [{"host": "nfs01", "paths": ["/srv/home"]}]


def test_exports_allow_only_the_clients_with_root_squash(inventories: InventoryFactory) -> None:
    text = rendered(inventories)["hosts/nfs-exports/nfs01.exports"]
    rows = [line.split() for line in text.replace("\\\n", " ").splitlines() if not line.startswith("#")]
    clients = ["head", "login01", *(f"n{i:02d}" for i in range(1, 9))]
    assert rows == [["/srv/home", *(f"{c}(rw,sync,root_squash,no_subtree_check)" for c in clients)]]


def test_exports_to_the_clients_given(inventories: InventoryFactory) -> None:
    files = rendered(inventories, lambda c: c["storage"][0]["nfs_server"].update(clients=["10.0.0.0/16"]))
    assert (
        "/srv/home \\\n    10.0.0.0/16(rw,sync,root_squash,no_subtree_check)\n"
        in files["hosts/nfs-exports/nfs01.exports"]
    )


def test_homes_live_on_the_home_filesystem_created_once(inventories: InventoryFactory) -> None:
    def moved(c: dict[str, Any]) -> None:
        storage(c, 0, mount="/shared/home")
        c["users"][1]["home"] = "/scratch/bob"

    data = body(rendered(inventories, moved)["hosts/users.yaml"])
    assert [u["home"] for u in data["users"]] == ["/shared/home/alice", "/scratch/bob"]
    homes = {entry["mount"]: entry for entry in data["shared_homes"]}
    # The NFS server creates the homes of its export; elsewhere the first host in name order.
    assert homes["/shared/home"]["created_on"] == "nfs01"
    assert homes["/scratch"]["created_on"] == "head"
    assert "nfs01" in homes["/shared/home"]["hosts"]


def test_no_storage_renders_nothing_new(inventories: InventoryFactory) -> None:
    # nfs01, no storage host any more, stays in the inventory as a login host.
    files = rendered(inventories, lambda c: (c.pop("storage"), c["slurm"].update(login=["login01", "nfs01"])))
    assert sorted(files) == ["hosts/users.yaml"]
    assert "shared_homes" not in body(files["hosts/users.yaml"])
