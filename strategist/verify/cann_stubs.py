"""Stub CANN libraries for MindSpore's DryRun (``MS_SIMULATION_LEVEL=1``) on a CPU-only machine, built once.

``strategist verify --memory`` runs one training step in MindSpore's DryRun through its **Ascend** plugin
(``lib/plugin/libmindspore_ascend.so.2``). In simulation level 0, or 1 with a kernel-by-kernel jit level (the
Ascend default), MindSpore replaces the ACL runtime by its own simulation functions and simulates a 64 GiB device,
so CANN is never called for memory or kernels: the plugin only has to load. These stubs satisfy the loader: one
library, ``libascendcl.so``, defines every symbol the plugin and its helpers import from CANN (from the wheel's own
symbol tables, ``readelf --dyn-syms``, and the ACL/HCCL names it looks up with ``dlsym``), and the other CANN
sonames are empty libraries that link it. What the plugin does call (the GE op-proto bookkeeping of the aclop
kernels) gets empty objects: ``ge::`` constructors zero the object, factories return a zeroed object, the
``std::string`` getters an empty string (MindSpore's old C++ ABI, hence the one C++ file).

They are compiled with the system C and C++ compilers into ``<cache>/cann-stubs-<key>/latest/lib64`` (the cache of
:func:`strategist.verify.stubs.cache_root`); ``<key>`` changes with the wheel, so an upgraded MindSpore rebuilds.

Beside them, ``<cache>/cann-stubs-<key>/preload/libstrategist_nprocs.so``: an ``LD_PRELOAD`` shim whose
``get_nprocs()``/``get_nprocs_conf()`` report 16 processors. MindSpore sizes its runtime's actor threads from the
processor count; on a machine with 2 cores it computes one and then disables kernel-by-kernel sub-graphs, which a
step with inlined control flow needs (MindFormers' training cell: "Can not build a sub graph which contains
ConditionSwitch ... by kbk"). Only thread-pool sizes change; no memory figure depends on them.
"""
from __future__ import annotations

import glob
import hashlib
import os
import re
import subprocess
from dataclasses import dataclass

from ..errors import VerifyError
from .stubs import build_once, cache_root, dynamic_symbols, find_compiler, find_program, find_readelf, mindspore_dir

#: Bumped when the generated stubs change, so old caches are not reused (2: the processor-count shim).
STUB_FORMAT = 2

#: the CANN sonames MindSpore's Ascend plugin and its helpers link (``libascendcl.so`` holds every symbol)
SONAMES = ("libascendcl.so", "libge_runner.so", "libgraph.so", "libhccl.so", "libmsprofiler.so", "libnnopbase.so",
           "libplatform.so", "libruntime.so", "libc_sec.so", "libacl_op_compiler.so", "libacl_tdt_channel.so",
           "libopapi.so", "libprofapi.so", "libregister.so", "libmmpa.so", "libascendalog.so", "libacl_tdt_queue.so",
           "libhccl_plugin_stub.so", "libaclnn_ops_infer.so", "libaclnn_ops_train.so", "libaclnn_math.so",
           "libaclnn_rand.so", "libopapi_math.so", "libopapi_nn.so", "libopapi_cv.so", "libopapi_transformer.so",
           "libcust_opapi.so", "libgmem.so", "liblcal.so", "libatb.so", "libdvpp_utils_stub.so",
           "driver/libascend_hal.so")

#: the names the plugin looks up with dlsym (read from its strings): ACL, aclnn, HCCL, the driver, the runtime
DLSYM_NAME = re.compile(rb"acl[a-zA-Z]*[A-Z]\w*|acl(?:nn|rt|mdl|op|tdt|prof)\w+|Hccl[A-Z]\w+|hal[A-Z]\w+|"
                        rb"rt[A-Z][a-zA-Z]+|Msprof\w+")

