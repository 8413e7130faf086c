"""The lab inventory with gpu04 handed to Kubernetes: the move that tests/unit/test_moves.py plans
and tests/lab/test_fleet_move.py carries out against the real daemons."""

from __future__ import annotations

LAB_EDITS_GPU04_TO_KUBERNETES = {
    "  nodes:\n    - {group: gpu_nodes, type: sim-h100}\n": (
        "  nodes:\n"
        "    - {group: leaf1_nodes, type: sim-h100, owner: slurm}\n"
        "    - {group: gpu03, type: sim-h100, owner: slurm}\n"
        "    - {group: gpu04, type: sim-h100, owner: kubernetes}\n"
    ),
    "    - {name: gpu, nodes: [gpu_nodes], default: true": "    - {name: gpu, nodes: [leaf1_nodes, gpu03], default: true",
    # 24 GPUs stay in Slurm, 8 go to Kubernetes: each scheduler receives only its own numbers.
    "      gpu_quota: 16\n      gpu_limit: 24\n      users: [alice, carol]": (
        "      gpus: {slurm: {quota: 12, limit: 24}, kubernetes: {quota: 8, limit: 8}}\n      users: [alice, carol]"
    ),
    "      gpu_quota: 16\n      gpu_limit: 32\n      users: [bob]": (
        "      gpus: {slurm: {quota: 12, limit: 24}}\n      users: [bob]"
    ),
}
# Appended to cluster.yml: Kubernetes on gpu04 (Kueue admits its pods).
LAB_KUBERNETES_SECTION = """\
  kubernetes:
    version: "1.34"
    gpu_operator: {driver: host, toolkit: false}
    kueue: {enabled: true}
"""


def gpu04_to_kubernetes(cluster_yml: str) -> str:
    for old, new in LAB_EDITS_GPU04_TO_KUBERNETES.items():
        assert old in cluster_yml, old
        cluster_yml = cluster_yml.replace(old, new)
    return cluster_yml.rstrip("\n") + "\n" + LAB_KUBERNETES_SECTION


# A first inventory as a new platform engineer writes one (issue 31): 48 x 8 H200 in three racks,
# 32 for Slurm and 16 for Kubernetes; 8 x 4 L40S in an interactive partition; a primary and a
# backup controller on shared state; three tenants. tests/unit/test_first_inventory.py checks what
# it must say, tests/unit/test_procedures.py plans its day-2 changes.
NEWCOMER_HOSTS = """\
all:
  children:
    controllers:
      hosts:
        ctl[01:02]:
    dbd:
      hosts:
        dbd01:
    login:
      hosts:
        login01:
    nfs:
      hosts:
        nfs01:
    h200:
      children:
        h200_r1:
          hosts:
            h200-r1-[01:16]:
        h200_r2:
          hosts:
            h200-r2-[01:16]:
        h200_r3:
          hosts:
            h200-r3-[01:16]:
    l40s:
      hosts:
        l40s-[01:08]:
"""

NEWCOMER_CLUSTER = """\
cluster:
  name: acme
  slurm:
    version: "26.05"
    controller: [ctl01, ctl02]
    state_save_location: /shared/slurm/state
    accounting: {host: dbd01}
    login: [login01]
  node_types:
    h200:
      sockets: 2
      cores_per_socket: 56
      threads_per_core: 2
      memory_mb: 2000000
      gpus: {model: h200, count: 8, devices: "/dev/nvidia[0-7]"}
    l40s:
      sockets: 1
      cores_per_socket: 32
      threads_per_core: 2
      memory_mb: 512000
      gpus: {model: l40s, count: 4, devices: "/dev/nvidia[0-3]"}
  nodes:
    - {group: h200_r1, type: h200, owner: slurm}
    - {group: h200_r2, type: h200, owner: slurm}
    - {group: h200_r3, type: h200, owner: kubernetes}
    - {group: l40s, type: l40s, owner: slurm}
  fabric:
    tree:
      spine: [leaf-r1, leaf-r2, leaf-r3, leaf-l40s]
      leaf-r1: [h200_r1]
      leaf-r2: [h200_r2]
      leaf-r3: [h200_r3]
      leaf-l40s: [l40s]
  partitions:
    - {name: train, nodes: [h200_r1, h200_r2], default: true, max_time: "7-00:00:00", exclusive: true}
    - {name: dev, nodes: [l40s], max_time: "08:00:00"}
  storage:
    - {name: home, mount: /home, home: true, nfs_server: {host: nfs01, export: /srv/nfs/home}}
    - {name: slurm-state, mount: /shared, source: "filer01:/export/slurm", type: nfs4, hosts: [controllers]}
  users:
    - {name: alice, uid: 10001}
    - {name: bob, uid: 10002}
    - {name: carol, uid: 10003}
  tenants:
    - {name: research, fairshare: 50, users: [alice],
       gpus: {slurm: {quota: 128, limit: 256}, kubernetes: {quota: 32, limit: 64}}}
    - {name: product, fairshare: 30, users: [bob], gpus: {slurm: {quota: 96, limit: 160}}}
    - {name: serving, fairshare: 20, users: [carol], gpus: {kubernetes: {quota: 96, limit: 128}}}
  kubernetes:
    version: "1.34"
    gpu_operator: {driver: host, toolkit: false}
    kueue: {enabled: true}
"""


