#!/usr/bin/env python3
"""Cloud Hypervisor through its REST API, TAP fds passed as SCM_RIGHTS.

Run it under podtap's fd handover. `podtap exec --vmm cloud-hypervisor` opens
every TAP queue inside the pod netns, keeps the fds open across exec and
appends one `--net fd=[3,4],mac=...,num_queues=4,id=net0` per NIC to this
script's arguments:

    podtap exec --id ID --vmm cloud-hypervisor -- \\
        python3 cloud-hypervisor-api.py --kernel vmlinuz --initramfs initrd.gz \\
            --cmdline "console=ttyS0 $(podtap render guest-args --id ID)"

The script then
  1. starts `cloud-hypervisor --api-socket path=SOCKET` (or, with --no-start,
     talks to one already listening on --api-socket);
  2. PUT /api/v1/vm.create: CPUs, memory, payload, and no NICs (vm.create
     cannot carry fds);
  3. PUT /api/v1/vm.add-net once per NIC: the NetConfig body (mac, num_queues,
     id; no fd, fds inside the JSON are ignored), with that NIC's queue fds
     attached as SCM_RIGHTS to the sendmsg that carries the HTTP request;
  4. PUT /api/v1/vm.boot;
  5. waits for cloud-hypervisor to exit and returns its exit status.

Cloud Hypervisor needs /dev/kvm. Needs Python 3.9+ (socket.send_fds).
"""

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

NUMERIC_KEYS = {"num_queues", "queue_size", "mtu", "pci_segment"}


def parse_net(value):
    """`fd=[3,4],mac=M,num_queues=4,id=net0` -> (fds, NetConfig body)."""
    match = re.search(r"(?:^|,)fd=\[([0-9,]*)\]", value)
    if not match:
        raise SystemExit(f"--net {value!r}: no fd=[...] (run under `podtap exec --vmm cloud-hypervisor`)")
    fds = [int(fd) for fd in match.group(1).split(",") if fd]
    rest = (value[: match.start()] + "," + value[match.end():]).strip(",")
    body = {}
    for item in filter(None, rest.split(",")):
        key, _, val = item.partition("=")
        body[key] = int(val) if key in NUMERIC_KEYS else val
    return fds, body


def request(api_socket, method, path, body=None, fds=()):
    """One HTTP/1.1 request over the API socket; returns (status, response body)."""
    data = b"" if body is None else json.dumps(body).encode()
    head = (
        f"{method} {path} HTTP/1.1\r\n"
        "Host: localhost\r\n"
        "Accept: application/json\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\n"
        "\r\n"
    ).encode()
    message = head + data
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(api_socket)
        if fds:
            # The fds travel with the first bytes of the request.
            sent = socket.send_fds(sock, [message], list(fds))
            # Only if bytes are left: the server may already have answered
            # and closed, and even an empty send then fails with EPIPE.
            if sent < len(message):
                sock.sendall(message[sent:])
        else:
            sock.sendall(message)
        return read_response(sock, f"{method} {path}")


def read_response(sock, what):
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise SystemExit(f"{what}: connection closed before a response")
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    length = 0
    for line in lines[1:]:
        name, _, val = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(val.strip())
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        rest += chunk
    return status, rest[:length].decode("utf-8", "replace")


def call(api_socket, method, path, body=None, fds=()):
    status, text = request(api_socket, method, path, body, fds)
    print(f"cloud-hypervisor-api: {method} {path} -> {status}", file=sys.stderr)
    if status >= 300:
        raise SystemExit(f"{method} {path}: HTTP {status}: {text}")
    return text


def wait_for_socket(path, child, seconds=10.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if child is not None and child.poll() is not None:
            raise SystemExit(f"cloud-hypervisor exited with {child.returncode} before listening")
        if os.path.exists(path):
            return
        time.sleep(0.05)
    raise SystemExit(f"no API socket at {path} after {seconds} s")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kernel", required=True)
    parser.add_argument("--initramfs")
    parser.add_argument("--cmdline", default="console=ttyS0")
    parser.add_argument("--memory-mib", type=int, default=256)
    parser.add_argument("--cpus", type=int, help="default: enough for the largest NIC's queues")
    parser.add_argument("--api-socket", help="default: a fresh path in a temp dir")
    parser.add_argument("--no-start", action="store_true", help="use a cloud-hypervisor already on --api-socket")
    parser.add_argument("--cloud-hypervisor", default=os.environ.get("CLOUD_HYPERVISOR", "cloud-hypervisor"))
    parser.add_argument("--net", action="append", default=[], help="appended by `podtap exec --vmm cloud-hypervisor`")
    args = parser.parse_args()

    nics = [parse_net(value) for value in args.net]
    if not nics:
        raise SystemExit("no --net arguments: run under `podtap exec --id ID --vmm cloud-hypervisor --`")
    # num_queues counts rx + tx; Cloud Hypervisor wants num_queues/2 <= boot vCPUs.
    cpus = args.cpus or max(body.get("num_queues", 2) // 2 for _, body in nics)

    api_socket = args.api_socket or os.path.join(tempfile.mkdtemp(prefix="ch-api-"), "api.sock")
    child = None
    if not args.no_start:
        # close_fds (the default) keeps the TAP fds out of the child: they reach
        # it over the socket, as they would reach an already running VMM.
        child = subprocess.Popen([args.cloud_hypervisor, "--api-socket", f"path={api_socket}"])
    try:
        wait_for_socket(api_socket, child)
        payload = {"kernel": args.kernel, "cmdline": args.cmdline}
        if args.initramfs:
            payload["initramfs"] = args.initramfs
        call(api_socket, "PUT", "/api/v1/vm.create", {
            "cpus": {"boot_vcpus": cpus, "max_vcpus": cpus},
            "memory": {"size": args.memory_mib << 20},
            "payload": payload,
            "serial": {"mode": "Tty"},
            "console": {"mode": "Off"},
        })
        for fds, body in nics:
            call(api_socket, "PUT", "/api/v1/vm.add-net", body, fds)
            for fd in fds:
                os.close(fd)  # Cloud Hypervisor holds its own copies now.
        call(api_socket, "PUT", "/api/v1/vm.boot")
    except BaseException:
        if child is not None:
            child.kill()
            child.wait()
        raise
    return child.wait() if child is not None else 0


if __name__ == "__main__":
    sys.exit(main())
