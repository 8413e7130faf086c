"""How a node group gets its power (`cluster.nodes[].power`): always on, powered on and off through
its BMC (Redfish, IPMI as fallback), or created in a cloud when Slurm needs it and deleted when idle.

Slurm decides when (power saving: SuspendTime, ResumeTimeout, ...); gpucluster's own program
(gpucluster/programs/gpucluster_power.py, installed on the controllers by the slurm_power role) is
Slurm's ResumeProgram, SuspendProgram and ResumeFailProgram for these groups. What the timers
default to and which combinations cannot work is decided in gpucluster.model.powered and
gpucluster.checks.power; this module is the shape of the section only.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from gpucluster.model.base import Strict, Update, spec

PowerKind = Literal["always", "bmc", "cloud"]
CloudProvider = Literal["aws", "gcp", "azure", "nebius"]

# A template may name the host: `https://{host}-bmc.example.com`.
HOST_TEMPLATE_RE = r"^[A-Za-z0-9{}._:/\[\]-]+$"
ENDPOINT_RE = r"^https://[A-Za-z0-9{}._\[\]-]+(:\d{1,5})?/?$"
CLOUD_ID_RE = r"^[A-Za-z0-9][A-Za-z0-9_./:@-]*$"

# Seconds from power-on to a registered slurmd when the inventory says nothing: a GPU server's
# firmware (POST with 8 GPUs and several NICs takes minutes), the OS, the NVIDIA driver and fabric
# manager, the InfiniBand links and gpucluster's health check; a cloud GPU instance's boot and its
# first-boot configuration (cloud providers quote 5-10 min for GPU instances).
DEFAULT_BOOT_TIME = {"bmc": 900, "cloud": 600}


class Bmc(Strict):
    """The BMCs of the group's hosts (Redfish; IPMI where a BMC has none). Credentials are Ansible
    variables (vaulted), per host where they differ: slurm_power_bmc_username and
    slurm_power_bmc_password (see roles/slurm_power)."""

    endpoint: Annotated[str, Field(pattern=ENDPOINT_RE)] = spec(
        "Redfish service of each host's BMC, https only, `{host}` standing for the host name (e.g. "
        "https://{host}-bmc.mgmt.example.com). The BMC's certificate is checked (against the "
        "controllers' CAs, or the CA the slurm_power role installs from slurm_power_bmc_ca).",
        Update.RENDER_ONLY,
    )
    system: Annotated[str, Field(pattern=HOST_TEMPLATE_RE)] = spec(
        "Redfish ComputerSystem id under /redfish/v1/Systems/ (`{host}` allowed): e.g. `1` (most "
        "BMCs), `System.Embedded.1` (Dell iDRAC), `system` (OpenBMC).",
        Update.RENDER_ONLY,
        default="1",
    )
    ipmi_fallback: bool = spec(
        "Power the host through IPMI (ipmitool, lanplus, `chassis power`) when its BMC answers no "
        "Redfish service.",
        Update.RENDER_ONLY,
        default=True,
    )
    ipmi_address: Annotated[str, Field(pattern=HOST_TEMPLATE_RE)] | None = spec(
        "IPMI address when it is not the endpoint's host (`{host}` allowed).",
        Update.RENDER_ONLY,
        default=None,
    )


class CloudBurst(Strict):
    """Where a group's nodes are created when Slurm needs them, and how they are bought."""

    provider: CloudProvider = spec("The cloud the nodes are created in.", Update.REBUILD)
    region: Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]+[0-9a-z]$")] = spec(
        "Region (AWS, GCP, Nebius) or location (Azure).", Update.REBUILD
    )
    zone: Annotated[str, Field(pattern=r"^[a-z0-9-]+$")] | None = spec(
        "Zone of the nodes (AWS availability zone, GCP zone, Azure zone number); required on GCP.",
        Update.REBUILD,
        default=None,
    )
    project: Annotated[str, Field(pattern=CLOUD_ID_RE)] | None = spec(
        "GCP project, Azure resource group, or Nebius project id (`project-...`) of the nodes.",
        Update.REBUILD,
        default=None,
    )
    subnet: Annotated[str, Field(pattern=CLOUD_ID_RE)] = spec(
        "Existing subnet the nodes join, routed to the controllers (VPN or interconnect): AWS "
        "`subnet-...`, GCP subnetwork name, Azure subnet resource id, Nebius `vpcsubnet-...`.",
        Update.REBUILD,
    )
    image: Annotated[str, Field(pattern=CLOUD_ID_RE)] = spec(
        "Image the nodes boot, with the NVIDIA driver (AWS AMI id, GCP image URL or family, Azure "
        "image resource id or URN, Nebius image id). Its first boot installs the target release's "
        "slurmd where the image lacks it and joins Slurm configless.",
        Update.REBUILD,
    )
    template: Annotated[str, Field(pattern=CLOUD_ID_RE)] | None = spec(
        "An existing template the nodes are created from (AWS launch template id, GCP instance "
        "template URL, Azure VM resource id to copy, Nebius instance template). Default: the one "
        "the `burst` Pulumi stack creates (stacks/burst), named `<cluster>-<group>`.",
        Update.REBUILD,
        default=None,
    )
    capacity: Literal["on-demand", "spot", "reservation", "capacity-block"] = spec(
        "How the nodes are bought: on demand, spot/preemptible, from a capacity reservation, or "
        "from an AWS EC2 Capacity Block for ML.",
        Update.REBUILD,
        default="on-demand",
    )
    reservation: Annotated[str, Field(pattern=CLOUD_ID_RE)] | None = spec(
        "The reservation drawn from (AWS `cr-...`, GCP reservation name, Azure capacity reservation "
        "group id, Nebius capacity reservation id). Required for `reservation` and `capacity-block`.",
        Update.REBUILD,
        default=None,
    )
    placement: bool = spec(
        "Pack the group close together: AWS cluster placement group, GCP COMPACT placement policy, "
        "Azure proximity placement group, Nebius GPU cluster.",
        Update.REBUILD,
        default=True,
    )
    on_suspend: Literal["delete", "stop"] = spec(
        "What suspending a node does: delete the instance (nothing left to pay) or stop it (its "
        "disk stays and is paid; the next start is faster).",
        Update.RENDER_ONLY,
        default="delete",
    )
    disk_gb: Annotated[int, Field(ge=20, le=65536)] = spec(
        "Boot disk size in GB.", Update.REBUILD, default=200
    )

    @model_validator(mode="after")
    def _reservation_needed(self) -> CloudBurst:
        if self.capacity in ("reservation", "capacity-block") and self.reservation is None:
            raise ValueError(f"capacity `{self.capacity}` draws from a reservation: set `reservation`")
        if self.capacity == "capacity-block" and self.provider != "aws":
            raise ValueError("`capacity-block` is AWS's (EC2 Capacity Blocks for ML): use `reservation`")
        return self


