#!/usr/bin/env python3
"""Session snapshot benchmark (docs/model_service.md, "Snapshots"): on one
model server (the default model, --prefix_cache=false so that a prefill
computes everything), a session of --tokens random token ids is prefilled,
exported (zstd and uncompressed) and imported into a new session; the
figures are the snapshot's bytes per token, raw and compressed, and the
export + import time against prefilling the same tokens again.

    python3 bench/snapshot_bench.py [--rounds 3] [--threads 2] [--tokens 2048]

Prints medians and writes build/bench/snapshot.json.

With --spill (the disk tier, model_server --kv_spill_dir): a server with
--max_sessions 1, so that each new session evicts (spills) the last one; for
each of --sizes, a session of that many random tokens is prefilled (the
re-prefill time), pushed out by a new 1-token session (the copy of its KV
under the engine's lock read from llm_kv_spill_copy_seconds_total), its spill file
awaited, and then decoded one token (the restore: the file read, decoded and
imported, then one decode step). Prints the restore against the re-prefill
as a ratio, and the file's bytes per token; writes build/bench/spill.json.

    python3 bench/snapshot_bench.py --spill [--rounds 1] [--sizes 512 2048 4096 8000]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import statistics
import tempfile
import time
import urllib.request
from pathlib import Path

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


def wait_loaded(stub) -> int:
    """The vocabulary size, once the model is loaded (UNAVAILABLE till then)."""
    for _ in range(1200):
        try:
            return stub.Info(model_pb2.ModelInfoRequest(), timeout=10).vocab_size
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.UNAVAILABLE:
                raise
            time.sleep(0.1)
    raise SystemExit("snapshot_bench: the model did not load")


def timed(f):
    t0 = time.perf_counter()
    out = f()
    return out, time.perf_counter() - t0


def spill_bench(args) -> None:
    spill_dir = Path(tempfile.mkdtemp(prefix="spill_bench_"))
    proc, addr = start("model_server", ["--model", str(MODEL), "--threads", str(args.threads),
                                        "--metrics_listen", "127.0.0.1:0",
                                        "--prefix_cache=false",
                                        "--kv_cache_mb", "1024", "--max_sessions", "1",
                                        "--kv_spill_dir", str(spill_dir)], "snapshot_bench")
    rows = []
    try:
        m = re.search(r"metrics on port (\d+)", proc.stdout.readline())
        if not m:
            raise SystemExit("snapshot_bench: no metrics port")
        metrics = f"http://127.0.0.1:{m.group(1)}/metrics"

        def copy_seconds() -> float:
            text = urllib.request.urlopen(metrics, timeout=10).read().decode()
            return float(re.search(r"^llm_kv_spill_copy_seconds_total (\S+)", text, re.M).group(1))

        channel = grpc.insecure_channel(addr, options=[("grpc.max_receive_message_length", -1)])
        stub = model_pb2_grpc.ModelStub(channel)
        vocab = wait_loaded(stub)

        def new_session(tokens):
            r, t = timed(lambda: stub.Prefill(model_pb2.PrefillRequest(tokens=tokens, logits=TOP1),
                                             timeout=600))
            return r.session_id, t

        def spilled(session):
            path = spill_dir / f"{session}.kvsnap"
            for _ in range(6000):
                if path.exists():
                    return path.stat().st_size
                time.sleep(0.01)
            raise SystemExit(f"snapshot_bench: {path} never appeared")

        for _ in range(args.rounds):
            for n in [1] + args.sizes:
                session, prefill = new_session([random.randrange(vocab) for _ in range(n)])
                raw = len(export(stub, session, uncompressed=True))
                copied = copy_seconds()
                _, evict = new_session([1])  # pushes `session` out: spilled
                copy = copy_seconds() - copied
                size = spilled(session)
                decode = model_pb2.DecodeTokenRequest(session_id=session, token=2, logits=TOP1)
                _, restore = timed(lambda: stub.Decode(decode, timeout=600))
                # And a decode step alone, on the restored session.
                decode.token = 3
                _, step = timed(lambda: stub.Decode(decode, timeout=600))
                rows.append({"tokens": n, "prefill_s": prefill, "evict_prefill_s": evict,
                             "restore_decode_s": restore, "decode_s": step, "copy_s": copy, "raw_bytes": raw,
                             "file_bytes": size})
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(spill_dir, ignore_errors=True)
    for n in args.sizes:
        med = {k: statistics.median(r[k] for r in rows if r["tokens"] == n) for k in rows[0]}
        print(f"spill: {n:5d} tokens: re-prefill {med['prefill_s'] * 1e3:8.0f} ms, restore from "
              f"disk + 1 decode {med['restore_decode_s'] * 1e3:6.0f} ms (a decode alone "
              f"{med['decode_s'] * 1e3:.0f} ms) = {med['prefill_s'] / med['restore_decode_s']:5.1f}x;"
              f" spill's KV copy under the lock {med['copy_s'] * 1e3:.0f} ms; "
              f"{med['raw_bytes'] / n:,.0f} bytes/token raw, {med['file_bytes'] / n:,.0f} on disk")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "spill.json").write_text(json.dumps({"rounds": rows}, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--spill", action="store_true", help="the disk tier (--kv_spill_dir)")
    ap.add_argument("--sizes", type=int, nargs="+", default=[512, 2048, 4096, 8000])
    args = ap.parse_args()
    if args.spill:
        spill_bench(args)
        return
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
