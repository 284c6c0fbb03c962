#!/usr/bin/env python3
# @HEADER@
"""Standalone repro of a gpuprobe native copy probe: one case of host <-> device copies
through the CUDA driver API (libcuda.so.1) or the HIP runtime (libamdhip64.so), called
with ctypes. Needs no PyTorch and no gpuprobe.

python repro.py [--device N] [--api cuda|hip]

Last line and exit code: REPRODUCED: ... (1), NOT REPRODUCED: ... (0), CANNOT RUN: ... (2).
"""
import argparse
import ctypes
import json
import os
import random
import subprocess
import sys

CASE = json.loads(@CASE@)
CANARY = 0xC3
# Seeded bytes with no zero and no canary byte, so "zero" and "unchanged" are unambiguous.
NO_ZERO_NO_CANARY = bytes.maketrans(b"\x00\xc3", b"\x01\x3c")
CHUNK = 64 << 20


class ApiError(Exception):
    pass


def cannot_run(why):
    print("CANNOT RUN: " + why)
    sys.exit(2)


def declare(lib, name, *argtypes):
    fn = getattr(lib, name)
    fn.argtypes = list(argtypes)
    fn.restype = ctypes.c_int
    return fn


P, U64, SZ, I, U = ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_int, ctypes.c_uint


