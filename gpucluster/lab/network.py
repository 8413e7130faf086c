"""A private L2 network for the lab: one bridge, and per node a network namespace joined by a veth.

Addresses live only inside the lab's own namespaces; the bridge itself has none, so the host's
routing is unchanged and nothing leaves the bridge. Bridged frames skip iptables on this bridge
only (per-bridge nf_call_iptables=0), whatever the host's br_netfilter settings.
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

from gpucluster.lab.paths import PREFIX
from gpucluster.lab.shell import LabError, run
from gpucluster.lab.state import LabState

DEFAULT_SUBNET = os.environ.get("GPUCLUSTER_LAB_SUBNET", "10.213.77.0/24")
BRIDGE = f"{PREFIX}0"


def netns_name(host: str) -> str:
    return f"{PREFIX}-{host}"


def netns_path(host: str) -> Path:
    return Path("/run/netns") / netns_name(host)


def link_exists(name: str, netns: str | None = None) -> bool:
    cmd = ["ip", *(["-n", netns] if netns else []), "link", "show", "dev", name]
    return run(cmd, check=False).returncode == 0


def bridge_ports(bridge: str) -> list[str]:
    """The links enslaved to `bridge` (the host ends of the lab's veth pairs)."""
    out = run(["ip", "-o", "link", "show", "master", bridge], check=False).stdout
    return [line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if ":" in line]


def _netns_exists(name: str) -> bool:
    return (Path("/run/netns") / name).exists()


def plan_addresses(hosts: list[str], subnet: str = DEFAULT_SUBNET) -> dict[str, str]:
    """host -> address, in host order, starting at .10 of the subnet."""
    network = ipaddress.ip_network(subnet)
    usable = list(network.hosts())
    if len(hosts) + 10 > len(usable):
        raise LabError(f"subnet {subnet} is too small for {len(hosts)} lab hosts")
    return {host: str(usable[9 + index]) for index, host in enumerate(hosts)}


def ensure_bridge(state: LabState) -> None:
    if not link_exists(BRIDGE):
        run(["ip", "link", "add", BRIDGE, "type", "bridge"])
        state.bridge = BRIDGE
        state.save()
    elif state.bridge != BRIDGE:
        raise LabError(
            f"bridge {BRIDGE} exists but this lab did not create it; `gpucluster lab down --left-behind` "
            "removes a lab of this prefix left behind, or set GPUCLUSTER_LAB_PREFIX to another"
        )
    run(
        ["ip", "link", "set", BRIDGE, "type", "bridge", "nf_call_iptables", "0", "nf_call_ip6tables", "0"],
        check=False,
    )
    run(["ip", "link", "set", BRIDGE, "up"])


def ensure_node_network(state: LabState, index: int, host: str, address: str, prefix_len: int) -> None:
    """netns <prefix>-<host> with eth0 = address, joined to the bridge by a veth pair."""
    ns = netns_name(host)
    host_side = f"{PREFIX}{index}h"
    node_side = f"{PREFIX}{index}n"
    if not _netns_exists(ns):
        run(["ip", "netns", "add", ns])
    state.remember("netns", ns)
    if not link_exists(host_side):
        run(["ip", "link", "add", host_side, "type", "veth", "peer", "name", node_side])
        state.remember("veths", host_side)
        run(["ip", "link", "set", node_side, "netns", ns])
        run(["ip", "-n", ns, "link", "set", node_side, "name", "eth0"])
    state.remember("veths", host_side)
    run(["ip", "link", "set", host_side, "master", BRIDGE])
    run(["ip", "link", "set", host_side, "up"])
    run(["ip", "-n", ns, "addr", "replace", f"{address}/{prefix_len}", "dev", "eth0"])
    run(["ip", "-n", ns, "link", "set", "eth0", "up"])
    run(["ip", "-n", ns, "link", "set", "lo", "up"])


def remove_network(state: LabState) -> list[str]:
    """Delete the namespaces, veths and bridge in the state; returns what was removed."""
    removed: list[str] = []
    for ns in list(state.netns):
        if _netns_exists(ns):
            run(["ip", "netns", "delete", ns])
            removed.append(f"netns {ns}")
        state.netns.remove(ns)
        state.save()
    for veth in list(state.veths):
        # Deleting a namespace deletes its end of the pair, and with it this end (asynchronously:
        # the link may vanish between the check and the delete).
        if link_exists(veth):
            run(["ip", "link", "delete", veth], check=False)
            if link_exists(veth):
                raise LabError(f"cannot delete veth {veth}")
            removed.append(f"veth {veth}")
        state.veths.remove(veth)
        state.save()
    if state.bridge:
        if link_exists(state.bridge):
            run(["ip", "link", "delete", state.bridge])
            removed.append(f"bridge {state.bridge}")
        state.bridge = ""
        state.save()
    return removed
