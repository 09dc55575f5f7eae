#!/usr/bin/env bash
# The one prepared run on a machine with an NVIDIA GPU (the H100 or H200
# device machine): builds the engine with the CUDA backend, runs the CUDA
# tests on the GPU, runs compute-sanitizer's memcheck and racecheck over the
# op tests, runs the GPU benchmark, and writes logs and summary.json into
# $OUT (./device-out when $OUT is unset). Budget: about 9 minutes, building
# included ($DEVICE_CHECK_SECONDS, 500 by default, for everything before the
# summary); each stage gets what is left, and a stage that no longer fits is
# skipped, said so in steps.log.
#
# That machine has CUDA, CMake, ninja and Python but none of Debian's -dev
# packages: run scripts/fetch-device-deps.sh here first and carry
# .device-deps with the call (docs/gpu.md has the exact call). The 98 MB
# SmolLM2 file cannot travel (64 MiB a call), so the benchmark writes random
# GGUF models of SmolLM2's exact shapes and types, and of Llama-3-8B's shapes
# (4 of its 32 layers), with build-device/bin/llm-random-model.
#
# llama.cpp, the side-by-side anchor, comes in .device-deps too (its CUDA
# backend from the llama-cpp-python sdist that bench/model_bench.py builds for
# the CPU): built in the background while this project builds and tests, then
# benchmarked with llama-bench on the same random files, if it finished in
# time.
#
# Files in $OUT (the device tool returns at most 8): steps.log (what ran, with
# times), nvidia-smi.txt, build.log, tests.log, sanitizer.log, bench.log,
# llamacpp.log, summary.json.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
START=$(date +%s)
DEADLINE=$((START + ${DEVICE_CHECK_SECONDS:-500}))
JOBS=$(nproc)
step() { echo "[device-check +$(($(date +%s) - START))s] $*" | tee -a "$OUT/steps.log"; }
# Seconds left before the deadline, at most $1.
budget() {
  local left=$((DEADLINE - $(date +%s)))
  ((left < $1)) && echo $((left > 1 ? left : 1)) || echo "$1"
}
# True when at least $1 seconds are left.
have() { ((DEADLINE - $(date +%s) >= $1)); }

# The device's memory bandwidth (GB/s) from its name: the published figure
# of each part this workplace lends (override with $ROOFLINE_GB_S).
GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
case "$GPU_NAME" in
  *H200*) ROOF=4800 ;;
  *H100*NVL*) ROOF=3900 ;;
  *H100*PCIe*) ROOF=2000 ;;
  *H100*) ROOF=3350 ;;  # H100 SXM5 80GB HBM3
  *A100*) ROOF=2039 ;;
  *) ROOF=0 ;;
esac
ROOF=${ROOFLINE_GB_S:-$ROOF}

