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
$CRI_CGROUP_PARENT is the pods' cgroup parent (cgroupfs); $CRI_STUBS, see stubs().
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

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
    elif cmd == "list-pods":
        for p in rt.ListPodSandbox(pb.ListPodSandboxRequest()).items:
            print(p.id, pb.PodSandboxState.Name(p.state), p.metadata.name)
    else:
        sys.exit(f"cri.py: unknown command {cmd!r}\n{__doc__}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
