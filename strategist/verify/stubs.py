"""What MindSpore needs to run its parallel front end on this machine, built once into the user's cache.

MindSpore 2.9.0 refuses an auto-parallel compile for the CPU device target. On a CPU-only machine we
let its GPU plugin (``lib/plugin/libmindspore_gpu.so.11.*``) load instead, against **stub CUDA 11
libraries**: one tiny shared library per CUDA soname the plugin links, exporting every symbol it
imports, each returning 0 ("success"); creators hand out dummy handles. Nothing ever runs on a GPU:
the child compiles in MindSpore's dry-run mode, which stops after the front end. MindSpore only tries
the GPU plugin when ``$CUDA_HOME/bin/nvcc --version`` names a CUDA release it was built for, so a
fake ``nvcc`` goes next to the stubs.

The stubs are generated from the installed wheel's own symbol tables (``readelf --dyn-syms``) and
compiled with the system C compiler into ``~/.cache/strategist/<key>/`` (``$XDG_CACHE_HOME`` or
``$STRATEGIST_CACHE_DIR`` move it); ``<key>`` changes with the wheel. Nothing else is written.

On a host with real Ascend (CANN) or CUDA, :func:`detect_backend` says so and no stubs are used.
"""
from __future__ import annotations

import collections
import ctypes
import glob
import hashlib
import os
import shutil
import subprocess
import tempfile

from ..errors import VerifyError

#: Bumped when the generated stubs change, so old caches are not reused.
STUB_FORMAT = 1

#: soname -> the symbol prefixes it owns when a library references a symbol without a version.
SONAMES = {
    "libcudart.so.11.0": ("cuda",),
    "libcublas.so.11": ("cublas",),
    "libcudnn.so.8": ("cudnn",),
    "libcusolver.so.11": ("cusolver",),
    "libcusparse.so.11": ("cusparse",),
    "libcurand.so.10": ("curand",),
    "libcufft.so.10": ("cufft",),
    "libnvrtc.so.11.2": ("nvrtc",),
    "libcuda.so.1": ("cu",),          # the driver API (cuLaunchKernel, cuModule*): unversioned
}

#: Functions whose callers read what they return through their arguments.
_BODIES = {
    "cudaGetErrorString": 'const char *cudaGetErrorString(int e) { (void)e; return "cuda stub"; }',
    "cudaGetErrorName": 'const char *cudaGetErrorName(int e) { (void)e; return "cudaStub"; }',
    "cudnnGetErrorString": 'const char *cudnnGetErrorString(int e) { (void)e; return "cudnn stub"; }',
    "cuGetErrorName": 'int cuGetErrorName(int e, const char **s) { (void)e; if (s) *s = "CUDA_STUB"; return 0; }',
    "cuGetErrorString": 'int cuGetErrorString(int e, const char **s) { (void)e; if (s) *s = "cuda stub"; return 0; }',
    "cudaGetDeviceCount": "int cudaGetDeviceCount(int *n) { if (n) *n = 1; return 0; }",
    "cudaGetDevice": "int cudaGetDevice(int *d) { if (d) *d = 0; return 0; }",
    "cudaMemGetInfo": "int cudaMemGetInfo(size_t *f, size_t *t) "
                      "{ if (f) *f = (size_t)30 << 30; if (t) *t = (size_t)32 << 30; return 0; }",
    # only the leading name[256] is written: the struct's size differs between CUDA versions
    "cudaGetDeviceProperties": "int cudaGetDeviceProperties(void *p, int d) { (void)d; if (p) memset(p, 0, 256); return 0; }",
    "cudaRuntimeGetVersion": "int cudaRuntimeGetVersion(int *v) { if (v) *v = 11060; return 0; }",
    "cudaDriverGetVersion": "int cudaDriverGetVersion(int *v) { if (v) *v = 11060; return 0; }",
    "cudnnGetVersion": "size_t cudnnGetVersion(void) { return 8200; }",
    "nvrtcVersion": "int nvrtcVersion(int *a, int *b) { if (a) *a = 11; if (b) *b = 6; return 0; }",
    "cuDeviceGetAttribute": "int cuDeviceGetAttribute(int *v, int a, int d) { (void)a; (void)d; if (v) *v = 0; return 0; }",
    "cudaMalloc": "int cudaMalloc(void **p, size_t n) { if (p) *p = calloc(1, n ? n : 1); return 0; }",
    "cudaHostAlloc": "int cudaHostAlloc(void **p, size_t n, unsigned f) { (void)f; if (p) *p = calloc(1, n ? n : 1); return 0; }",
    "cudaMallocHost": "int cudaMallocHost(void **p, size_t n) { if (p) *p = calloc(1, n ? n : 1); return 0; }",
    "cudaMemcpy": "int cudaMemcpy(void *d, const void *s, size_t n, int k) { (void)k; if (d && s && n) memmove(d, s, n); return 0; }",
    "cudaMemcpyAsync": "int cudaMemcpyAsync(void *d, const void *s, size_t n, int k, void *st) "
                       "{ (void)k; (void)st; if (d && s && n) memmove(d, s, n); return 0; }",
    "cudaMemset": "int cudaMemset(void *d, int v, size_t n) { if (d && n) memset(d, v, n); return 0; }",
    "cudaMemsetAsync": "int cudaMemsetAsync(void *d, int v, size_t n, void *st) { (void)st; if (d && n) memset(d, v, n); return 0; }",
    "cufftCreate": "int cufftCreate(int *h) { if (h) *h = 1; return 0; }",      # cufftHandle is an int
    "cufftPlanMany": "int cufftPlanMany(int *h) { if (h) *h = 1; return 0; }",
}