# summary.json, written on exit (also when the script stops early).
summarize() {
  python3 - "$OUT" "$GPU_NAME" "$ROOF" <<'PY'
import glob, json, os, re, sys
out, gpu, roof = sys.argv[1], sys.argv[2], float(sys.argv[3])
summary = {"gpu": gpu, "roofline_gb_s": roof, "tests": {}, "sanitizer": {}, "bench": {}}
for path in glob.glob("/tmp/cuda_*_test.json") + glob.glob("/tmp/backend_factory_test.json"):
    r = json.load(open(path))
    failed = [f'{s["name"]}.{c["name"]}' for s in r.get("testsuites", [])
              for c in s.get("testsuite", []) if c.get("failures")]
    skipped = [f'{s["name"]}.{c["name"]}' for s in r.get("testsuites", [])
               for c in s.get("testsuite", []) if c.get("result") == "SKIPPED"]
    summary["tests"][os.path.basename(path)[:-5]] = {
        "tests": r.get("tests"), "failures": r.get("failures"), "failed": failed,
        "skipped": skipped}
log = os.path.join(out, "sanitizer.log")
if os.path.exists(log):
    tool = None
    for line in open(log, errors="replace"):
        m = re.match(r"=== (\w+) (.*)", line)
        if m:
            tool = m.group(1)
            summary["sanitizer"][tool] = {"ran": m.group(2)}
        m = re.search(r"ERROR SUMMARY: (\d+) error", line)
        if m and tool:
            summary["sanitizer"][tool]["errors"] = int(m.group(1))
        m = re.search(r"RACECHECK SUMMARY: (\d+) hazard", line)
        if m and tool:
            summary["sanitizer"][tool]["hazards"] = int(m.group(1))
        m = re.match(r"=== exit (\d+)", line)
        if m and tool:
            summary["sanitizer"][tool]["exit"] = int(m.group(1))
for path in glob.glob("/tmp/bench-*.json"):
    try:
        summary["bench"][os.path.basename(path)[6:-5]] = json.load(open(path))
    except ValueError:
        summary["bench"][os.path.basename(path)[6:-5]] = "no result"
b = summary["bench"]
def get(name, *keys):
    v = b.get(name)
    for k in keys:
        v = v.get(k) if isinstance(v, dict) else None
    return v
one = get("smollm2-cuda", "aggregate_decode_tok_s", "1")
many = get("smollm2-cuda", "aggregate_decode_tok_s", "64")
summary["targets"] = {
    "smollm2_decode_tok_s (>= 5000)": get("smollm2-cuda", "decode_tok_s"),
    "smollm2_16_sessions_tok_s": get("smollm2-cuda", "aggregate_decode_tok_s", "16"),
    "smollm2_decode_tok_s_fp16_weights": get("smollm2-cuda-fp16", "decode_tok_s"),
    "llama3_8b_decode_roofline_fraction (>= 0.75)":
        get("llama3-8b-4l-cuda", "decode_roofline_fraction"),
    "sessions_64_over_1 (>= 20)": round(many / one, 2) if one and many else None,
}
# The anchor: llama-bench's rows (pp512, tg128) on the same files.
def llama(name, prompt):
    rows = b.get("llamacpp-" + name)
    for row in rows if isinstance(rows, list) else []:
        if (row.get("n_prompt", 0) > 0) == prompt and (row.get("n_gen", 0) > 0) != prompt:
            return row.get("avg_ts")
    return None
def ratio(ours, theirs):
    return round(ours / theirs, 3) if ours and theirs else None
for name, ours in (("smollm2", "smollm2-cuda"), ("llama3-8b-4l", "llama3-8b-4l-cuda")):
    summary["targets"][f"{name}_llamacpp_prefill_tok_s"] = llama(name, True)
    summary["targets"][f"{name}_llamacpp_decode_tok_s"] = llama(name, False)
    summary["targets"][f"{name}_prefill_over_llamacpp"] = ratio(
        get(ours, "prefill_tok_s"), llama(name, True))
    summary["targets"][f"{name}_decode_over_llamacpp"] = ratio(
        get(ours, "decode_tok_s"), llama(name, False))
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=1)
print(json.dumps({k: summary[k] for k in ("gpu", "sanitizer", "targets")}, indent=1))
PY
}
trap 'summarize' EXIT

step "machine: $(nproc) cores; $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1); roofline ${ROOF} GB/s"
nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1
step "$(cmake --version | head -1); $(g++ --version | head -1); $(nvcc --version 2>/dev/null | tail -1)"

NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
SANITIZER=$(command -v compute-sanitizer || echo "$(dirname "$NVCC")/compute-sanitizer")