#: functions whose callers read what they return through their arguments or as a string
BODIES = {
    "aclrtGetSocName": 'const char *aclrtGetSocName(void) { return "Ascend910B1"; }',
    "aclGetRecentErrMsg": 'const char *aclGetRecentErrMsg(void) { return "cann stub"; }',
    "HcclGetErrorString": 'const char *HcclGetErrorString(int e) { (void)e; return "hccl stub"; }',
    "aclrtGetDeviceCount": "int aclrtGetDeviceCount(unsigned *n) { if (n) *n = 8; return 0; }",
    "aclrtGetDevice": "int aclrtGetDevice(int *d) { if (d) *d = 0; return 0; }",
    "aclrtGetMemInfo": "int aclrtGetMemInfo(int a, size_t *f, size_t *t) "
                       "{ (void)a; if (f) *f = (size_t)60 << 30; if (t) *t = (size_t)64 << 30; return 0; }",
    "aclrtMalloc": "int aclrtMalloc(void **p, size_t n, int c) { (void)c; if (p) *p = reserve(n); return 0; }",
    "aclrtMallocHost": "int aclrtMallocHost(void **p, size_t n) { if (p) *p = reserve(n); return 0; }",
    "aclrtMallocAlign32": "int aclrtMallocAlign32(void **p, size_t n, int c) { (void)c; if (p) *p = reserve(n); return 0; }",
    "aclrtMallocCached": "int aclrtMallocCached(void **p, size_t n, int c) { (void)c; if (p) *p = reserve(n); return 0; }",
    "aclrtGetVersion": "int aclrtGetVersion(int *a, int *b, int *c) { if (a) *a = 1; if (b) *b = 0; if (c) *c = 0; return 0; }",
    "aclsysGetCANNVersion": 'int aclsysGetCANNVersion(int t, char *v) { (void)t; if (v) strcpy(v, "8.1.RC1"); return 0; }',
    "_ZNK2ge12AscendString9GetStringEv": 'const char *_ZNK2ge12AscendString9GetStringEv(void) { return ""; }',
}

#: ``ge::`` functions returning an object by value (a hidden result pointer first): a zeroed object (each is a
#: shared_ptr to an implementation, or a std::vector: all-zero is empty)
RETURNS_OBJECT = re.compile(r"^_ZNK?2ge(15OperatorFactory14CreateOperator|8Operator13GetOutputDesc|5Graph13GetDirectNode|"
                            r"5GNode\d+Get\w*Nodes|7Session23GetCompiledGraphSummary|5Shape7GetDims|6Tensor13GetTensorDesc|"
                            r"10TensorDesc14GetOriginShape|10TensorDesc8GetShape)")
#: ``ge::`` functions returning ``std::string`` (MindSpore's old C++ ABI): written in C++
RETURNS_STRING = {"_ZNK2ge8Operator7GetNameEv", "_ZNK2ge8Operator9GetOpTypeEv", "_ZNK2ge5Graph7GetNameEv"}
CXX_SOURCE = """// strategist verify --memory: ge:: getters returning std::string (built with _GLIBCXX_USE_CXX11_ABI=0)
#include <string>
namespace ge {
class Operator { public: std::string GetName() const; std::string GetOpType() const; };
class Graph { public: std::string GetName() const; };
std::string Operator::GetName() const { return std::string(); }
std::string Operator::GetOpType() const { return std::string(); }
std::string Graph::GetName() const { return std::string(); }
}
"""
C_HEADER = """/* strategist verify --memory: stub CANN; MindSpore's simulation runs no kernel and allocates no device memory */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
static void *reserve(size_t n) {
  void *p = mmap(0, n ? n : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? 0 : p;
}
"""

#: the LD_PRELOAD shim's file (under ``preload/``) and source: MindSpore's runtime sees 16 processors
NPROCS_SHIM = "libstrategist_nprocs.so"
NPROCS_SOURCE = """/* strategist verify --memory: report 16 processors (glibc get_nprocs, std::thread::hardware_concurrency) so
   MindSpore's runtime sizes its actor threads as on a server and keeps kernel-by-kernel sub-graphs (ConditionSwitch) */
int get_nprocs(void) { return 16; }
int get_nprocs_conf(void) { return 16; }
"""

CXX_INSTALL_HINT = ("install one, e.g. `sudo apt-get install g++` (Debian/Ubuntu; or build-essential), "
                    "`sudo dnf install gcc-c++`, or set CXX")


@dataclass(frozen=True)
class CannStubs:
    """Where the stubs are: ``lib_dirs`` go on ``LD_LIBRARY_PATH``, ``home`` (holding ``latest/lib64``) is the fake
    ``ASCEND_HOME_PATH``; ``nprocs_shim`` is the processor-count shim for ``LD_PRELOAD``."""

    lib_dirs: tuple[str, ...]
    home: str
    nprocs_shim: str = ""