INSTALL_HINT = ("install one, e.g. `sudo apt-get install gcc` (Debian/Ubuntu; or build-essential), "
                "`sudo dnf install gcc`, or set CC")


def mindspore_dir() -> str:
    """The installed ``mindspore`` package directory (without importing it)."""
    import importlib.util
    spec = importlib.util.find_spec("mindspore")
    if spec is None or not spec.submodule_search_locations:
        raise VerifyError("verify needs MindSpore 2.9.0 installed in this Python (pip install mindspore==2.9.0)")
    return list(spec.submodule_search_locations)[0]


def detect_backend(ms_dir: str | None = None) -> str:
    """``"ascend"``, ``"gpu"`` (a real device stack is present) or ``"stub"`` (CPU only: GPU plugin on stubs).

    ``$STRATEGIST_VERIFY_BACKEND`` overrides the detection.
    """
    forced = os.environ.get("STRATEGIST_VERIFY_BACKEND", "").strip().lower()
    if forced in ("ascend", "gpu", "stub"):
        return forced
    ms_dir = ms_dir or mindspore_dir()
    if glob.glob(os.path.join(ms_dir, "lib", "plugin", "libmindspore_ascend.so*")) and (
            os.environ.get("ASCEND_HOME_PATH") or os.path.isdir("/usr/local/Ascend/ascend-toolkit/latest")):
        return "ascend"
    if shutil.which("nvidia-smi") and os.environ.get("CUDA_HOME"):
        try:
            ctypes.CDLL("libcudart.so.11.0")
            return "gpu"
        except OSError:
            pass
    return "stub"


def find_program(names: list[str], env: str | None, missing: str) -> str:
    """The first of ``$env`` and ``names`` on PATH; else a VerifyError with the one line ``missing``."""
    for cand in ([os.environ[env]] if env and os.environ.get(env) else []) + names:
        path = shutil.which(cand)
        if path:
            return path
    raise VerifyError(missing)


def find_compiler(why: str = "verify builds stub CUDA libraries to run MindSpore's sharding propagation") -> str:
    """The system C compiler (``$CC``, ``cc``, ``gcc`` or ``clang``); a one-line error naming the package if none."""
    return find_program(["cc", "gcc", "clang"], "CC", f"{why} on a CPU-only machine and needs a C compiler, but none "
                                                      f"was found (cc, gcc, clang): {INSTALL_HINT}")


def find_readelf(what: str = "verify reads MindSpore's GPU plugin") -> str:
    return find_program(["readelf"], None, f"{what} with readelf, which is missing: install binutils "
                                           "(`sudo apt-get install binutils`; it comes with gcc and build-essential)")


def cache_root() -> str:
    root = os.environ.get("STRATEGIST_CACHE_DIR")
    if not root:
        root = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "strategist")
    return root


def _plugins(ms_dir: str) -> list[str]:
    plugins = sorted(glob.glob(os.path.join(ms_dir, "lib", "plugin", "libmindspore_gpu.so.*")))
    if not plugins:
        raise VerifyError("this MindSpore wheel has no GPU plugin (lib/plugin/libmindspore_gpu.so.*), which verify "
                          "needs on a CPU-only machine: install the Linux x86_64 wheel of mindspore==2.9.0")
    return plugins


def cuda_release(plugins: list[str]) -> str:
    """The CUDA release the fake nvcc reports: 11.6 when the wheel has that plugin, else its newest."""
    versions = [p.rsplit(".so.", 1)[1] for p in plugins]
    return "11.6" if "11.6" in versions else sorted(versions, key=lambda v: tuple(map(int, v.split("."))))[-1]


def dynamic_symbols(readelf: str, path: str) -> tuple[list[str], set[str]]:
    """(undefined symbols as ``name@version`` or ``name``, names defined) of one shared library."""
    out = subprocess.run([readelf, "--dyn-syms", "-W", path], capture_output=True, text=True).stdout
    undefined, defined = [], set()
    for line in out.splitlines():
        f = line.split()
        if len(f) < 8 or not f[0].endswith(":"):
            continue
        if f[6] == "UND":
            undefined.append(f[7])
        else:
            defined.add(f[7].split("@")[0])
    return undefined, defined


