"""The seccomp filter every sandbox installs: process control a generator never needs (ptrace,
process_vm_readv/writev, kcmp, pidfd_getfd) is denied with EPERM."""

from __future__ import annotations

import ctypes
import os
import struct
from collections.abc import Callable

from git_genjob.worker.generators.sandbox.kernel import load_libc

# Process control a generator never needs, denied (EPERM) by a seccomp filter in every sandbox:
# a generator that PTRACE_ATTACHes its own `sh` parent would stop it, and the attempt with it,
# until the timeout. By audit architecture: ptrace, process_vm_readv/writev, kcmp, pidfd_getfd.
SECCOMP_DENIED = {
    0xC000003E: (101, 310, 311, 312, 438),  # x86_64 (and any x32 call, which it denies whole)
    0x40000003: (26, 347, 348, 349, 438),  # i386, reachable from x86_64 by int 0x80
    0xC00000B7: (117, 270, 271, 272, 438),  # aarch64
}

_BPF_LD_ABS, _BPF_JEQ, _BPF_JGE, _BPF_RET = 0x20, 0x15, 0x35, 0x06

_RET_ALLOW, _RET_EPERM = 0x7FFF0000, 0x00050000 | 1

PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2


def seccomp_program() -> bytes:
    """The filter as the kernel takes it: struct sock_filter[] (u16 code, u8 jt, u8 jf, u32 k),
    on struct seccomp_data (nr at offset 0, arch at 4). What bwrap --seccomp FD reads."""
    code: list[tuple[int, int, int, int]] = [(_BPF_LD_ABS, 0, 0, 4)]
    for arch, nrs in SECCOMP_DENIED.items():
        body: list[tuple[int, int, int, int]] = [(_BPF_LD_ABS, 0, 0, 0)]
        if arch == 0xC000003E:
            body.append((_BPF_JGE, 0xFF, 0, 0x40000000))  # x32: jt patched to the deny below
        body += [(_BPF_JEQ, 0xFF, 0, nr) for nr in nrs]
        body.append((_BPF_RET, 0, 0, _RET_ALLOW))
        code.append((_BPF_JEQ, 0, len(body), arch))
        code += body
    code.append((_BPF_RET, 0, 0, _RET_ALLOW))  # another architecture: as the kernel has it
    deny = len(code)
    code.append((_BPF_RET, 0, 0, _RET_EPERM))
    out = bytearray()
    for i, (op, jt, jf, k) in enumerate(code):
        if jt == 0xFF:
            jt = deny - i - 1
        out += struct.pack("=HBBI", op, jt, jf, k)
    return bytes(out)


def seccomp_fd() -> int:
    """A pipe's read end holding the filter, for bwrap --seccomp FD (the caller closes it)."""
    prog = seccomp_program()
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, prog)
    finally:
        os.close(write_end)
    return read_end


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def seccomp_applier() -> Callable[[], None]:
    """What installs the filter on the calling thread (no_new_privs must be set first): built
    here, so the forked child only makes the call."""
    prog = ctypes.create_string_buffer(seccomp_program())
    fprog = _SockFprog(len(prog.raw) // 8, ctypes.cast(prog, ctypes.c_void_p))
    libc = load_libc()

    def apply() -> None:
        _ = prog  # kept alive with the closure
        if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")

    return apply
