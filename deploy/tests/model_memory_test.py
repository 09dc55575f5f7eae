#!/usr/bin/env python3
"""The base manifest's model-server memory covers the default model.

deploy/k8s/model-memory.py computes a model's request and limit from its
file (weights, vocabulary) and model.env (KV cache, batch tokens); the base
StatefulSet's figures must be at least those of the default model, so that
the manifests follow the model's size rather than a number picked once.
Also checks the script's arithmetic on the default model and on Gemma 3 270M
when it is present (its 262,144-token vocabulary makes the logits scratch
the largest item).

    python3 deploy/tests/model_memory_test.py

Exit status 0: pass; 1: fail; 77: skipped (no models/ file).
"""
from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("model_memory", ROOT / "deploy/k8s/model-memory.py")
mm = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mm)


def mib(quantity: str) -> int:
    m = re.fullmatch(r"(\d+)(Mi|Gi)", quantity)
    assert m, f"unexpected quantity {quantity}"
    return int(m.group(1)) * (1024 if m.group(2) == "Gi" else 1)


def main() -> int:
    default = ROOT / "models/SmolLM2-135M-Instruct.Q4_1.gguf"
    if not default.exists():
        print("model_memory_test: skipped (no models/; run scripts/fetch-model.sh)")
        return 77
    errors = []
    assert mm.vocab_size(str(default)) == 49152
    kv, rows = mm.env_value("LLM_KV_CACHE_MB"), mm.env_value("LLM_MAX_BATCH_TOKENS")
    request, limit = mm.memory_mib(default.stat().st_size, kv, rows * 49152 * 4)
    doc = yaml.safe_load((ROOT / "deploy/k8s/base/model-statefulset.yaml").read_text())
    container = doc["spec"]["template"]["spec"]["containers"][0]
    resources = container["resources"]
    have_request = mib(resources["requests"]["memory"])
    have_limit = mib(resources["limits"]["memory"])
    if have_request < request:
        errors.append(f"base memory request {have_request}Mi < {request}Mi the default model needs")
    if have_limit < limit:
        errors.append(f"base memory limit {have_limit}Mi < {limit}Mi for the default model")
    gemma = ROOT / "models/gemma-3-270m-q4_k_m.gguf"
    if gemma.exists():
        if mm.vocab_size(str(gemma)) != 262144:
            errors.append("Gemma 3's vocabulary is not 262,144 tokens")
        g_request, _ = mm.memory_mib(gemma.stat().st_size, kv, rows * 262144 * 4)
        if g_request <= request:
            errors.append("Gemma 3 does not need more memory than SmolLM2")
    for e in errors:
        print(f"model_memory_test: {e}")
    print(f"model_memory_test: {'FAIL' if errors else 'ok'} (default model: request {request}Mi, "
          f"limit {limit}Mi; base {have_request}Mi / {have_limit}Mi)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
