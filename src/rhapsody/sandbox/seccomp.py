"""A small seccomp filter for the sandbox: no AF_UNIX sockets, no io_uring.

A read-only bind mount does not stop `connect()` to a Unix socket, so a sandboxed command
could otherwise talk to any host daemon whose socket it can see (docker, LXD, a desktop
bus): `socket(AF_UNIX, ...)` fails with EACCES instead. `socketpair` (pipes between a
command's own processes) still works. io_uring is refused because its operations are
not seen by seccomp. Calls from a foreign ABI (32-bit on a 64-bit kernel, x32) are
refused whole. Written as classic BPF by hand, so no libseccomp is needed; supported on
x86_64 and aarch64 (elsewhere the sandbox runs without it, see docs/security.md).
"""

from __future__ import annotations

import errno
import os
import platform
import struct

_ARCH = {"x86_64": (0xC000003E, 41), "aarch64": (0xC00000B7, 198)}
"""AUDIT_ARCH and the number of socket(2) per machine."""
_IO_URING = (425, 426, 427)
_LD_ABS, _JEQ, _JGE, _RET = 0x20, 0x15, 0x35, 0x06
_ALLOW = 0x7FFF0000
_DENY = 0x00050000 | errno.EACCES
_X32 = 0x40000000
AF_UNIX = 1


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k)


def program() -> bytes | None:
    """The filter for this machine, or None where it is not supported."""
    arch = _ARCH.get(platform.machine())
    if arch is None:
        return None
    audit_arch, nr_socket = arch
    ops = [
        _op(_LD_ABS, 4),                          # 0: arch
        _op(_JEQ, audit_arch, 0, 9),              # 1: foreign ABI -> deny (11)
        _op(_LD_ABS, 0),                          # 2: syscall number
        _op(_JGE, _X32, 7, 0),                    # 3: x32 -> deny
        _op(_JEQ, _IO_URING[0], 6, 0),            # 4
        _op(_JEQ, _IO_URING[1], 5, 0),            # 5
        _op(_JEQ, _IO_URING[2], 4, 0),            # 6
        _op(_JEQ, nr_socket, 0, 2),               # 7: not socket -> allow (10)
        _op(_LD_ABS, 16),                         # 8: args[0] (domain), low word
        _op(_JEQ, AF_UNIX, 1, 0),                 # 9: AF_UNIX -> deny (11)
        _op(_RET, _ALLOW),                        # 10
        _op(_RET, _DENY),                         # 11
    ]
    return b"".join(ops)


def program_fd() -> int | None:
    """A fresh descriptor holding the filter, read from its start (bwrap --seccomp FD); None if unsupported."""
    data = program()
    if data is None:
        return None
    fd = os.memfd_create("rhapsody-seccomp", 0) if hasattr(os, "memfd_create") else None
    if fd is None:
        return None
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
