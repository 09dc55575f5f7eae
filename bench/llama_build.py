"""llama.cpp, built from the llama-cpp-python source distribution, for the
benchmarks that compare with it (model_bench.py, serving_bench.py).

    from llama_build import llama_source, build_llama, tool_logger
    log, run = tool_logger("my_bench")
    src = llama_source(log, run)          # build/bench-llama.cpp/src-VERSION
    bin_dir = build_llama(["llama-server"], log, run)

The first call downloads llama-cpp-python==LLAMA_CPP_PYTHON (source) from PyPI
with pip into build/bench-llama.cpp and unpacks it (it vendors llama.cpp);
nothing of it is kept in the repository. build_llama() configures and builds
the named targets in build/bench-llama.cpp/build (Release, Ninja, the same
compiler as ours) unless they are there already. All the benchmarks share
that one build dir; the first build makes every tool of ALL_TOOLS, so that
no benchmark has to rebuild for its own.

CPU flags: GGML_NATIVE (-march=native) except where /proc/cpuinfo lists AMX
(amx_tile / amx_int8 / amx_bf16): llama.cpp's AMX path crashes on such a CPU
(SIGILL in tilezero, SIGSEGV in llama-bench; upstream PR 26954), so there the
build names the CPU's AVX / AVX2 / AVX-512 extensions one by one with
GGML_NATIVE=OFF and every GGML_AMX_* off, and says so.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
LLAMA_DIR = ROOT / "build" / "bench-llama.cpp"
LLAMA_CPP_PYTHON = "0.3.36"  # the newest llama-cpp-python on 2026-12-01
BUILD_DIR = LLAMA_DIR / "build"  # one build of llama.cpp for every benchmark
# What the benchmarks use; a build makes them all at once.
ALL_TOOLS = ("llama-bench", "llama-batched-bench", "llama-quantize", "llama-perplexity",
             "llama-server")

Log = Callable[[str], None]
Run = Callable[..., subprocess.CompletedProcess]

# ggml's CMake option for each /proc/cpuinfo flag it can use (without AMX).
_ISA_OPTIONS = {
    "avx": "GGML_AVX", "avx2": "GGML_AVX2", "fma": "GGML_FMA", "f16c": "GGML_F16C",
    "bmi2": "GGML_BMI2", "avx_vnni": "GGML_AVX_VNNI", "avx512f": "GGML_AVX512",
    "avx512vbmi": "GGML_AVX512_VBMI", "avx512_vnni": "GGML_AVX512_VNNI",
    "avx512_bf16": "GGML_AVX512_BF16",
}


def tool_logger(who: str) -> tuple[Log, Run]:
    """(log, run) for the script `who`: log(msg) writes "who: msg" to stderr;
    run(cmd, **subprocess_kw) runs cmd capturing its output, and exits the
    script with the command's last output when it fails."""
    def log(msg: str) -> None:
        print(f"{who}: {msg}", file=sys.stderr, flush=True)

    def run(cmd: list, **kw) -> subprocess.CompletedProcess:
        res = subprocess.run(cmd, capture_output=True, text=True, **kw)
        if res.returncode != 0:
            sys.exit(f"{who}: {' '.join(map(str, cmd))} failed ({res.returncode}):\n"
                     f"{res.stdout[-2000:]}\n{res.stderr[-4000:]}")
        return res
    return log, run