def edit(text: str, edits: dict[str, str]) -> str:
    for old, new in edits.items():
        assert old in text, old
        text = text.replace(old, new)
    return text


# A 2026 fleet written from the README alone (issue 37): two GB200 NVL72 racks for training (each an
# NVLink block of 18 trays x 4 GPUs), 8 L40S for interactive work under the InfiniBand tree, 16 H200
# under Kubernetes for serving (in no block: no NVLink domain spans them); HA controllers, slurmdbd,
# two login nodes, NFS homes, monitoring on a host of its own; three tenants, two of them limited to
# partitions. Slurm 26.05: the training partition places jobs by the blocks, the interactive one by
# the tree. tests/unit/test_fleet_2026.py checks what it says; tests/slurm/test_fleet_trial.py proves
# it with real daemons (26.05, and 24.11 with FLEET_2026_ON_24_11).
FLEET_2026_HOSTS = """\
all:
  children:
    controllers:
      hosts:
        ctl[01:02]:
    dbd:
      hosts:
        dbd01:
    login:
      hosts:
        login[01:02]:
    nfs:
      hosts:
        nfs01:
    monitoring:
      hosts:
        mon01:
    gb200:
      children:
        rack1:
          hosts:
            gb200-r1-[01:18]:
        rack2:
          hosts:
            gb200-r2-[01:18]:
    h200:
      hosts:
        h200-[01:16]:
    l40s:
      hosts:
        l40s-[01:08]:
"""

FLEET_2026_CLUSTER = """\
cluster:
  name: fleet26
  slurm:
    version: "26.05"
    controller: [ctl01, ctl02]
    state_save_location: /shared/slurm/state
    accounting: {host: dbd01}
    login: [login01, login02]
  node_types:
    gb200-tray:
      sockets: 2
      cores_per_socket: 72
      threads_per_core: 1
      memory_mb: 860000
      gpus: {model: gb200, count: 4, devices: "/dev/nvidia[0-3]"}
    h200:
      sockets: 2
      cores_per_socket: 56
      threads_per_core: 2
      memory_mb: 2000000
      gpus: {model: h200, count: 8, devices: "/dev/nvidia[0-7]"}
    l40s:
      sockets: 1
      cores_per_socket: 32
      threads_per_core: 2
      memory_mb: 512000
      gpus: {model: l40s, count: 4, devices: "/dev/nvidia[0-3]"}
  nodes:
    - {group: gb200, type: gb200-tray, owner: slurm}
    - {group: h200, type: h200, owner: kubernetes}
    - {group: l40s, type: l40s, owner: slurm}
  fabric:
    tree:
      spine: [leaf-gb200, leaf-h200, leaf-l40s]
      leaf-gb200: [gb200]
      leaf-h200: [h200]
      leaf-l40s: [l40s]
    blocks:
      nvl72-r1: [rack1]
      nvl72-r2: [rack2]
    block_sizes: [18, 36]
  partitions:
    - {name: train, nodes: [gb200], default: true, max_time: "14-00:00:00", exclusive: true,
       topology: nvlink-blocks, tenants: [research, product]}
    - {name: dev, nodes: [l40s], max_time: "08:00:00", topology: fabric-tree, tenants: [research, product]}
  qos:
    - {name: normal}
    - {name: interactive, max_gpus_per_user: 4}
  storage:
    - {name: home, mount: /home, home: true, nfs_server: {host: nfs01, export: /srv/nfs/home}}
    - {name: slurm-state, mount: /shared, source: "filer01:/export/slurm", type: nfs4, hosts: [controllers]}
  users:
    - {name: alice, uid: 10001}
    - {name: bob, uid: 10002}
    - {name: carol, uid: 10003}
  tenants:
    - {name: research, fairshare: 50, users: [alice], qos: [normal, interactive], default_qos: normal,
       gpus: {slurm: {quota: 96, limit: 144}, kubernetes: {quota: 64, limit: 96}}}
    - {name: product, fairshare: 30, users: [bob], qos: [normal],
       gpus: {slurm: {quota: 64, limit: 96}}}
    - {name: serving, fairshare: 20, users: [carol], gpus: {kubernetes: {quota: 64, limit: 128}}}
  monitoring:
    host: mon01
  kubernetes:
    version: "1.34"
    gpu_operator: {driver: host, toolkit: false}
    kueue: {enabled: true}
"""

# The same fleet on Slurm 24.11 (one topology plugin): no partition chooses its topology; the tree is
# Slurm's (fabric.default: tree: the L40S nodes are in no block), the blocks stay with IMEX,
# Kubernetes and monitoring, and a warning says so.
FLEET_2026_ON_24_11 = {
    'version: "26.05"': 'version: "24.11"',
    "\n       topology: nvlink-blocks, tenants": "\n       tenants",
    ", topology: fabric-tree, tenants: [research, product]}": ", tenants: [research, product]}",
    "    block_sizes: [18, 36]\n": "    block_sizes: [18, 36]\n    default: tree\n",
}
