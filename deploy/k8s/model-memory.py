#!/usr/bin/env python3
"""The model server's memory request and limit for a GGUF model.

    deploy/k8s/model-memory.py MODEL.gguf [--kv-cache-mb N] [--patch]

model_server holds, for its whole life:
  - the weights: the file's tensor bytes, copied into memory (the CPU backend
    copies them onto huge pages; the file's page cache, also charged to the
    container, is reclaimable and not counted);
  - the KV cache pool, allocated at start-up (LLM_KV_CACHE_MB);
  - the logits scratch: LLM_MAX_BATCH_TOKENS rows of the vocabulary in fp32
    (512 MiB for Gemma 3's 262,144 tokens at 512 rows);
  - working space: activations of a step, gRPC buffers, the sessions' token
    histories (WORKING_MIB, measured with the default model under load, with
    room to spare).
The request is their sum; the limit adds a quarter of it for transients
(a logits reply being encoded while the next step runs). Both are rounded
up to 64 MiB.

--kv-cache-mb and --max-batch-tokens default to LLM_KV_CACHE_MB and
LLM_MAX_BATCH_TOKENS of deploy/k8s/base/model.env; the vocabulary size is
read from the file (token_embd.weight's rows).
--patch prints a strategic-merge patch for the StatefulSet, to put in an
overlay beside LLM_MODEL / LLM_VOCAB (docs/operations.md, "Serving another
model"). deploy/tests/model_memory_test.py checks that the base's figures
cover the default model.
"""
from __future__ import annotations

import argparse
import os
import re
import struct
import sys
from pathlib import Path

WORKING_MIB = 256
MIB = 1 << 20
ROOT = Path(__file__).resolve().parent


def env_value(key: str, env: Path = ROOT / "base" / "model.env") -> int:
    for line in env.read_text().splitlines():
        m = re.fullmatch(rf"\s*{key}\s*=\s*(\d+)\s*", line)
        if m:
            return int(m.group(1))
    raise SystemExit(f"model-memory: no {key} in {env}")


def vocab_size(path: str) -> int:
    """Rows of token_embd.weight, from the GGUF header (GGUF.md)."""
    with open(path, "rb") as f:
        def read(fmt: str):
            size = struct.calcsize(fmt)
            data = f.read(size)
            if len(data) != size:
                raise SystemExit(f"model-memory: {path} ends inside its header")
            return struct.unpack(fmt, data)

        def string() -> bytes:
            (n,) = read("<Q")
            return f.read(n)

        scalar = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
                  10: "<Q", 11: "<q", 12: "<d"}

        def skip(kind: int) -> None:
            if kind in scalar:
                read(scalar[kind])
            elif kind == 8:
                string()
            elif kind == 9:
                (item, n) = read("<IQ")
                if item in scalar:
                    f.seek(n * struct.calcsize(scalar[item]), 1)
                else:
                    for _ in range(n):
                        skip(item)
            else:
                raise SystemExit(f"model-memory: {path}: unknown GGUF value type {kind}")

        magic, _version, n_tensors, n_kv = read("<4sIQQ")
        if magic != b"GGUF":
            raise SystemExit(f"model-memory: {path} is not a GGUF file")
        for _ in range(n_kv):
            string()
            (kind,) = read("<I")
            skip(kind)
        for _ in range(n_tensors):
            name = string()
            (n_dims,) = read("<I")
            ne = read(f"<{n_dims}Q")
            read("<IQ")  # type, offset
            if name == b"token_embd.weight" and n_dims == 2:
                return ne[1]
    raise SystemExit(f"model-memory: {path} has no token_embd.weight")


def round_up(mib: float, step: int = 64) -> int:
    return int(-(-mib // step) * step)


def memory_mib(weight_bytes: int, kv_cache_mb: int, logits_bytes: int) -> tuple[int, int]:
    """(request, limit) in MiB."""
    need = weight_bytes / MIB + kv_cache_mb + logits_bytes / MIB + WORKING_MIB
    return round_up(need), round_up(need * 1.25)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="the GGUF file the pods will serve")
    ap.add_argument("--kv-cache-mb", type=int, default=None)
    ap.add_argument("--max-batch-tokens", type=int, default=None)
    ap.add_argument("--patch", action="store_true", help="print a StatefulSet patch")
    args = ap.parse_args()
    kv = args.kv_cache_mb if args.kv_cache_mb is not None else env_value("LLM_KV_CACHE_MB")
    rows = (args.max_batch_tokens if args.max_batch_tokens is not None
            else env_value("LLM_MAX_BATCH_TOKENS"))
    size = os.path.getsize(args.model)  # header and vocabulary included: a little over
    logits = rows * vocab_size(args.model) * 4
    request, limit = memory_mib(size, kv, logits)
    if args.patch:
        print(f"""# model_server memory for {Path(args.model).name} ({size / MIB:.0f} MiB of weights),
# a {kv} MiB KV cache, {logits / MIB:.0f} MiB of logits scratch and {WORKING_MIB} MiB of
# working space (deploy/k8s/model-memory.py)
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: llm-model
spec:
  template:
    spec:
      containers:
        - name: model-server
          resources:
            requests:
              memory: {request}Mi
            limits:
              memory: {limit}Mi""")
    else:
        print(f"{Path(args.model).name}: weights {size / MIB:.0f} MiB + KV cache {kv} MiB + "
              f"logits {logits / MIB:.0f} MiB + working space {WORKING_MIB} MiB: "
              f"request {request}Mi, limit {limit}Mi")


if __name__ == "__main__":
    sys.exit(main())