def cpu_flags() -> set[str]:
    """The flags of the first CPU in /proc/cpuinfo (empty where there is none)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def has_amx(flags: set[str] | None = None) -> bool:
    return bool({"amx_tile", "amx_int8", "amx_bf16"} & (cpu_flags() if flags is None else flags))


def cpu_cmake_flags(log: Log) -> list[str]:
    """-DGGML_NATIVE=ON, or, on a CPU with AMX, its extensions named one by one
    with AMX off (logged)."""
    flags = cpu_flags()
    if not has_amx(flags):
        return ["-DGGML_NATIVE=ON"]
    on = [opt for flag, opt in _ISA_OPTIONS.items() if flag in flags]
    log("this CPU has AMX (/proc/cpuinfo), and llama.cpp's AMX path crashes on it: building "
        f"with GGML_NATIVE=OFF, AMX off, and {', '.join(on) or 'no x86 extensions'} on")
    return (["-DGGML_NATIVE=OFF", "-DGGML_AMX_TILE=OFF", "-DGGML_AMX_INT8=OFF",
             "-DGGML_AMX_BF16=OFF"] + [f"-D{opt}=ON" for opt in on])


def llama_source(log: Log, run: Run) -> Path:
    """build/bench-llama.cpp/src-VERSION: the sdist, downloaded and unpacked
    on first use."""
    src = LLAMA_DIR / f"src-{LLAMA_CPP_PYTHON}"
    if not src.exists():
        LLAMA_DIR.mkdir(parents=True, exist_ok=True)
        log(f"downloading llama-cpp-python=={LLAMA_CPP_PYTHON} (source) from PyPI")
        run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
             "-d", str(LLAMA_DIR), f"llama-cpp-python=={LLAMA_CPP_PYTHON}"])
        sdist = LLAMA_DIR / f"llama_cpp_python-{LLAMA_CPP_PYTHON}.tar.gz"
        with tarfile.open(sdist) as tar:
            tar.extractall(LLAMA_DIR, filter="data")
        (LLAMA_DIR / f"llama_cpp_python-{LLAMA_CPP_PYTHON}").rename(src)
    return src


def build_llama(targets: list[str], log: Log, run: Run) -> Path:
    """Builds `targets` (and the rest of ALL_TOOLS) in build/bench-llama.cpp/build
    (AMX-aware CPU flags, the server on); their bin dir. Nothing is rebuilt when
    all are there, unless that build has AMX on and this CPU has AMX (then it
    is configured afresh with AMX off)."""
    bin_dir = BUILD_DIR / "bin"
    stale = has_amx() and (BUILD_DIR / "CMakeCache.txt").exists() and not built_without_amx()
    if all((bin_dir / t).exists() for t in targets) and not stale:
        return bin_dir
    if stale:
        log(f"{BUILD_DIR} was configured with AMX on, on a CPU with AMX: reconfiguring it")
        (BUILD_DIR / "CMakeCache.txt").unlink()
    src = llama_source(log, run)
    every = list(dict.fromkeys([*targets, *ALL_TOOLS]))
    log(f"building {', '.join(every)} in {BUILD_DIR} (several minutes)")
    run(["cmake", "-S", str(src / "vendor" / "llama.cpp"), "-B", str(BUILD_DIR), "-G", "Ninja",
         "-DCMAKE_BUILD_TYPE=Release", *cpu_cmake_flags(log), "-DLLAMA_CURL=OFF",
         "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_SERVER=ON",
         "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_OPENSSL=OFF"])
    run(["nice", "-n", "10", "cmake", "--build", str(BUILD_DIR), "-j",
         str(os.cpu_count() or 2), "--target", *every])
    return bin_dir


def built_without_amx() -> bool:
    """Whether build/bench-llama.cpp/build was configured with AMX off."""
    try:
        text = (BUILD_DIR / "CMakeCache.txt").read_text()
    except OSError:
        return False
    return "GGML_NATIVE:BOOL=OFF" in text and "GGML_AMX_INT8:BOOL=ON" not in text


def build_flags() -> str:
    """The CPU flags build/bench-llama.cpp/build was configured with, in words
    (for the benchmarks' output)."""
    try:
        text = (BUILD_DIR / "CMakeCache.txt").read_text()
    except OSError:
        return "not built"
    on = sorted(line.split(":", 1)[0] for line in text.splitlines()
                if line.startswith("GGML_") and line.endswith("=ON")
                and line.split(":", 1)[0] in {*_ISA_OPTIONS.values(), "GGML_NATIVE",
                                              "GGML_AMX_TILE", "GGML_AMX_INT8",
                                              "GGML_AMX_BF16"})
    return "Release, " + (" ".join(f"{o}=ON" for o in on) or "no x86 extensions") + (
        ", AMX off" if built_without_amx() else "")
