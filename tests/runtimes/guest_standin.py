#!/usr/bin/env python3
"""A guest stand-in for tests without a VM: the VMM's side of a TAP.

usage: guest_standin.py POD_NETNS GUEST_NETNS TAP GUEST_IF

Opens TAP in the pod netns as a VMM does (TUNSETIFF on the existing device,
IFF_TAP|IFF_NO_PI|IFF_VNET_HDR, the flags podtap made it with), creates the
TAP GUEST_IF in GUEST_NETNS (the "guest kernel's NIC", configured by the
caller) and copies frames both ways. When the pod's TAP goes away (the kernel
then fails reads on the fd with EBADFD, or EFAULT while the deletion runs), it opens the TAP of that name again
once it is back, as a VMM restarted or re-plugged by `podtap watch` would.
Prints "READY" once both ends are open and "REOPENED" after each re-open.
Runs until killed; never touches the root netns.
"""
import ctypes
import errno
import fcntl
import os
import select
import socket
import struct
import sys
import time

CLONE_NEWNET = 0x40000000
TUNSETIFF = 0x400454CA
TUNGETVNETHDRSZ = 0x800454D7
IFF_TAP, IFF_NO_PI, IFF_VNET_HDR = 0x0002, 0x1000, 0x4000

libc = ctypes.CDLL(None, use_errno=True)


def enter(path):
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns {path}: {os.strerror(err)}")
    finally:
        os.close(fd)


def open_tap(name, flags):
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_CLOEXEC)
    try:
        fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH22x", name.encode(), flags))
    except OSError:
        os.close(fd)
        raise
    return fd


def open_pod_tap(pod, name):
    """Open the pod's TAP, waiting for it to exist; returns (fd, vnet header size)."""
    enter(pod)
    while True:
        # TUNSETIFF on a name that does not exist creates a TAP of that name:
        # open only a TAP that is there (its index, looked up by a socket of
        # this thread's netns), so podtap never finds its name taken.
        try:
            socket.if_nametoindex(name)
        except OSError:
            time.sleep(0.02)
            continue
        try:
            fd = open_tap(name, IFF_TAP | IFF_NO_PI | IFF_VNET_HDR)
            size = struct.unpack("i", fcntl.ioctl(fd, TUNGETVNETHDRSZ, b"\0" * 4))[0]
            return fd, size
        except OSError:
            time.sleep(0.02)


def main():
    pod, guest, tap, guest_if = sys.argv[1:5]
    pod_fd, hdr = open_pod_tap(pod, tap)
    enter(guest)
    guest_fd = open_tap(guest_if, IFF_TAP | IFF_NO_PI)
    print("READY", flush=True)
    while True:
        ready, _, _ = select.select([pod_fd, guest_fd], [], [], 1.0)
        if pod_fd in ready:
            try:
                frame = os.read(pod_fd, 65536 + hdr)
            except OSError as e:
                if e.errno not in (errno.EBADFD, errno.EFAULT):
                    raise
                # The pod's TAP was deleted under the open fd: wait for the
                # TAP of that name to come back and open it again. A read
                # woken by the deletion itself fails with EFAULT, not EBADFD:
                # tun_detach_all() shuts the queue down (RCV_SHUTDOWN) and
                # wakes the reader before it detaches the queue from the TAP,
                # and tun_ring_recv() answers an empty queue that is shut
                # down with -EFAULT. A VMM's read loop sees the same.
                os.close(pod_fd)
                pod_fd, hdr = open_pod_tap(pod, tap)
                print("REOPENED", flush=True)
                continue
            send(guest_fd, frame[hdr:])
        if guest_fd in ready:
            frame = os.read(guest_fd, 65536)
            send(pod_fd, bytes(hdr) + frame)


def send(fd, frame):
    """Write one frame; a TAP that is down (EIO) or gone (EBADFD) loses it, as a wire would."""
    try:
        os.write(fd, frame)
    except OSError as e:
        if e.errno not in (errno.EIO, errno.EBADFD):
            raise


if __name__ == "__main__":
    main()