def needed_symbols(ms_dir: str, readelf: str) -> dict[str, set[str]]:
    """soname -> the symbols MindSpore's GPU plugin and CUDA kernels import from it."""
    plugin_dir = os.path.join(ms_dir, "lib", "plugin")
    targets = _plugins(ms_dir) + glob.glob(os.path.join(plugin_dir, "gpu", "libcuda_ops.so.*"))
    defined: set[str] = set()
    for lib in (glob.glob(os.path.join(ms_dir, "lib", "*.so*")) + glob.glob(os.path.join(plugin_dir, "gpu", "*.so*"))
                + [os.path.join(plugin_dir, "libmindspore_ops_cpu.so")]):
        if os.path.exists(lib):
            defined |= dynamic_symbols(readelf, lib)[1]
    need: dict[str, set[str]] = collections.defaultdict(set)
    for t in targets:
        for sym in dynamic_symbols(readelf, t)[0]:
            name, _, version = sym.partition("@")
            version = version.lstrip("@")
            if version:
                if version in SONAMES:
                    need[version].add(name)
                continue
            if name in defined or name.startswith(("Py", "_Py", "_ITM", "__gmon", "_ZTH")):
                continue
            owner = max(((so, len(p)) for so, pfx in SONAMES.items() for p in pfx if name.startswith(p)),
                        key=lambda x: x[1], default=None)
            if owner:
                need[owner[0]].add(name)
    return need


def _c_source(soname: str, symbols: list[str]) -> str:
    lines = [f"/* strategist verify: stub {soname}; every call succeeds, nothing runs on a GPU */",
             "#include <stddef.h>", "#include <stdlib.h>", "#include <string.h>"]
    for s in symbols:
        if s in _BODIES:
            lines.append(_BODIES[s])
        elif "Create" in s:     # handle/descriptor/stream creators: the first argument is an out-pointer
            lines.append(f"int {s}(void **h) {{ if (h) *h = calloc(1, 4096); return 0; }}")
        else:
            lines.append(f"int {s}(void) {{ return 0; }}")
    return "\n".join(lines) + "\n"


def _build(dest: str, ms_dir: str, cc: str, readelf: str, release: str) -> None:
    need = needed_symbols(ms_dir, readelf)
    lib_dir = os.path.join(dest, "lib")
    os.makedirs(lib_dir)
    for soname in SONAMES:
        syms = sorted(need.get(soname, ()))
        src = os.path.join(dest, "src", soname + ".c")
        os.makedirs(os.path.dirname(src), exist_ok=True)
        with open(src, "w") as f:
            f.write(_c_source(soname, syms))
        cmd = [cc, "-shared", "-fPIC", "-O0", "-w", "-o", os.path.join(lib_dir, soname), src, f"-Wl,-soname,{soname}"]
        if soname != "libcuda.so.1":     # the runtime libraries' symbols are versioned by their soname
            vs = src[:-2] + ".map"
            with open(vs, "w") as f:
                f.write(f"{soname} {{\n  global:\n" + "".join(f"    {s};\n" for s in syms) + "  local: *;\n};\n")
            cmd.append(f"-Wl,--version-script={vs}")
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            first = next((ln for ln in (r.stderr or r.stdout).splitlines() if ln.strip()), "no message")
            raise VerifyError(f"building the CUDA stub {soname} with {cc} failed: {first} "
                              f"(a working C compiler is needed: {INSTALL_HINT})")
    nvcc = os.path.join(dest, "cuda_home", "bin", "nvcc")
    os.makedirs(os.path.dirname(nvcc))
    with open(nvcc, "w") as f:
        f.write("#!/bin/sh\necho 'nvcc: NVIDIA (R) Cuda compiler driver (strategist verify stub)'\n"
                f"echo 'Cuda compilation tools, release {release}, V{release}.0'\n")
    os.chmod(nvcc, 0o755)


def ensure_stubs(ms_dir: str | None = None) -> tuple[str, str]:
    """(stub library dir, fake CUDA_HOME), built on first use into the cache (a few seconds)."""
    ms_dir = ms_dir or mindspore_dir()
    plugins = _plugins(ms_dir)
    ident = "|".join(f"{os.path.basename(p)}:{os.path.getsize(p)}" for p in plugins) + f"|{STUB_FORMAT}"
    key = "cuda-stubs-" + hashlib.sha1(ident.encode()).hexdigest()[:12]
    final = os.path.join(cache_root(), key)
    if not os.path.exists(os.path.join(final, "lib", "libcuda.so.1")):
        cc = find_compiler()
        readelf = find_readelf()
        build_once(final, os.path.join("lib", "libcuda.so.1"),
                   lambda work: _build(work, ms_dir, cc, readelf, cuda_release(plugins)))
    return os.path.join(final, "lib"), os.path.join(final, "cuda_home")


def build_once(final: str, marker: str, build) -> None:
    """``build(folder)`` into a temporary folder of the cache, renamed to ``final`` atomically: a concurrent build that
    won (``final``'s ``marker`` file exists) is fine."""
    os.makedirs(cache_root(), exist_ok=True)
    work = tempfile.mkdtemp(prefix=".building-", dir=cache_root())
    try:
        build(work)
        try:
            os.rename(work, final)
        except OSError:
            if not os.path.exists(os.path.join(final, marker)):
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
