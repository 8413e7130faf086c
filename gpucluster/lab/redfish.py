"""The lab's BMC: a Redfish service on the lab network, in DMTF's resource shapes, that powers the
containers of the lab's power-saved nodes on and off. gpucluster-power's Redfish provider talks to
it exactly as to a server's BMC (HTTPS with the certificate checked, Basic authentication,
ComputerSystem.Reset), so the code that runs in the lab is the code that runs on a site.

- GET /redfish/v1 (ServiceRoot), /redfish/v1/Systems (the collection), /redfish/v1/Systems/<id>
  (ComputerSystem: PowerState On while the container runs, Off while it is stopped);
- POST /redfish/v1/Systems/<id>/Actions/ComputerSystem.Reset {"ResetType": On | ForceOff |
  GracefulShutdown | ForceRestart}: `podman start` (the node boots: systemd, munge, slurmd), `podman
  stop` (systemd shuts down; GracefulShutdown gives it 10 s), `podman restart`.

It runs on the host (where podman is) with its listening socket inside a network namespace of the
lab's own (`<prefix>-lab-bmc`, an address on the lab bridge), so nothing outside the lab reaches it.
`lab up` starts it, `lab down` stops it; its certificate is signed by a CA the lab makes, which the
slurm_power role installs on the controllers (slurm_power_bmc_ca).
"""

from __future__ import annotations

import argparse
import base64
import ctypes
import hmac
import json
import os
import ssl
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from gpucluster.lab import nodes
from gpucluster.lab.paths import podman_env

BMC_HOST = "lab-bmc"
BMC_PORT = 8443
RESET_TYPES = ("On", "ForceOff", "GracefulShutdown", "ForceRestart")
GRACEFUL_SECONDS = 10
CLONE_NEWNET = 0x40000000
ODATA_VERSION = "4.0"


def message(message_id: str, text: str) -> dict[str, Any]:
    """A Redfish error body (Base message registry)."""
    return {
        "error": {
            "code": f"Base.1.8.{message_id}",
            "message": text,
            "@Message.ExtendedInfo": [
                {
                    "@odata.type": "#Message.v1_1_1.Message",
                    "MessageId": f"Base.1.8.{message_id}",
                    "Message": text,
                    "Severity": "Critical",
                }
            ],
        }
    }


class LabBmc:
    """The systems (Redfish id -> lab container) and what their power does."""

    def __init__(self, systems: dict[str, str], username: str, password: str) -> None:
        self.systems = systems
        self.username = username
        self.password = password
        self.lock = threading.Lock()

    def power_state(self, system: str) -> str:
        return "On" if nodes.container_running(self.systems[system]) else "Off"

    def resource(self, system: str) -> dict[str, Any]:
        state = self.power_state(system)
        path = f"/redfish/v1/Systems/{system}"
        return {
            "@odata.id": path,
            "@odata.type": "#ComputerSystem.v1_20_0.ComputerSystem",
            "Id": system,
            "Name": f"lab node {system}",
            "SystemType": "Physical",
            "HostName": self.systems[system].split("-", 1)[-1],
            "PowerState": state,
            "Status": {"State": "Enabled" if state == "On" else "StandbyOffline", "Health": "OK"},
            "Actions": {
                "#ComputerSystem.Reset": {
                    "target": f"{path}/Actions/ComputerSystem.Reset",
                    "ResetType@Redfish.AllowableValues": list(RESET_TYPES),
                }
            },
        }

    def reset(self, system: str, reset_type: str) -> None:
        name = self.systems[system]
        with self.lock:
            if reset_type == "On":
                if not nodes.container_running(name):
                    nodes.start_container(name)
            elif reset_type in ("ForceOff", "GracefulShutdown"):
                seconds = GRACEFUL_SECONDS if reset_type == "GracefulShutdown" else 0
                # The BMC answers at once; the node shuts down meanwhile, as a server's does.
                threading.Thread(target=self._stop, args=(name, seconds), daemon=True).start()
            elif reset_type == "ForceRestart":
                nodes.podman("restart", "--time", "0", name)

    @staticmethod
    def _stop(name: str, seconds: int) -> None:
        subprocess.run(
            ["podman", "stop", "--time", str(seconds), name],
            env=podman_env(),
            capture_output=True,
            check=False,
            timeout=seconds + 60,
        )

    def authorized(self, header: str | None) -> bool:
        if not header or not header.startswith("Basic "):
            return False
        try:
            user, _, password = base64.b64decode(header[6:]).decode().partition(":")
        except ValueError:
            return False
        return hmac.compare_digest(user, self.username) and hmac.compare_digest(password, self.password)


