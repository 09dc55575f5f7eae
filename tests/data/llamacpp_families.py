#!/usr/bin/env python3
"""Records llama.cpp's logits on random-weight models of every family.

For each family of model_svc/model/architecture.h, writes a small model with
`llm-random-model --shape small --architecture ARCH --type TYPE --seed 7`
(gemma3 with --layers 6, so that one layer of six attends to the whole
context and five through a window of 8 positions; phi3 also with Phi-3
128k's long/short RoPE factors, --rope_orig_context 16 and 100000; qwen2
and llama also with YaRN, factor 4 over an original context of 8; llama in
every weight type, d_model 256: F16, BF16, Q4_0 .. Q8_0, Q2_K .. Q6_K,
IQ4_NL, IQ4_XS), evaluates TOKENS with
llama.cpp in one batch (its default f16 KV cache, 2 threads) and records the
logits of every position. model_svc/model/families_llamacpp_test.cc writes
the same files in-process and compares.

Run once, by hand, when the random models or the families change:

  LLAMA_CPP_LIB_PATH=build/bench-llama.cpp/build/bin \\
  PYTHONPATH=build/bench-llama.cpp/src-0.3.36 \\
  build/ref-venv/bin/python tests/data/llamacpp_families.py build/bin/llm-random-model \\
      > tests/data/llamacpp_families.json

(llama-cpp-python 0.3.36's library, built by bench/model_bench.py; the venv
needs numpy, diskcache, jinja2 and typing_extensions.)
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
from llama_cpp import Llama
import llama_cpp

FAMILIES = ["llama", "qwen2", "qwen3", "gemma3", "phi3"]
TYPES = ["f32", "q8_0"]
# Phi-3 128k-style files: long and short RoPE factors and an attention factor;
# llama.cpp serves n_ctx 64 with the long ones when the original context is 16,
# with the short ones when it is 100000.
LONGROPE = [16, 100000]
# Every weight type llm-random-model writes, on llama (d_model 256 and FFN 512:
# the K-quants' rows are multiples of 256), the embedding in the same type.
ALL_TYPES = ["f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_k", "q3_k", "q4_k", "q5_k",
             "q6_k", "iq4_nl", "iq4_xs"]
# YaRN (rope.scaling.type yarn, factor 4, original context 8) on qwen2 and
# llama: the 20 positions run past the original context.
YARN = ["qwen2", "llama"]
TOKENS = [1, 17, 300, 42, 511, 8, 99, 250, 3, 77, 401, 12, 64, 128, 5, 333, 21, 90, 450, 6]


def record(tool, tmp, name, tool_args, fields, decimals=5):
    """Writes a model with llm-random-model TOOL_ARGS, evaluates TOKENS with
    llama.cpp and returns FIELDS plus the logits of every position."""
    path = os.path.join(tmp, name + ".gguf")
    subprocess.run([tool, "--shape", "small", "--seed", "7", *tool_args, "--out", path],
                   check=True, stdout=subprocess.DEVNULL)
    llm = Llama(model_path=path, n_ctx=64, n_batch=64, n_threads=2, logits_all=True,
                verbose=False, seed=0)
    llm.eval(TOKENS)
    logits = np.array(llm.scores[:len(TOKENS)], dtype=np.float32)
    del llm
    return {**fields, "logits": [[round(float(v), decimals) for v in row] for row in logits]}


def main():
    tool = sys.argv[1]
    out = {
        "producer": f"llama-cpp-python {llama_cpp.__version__} (llama.cpp), n_threads=2, "
                    "f16 KV cache, one batch",
        "command": "build/ref-venv/bin/python tests/data/llamacpp_families.py "
                   "build/bin/llm-random-model",
        "tokens": TOKENS,
        "models": [],
    }
    models = out["models"]
    with tempfile.TemporaryDirectory() as tmp:
        for arch in FAMILIES:
            layers = 6 if arch == "gemma3" else 2
            for type_name in TYPES:
                models.append(record(
                    tool, tmp, f"{arch}-{type_name}",
                    ["--architecture", arch, "--type", type_name, "--layers", str(layers)],
                    {"architecture": arch, "type": type_name, "layers": layers}))
        for orig in LONGROPE:
            models.append(record(
                tool, tmp, f"phi3-longrope-{orig}",
                ["--architecture", "phi3", "--type", "f32", "--rope_orig_context", str(orig)],
                {"architecture": "phi3", "type": "f32", "layers": 2, "rope_orig_context": orig}))
        for type_name in ALL_TYPES:
            models.append(record(
                tool, tmp, f"llama-256-{type_name}",
                ["--architecture", "llama", "--type", type_name, "--d_model", "256",
                 "--ff", "512"],
                {"architecture": "llama", "type": type_name, "layers": 2, "d_model": 256,
                 "ff": 512}, decimals=4))
        for arch in YARN:
            models.append(record(
                tool, tmp, f"{arch}-yarn",
                ["--architecture", arch, "--type", "f32", "--rope_scaling", "yarn",
                 "--rope_scaling_factor", "4", "--rope_orig_context", "8"],
                {"architecture": arch, "type": "f32", "layers": 2,
                 "yarn": {"factor": 4, "original_context": 8}}))
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