WHY = "verify --memory builds stub CANN libraries to run MindSpore's DryRun"


def find_cxx_compiler() -> str:
    """The system C++ compiler (``$CXX``, ``c++``, ``g++`` or ``clang++``); a one-line error naming the package."""
    return find_program(["c++", "g++", "clang++"], "CXX", f"{WHY} on a CPU-only machine and needs a C++ compiler, "
                                                          f"but none was found (c++, g++, clang++): {CXX_INSTALL_HINT}")


def ascend_plugin(ms_dir: str) -> str:
    path = os.path.join(ms_dir, "lib", "plugin", "libmindspore_ascend.so.2")
    if not os.path.exists(path):
        raise VerifyError("this MindSpore wheel has no Ascend plugin (lib/plugin/libmindspore_ascend.so.2), which "
                          "verify --memory runs MindSpore's DryRun with: install the Linux x86_64 wheel of "
                          "mindspore==2.9.0")
    return path


def _plugin_files(ms_dir: str) -> tuple[list[str], list[str]]:
    """(the libraries whose CANN imports are stubbed, every MindSpore library whose exports are not)."""
    plugin = os.path.join(ms_dir, "lib", "plugin")
    ascend = os.path.join(plugin, "ascend")
    targets = [ascend_plugin(ms_dir), os.path.join(plugin, "libmindspore_ops_ascend.so")]
    targets += [os.path.join(ascend, n) for n in ("libmindspore_ascend_res_manager.so", "libd_collective.so",
                                                  "libhccl_plugin.so", "libmindspore_graph_ir.so")]
    targets += glob.glob(os.path.join(ascend, "ms_kernels_symmetric_memory", "**", "*.so"), recursive=True)
    ours = (glob.glob(os.path.join(ms_dir, "lib", "*.so*")) + glob.glob(os.path.join(plugin, "*.so*"))
            + glob.glob(os.path.join(ascend, "**", "*.so*"), recursive=True))
    return [t for t in targets if os.path.exists(t)], ours


#: where the system's own libraries are looked for (the C and C++ runtimes the plugin links)
SYSTEM_LIB_DIRS = ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib")
ALWAYS_SYSTEM = ("libc.so.6", "libstdc++.so.6", "libgcc_s.so.1", "libm.so.6")


def system_libraries(readelf: str, targets: list[str]) -> list[str]:
    """The non-CANN libraries ``targets`` link (``DT_NEEDED``) that the system has, with the C and C++ runtimes."""
    needed = set(ALWAYS_SYSTEM)
    for t in targets:
        out = subprocess.run([readelf, "-d", "-W", t], capture_output=True, text=True).stdout
        needed.update(re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out))
    cann = {os.path.basename(so) for so in SONAMES}
    found = []
    for name in sorted(needed - cann):
        path = next((os.path.join(d, name) for d in SYSTEM_LIB_DIRS if os.path.exists(os.path.join(d, name))), None)
        if path:
            found.append(path)
    return found


def needed_symbols(ms_dir: str, readelf: str) -> list[str]:
    """Every CANN symbol the Ascend plugin imports or looks up: its unversioned undefined symbols that neither a
    MindSpore library nor a system library it links defines (a versioned one belongs to the C or C++ runtime),
    and the ACL/HCCL names in it."""
    targets, ours = _plugin_files(ms_dir)
    defined: set[str] = set()
    for lib in ours + system_libraries(readelf, targets):
        defined |= dynamic_symbols(readelf, lib)[1]
    names: set[str] = set()
    for t in targets:
        for sym in dynamic_symbols(readelf, t)[0]:
            if "@" in sym or sym in defined or sym.startswith(("_ITM", "__gmon", "_ZTH", "Py", "_Py")):
                continue
            names.add(sym)
        with open(t, "rb") as f:
            data = f.read()
        words = (m.group().decode() for m in re.finditer(rb"[!-~]{5,}", data) if DLSYM_NAME.fullmatch(m.group()))
        names.update(w for w in words if w not in defined)
    return sorted(names)


