#!/usr/bin/env python3
"""A small CRI v1 client over gRPC for tests/runtimes/cri.sh.

The stubs are generated at run time from cri_subset.proto, a minimal hand-written
subset of CRI v1 (see stubs(); nothing generated is committed).
usage: cri.py SOCKET COMMAND [ARGS...]

  run-pod NAME UID NAMESPACE [KEY=VALUE...]   RunPodSandbox (annotations); prints the pod id
  pod-netns POD                               the pod's netns path (PodSandboxStatus, verbose)
  pod-state POD                               SANDBOX_READY or SANDBOX_NOTREADY
  create POD NAME IMAGE CMD...                CreateContainer (the pod's config); prints its id
  start CONTAINER                             StartContainer
  exec-sync CONTAINER CMD...                  ExecSync: prints stdout, exits with the command's code
  stop-pod POD / remove-pod POD               StopPodSandbox / RemovePodSandbox
  list-pods                                   one line per pod: ID STATE NAME
  port-forward POD PORT PATH                  PortForward, then over the streaming server's
                                              WebSocket one `GET PATH HTTP/1.0` to the pod's
                                              PORT: prints the answer; exits 1 with the
                                              error channel's message on stderr
$CRI_CGROUP_PARENT is the pods' cgroup parent (cgroupfs); $CRI_STUBS, see stubs().
"""
import base64
import hashlib
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))


def stubs():
    """Generate the stubs into $CRI_STUBS (kept for the next call; the caller's
    temp dir) or, without it, into a temp dir removed once they are imported."""
    out = os.environ.get("CRI_STUBS") or tempfile.mkdtemp(prefix="podtap-cri-")
    if not os.path.exists(os.path.join(out, "cri_subset_pb2_grpc.py")):
        os.makedirs(out, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "grpc_tools.protoc", "-I", HERE,
             "--python_out", out, "--grpc_python_out", out, "cri_subset.proto"],
            check=True)
    sys.path.insert(0, out)
    import cri_subset_pb2
    import cri_subset_pb2_grpc
    if not os.environ.get("CRI_STUBS"):
        shutil.rmtree(out)
    return cri_subset_pb2, cri_subset_pb2_grpc


def pod_config(pb, name, uid, namespace, annotations):
    """What a kubelet sends for a plain pod: pod netns, own pid ns, no host namespaces."""
    ns = pb.NamespaceOption(network=pb.POD, pid=pb.CONTAINER, ipc=pb.POD)
    return pb.PodSandboxConfig(
        metadata=pb.PodSandboxMetadata(name=name, uid=uid, namespace=namespace, attempt=0),
        hostname=name,
        annotations=annotations,
        labels={"io.kubernetes.pod.name": name},
        linux=pb.LinuxPodSandboxConfig(
            cgroup_parent=os.environ.get("CRI_CGROUP_PARENT", ""),
            security_context=pb.LinuxSandboxSecurityContext(namespace_options=ns)),
    )


def pod_info(pb, rt, pod):
    st = rt.PodSandboxStatus(pb.PodSandboxStatusRequest(pod_sandbox_id=pod, verbose=True))
    return st, json.loads(st.info["info"])


# The Kubernetes streaming port-forward over WebSocket, as containerd 1.6 serves it
# (pkg/cri/streaming/portforward/websocket.go, k8s.io/apiserver/pkg/util/wsstream):
# subprotocol v4.channel.k8s.io (binary), per forwarded port a data channel
# (2n, read-write) and an error channel (2n+1, written by the server only); every
# message's first byte is its channel; the server first writes the port (uint16
# little-endian) on each of the two channels, then the forwarded bytes; client
# frames are masked (RFC 6455).
WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
WS_PROTOCOL = "v4.channel.k8s.io"


def ws_send(sock, opcode, payload):
    """One final, masked frame."""
    head = bytearray([0x80 | opcode])
    n = len(payload)
    if n < 126:
        head.append(0x80 | n)
    elif n < 1 << 16:
        head += bytes([0x80 | 126]) + struct.pack(">H", n)
    else:
        head += bytes([0x80 | 127]) + struct.pack(">Q", n)
    mask = os.urandom(4)
    head += mask
    sock.sendall(bytes(head) + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))


def ws_exact(f, n):
    data = f.read(n)
    if len(data) != n:
        raise EOFError("connection closed mid-frame")
    return data


def ws_messages(f, sock):
    """Yield (opcode, payload) per message (fragments joined) until a close
    frame (answered) or the end of the connection; pings are answered."""
    parts, first_op = [], None
    while True:
        head = f.read(2)
        if len(head) < 2:
            return
        fin, op, n = head[0] & 0x80, head[0] & 0x0F, head[1] & 0x7F
        if n == 126:
            n = struct.unpack(">H", ws_exact(f, 2))[0]
        elif n == 127:
            n = struct.unpack(">Q", ws_exact(f, 8))[0]
        mask = ws_exact(f, 4) if head[1] & 0x80 else None
        data = ws_exact(f, n)
        if mask:
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
        if op == 0x8:
            try:
                ws_send(sock, 0x8, data[:2])
            except OSError:
                pass
            return
        if op == 0x9:
            ws_send(sock, 0xA, data)
            continue
        if op == 0xA:
            continue
        if op != 0x0:
            first_op = op
        parts.append(data)
        if fin:
            yield first_op, b"".join(parts)
            parts = []


