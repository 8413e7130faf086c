"""Lab building blocks that need no root: addresses, image tag, users, generated inventory."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gpucluster.lab import cgroups, image, inventory, lab, network
from gpucluster.lab.paths import DEFAULT_INVENTORY, IMAGE_RECIPE_DIR
from gpucluster.lab.shell import LabError
from gpucluster.lab.state import LabState
from gpucluster.layers import load_cluster
from gpucluster.model.releases import RELEASES
from gpucluster.tools import venv_env, venv_tool
from tests.conftest import REPO


@pytest.fixture
def lab_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GPUCLUSTER_LAB_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


def test_addresses_are_distinct_and_inside_the_subnet() -> None:
    hosts = ["ctl01", "gpu01", "gpu02"]
    addresses = network.plan_addresses(hosts, "10.213.77.0/24")
    assert addresses == {"ctl01": "10.213.77.10", "gpu01": "10.213.77.11", "gpu02": "10.213.77.12"}
    with pytest.raises(network.LabError):
        network.plan_addresses([f"h{i}" for i in range(10)], "10.0.0.0/29")


def test_image_tag_follows_the_package_list(tmp_path: Path) -> None:
    recipe = tmp_path / "recipe"
    shutil.copytree(IMAGE_RECIPE_DIR, recipe)
    before = {suite: image.image_tag(suite, recipe) for suite in ("bookworm", "trixie", "forky")}
    assert before == {suite: image.image_tag(suite, IMAGE_RECIPE_DIR) for suite in before}
    assert len(set(before.values())) == 3 and all(f":{suite}-" in tag for suite, tag in before.items())
    (recipe / "packages.txt").write_text((recipe / "packages.txt").read_text() + "# a comment only\n")
    assert {suite: image.image_tag(suite, recipe) for suite in before} == before
    # A package for one suite changes that suite's image only.
    (recipe / "packages.txt").write_text((recipe / "packages.txt").read_text() + "strace [trixie]\n")
    after = {suite: image.image_tag(suite, recipe) for suite in before}
    assert [suite for suite in before if after[suite] != before[suite]] == ["trixie"]
    assert "strace" in image.package_list("trixie", recipe) and "strace" not in image.package_list(
        "forky", recipe
    )


def test_each_proven_release_has_its_suite_and_others_are_refused() -> None:
    assert [image.suite_of(r) for r in ("22.05", "24.11", "26.05")] == ["bookworm", "trixie", "forky"]
    with pytest.raises(LabError, match=r"no Debian suite carries Slurm 25\.11"):
        image.suite_of("25.11")


@pytest.mark.parametrize("release", ["22.05", "24.11", "26.05"])
def test_image_bakes_every_package_the_roles_install(release: str) -> None:
    """Each suite's image holds what the roles install for its release (lists the roles template
    from the release's facts, as the render play gives them)."""
    from jinja2 import Template

    from plugins.modules.gpucluster_render import classify

    facts = classify(load_cluster(DEFAULT_INVENTORY))["release"] | {
        "pmix": RELEASES[release].packaging.pmix,
        "sackd": RELEASES[release].sackd,
    }
    baked = set(image.package_list(image.suite_of(release)))
    roles = Path(__file__).resolve().parents[2] / "roles"
    ours = [
        "munge", "slurm_common", "slurm_dbd", "slurm_controller", "slurm_compute", "slurm_accounts", "slurm_login",
        "slurm_restd", "slurm_node_ssh",
    ]  # fmt: skip
    for defaults in (roles / role / "defaults" / "main.yml" for role in ours):
        data = yaml.safe_load(defaults.read_text()) or {}
        for key, value in data.items():
            if key.endswith("_packages") and (key != "slurm_login_sackd_packages" or facts["sackd"]):
                if isinstance(value, str):
                    value = yaml.safe_load(Template(value).render(slurm_common_release=facts))
                assert set(value) <= baked, f"{release}: {defaults}: {key}"


def test_lab_declares_every_tenant_user_an_outsider_and_an_admin() -> None:
    # The users role creates them on every host; the outsider tests need a user with no account,
    # the node ssh tests an admin in no tenant.
    spec = load_cluster(DEFAULT_INVENTORY).spec
    declared = {user.name for user in spec.users}
    in_tenants = {name for tenant in spec.tenants for name in tenant.users}
    assert in_tenants < declared and declared - in_tenants == {"outsider", "ops"}
    assert spec.slurm.node_ssh is not None and spec.slurm.node_ssh.admins == ["ops"]