class NodePower(Strict):
    """`cluster.nodes[].power`: how these hosts get power. Only `always` hosts run without Slurm's
    say; the others are off until a job needs them (Slurm's power saving)."""

    kind: PowerKind = spec(
        "`always` (on all the time), `bmc` (bare metal powered on and off through its BMC when Slurm "
        "needs it), `cloud` (instances created when Slurm needs them, deleted or stopped when idle; "
        "Slurm State=CLOUD).",
        Update.RECONFIGURE,
        default="always",
    )
    boot_time: Annotated[int, Field(ge=5, le=65533)] | None = spec(
        "Seconds from power-on until slurmd registers: firmware, OS, NVIDIA driver, fabric and the "
        "health check. ResumeTimeout must exceed it. Default 900 (bmc) or 600 (cloud).",
        Update.RECONFIGURE,
        default=None,
    )
    bmc: Bmc | None = spec("The hosts' BMCs (kind `bmc`).", Update.RENDER_ONLY, default=None)
    cloud: CloudBurst | None = spec(
        "Where the instances are made (kind `cloud`).", Update.REBUILD, default=None
    )

    @model_validator(mode="after")
    def _settings_of_kind(self) -> NodePower:
        if self.kind == "bmc" and self.bmc is None:
            raise ValueError("kind `bmc` powers hosts through their BMCs: give `bmc: {endpoint: ...}`")
        if self.kind == "cloud" and self.cloud is None:
            raise ValueError("kind `cloud` creates instances: give `cloud: {provider: ..., region: ...}`")
        for kind in ("bmc", "cloud"):
            if getattr(self, kind) is not None and self.kind != kind:
                raise ValueError(
                    f"`{kind}` settings belong to kind `{kind}` (this group's kind is `{self.kind}`)"
                )
        return self

    @property
    def saved(self) -> bool:
        """Off until Slurm powers it on."""
        return self.kind != "always"

    @property
    def effective_boot_time(self) -> int:
        if self.boot_time is not None:
            return self.boot_time
        return DEFAULT_BOOT_TIME.get(self.kind, 0)


# The descriptions of the fields spec.py declares (kept here, beside their models).
NODE_POWER = (
    "How these hosts get power: `{kind: always}` (the default), `{kind: bmc, bmc: {...}}` or "
    "`{kind: cloud, cloud: {...}}`; the last two are off until Slurm needs them (power saving with "
    "gpucluster's own programs; timers in cluster.slurm.power_save)."
)
MAX_POWERED = (
    "SlurmctldParameters=max_powered_nodes (Slurm 24.05+): at most this many nodes powered up at "
    "once; jobs needing more wait. A ceiling on what bursting can cost."
)