def stub_body(name: str) -> str:
    """The C definition of stub symbol ``name`` ("" for the C++ ones)."""
    if name in BODIES:
        return BODIES[name]
    if name in RETURNS_STRING:
        return ""
    if RETURNS_OBJECT.match(name):
        return f"void *{name}(void *ret) {{ if (ret) memset(ret, 0, 24); return ret; }}"
    if name.startswith("aclrt") and "Create" in name:
        return f"int {name}(void **h) {{ if (h) *h = calloc(1, 4096); return 0; }}"
    if re.match(r"^acl[a-z]*Create|^aclCreate", name):
        return f"void *{name}(void) {{ return calloc(1, 4096); }}"
    if re.match(r"^_ZN2ge\w*C[12]E", name):       # a ge:: constructor: zero the object (a shared_ptr to its impl)
        return f"long {name}(void *self) {{ if (self) memset(self, 0, 16); return 0; }}"
    return f"long {name}(void) {{ return 0; }}"


def _compile(cmd: list[str], what: str, hint: str) -> None:
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        first = next((ln for ln in (r.stderr or r.stdout).splitlines() if ln.strip()), "no message")
        raise VerifyError(f"building {what} with {cmd[0]} failed: {first} ({hint})")


def _build(dest: str, ms_dir: str, cc: str, cxx: str, readelf: str) -> None:
    lib64 = os.path.join(dest, "latest", "lib64")
    os.makedirs(os.path.join(lib64, "driver"))
    src = os.path.join(dest, "src")
    os.makedirs(src)
    c_file, cxx_file, empty = (os.path.join(src, n) for n in ("cann_stub.c", "cann_stub.cc", "empty.c"))
    with open(c_file, "w") as f:
        f.write(C_HEADER + "".join(b + "\n" for b in map(stub_body, needed_symbols(ms_dir, readelf)) if b))
    with open(cxx_file, "w") as f:
        f.write(CXX_SOURCE)
    with open(empty, "w") as f:
        f.write("int strategist_cann_stub;\n")
    hint = f"a working C and C++ compiler is needed: {CXX_INSTALL_HINT}"
    objs = []
    for source, compiler in ((c_file, cc), (cxx_file, cxx)):
        obj = source + ".o"
        _compile([compiler, "-c", "-fPIC", "-O0", "-w", "-D_GLIBCXX_USE_CXX11_ABI=0", source, "-o", obj],
                 f"the stub CANN library {os.path.basename(source)}", hint)
        objs.append(obj)
    _compile([cxx, "-shared", "-o", os.path.join(lib64, SONAMES[0]), *objs, f"-Wl,-soname,{SONAMES[0]}"],
             f"the stub CANN library {SONAMES[0]}", hint)
    for so in SONAMES[1:]:
        _compile([cc, "-shared", "-fPIC", "-w", "-o", os.path.join(lib64, so), empty,
                  f"-Wl,-soname,{os.path.basename(so)}", f"-L{lib64}", "-Wl,--no-as-needed", "-lascendcl",
                  f"-Wl,-rpath,{lib64}"], f"the stub CANN library {so}", hint)
    shim_src = os.path.join(src, "nprocs_shim.c")
    with open(shim_src, "w") as f:
        f.write(NPROCS_SOURCE)
    os.makedirs(os.path.join(dest, "preload"))
    _compile([cc, "-shared", "-fPIC", "-O2", "-w", "-o", os.path.join(dest, "preload", NPROCS_SHIM), shim_src],
             f"the processor-count shim {NPROCS_SHIM}", hint)


def ensure_cann_stubs(ms_dir: str | None = None) -> CannStubs:
    """The stub CANN libraries, built on first use into the cache (a few seconds)."""
    ms_dir = ms_dir or mindspore_dir()
    plugin = ascend_plugin(ms_dir)
    ident = f"{os.path.basename(plugin)}:{os.path.getsize(plugin)}|{STUB_FORMAT}"
    final = os.path.join(cache_root(), "cann-stubs-" + hashlib.sha1(ident.encode()).hexdigest()[:12])
    lib64 = os.path.join(final, "latest", "lib64")
    if not os.path.exists(os.path.join(lib64, "driver", "libascend_hal.so")):
        cc = find_compiler(WHY)
        cxx = find_cxx_compiler()
        readelf = find_readelf("verify --memory reads MindSpore's Ascend plugin")
        build_once(final, os.path.join("latest", "lib64", "driver", "libascend_hal.so"),
                   lambda work: _build(work, ms_dir, cc, cxx, readelf))
    return CannStubs((lib64, os.path.join(lib64, "driver")), final, os.path.join(final, "preload", NPROCS_SHIM))