def port_forward(url, port, request, timeout=30):
    """Open the port-forward WebSocket at `url` (what PortForward returned) for
    `port`, send `request` on the data channel, and return (data, error): what
    came back on the data channel and on the error channel, the port prefixes
    stripped."""
    u = urllib.parse.urlsplit(url)
    if u.scheme != "http":
        raise SystemExit(f"cri.py: port-forward: unexpected URL {url!r}")
    sock = socket.create_connection((u.hostname, u.port or 80), timeout=timeout)
    key = base64.b64encode(os.urandom(16)).decode()
    query = "&".join(q for q in (u.query, urllib.parse.urlencode({"port": port})) if q)
    sock.sendall((
        f"GET {u.path or '/'}?{query} HTTP/1.1\r\n"
        f"Host: {u.netloc}\r\n"
        "Upgrade: websocket\r\n"
        "Connection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\n"
        "Sec-WebSocket-Version: 13\r\n"
        f"Sec-WebSocket-Protocol: {WS_PROTOCOL}\r\n"
        "\r\n").encode())
    f = sock.makefile("rb")
    status = f.readline().decode(errors="replace").strip()
    headers = {}
    while True:
        line = f.readline()
        if line in (b"\r\n", b"\n", b""):
            break
        k, _, v = line.decode(errors="replace").partition(":")
        headers[k.strip().lower()] = v.strip()
    if status.split(" ")[1:2] != ["101"]:
        body = f.read().decode(errors="replace")
        raise SystemExit(f"cri.py: port-forward: no WebSocket upgrade: {status}: {body}")
    accept = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
    if headers.get("sec-websocket-accept") != accept:
        raise SystemExit(f"cri.py: port-forward: bad Sec-WebSocket-Accept in {headers}")
    if headers.get("sec-websocket-protocol") != WS_PROTOCOL:
        raise SystemExit(f"cri.py: port-forward: subprotocol {headers.get('sec-websocket-protocol')!r}")
    streams = {0: b"", 1: b""}
    prefix = struct.pack("<H", port)
    sent = False
    for op, msg in ws_messages(f, sock):
        if op != 0x2 or not msg:
            continue
        channel, data = msg[0], msg[1:]
        if channel not in streams:
            raise SystemExit(f"cri.py: port-forward: message on channel {channel}")
        streams[channel] += data
        # Once the server has announced the port on both channels, send.
        if not sent and all(len(v) >= 2 for v in streams.values()):
            for v in streams.values():
                if v[:2] != prefix:
                    raise SystemExit(f"cri.py: port-forward: port prefix {v[:2]!r}, not {prefix!r}")
            ws_send(sock, 0x2, bytes([0]) + request)
            sent = True
    sock.close()
    return streams[0][2:], streams[1][2:]


def main(argv):
    sock, cmd, args = argv[1], argv[2], argv[3:]
    import grpc
    pb, pbg = stubs()
    rt = pbg.RuntimeServiceStub(grpc.insecure_channel("unix://" + sock))
    if cmd == "run-pod":
        name, uid, namespace = args[:3]
        ann = dict(a.split("=", 1) for a in args[3:])
        r = rt.RunPodSandbox(pb.RunPodSandboxRequest(
            config=pod_config(pb, name, uid, namespace, ann)))
        print(r.pod_sandbox_id)
    elif cmd == "pod-netns":
        _, info = pod_info(pb, rt, args[0])
        spaces = info["runtimeSpec"]["linux"]["namespaces"]
        print(next(n["path"] for n in spaces if n["type"] == "network"))
    elif cmd == "pod-state":
        st, _ = pod_info(pb, rt, args[0])
        print(pb.PodSandboxState.Name(st.status.state))
    elif cmd == "create":
        pod, name, image, command = args[0], args[1], args[2], args[3:]
        st, info = pod_info(pb, rt, pod)
        meta = st.status.metadata
        sandbox = pod_config(pb, meta.name, meta.uid, meta.namespace,
                             dict(st.status.annotations))
        r = rt.CreateContainer(pb.CreateContainerRequest(
            pod_sandbox_id=pod,
            sandbox_config=sandbox,
            config=pb.ContainerConfig(
                metadata=pb.ContainerMetadata(name=name),
                image=pb.ImageSpec(image=image),
                command=command,
                linux=pb.LinuxContainerConfig(),
            )))
        print(r.container_id)
    elif cmd == "start":
        rt.StartContainer(pb.StartContainerRequest(container_id=args[0]))
    elif cmd == "exec-sync":
        r = rt.ExecSync(pb.ExecSyncRequest(container_id=args[0], cmd=args[1:], timeout=10))
        sys.stdout.write(r.stdout.decode())
        sys.stderr.write(r.stderr.decode())
        return r.exit_code
    elif cmd == "stop-pod":
        rt.StopPodSandbox(pb.StopPodSandboxRequest(pod_sandbox_id=args[0]))
    elif cmd == "remove-pod":
        rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=args[0]))
    elif cmd == "port-forward":
        pod, port, path = args[0], int(args[1]), args[2]
        r = rt.PortForward(pb.PortForwardRequest(pod_sandbox_id=pod, port=[port]))
        data, error = port_forward(r.url, port, f"GET {path} HTTP/1.0\r\n\r\n".encode())
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        if error:
            sys.stderr.write(error.decode(errors="replace") + "\n")
            return 1
        if not data:
            sys.stderr.write("cri.py: port-forward: nothing came back\n")
            return 1
    elif cmd == "list-pods":
        for p in rt.ListPodSandbox(pb.ListPodSandboxRequest()).items:
            print(p.id, pb.PodSandboxState.Name(p.state), p.metadata.name)
    else:
        sys.exit(f"cri.py: unknown command {cmd!r}\n{__doc__}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