# 1. Dependencies from .device-deps (Debian 12 packages, unpacked, not installed).
PREFIX=/tmp/llm-device-deps
if compgen -G ".device-deps/*.deb" >/dev/null; then
  for deb in .device-deps/*.deb; do dpkg -x "$deb" "$PREFIX"; done
  step "unpacked $(ls .device-deps/*.deb | wc -l) packages into $PREFIX"
else
  step "no .device-deps: using the machine's own Abseil, GoogleTest and nlohmann_json"
fi
export LD_LIBRARY_PATH="$PREFIX/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# 1b. llama.cpp, the anchor: its llama-bench with the CUDA backend, built in
#     its own session (so that a build still running at the end can be
#     stopped whole) with half the cores, niced, while the rest runs.
LLAMA_TGZ=$(ls .device-deps/llama.cpp-*.tar.gz 2>/dev/null | head -1)
LLAMA_DIR=/tmp/llamacpp
LLAMA_PID=
if [ -n "$LLAMA_TGZ" ]; then
  case "$GPU_NAME" in
    *H100* | *H200*) LLAMA_ARCH=90 ;;
    *A100*) LLAMA_ARCH=80 ;;
    *) LLAMA_ARCH=native ;;
  esac
  step "llama.cpp: building llama-bench from $(basename "$LLAMA_TGZ") in the background" \
    "(CUDA architecture $LLAMA_ARCH, $((JOBS / 2)) jobs; llamacpp.log)"
  LLAMA_TGZ=$LLAMA_TGZ LLAMA_DIR=$LLAMA_DIR LLAMA_ARCH=$LLAMA_ARCH NVCC=$NVCC \
    LLAMA_JOBS=$((JOBS / 2)) setsid bash -c '
    set -e
    mkdir -p "$LLAMA_DIR"
    tar xzf "$LLAMA_TGZ" -C "$LLAMA_DIR"
    cmake -S "$LLAMA_DIR/llama.cpp" -B "$LLAMA_DIR/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$LLAMA_ARCH" -DCMAKE_CUDA_COMPILER="$NVCC" \
      -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF \
      -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF
    nice cmake --build "$LLAMA_DIR/build" -j"$LLAMA_JOBS" --target llama-bench
    echo "llama.cpp: built"' >"$OUT/llamacpp.log" 2>&1 &
  LLAMA_PID=$!
else
  step "llama.cpp: no .device-deps/llama.cpp-*.tar.gz (run scripts/fetch-device-deps.sh): no anchor"
fi

# 2. Configure and build only what this run needs, with every core.
step "configure (cuda-device preset, nvcc $NVCC)"
cmake --preset cuda-device -DCMAKE_PREFIX_PATH="$PREFIX/usr" -DCMAKE_CUDA_COMPILER="$NVCC" \
  -DLLM_CUDA_WERROR=OFF \
  >"$OUT/build.log" 2>&1 || { step "configure FAILED (build.log)"; tail -40 "$OUT/build.log"; exit 1; }
step "build"
cmake --build build-device -j"$JOBS" --target cuda_backend_test cuda_model_test \
  backend_factory_test llm_cuda llm_bench_tool llm_random_model_tool >>"$OUT/build.log" 2>&1 ||
  { step "build FAILED (build.log)"; tail -40 "$OUT/build.log"; exit 1; }
BIN=build-device/bin
grep -q "CUDA backend: on" "$OUT/build.log" || step "WARNING: the CUDA backend was not configured"

# 3. The CUDA tests (op parity, whole model against the CPU, invariants).
TESTS_OK=1
for t in backend_factory_test cuda_backend_test cuda_model_test; do
  step "test $t"
  timeout "$(budget 150)" "$BIN/$t" --gtest_output="json:/tmp/$t.json" >>"$OUT/tests.log" 2>&1 ||
    { TESTS_OK=0; step "$t FAILED (tests.log)"; }
done
# On a GPU machine nothing may skip (but the no-device case's own test).
if grep '^\[  SKIPPED \]' "$OUT/tests.log" | grep -v ClearErrorWithoutADevice |
  grep -v CudaWithoutADeviceSaysWhy | grep -q .; then
  step "tests SKIPPED on a GPU machine (tests.log)"
  TESTS_OK=0
fi
step "tests: $([ $TESTS_OK = 1 ] && echo passed || echo FAILED) (tests.log)"

# 4. compute-sanitizer over the op tests (our kernels; cuBLAS's GEMMs are
#    left out of racecheck, which is slow on them and not about our code).
#    memcheck: out-of-bounds and misaligned accesses, API errors; racecheck:
#    shared-memory hazards (a missing __syncthreads).
sanitize() {  # tool, gtest filter
  if ! have 60; then
    step "sanitizer $1: skipped, out of time"
    return
  fi
  step "sanitizer $1 over $2"
  echo "=== $1 $2" >>"$OUT/sanitizer.log"
  timeout "$(budget 100)" "$SANITIZER" --tool "$1" --error-exitcode 9 "${@:3}" \
    "$BIN/cuda_backend_test" --gtest_filter="$2" >>"$OUT/sanitizer.log" 2>&1
  local rc=$?
  echo "=== exit $rc" >>"$OUT/sanitizer.log"
  ((rc == 0)) || { TESTS_OK=0; step "sanitizer $1: exit $rc (sanitizer.log)"; }
}
if [ -x "$SANITIZER" ]; then
  sanitize memcheck 'OpParity.*:-OpParity.MatMulEveryWeightType'
  sanitize racecheck 'OpParity.*:-OpParity.MatMulEveryWeightType' --racecheck-report hazard
else
  step "no compute-sanitizer at $SANITIZER"
fi

# 5. The benchmark: SmolLM2 shapes (pp512, tg128, aggregate decode at 1, 16
#    and 64 sessions) and an 8B-shaped model against the bandwidth roofline.
MODELS=/tmp/llm-device-models
mkdir -p "$MODELS"
bench() {  # name, then llm-bench flags
  local name=$1
  shift
  if ! have 30; then
    step "bench $name: skipped, out of time"
    return
  fi
  step "bench $name: llm-bench $*"
  if timeout "$(budget 120)" "$BIN/llm-bench" "$@" >"/tmp/bench-$name.json" \
    2>>"$OUT/bench.log"; then
    echo "$name $(cat "/tmp/bench-$name.json")" >>"$OUT/bench.log"
  else
    echo "$name FAILED" >>"$OUT/bench.log"
  fi
}
ROOF_FLAG=()
((ROOF > 0)) && ROOF_FLAG=(--roofline_gb_s "$ROOF")
# --vocab placeholder: llama-bench draws random token ids below the
# vocabulary's size, so the anchor needs one.
"$BIN/llm-random-model" --shape smollm2 --vocab placeholder --out "$MODELS/smollm2.gguf" >>"$OUT/bench.log" 2>&1
bench smollm2-cuda --model "$MODELS/smollm2.gguf" --backend cuda -p 512 -n 128 \
  --repetitions 2 --sessions 1,16,64 --kv_cache_mb 1024 "${ROOF_FLAG[@]}"
# What keeping Q4_1 / Q8_0 quantized buys: the same file dequantized to fp16.
bench smollm2-cuda-fp16 --model "$MODELS/smollm2.gguf" --backend cuda \
  --cuda_quantized_weights=false -p 0 -n 128 --repetitions 2 "${ROOF_FLAG[@]}"
if [ -n "${DEVICE_CHECK_ALL:-}" ]; then
  bench smollm2-cuda-nographs --model "$MODELS/smollm2.gguf" --backend cuda --cuda_graphs=false \
    -p 0 -n 128 --repetitions 2
  bench smollm2-cpu --model "$MODELS/smollm2.gguf" --backend cpu --threads "$JOBS" -p 512 \
    -n 128 --repetitions 1
fi
# The 8B shape as Q4_K_M's main type, q4_k (kept quantized, as q4_0, q4_1,
# q8_0, q5_k and q6_k are; bf16 is held as it is).
EIGHT_B_TYPE=${EIGHT_B_TYPE:-q4_k}
if have 100; then
  step "write the 8B-shaped model (4 of 32 layers, $EIGHT_B_TYPE)"
  timeout "$(budget 90)" "$BIN/llm-random-model" --shape llama3-8b --layers 4 \
    --type "$EIGHT_B_TYPE" --vocab placeholder --out "$MODELS/llama3-8b-4l.gguf" >>"$OUT/bench.log" 2>&1
fi
bench llama3-8b-4l-cuda --model "$MODELS/llama3-8b-4l.gguf" --backend cuda -p 512 -n 64 \
  --repetitions 2 --kv_cache_mb 1024 "${ROOF_FLAG[@]}"

# 6. The anchor on the same files: llama-bench, every layer on the GPU, its
#    defaults otherwise (flash attention: auto). Waits for its build while
#    time is left for both runs.
llama_bench() {  # name, model file
  if ! have 40; then
    step "llama.cpp $1: skipped, out of time"
    return
  fi
  step "llama.cpp $1: llama-bench -m $2 -ngl 99 -p 512 -n 128 -r 2"
  timeout "$(budget 100)" "$LLAMA_DIR/build/bin/llama-bench" -m "$2" -ngl 99 -p 512 -n 128 \
    -r 2 -o json >"/tmp/bench-llamacpp-$1.json" 2>>"$OUT/llamacpp.log" ||
    echo "llamacpp-$1 FAILED" >>"$OUT/bench.log"
}
if [ -n "$LLAMA_PID" ]; then
  while kill -0 "$LLAMA_PID" 2>/dev/null && have 100; do sleep 5; done
  if kill -0 "$LLAMA_PID" 2>/dev/null; then
    kill -- -"$LLAMA_PID" 2>/dev/null
    step "llama.cpp: its build did not finish in time (llamacpp.log); no anchor"
  elif [ -x "$LLAMA_DIR/build/bin/llama-bench" ]; then
    llama_bench smollm2 "$MODELS/smollm2.gguf"
    [ -f "$MODELS/llama3-8b-4l.gguf" ] && llama_bench llama3-8b-4l "$MODELS/llama3-8b-4l.gguf"
  else
    step "llama.cpp: build FAILED (llamacpp.log); no anchor"
  fi
fi
rm -rf "$MODELS"

step "done; tests $([ $TESTS_OK = 1 ] && echo passed || echo FAILED)"
[ $TESTS_OK = 1 ]