class Cuda:
    name = "CUDA driver API"

    def __init__(self, index):
        self.lib = ctypes.CDLL("libcuda.so.1")
        L = self.lib
        self.fn = {
            "cuInit": declare(L, "cuInit", U),
            "cuDriverGetVersion": declare(L, "cuDriverGetVersion", ctypes.POINTER(I)),
            "cuDeviceGet": declare(L, "cuDeviceGet", ctypes.POINTER(I), I),
            "cuDeviceGetName": declare(L, "cuDeviceGetName", ctypes.c_char_p, I, I),
            "cuDevicePrimaryCtxRetain": declare(L, "cuDevicePrimaryCtxRetain", ctypes.POINTER(P), I),
            "cuCtxSetCurrent": declare(L, "cuCtxSetCurrent", P),
            "cuMemAlloc_v2": declare(L, "cuMemAlloc_v2", ctypes.POINTER(U64), SZ),
            "cuMemFree_v2": declare(L, "cuMemFree_v2", U64),
            "cuMemsetD8_v2": declare(L, "cuMemsetD8_v2", U64, ctypes.c_ubyte, SZ),
            "cuMemHostAlloc": declare(L, "cuMemHostAlloc", ctypes.POINTER(P), SZ, U),
            "cuMemFreeHost": declare(L, "cuMemFreeHost", P),
            "cuStreamCreate": declare(L, "cuStreamCreate", ctypes.POINTER(P), U),
            "cuStreamSynchronize": declare(L, "cuStreamSynchronize", P),
            "cuMemcpyHtoD_v2": declare(L, "cuMemcpyHtoD_v2", U64, P, SZ),
            "cuMemcpyDtoH_v2": declare(L, "cuMemcpyDtoH_v2", P, U64, SZ),
            "cuMemcpyDtoD_v2": declare(L, "cuMemcpyDtoD_v2", U64, U64, SZ),
            "cuMemcpyHtoDAsync_v2": declare(L, "cuMemcpyHtoDAsync_v2", U64, P, SZ, P),
            "cuMemcpyDtoHAsync_v2": declare(L, "cuMemcpyDtoHAsync_v2", P, U64, SZ, P),
        }
        self.call("cuInit", 0)
        v = I()
        self.call("cuDriverGetVersion", ctypes.byref(v))
        self.version = "driver API %d.%d" % (v.value // 1000, v.value % 1000 // 10)
        dev = I()
        self.call("cuDeviceGet", ctypes.byref(dev), index)
        buf = ctypes.create_string_buffer(256)
        self.call("cuDeviceGetName", buf, 256, dev)
        self.device_name = buf.value.decode(errors="replace")
        ctx = P()
        self.call("cuDevicePrimaryCtxRetain", ctypes.byref(ctx), dev)
        self.call("cuCtxSetCurrent", ctx)

    def call(self, name, *args):
        rc = self.fn[name](*args)
        if rc != 0:
            text = ctypes.c_char_p()
            self.lib.cuGetErrorName(rc, ctypes.byref(text))
            raise ApiError("%s failed: %s (%d)" % (name, (text.value or b"?").decode(), rc))

    def alloc(self, n):
        p = U64()
        self.call("cuMemAlloc_v2", ctypes.byref(p), n)
        return p.value

    def free(self, p):
        self.call("cuMemFree_v2", p)

    def memset(self, p, value, n):
        self.call("cuMemsetD8_v2", p, value, n)

    def host_alloc(self, n):
        p = P()
        self.call("cuMemHostAlloc", ctypes.byref(p), n, 0)
        return p.value

    def host_free(self, p):
        self.call("cuMemFreeHost", p)

    def stream(self):
        s = P()
        self.call("cuStreamCreate", ctypes.byref(s), 0)
        return s

    def htod(self, d, h, n, stream):
        if stream is None:
            self.call("cuMemcpyHtoD_v2", d, h, n)
        else:
            self.call("cuMemcpyHtoDAsync_v2", d, h, n, stream)
            self.call("cuStreamSynchronize", stream)

    def dtoh(self, h, d, n, stream):
        if stream is None:
            self.call("cuMemcpyDtoH_v2", h, d, n)
        else:
            self.call("cuMemcpyDtoHAsync_v2", h, d, n, stream)
            self.call("cuStreamSynchronize", stream)

    def dtod(self, dst, src, n):
        self.call("cuMemcpyDtoD_v2", dst, src, n)


class Hip:
    name = "HIP runtime"

    def __init__(self, index):
        errors = []
        for soname in ("libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5"):
            try:
                self.lib = ctypes.CDLL(soname)
                break
            except OSError as e:
                errors.append(str(e))
        else:
            raise OSError("; ".join(errors))
        L = self.lib
        L.hipGetErrorName.restype = ctypes.c_char_p
        L.hipGetErrorName.argtypes = [I]
        self.fn = {
            "hipInit": declare(L, "hipInit", U),
            "hipRuntimeGetVersion": declare(L, "hipRuntimeGetVersion", ctypes.POINTER(I)),
            "hipSetDevice": declare(L, "hipSetDevice", I),
            "hipDeviceGetName": declare(L, "hipDeviceGetName", ctypes.c_char_p, I, I),
            "hipMalloc": declare(L, "hipMalloc", ctypes.POINTER(P), SZ),
            "hipFree": declare(L, "hipFree", P),
            "hipMemset": declare(L, "hipMemset", P, I, SZ),
            "hipHostMalloc": declare(L, "hipHostMalloc", ctypes.POINTER(P), SZ, U),
            "hipHostFree": declare(L, "hipHostFree", P),
            "hipStreamCreate": declare(L, "hipStreamCreate", ctypes.POINTER(P)),
            "hipStreamSynchronize": declare(L, "hipStreamSynchronize", P),
            "hipMemcpy": declare(L, "hipMemcpy", P, P, SZ, I),
            "hipMemcpyAsync": declare(L, "hipMemcpyAsync", P, P, SZ, I, P),
        }
        self.call("hipInit", 0)
        v = I()
        self.call("hipRuntimeGetVersion", ctypes.byref(v))
        self.version = "runtime %d" % v.value
        self.call("hipSetDevice", index)
        buf = ctypes.create_string_buffer(256)
        self.call("hipDeviceGetName", buf, 256, index)
        self.device_name = buf.value.decode(errors="replace")

    def call(self, name, *args):
        rc = self.fn[name](*args)
        if rc != 0:
            text = self.lib.hipGetErrorName(rc) or b"?"
            raise ApiError("%s failed: %s (%d)" % (name, text.decode(), rc))

    def alloc(self, n):
        p = P()
        self.call("hipMalloc", ctypes.byref(p), n)
        return p.value

    def free(self, p):
        self.call("hipFree", p)

    def memset(self, p, value, n):
        self.call("hipMemset", p, value, n)

    def host_alloc(self, n):
        p = P()
        self.call("hipHostMalloc", ctypes.byref(p), n, 0)
        return p.value

    def host_free(self, p):
        self.call("hipHostFree", p)

    def stream(self):
        s = P()
        self.call("hipStreamCreate", ctypes.byref(s))
        return s

    def htod(self, d, h, n, stream):
        if stream is None:
            self.call("hipMemcpy", d, h, n, 1)
        else:
            self.call("hipMemcpyAsync", d, h, n, 1, stream)
            self.call("hipStreamSynchronize", stream)

    def dtoh(self, h, d, n, stream):
        if stream is None:
            self.call("hipMemcpy", h, d, n, 2)
        else:
            self.call("hipMemcpyAsync", h, d, n, 2, stream)
            self.call("hipStreamSynchronize", stream)

    def dtod(self, dst, src, n):
        self.call("hipMemcpy", dst, src, n, 3)


def open_api(api, index):
    tried = []
    for kind in ([api] if api != "auto" else ["cuda", "hip"]):
        try:
            return (Cuda if kind == "cuda" else Hip)(index)
        except OSError as e:
            tried.append("%s: not loadable (%s)" % (kind, e))
        except (ApiError, AttributeError) as e:
            tried.append("%s: %s" % (kind, e))
    cannot_run("no usable GPU runtime: " + "; ".join(tried))


def fill(addr, n, seed):
    rng = random.Random(seed)
    for off in range(0, n, CHUNK):
        k = min(CHUNK, n - off)
        ctypes.memmove(addr + off, rng.randbytes(k).translate(NO_ZERO_NO_CANARY), k)


def compare(src, dst, n, report):
    """Bytes that differ, all-zero flag, and the first few (index, expected, actual)."""
    differ, zero, first = 0, True, []
    for off in range(0, n, CHUNK):
        k = min(CHUNK, n - off)
        a, b = ctypes.string_at(src + off, k), ctypes.string_at(dst + off, k)
        zero = zero and b.count(0) == k
        if a != b:
            for i in range(k):
                if a[i] != b[i]:
                    differ += 1
                    if len(first) < report:
                        first.append((off + i, a[i], b[i]))
    return differ, zero, first


def host_buffer(api, n, pinned):
    if pinned:
        return api.host_alloc(n), True
    buf = ctypes.create_string_buffer(n)
    host_buffer.keep.append(buf)
    return ctypes.addressof(buf), False


host_buffer.keep = []


def run_case(args):
    c = CASE
    api = open_api(args.api, args.device)
    n = c["bytes"]
    print("api: %s (%s)" % (api.name, api.version))
    print("device %d: %s" % (args.device, api.device_name))
    print("case: %s" % c["summary"])
    print("expected: every byte read back equals the byte sent (bit for bit); a canary 0x%02x marks bytes never written" % CANARY)
    try:
        dev = api.alloc(n)
        dev2 = api.alloc(n) if c["d2d"] else None
        src, src_pinned = host_buffer(api, n, c["pinned"])
        dst, dst_pinned = host_buffer(api, n, c["pinned"])
        stream = api.stream() if c["async"] else None
    except ApiError as e:
        cannot_run("cannot set the case up: %s" % e)
    failed, zero_trials, shown = 0, 0, 0
    try:
        for trial in range(c["trials"]):
            fill(src, n, c["seed"] + trial)
            ctypes.memset(dst, CANARY, n)
            api.memset(dev, CANARY, n)
            api.htod(dev, src, n, stream)
            if c["d2d"]:
                api.memset(dev2, CANARY, n)
                api.dtod(dev2, dev, n)
                api.dtoh(dst, dev2, n, stream)
            else:
                api.dtoh(dst, dev, n, stream)
            differ, zero, first = compare(src, dst, n, 8)
            if differ:
                failed += 1
                zero_trials += zero
                if shown < 3:
                    shown += 1
                    print("trial %d: %d of %d bytes differ%s" % (trial, differ, n, " (all zeros)" if zero else ""))
                    for index, want, got in first:
                        print("  [%d] expected 0x%02x actual 0x%02x%s" % (index, want, got, " (canary: never written)" if got == CANARY else ""))
    except ApiError as e:
        print("REPRODUCED: %s" % e)
        sys.exit(1)
    finally:
        for p, pinned in ((src, src_pinned), (dst, dst_pinned)):
            if pinned:
                try:
                    api.host_free(p)
                except ApiError:
                    pass
    what = "%d round trip(s) of %d B" % (c["trials"], n)
    if failed:
        zeros = " (all zeros in %d)" % zero_trials if zero_trials else ""
        print("REPRODUCED: %d of %s came back wrong%s" % (failed, what, zeros))
        sys.exit(1)
    print("NOT REPRODUCED: %s came back intact" % what)
    sys.exit(0)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", type=int, default=CASE["device"])
    parser.add_argument("--api", choices=["auto", "cuda", "hip"], default=CASE["api"])
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    for name, value in CASE["env"].items():
        os.environ[name] = value
    if not args.child:
        print("gpuprobe native repro: %s (Python %s)" % (CASE["probe"], sys.version.split()[0]))
    if CASE["crash_child"] and not args.child:
        # A crash or hang must not take the reporting process with it.
        command = [sys.executable, os.path.abspath(__file__), "--child", "--device", str(args.device), "--api", args.api]
        sys.stdout.flush()
        try:
            child = subprocess.run(command, timeout=CASE["hang_s"])
        except subprocess.TimeoutExpired:
            print("REPRODUCED: hang (no result in %d s)" % CASE["hang_s"])
            sys.exit(1)
        if child.returncode < 0:
            print("REPRODUCED: crash (signal %d)" % -child.returncode)
            sys.exit(1)
        sys.exit(child.returncode)
    run_case(args)


if __name__ == "__main__":
    main()
