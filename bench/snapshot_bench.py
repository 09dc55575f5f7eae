#!/usr/bin/env python3
"""Session snapshot benchmark (docs/model_service.md, "Snapshots"): on one
model server (the default model, --prefix_cache=false so that a prefill
computes everything), a session of --tokens random token ids is prefilled,
exported (zstd and uncompressed) and imported into a new session; the
figures are the snapshot's bytes per token, raw and compressed, and the
export + import time against prefilling the same tokens again.

    python3 bench/snapshot_bench.py [--rounds 3] [--threads 2] [--tokens 2048]

Prints medians and writes build/bench/snapshot.json.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time

from servers import MODEL, ROOT, model_stubs, start  # bench/servers.py

OUT = ROOT / "build" / "bench"
grpc, model_pb2, model_pb2_grpc = model_stubs()

TOP1 = model_pb2.LogitsOptions(encoding=model_pb2.LogitsOptions.LOGITS_TOP_N, top_n=1)


def export(stub, session: str, uncompressed: bool) -> bytes:
    req = model_pb2.ExportSessionRequest(session_id=session, uncompressed=uncompressed)
    return b"".join(c.data for c in stub.ExportSession(req, timeout=600))


def import_(stub, data: bytes) -> str:
    step = 1 << 20
    chunks = (model_pb2.SessionChunk(data=data[i:i + step]) for i in range(0, len(data), step))
    return stub.ImportSession(chunks, timeout=600).session_id


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=2048)
    args = ap.parse_args()
    proc, addr = start("model_server", ["--model", str(MODEL), "--threads", str(args.threads),
                                        "--metrics_listen", "", "--prefix_cache=false",
                                        "--kv_cache_mb", "1024"], "snapshot_bench")
    try:
        channel = grpc.insecure_channel(addr, options=[("grpc.max_receive_message_length", -1)])
        stub = model_pb2_grpc.ModelStub(channel)
        vocab = 0
        for _ in range(1200):  # the model loads after the port opens (UNAVAILABLE till then)
            try:
                vocab = stub.Info(model_pb2.ModelInfoRequest(), timeout=10).vocab_size
                break
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.UNAVAILABLE:
                    raise
                time.sleep(0.1)
        rows = []
        for _ in range(args.rounds):
            tokens = [random.randrange(vocab) for _ in range(args.tokens)]
            t0 = time.perf_counter()
            session = stub.Prefill(model_pb2.PrefillRequest(tokens=tokens, logits=TOP1)).session_id
            prefill = time.perf_counter() - t0
            t0 = time.perf_counter()
            packed = export(stub, session, uncompressed=False)
            t1 = time.perf_counter()
            copy = import_(stub, packed)
            t2 = time.perf_counter()
            raw = export(stub, session, uncompressed=True)
            for s in (session, copy):
                stub.Release(model_pb2.ReleaseRequest(session_id=s))
            rows.append({"prefill_s": prefill, "export_s": t1 - t0, "import_s": t2 - t1,
                         "raw_bytes": len(raw), "zstd_bytes": len(packed)})
    finally:
        proc.terminate()
        proc.wait()
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    n = args.tokens
    print(f"snapshot_bench: {n} tokens, {args.threads} threads, median of {args.rounds}: "
          f"{med['raw_bytes'] / n:,.0f} bytes/token raw, {med['zstd_bytes'] / n:,.0f} zstd "
          f"({med['zstd_bytes'] / med['raw_bytes']:.2f}x); export {med['export_s'] * 1e3:.0f} ms "
          f"+ import {med['import_s'] * 1e3:.0f} ms = "
          f"{(med['export_s'] + med['import_s']) * 1e3:.0f} ms against prefill "
          f"{med['prefill_s'] * 1e3:.0f} ms")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "snapshot.json").write_text(json.dumps({"tokens": n, "rounds": rows, "median": med},
                                                  indent=1))


if __name__ == "__main__":
    main()