def handler_for(bmc: LabBmc) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "gpucluster-lab-bmc"

        def log_message(self, format: str, *args: Any) -> None:
            sys.stderr.write(f"{self.address_string()} {format % args}\n")

        def send(self, status: int, body: dict[str, Any] | None = None) -> None:
            data = json.dumps(body).encode() if body is not None else b""
            self.send_response(status)
            self.send_header("OData-Version", ODATA_VERSION)
            if body is not None:
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if status == 401:
                self.send_header("WWW-Authenticate", 'Basic realm="lab-bmc"')
            self.end_headers()
            self.wfile.write(data)

        def system_of(self, parts: list[str]) -> str | None:
            if len(parts) >= 4 and parts[:3] == ["redfish", "v1", "Systems"]:
                return parts[3] if parts[3] in bmc.systems else None
            return None

        def do_GET(self) -> None:
            parts = [p for p in self.path.split("?")[0].split("/") if p]
            if parts == ["redfish", "v1"]:  # the service root answers without credentials
                self.send(200, {
                    "@odata.id": "/redfish/v1", "@odata.type": "#ServiceRoot.v1_15_0.ServiceRoot",
                    "Id": "RootService", "Name": "gpucluster lab BMC", "RedfishVersion": "1.17.0",
                    "Systems": {"@odata.id": "/redfish/v1/Systems"},
                })  # fmt: skip
                return
            if not bmc.authorized(self.headers.get("Authorization")):
                self.send(
                    401,
                    message(
                        "InsufficientPrivilege",
                        "There are insufficient privileges for the account or credentials associated with the current session to perform the requested operation.",
                    ),
                )
                return
            if parts == ["redfish", "v1", "Systems"]:
                members = [{"@odata.id": f"/redfish/v1/Systems/{s}"} for s in sorted(bmc.systems)]
                self.send(200, {
                    "@odata.id": "/redfish/v1/Systems",
                    "@odata.type": "#ComputerSystemCollection.ComputerSystemCollection",
                    "Name": "Computer System Collection", "Members@odata.count": len(members), "Members": members,
                })  # fmt: skip
                return
            system = self.system_of(parts)
            if system is None or len(parts) != 4:
                self.send(
                    404,
                    message(
                        "ResourceNotFound",
                        f"The requested resource of type ComputerSystem named '{'/'.join(parts[3:])}' was not found.",
                    ),
                )
                return
            self.send(200, bmc.resource(system))

        def do_POST(self) -> None:
            parts = [p for p in self.path.split("?")[0].split("/") if p]
            if not bmc.authorized(self.headers.get("Authorization")):
                self.send(
                    401,
                    message(
                        "InsufficientPrivilege",
                        "There are insufficient privileges for the account or credentials associated with the current session to perform the requested operation.",
                    ),
                )
                return
            system = self.system_of(parts)
            if system is None or parts[4:] != ["Actions", "ComputerSystem.Reset"]:
                self.send(
                    404, message("ResourceNotFound", f"The requested resource '{self.path}' was not found.")
                )
                return
            try:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                reset_type = body["ResetType"]
            except (ValueError, KeyError, TypeError):
                self.send(
                    400,
                    message(
                        "ActionParameterMissing",
                        "The action ComputerSystem.Reset requires the parameter ResetType to be present in the request body.",
                    ),
                )
                return
            if reset_type not in RESET_TYPES:
                self.send(
                    400,
                    message(
                        "ActionParameterNotSupported",
                        f"The parameter ResetType for the action ComputerSystem.Reset is not supported on the target resource: {reset_type}.",
                    ),
                )
                return
            try:
                bmc.reset(system, reset_type)
            except Exception as exc:  # the BMC reports its failure; the service stays up
                self.send(500, message("GeneralError", f"ResetType {reset_type} failed: {exc}"))
                return
            self.send(204)

    return Handler


def bind_in_netns(netns: str, address: str, port: int) -> ThreadingHTTPServer:
    """A server socket bound inside the lab's namespace `netns`, made from this thread, which then
    returns to its own namespace (podman, which the handlers run, lives there)."""
    libc = ctypes.CDLL(None, use_errno=True)
    own = os.open("/proc/self/ns/net", os.O_RDONLY)
    target = os.open(f"/run/netns/{netns}", os.O_RDONLY)
    try:
        if libc.setns(target, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into {netns}")
        try:
            return ThreadingHTTPServer((address, port), BaseHTTPRequestHandler, bind_and_activate=True)
        finally:
            if libc.setns(own, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns back")
    finally:
        os.close(own)
        os.close(target)


def serve(args: argparse.Namespace) -> None:
    config = json.loads(Path(args.config).read_text(encoding="utf-8"))
    bmc = LabBmc(config["systems"], config["username"], config["password"])
    server = (
        bind_in_netns(args.netns, args.address, args.port)
        if args.netns
        else ThreadingHTTPServer((args.address, args.port), BaseHTTPRequestHandler)
    )
    server.RequestHandlerClass = handler_for(bmc)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(args.cert, args.key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    if args.ready:
        Path(args.ready).write_text(f"{server.server_address[1]}\n", encoding="utf-8")
    server.serve_forever()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="the lab's Redfish BMC")
    parser.add_argument("--config", required=True, help="JSON: systems (id -> container), username, password")
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--address", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=BMC_PORT)
    parser.add_argument("--netns", default="")
    parser.add_argument("--ready", default="", help="file written once the service listens")
    serve(parser.parse_args(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