MOUNTINFO = """\
1060 1059 0:61 / /sys/fs/cgroup ro,nosuid,nodev,noexec,relatime - tmpfs tmpfs ro,size=4096k,mode=755
1063 1060 0:29 /libpod_parent/libpod-abc /sys/fs/cgroup/memory ro,nosuid,nodev,noexec,relatime - cgroup cgroup rw,memory
1064 1060 0:30 /libpod_parent/libpod-abc /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime - cgroup cgroup rw,cpu,cpuacct
1065 1060 0:31 /libpod_parent/libpod-abc /sys/fs/cgroup/freezer ro,relatime shared:5 - cgroup cgroup rw,freezer
1066 1060 0:32 / /sys/fs/cgroup/unified ro,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw
1067 1060 0:33 / /sys/fs/cgroup/systemd ro,nosuid,nodev,noexec,relatime - cgroup cgroup rw,name=systemd
"""


def test_only_read_only_cgroup_v1_mounts_are_remounted() -> None:
    # The mount's own options decide (field 6), not the superblock's after " - "; optional
    # fields (shared:5) may come before the separator; tmpfs, cgroup2 and the named systemd
    # hierarchy are left alone.
    assert cgroups.read_only_cgroup_mounts(MOUNTINFO) == ["/sys/fs/cgroup/memory", "/sys/fs/cgroup/freezer"]


def test_gpu_devices_come_from_the_inventory() -> None:
    cluster = load_cluster(DEFAULT_INVENTORY)
    assert lab.gpu_devices(cluster, "gpu01") == [f"/dev/nvidia{i}" for i in range(8)]
    assert lab.gpu_devices(cluster, "ctl01") == []
    # The login node is a container like every host, with no GPU.
    assert "login01" in lab.lab_hosts(cluster)
    assert lab.gpu_devices(cluster, "login01") == []


def test_lab_run_defaults_to_the_login_node_else_the_first_controller() -> None:
    with_login = load_cluster(DEFAULT_INVENTORY)
    assert lab.run_host(with_login) == "login01"
    assert lab.run_host(with_login, "gpu03") == "gpu03"
    with pytest.raises(LabError, match=r"`gpu99` is not a host of the lab \(hosts: ctl01, ctl02, gpu01"):
        lab.run_host(with_login, "gpu99")
    # No login node: the controller, as `lab run` always did.
    without_login = load_cluster(REPO / "molecule" / "inventory" / "mol")
    assert without_login.spec.slurm.login == []
    assert lab.run_host(without_login) == "gcmol01"


def test_lab_run_help_names_host_and_user() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "gpucluster.cli", "lab", "run", "--help"],
        cwd=REPO, capture_output=True, text=True, check=True,
    )  # fmt: skip
    text = " ".join(proc.stdout.split())
    assert "--host HOST" in text and "--user USER" in text
    assert "default: the first login node of the inventory, else the first controller" in text
    assert "Run a command on a lab host (default: the login node, else the first controller)" in text


def test_generated_inventory_reaches_hosts_through_podman(lab_dir: Path) -> None:
    cluster = load_cluster(DEFAULT_INVENTORY)
    target = inventory.write_inventory(DEFAULT_INVENTORY, cluster)
    # Same basename as the source: the generated files' header names `lab` either way.
    assert target.name == "lab"
    assert (target / "hosts.yml").read_text() == (DEFAULT_INVENTORY / "hosts.yml").read_text()
    assert (target / "group_vars/all/cluster.yml").read_text() == (
        DEFAULT_INVENTORY / "group_vars/all/cluster.yml"
    ).read_text()
    host_vars = yaml.safe_load((target / "host_vars/gpu03.yml").read_text())
    assert host_vars["ansible_connection"] == "podman_nsenter"
    assert host_vars["ansible_host"] == "gclab-gpu03"
    vault = (target / "group_vars/all/lab-vault.yml").read_text()
    assert "$ANSIBLE_VAULT" in vault and (target / "group_vars/all/lab-vault.yml").stat().st_mode & 0o077 == 0
    # A second write keeps the same secret.
    inventory.write_inventory(DEFAULT_INVENTORY, cluster)
    assert (target / "group_vars/all/lab-vault.yml").read_text() == vault
    assert load_cluster(target).spec == cluster.spec


def test_generated_inventory_keeps_every_groups_own_vars(lab_dir: Path, tmp_path: Path) -> None:
    """The group_vars of other groups than `all` reach the lab's hosts too: the power-saved nodes'
    slurmd options lived in group_vars/saved_nodes and a lab brought up without them kept those
    nodes POWERING_UP until their resume gave up."""
    source = tmp_path / "lab"
    shutil.copytree(DEFAULT_INVENTORY, source)
    (source / "group_vars" / "gpu_nodes").mkdir()
    (source / "group_vars" / "gpu_nodes" / "slurmd.yml").write_text(
        '---\nslurm_compute_slurmd_extra_options: ["-b"]\n'
    )
    (source / "group_vars" / "login.yml").write_text("---\nsome_login_setting: 1\n")
    target = inventory.write_inventory(source, load_cluster(source))
    assert yaml.safe_load((target / "group_vars/gpu_nodes/slurmd.yml").read_text()) == {
        "slurm_compute_slurmd_extra_options": ["-b"]
    }
    assert yaml.safe_load((target / "group_vars/login.yml").read_text()) == {"some_login_setting": 1}
    assert (target / "group_vars/all/cluster.yml").read_text() == (
        source / "group_vars/all/cluster.yml"
    ).read_text()


def test_db_password_starting_with_a_dash_is_vaulted_and_decrypts(
    lab_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # token_urlsafe() starts with "-" one time in 64; on the command line it was read as an option.
    password = "-nxTSf9l8EH-fO3vHvYzJw3Ce2qC1klf"
    monkeypatch.setattr(inventory.secrets, "token_urlsafe", lambda n=32: password)
    target = lab_dir / "vaulted.yml"
    inventory._vaulted_db_password(target)
    text = target.read_text()
    assert password not in text and "$ANSIBLE_VAULT" in text
    decrypted = subprocess.run(
        [str(venv_tool("ansible")), "localhost", "-m", "ansible.builtin.debug",
         "-a", "var=slurm_dbd_db_password", "-e", f"@{target}",
         "--vault-password-file", str(inventory.vault_password_file())],
        capture_output=True, text=True, check=True, env=venv_env(),
    ).stdout  # fmt: skip
    assert f'"slurm_dbd_db_password": "{password}"' in decrypted


def test_state_round_trip_and_down_without_state(lab_dir: Path) -> None:
    assert LabState.load() is None
    assert lab.down(progress=lambda message: None) == []
    state = LabState(inventory="/x", bridge="gclab0")
    state.remember("netns", "gclab-a")
    loaded = LabState.load()
    assert loaded is not None and loaded.netns == ["gclab-a"] and loaded.bridge == "gclab0"


LEFT_BEHIND = """
import json, subprocess, sys
from gpucluster.lab import lab, network, nodes
from gpucluster.lab.paths import IMAGE_REPO
from gpucluster.lab.state import LabState

state = LabState(subnet="10.213.91.0/24")
network.ensure_bridge(state)
network.ensure_node_network(state, 0, "n1", "10.213.91.10", 24)
images = nodes.podman("images", "--format", "{{.Repository}}:{{.Tag}}", IMAGE_REPO).split()
if images:
    nodes.podman("create", "--name", "gcorph-n1", "--label", f"{nodes.LABEL}=n1", images[0], "true")
# A process with the lab BMC service's command line for this prefix (the service itself runs in
# the host's namespace, its socket bound in the lab's).
service = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "-m", "gpucluster.lab.redfish",
                            "--netns", network.netns_name("lab-bmc")])
LabState.path().unlink()  # the state went with its folder, as when a run is killed
named = []
kept = lab.down(named.append)
removed = lab.down(print, left=True)
try:
    ended = service.wait(timeout=30)
except subprocess.TimeoutExpired:  # down left it running: end it here, the test fails on `ended`
    service.kill()
    ended = service.wait()
print(json.dumps({"kept": kept, "named": named, "removed": removed, "image": bool(images),
                  "service": service.pid, "ended": ended}))
"""


def test_down_removes_a_lab_left_behind_only_when_asked(tmp_path: Path) -> None:
    env = {**venv_env(), "GPUCLUSTER_LAB_PREFIX": "gcorph", "GPUCLUSTER_LAB_DIR": str(tmp_path / "state")}
    try:
        proc = subprocess.run([sys.executable, "-c", LEFT_BEHIND], cwd=REPO, env=env, capture_output=True,
                              text=True, timeout=300, check=False)  # fmt: skip
        assert proc.returncode == 0, proc.stdout + proc.stderr
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        assert result["kept"] == [] and "--left-behind" in result["named"][0], result
        expected = {"netns gcorph-n1", "bridge gcorph0", f"BMC service (pid {result['service']})"}
        assert result["ended"] == -15, result  # SIGTERM
        if result["image"]:
            expected.add("container gcorph-n1")
        assert expected <= set(result["removed"]), result
    finally:
        # Whatever the test made goes, whether or not `down` did its job.
        subprocess.run(["podman", "rm", "--force", "gcorph-n1"], capture_output=True, check=False)
        subprocess.run(["ip", "netns", "delete", "gcorph-n1"], capture_output=True, check=False)
        subprocess.run(["ip", "link", "delete", "gcorph0"], capture_output=True, check=False)
    assert not network.link_exists("gcorph0")
    assert not Path("/run/netns/gcorph-n1").exists()
