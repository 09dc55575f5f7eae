#!/usr/bin/env python3
"""Where our outputs part from llama.cpp's: tensors layer by layer, and perplexity.

Runs with llama-cpp-python's library as bench/model_bench.py builds it
(nothing is rebuilt):

  LLAMA_CPP_LIB_PATH=build/bench-llama.cpp/build/bin \\
  PYTHONPATH=build/bench-llama.cpp/src-0.3.36 build/ref-venv/bin/python \\
      bench/layer_compare.py layers --model models/SmolLM2-135M-Instruct.Q4_1.gguf

layers: the first --ctx tokens of --text (tokenized by llama.cpp, BOS first
when the vocabulary adds it) go through llama.cpp (one llama_decode; its
graph callback copies every tensor named below), through our forward and
through the fp64 reference forward (build/bin/llm-layers --reference). For
each tensor and layer it prints the relative error ||a - b|| / ||b|| of each
position's row, as the median over positions, for three pairs: ours against
llama.cpp, ours against the fp64 reference, llama.cpp against the reference.
--ubatch 1 runs both sides one token per evaluation (the decode path);
--flash and --kv f32 pick llama.cpp's other paths (ours: --kv f32 only).

--against llama_decode / llama_flash puts another llama.cpp path in our place
(llama.cpp against itself).

ops: each op of one layer (--layer) recomputed in fp64 from llama.cpp's own
input tensors, with llama.cpp's order of roundings (its activation
quantization per weight type, its attention's fp16 roundings), with ours,
and exactly, each compared with llama.cpp's output tensor. Needs gguf-py
(build/bench-llama.cpp/src-0.3.36/vendor/llama.cpp/gguf-py on PYTHONPATH).

perplexity: llama-perplexity's method over llama.cpp (non-overlapping
windows of --ctx tokens of the whole text, first token of each replaced by
BOS when the vocabulary adds one, the second half of each scored), for its
paths (flash attention off/on, f16/f32 KV cache), beside build/bin/
llm-perplexity's number, after checking that both tokenize the text alike;
with the paired standard error of each path's difference.

Results and their reading: bench/README.md, "Where our outputs part from
llama.cpp's".
"""
import argparse
import ctypes
import json
import math
import os
import subprocess
import sys
import tempfile
from collections import defaultdict

import numpy as np
import llama_cpp as L

# Our tensor names (LlamaModel::TensorObserver) -> llama.cpp's graph names.
LLAMA_NAMES = {
    "attn_norm": ["attn_norm"],
    "Qcur": ["Qcur"],
    "Kcur": ["Kcur"],
    "Vcur": ["Vcur"],
    "kqv_out": ["kqv_out"],
    "attn_out": ["attn_out"],
    "attn_post_norm": ["attn_post_norm"],
    "ffn_inp": ["ffn_inp", "sa_out"],
    "ffn_norm": ["ffn_norm"],
    "ffn_gate": ["ffn_gate"],
    "ffn_up": ["ffn_up"],
    "ffn_act": ["ffn_swiglu", "ffn_geglu"],
    "ffn_out": ["ffn_out"],
    "ffn_post_norm": ["ffn_post_norm"],
    "l_out": ["l_out"],
    "result_norm": ["result_norm"],
}
ORDER = list(LLAMA_NAMES)


class GgmlTensor(ctypes.Structure):
    """ggml.h's struct ggml_tensor (GGML_MAX_DIMS 4, GGML_MAX_SRC 10)."""
    _fields_ = [
        ("type", ctypes.c_int), ("buffer", ctypes.c_void_p),
        ("ne", ctypes.c_int64 * 4), ("nb", ctypes.c_size_t * 4),
        ("op", ctypes.c_int), ("op_params", ctypes.c_int32 * 16), ("flags", ctypes.c_int32),
        ("src", ctypes.c_void_p * 10), ("view_src", ctypes.c_void_p),
        ("view_offs", ctypes.c_size_t), ("data", ctypes.c_void_p),
        ("name", ctypes.c_char * 64), ("extra", ctypes.c_void_p), ("padding", ctypes.c_char * 8),
    ]


GGML_TYPE_F32, GGML_TYPE_F16 = 0, 1


def tensor_rows(t):
    """A copy of a 2-4D f32 tensor as [tokens, features] (ggml: ne[0] fastest)."""
    assert t.type == GGML_TYPE_F32, (t.name, t.type)
    ne = [t.ne[i] for i in range(4)]
    nb = [t.nb[i] for i in range(4)]
    span = sum((ne[i] - 1) * nb[i] for i in range(4)) + 4
    buf = (ctypes.c_char * span).from_address(t.data)
    a = np.lib.stride_tricks.as_strided(np.frombuffer(buf, dtype=np.float32),
                                        shape=ne[::-1], strides=nb[::-1]).copy()
    # [ne3, ne2, ne1, ne0]: tokens are the last non-unit dimension of ggml's.
    if ne[2] > 1 and ne[1] > 1 and ne[3] == 1:  # [head_dim, heads, tokens]
        return a.reshape(ne[2], ne[1] * ne[0])
    return a.reshape(-1, ne[0])


@L.llama_log_callback
def _quiet(level, text, user_data):
    pass


class LlamaCpp:
    def __init__(self, model_path):
        L.llama_log_set(_quiet, ctypes.c_void_p())
        L.llama_backend_init()
        mp = L.llama_model_default_params()
        self.model = L.llama_model_load_from_file(model_path.encode(), mp)
        assert self.model, model_path
        self.vocab = L.llama_model_get_vocab(self.model)
        self.n_vocab = L.llama_vocab_n_tokens(self.vocab)
        self.add_bos = bool(L.llama_vocab_get_add_bos(self.vocab))
        self.bos = L.llama_vocab_bos(self.vocab)

    def tokenize(self, text, add_bos):
        raw = text.encode("utf-8")
        buf = (L.llama_token * (len(raw) + 16))()
        n = L.llama_tokenize(self.vocab, raw, len(raw), buf, len(buf), add_bos, False)
        assert n >= 0
        return list(buf[:n])

    def run(self, tokens, ubatch=0, flash=False, kv="f16", names=(), threads=2, all_parts=False):
        """Logits [n, vocab] of every position and {name-layer: [n, features]}
        (all_parts: {name-layer: [every tensor of that name, in evaluation order]},
        one ubatch only)."""
        n = len(tokens)
        want = {alias for ours in names for alias in LLAMA_NAMES[ours]}
        captured = defaultdict(list)

        def key(name):
            """name-layer (layer -1: none) for the tensors asked for, else None."""
            base, _, layer = name.rpartition("-")
            if base in want and layer.isdigit():
                return f"{base}-{layer}"
            return f"{name}--1" if name in want else None

        def callback(ptr, ask, _):
            t = GgmlTensor.from_address(ptr)
            k = key(t.name.decode())
            if ask:
                return k is not None
            if k is not None:
                captured[k].append(tensor_rows(t))
            return True

        cb = L.ggml_backend_sched_eval_callback(callback)
        cp = L.llama_context_default_params()
        cp.n_ctx = max(n, 256)
        cp.n_batch = max(n, 1)
        cp.n_ubatch = ubatch if ubatch > 0 else n
        cp.n_threads = threads
        cp.n_threads_batch = threads
        cp.flash_attn_type = (L.LLAMA_FLASH_ATTN_TYPE_ENABLED if flash
                              else L.LLAMA_FLASH_ATTN_TYPE_DISABLED)
        cp.type_k = cp.type_v = GGML_TYPE_F32 if kv == "f32" else GGML_TYPE_F16
        if want:
            cp.cb_eval = cb
            cp.cb_eval_user_data = None
        ctx = L.llama_init_from_model(self.model, cp)
        assert ctx
        batch = L.llama_batch_init(n, 0, 1)
        batch.n_tokens = n
        for i, tok in enumerate(tokens):
            batch.token[i] = tok
            batch.pos[i] = i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = True
        assert L.llama_decode(ctx, batch) == 0
        logits = np.ctypeslib.as_array(L.llama_get_logits(ctx), shape=(n, self.n_vocab)).copy()
        L.llama_batch_free(batch)
        L.llama_free(ctx)
        # A name can be given to several tensors of a ubatch's graph (Qcur: the
        # product, its reshape, RoPE's result); the last one evaluated is the
        # tensor meant.
        if all_parts:
            return logits, dict(captured)
        ubatches = -(-n // cp.n_ubatch)
        tensors = {}
        for name, parts in captured.items():
            per = len(parts) // ubatches
            assert per * ubatches == len(parts), (name, len(parts), ubatches)
            tensors[name] = np.concatenate(parts[per - 1::per], axis=0)
        return logits, tensors


def rel_rows(a, b):
    """Per row: ||a - b|| / ||b||."""
    a = a.astype(np.float64)
    b = b.astype(np.float64)
    return np.linalg.norm(a - b, axis=1) / np.maximum(np.linalg.norm(b, axis=1), 1e-30)


def log_softmax_at(logits, ids):
    """log p(ids[j]) under logits[j], in float64."""
    x = logits.astype(np.float64)
    m = x.max(axis=1, keepdims=True)
    lse = m[:, 0] + np.log(np.exp(x - m).sum(axis=1))
    return x[np.arange(len(ids)), ids] - lse


def ours_layers(args, tokens, names, out_dir):
    tok_path = os.path.join(out_dir, "tokens.json")
    with open(tok_path, "w") as f:
        json.dump(tokens, f)
    cmd = [args.llm_layers, "--model", args.model, "--tokens", tok_path, "--out", out_dir,
           "--names", ",".join(names), "--kv_cache_type", args.kv, "--threads",
           str(args.threads), "--ubatch", str(args.ubatch), "--logits"]
    if args.reference:
        cmd.append("--reference")
    info = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    n = info["tokens"]

    def load(kind, name, layer, dtype):
        path = os.path.join(out_dir, kind, f"{name}-{layer}.{'f32' if dtype == np.float32 else 'f64'}")
        if not os.path.exists(path):
            return None
        return np.fromfile(path, dtype=dtype).reshape(n, -1)

    return load


def cmd_layers(args):
    lc = LlamaCpp(args.model)
    text = open(args.text, encoding="utf-8").read()
    tokens = lc.tokenize(text, lc.add_bos)[:args.ctx]
    names = args.names.split(",") if args.names else ORDER
    logits, theirs = lc.run(tokens, ubatch=args.ubatch, flash=args.flash, kv=args.kv,
                            names=names, threads=args.threads)
    if args.check_callback:
        plain, _ = lc.run(tokens, ubatch=args.ubatch, flash=args.flash, kv=args.kv,
                          threads=args.threads)
        print(f"llama.cpp logits with the callback == without: {np.array_equal(plain, logits)}")
    out_dir = tempfile.mkdtemp(prefix="layer_compare.")
    load = ours_layers(args, tokens, names, out_dir)
    n = len(tokens)
    ours_logits = np.fromfile(os.path.join(out_dir, "ours", "result_output.f32"),
                              dtype=np.float32).reshape(n, -1)
    if args.against != "ours":
        # The "ours" column becomes another llama.cpp path: its own noise floor.
        alt_logits, alt = lc.run(tokens, ubatch=1 if args.against == "llama_decode" else 0,
                                 flash=args.against == "llama_flash", kv=args.kv, names=names,
                                 threads=args.threads)
        ours_logits = alt_logits
        ours_load = load

        def load(kind, name, layer, dtype):
            if kind != "ours":
                return ours_load(kind, name, layer, dtype)
            key = next((f"{a}-{layer}" for a in LLAMA_NAMES[name] if f"{a}-{layer}" in alt), None)
            return alt[key] if key else None
        print(f"'ours' below is llama.cpp's {args.against} path")
    ref_logits = None
    if args.reference:
        ref_logits = np.fromfile(os.path.join(out_dir, "reference", "result_output.f64"),
                                 dtype=np.float64).reshape(n, -1)
    n_layers = 1 + max(int(k.rsplit("-", 1)[1]) for k in theirs if not k.endswith("--1"))
    assert all(len(v) == n for v in theirs.values())
    rows = []
    print(f"{len(tokens)} tokens; median over positions of ||a-b||/||b|| (and max)")
    print(f"{'tensor':<16} {'layer':>5} {'ours~llama':>20} {'ours~ref':>20} {'llama~ref':>20}")
    for layer in list(range(n_layers)) + [-1]:
        for name in names:
            llama_key = next((f"{a}-{layer}" for a in LLAMA_NAMES[name]
                              if f"{a}-{layer}" in theirs), None)
            o = load("ours", name, layer, np.float32)
            if o is None or llama_key is None:
                continue
            t = theirs[llama_key]
            if t.shape != o.shape:
                print(f"{name}-{layer}: shapes differ: ours {o.shape}, llama.cpp {t.shape}")
                continue
            r = load("reference", name, layer, np.float64) if args.reference else None
            e_ol = rel_rows(o, t)
            cells = [e_ol]
            if r is not None:
                cells += [rel_rows(o, r), rel_rows(t, r)]
            fmt = " ".join(f"{np.median(c):9.2e} ({c.max():7.1e})" for c in cells)
            print(f"{name:<16} {layer:>5} {fmt}")
            rows.append({"tensor": name, "layer": layer,
                         "ours_llama": [float(np.median(cells[0])), float(cells[0].max())],
                         **({"ours_ref": [float(np.median(cells[1])), float(cells[1].max())],
                             "llama_ref": [float(np.median(cells[2])), float(cells[2].max())]}
                            if r is not None else {})})
    # Logits: relative error, top-1 agreement, perplexity of the window.
    ids = np.array(tokens)
    summary = {}
    pairs = [("ours", ours_logits), ("llama", logits)] + ([("ref", ref_logits)] if
                                                         ref_logits is not None else [])
    for name, lg in pairs:
        nll = -log_softmax_at(lg[:-1], ids[1:])
        summary[name] = {"perplexity": float(np.exp(nll.mean())),
                         "perplexity_second_half": float(np.exp(nll[n // 2 - 1:].mean()))}
    for (a, la), (b, lb) in [(pairs[0], pairs[1])] + ([(pairs[0], pairs[2]), (pairs[1], pairs[2])]
                                                      if len(pairs) == 3 else []):
        e = rel_rows(la, lb)
        top = int((la.argmax(axis=1) == lb.argmax(axis=1)).sum())
        print(f"logits {a}~{b}: median rel {np.median(e):.2e} (max {e.max():.1e}), "
              f"top-1 agree {top}/{n}")
        summary[f"{a}~{b}"] = {"median_rel": float(np.median(e)), "top1": top}
    for name in summary:
        if "perplexity" in summary[name]:
            print(f"perplexity of the window ({name}): {summary[name]['perplexity']:.4f}, "
                  f"second half {summary[name]['perplexity_second_half']:.4f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "rows": rows, "summary": summary}, f, indent=1)
    if not args.keep:
        subprocess.run(["rm", "-rf", out_dir], check=True)
    else:
        print("kept", out_dir)


def window_nll(logits, chunk, ctx):
    """llama-perplexity's scored NLLs of one window: tokens ctx/2+1 .. ctx-1."""
    first = ctx // 2
    return -log_softmax_at(logits[first:ctx - 1], np.array(chunk[first + 1:ctx]))


def windows_of(lc, tokens, ctx):
    for w in range(len(tokens) // ctx):
        chunk = list(tokens[w * ctx:(w + 1) * ctx])
        if lc.add_bos:
            chunk[0] = lc.bos
        yield chunk


def ours_nll(args, lc, tokens):
    """Per-token NLLs from our forward (llm-layers' logits), window by window."""
    nll = []
    with tempfile.TemporaryDirectory(prefix="layer_compare.") as d:
        for chunk in windows_of(lc, tokens, args.ctx):
            with open(os.path.join(d, "tokens.json"), "w") as f:
                json.dump(chunk, f)
            subprocess.run([args.llm_layers, "--model", args.model, "--tokens",
                            os.path.join(d, "tokens.json"), "--out", d, "--names", "none",
                            "--kv_cache_type", args.kv, "--threads", str(args.threads),
                            "--logits"], check=True, capture_output=True)
            logits = np.fromfile(os.path.join(d, "ours", "result_output.f32"),
                                 dtype=np.float32).reshape(args.ctx, -1)
            nll.extend(window_nll(logits, chunk, args.ctx))
    return np.array(nll)


def cmd_perplexity(args):
    lc = LlamaCpp(args.model)
    text = open(args.text, encoding="utf-8").read()
    tokens = lc.tokenize(text, lc.add_bos)
    with tempfile.NamedTemporaryFile("r", suffix=".json") as f:
        out = subprocess.run([args.llm_perplexity, "--model", args.model, "--file", args.text,
                              "--ctx", str(args.ctx), "--threads", str(args.threads),
                              "--kv_cache_type", args.kv, "--tokens_out", f.name],
                             check=True, capture_output=True, text=True).stdout
        ours_tokens = json.load(f)
    ours = json.loads(out)
    print(f"{args.model}: {len(tokens)} tokens (llama.cpp's tokenizer, BOS {lc.add_bos}); "
          f"ours tokenize alike: {ours_tokens == tokens}")
    print(f"ours (llm-perplexity, {args.kv} KV): {ours['perplexity']:.4f} "
          f"({ours['tokens']} scored, {ours['windows']} windows)")
    paths = {}
    for flash in (False, True):
        for kv in ("f16", "f32"):
            nll = np.concatenate([window_nll(lc.run(c, flash=flash, kv=kv,
                                                    threads=args.threads)[0], c, args.ctx)
                                  for c in windows_of(lc, tokens, args.ctx)])
            paths[f"llama.cpp flash_attn={'on ' if flash else 'off'} {kv} KV"] = nll
    paths[f"ours (llm-layers' logits, {args.kv} KV)"] = ours_nll(args, lc, tokens)
    base_name = "llama.cpp flash_attn=off f16 KV"
    base = paths[base_name]
    print(f"perplexity, and the paired difference of the mean NLL against {base_name}")
    print("(+- its standard error over the scored tokens, as a perplexity ratio in %):")
    for name, nll in paths.items():
        diff = nll - base
        se = diff.std(ddof=1) / math.sqrt(len(diff))
        print(f"  {name:<36} {math.exp(nll.mean()):9.4f}  {100 * (math.exp(diff.mean()) - 1):+6.2f} % "
              f"+- {100 * se:.2f} %  (per-token NLL difference: std {diff.std(ddof=1):.3f})")

# --- ops: each op of one layer on llama.cpp's own inputs ---------------------

def f16(x):
    return np.asarray(x, dtype=np.float32).astype(np.float16).astype(np.float64)


def act_ours(x):
    """Our QuantizeQ8 (quant.h): blocks of 32, d = amax/127 in fp32, codes
    round-half-even(x * (1/d)); the product sees d * q (and s = d * sum q)."""
    b = x.astype(np.float32).reshape(x.shape[0], -1, 32)
    amax = np.abs(b).max(axis=2, keepdims=True)
    d = (amax / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore"):
        idv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    q = np.clip(np.rint(b * idv), -127, 127)
    return (d.astype(np.float64) * q).reshape(x.shape), None


def act_q8_0(x, with_s=False):
    """llama.cpp's quantize_row_q8_0 / q8_1 (AVX2): id = 127/amax, codes
    round-half-even, d stored as fp16; Q8_1 also s = fp16(d * sum q)."""
    b = x.astype(np.float32).reshape(x.shape[0], -1, 32)
    amax = np.abs(b).max(axis=2, keepdims=True)
    d = (amax / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore"):
        idv = np.where(amax != 0, np.float32(127) / amax, np.float32(0)).astype(np.float32)
    q = np.rint(b * idv)
    s = f16(d[..., 0] * q.sum(axis=2)) if with_s else None  # [tokens, blocks]
    return (f16(d) * q).reshape(x.shape), s


def act_q8_k(x):
    """llama.cpp's quantize_row_q8_K: blocks of 256, the signed value of largest
    magnitude gets -127 (iscale = -127/max, nearest_int), d = 1/iscale in fp32."""
    b = x.astype(np.float32).reshape(x.shape[0], -1, 256)
    idx = np.abs(b).argmax(axis=2)[..., None]
    mx = np.take_along_axis(b, idx, axis=2)
    with np.errstate(divide="ignore"):
        iscale = np.where(mx != 0, np.float32(-127) / mx, np.float32(0)).astype(np.float32)
        d = np.where(iscale != 0, np.float32(1) / iscale, np.float32(0)).astype(np.float32)
    q = np.minimum(np.rint(iscale * b), 127)
    return (d.astype(np.float64) * q).reshape(x.shape), None


class Weights:
    """Dequantized matrices (gguf-py), and Q4_1's per-block minima."""
    def __init__(self, path):
        # gguf-py (llama.cpp's vendored copy, on PYTHONPATH) imports yaml for
        # model-card metadata only, which the reader does not use.
        import types
        sys.modules.setdefault("yaml", types.ModuleType("yaml"))
        import gguf
        self.gguf = gguf
        self.reader = gguf.GGUFReader(path)
        self.tensors = {t.name: t for t in self.reader.tensors}

    def type_name(self, name):
        return self.tensors[name].tensor_type.name

    def matrix(self, name):
        t = self.tensors[name]
        return self.gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float64)

    def q4_1_minima(self, name):
        t = self.tensors[name]
        raw = np.asarray(t.data).reshape(-1, 20)  # d, m (fp16), 16 bytes of codes
        return raw[:, 2:4].copy().view(np.float16).astype(np.float64).reshape(t.shape[1], -1)


def llama_activation(weight_type):
    """The activation type llama.cpp's CPU backend quantizes to for a weight type."""
    if weight_type in ("Q4_1", "Q5_1"):
        return "q8_1"
    if weight_type in ("Q4_0", "Q5_0", "Q8_0", "IQ4_NL"):
        return "q8_0"
    if weight_type.endswith("_K") or weight_type == "IQ4_XS":
        return "q8_k"
    return "float"


def product(x, w, wtype, scheme, minima=None):
    """x [tokens, cols] times w [rows, cols]^T with x rounded as `scheme`."""
    if scheme == "exact" or wtype in ("F32",):
        return x.astype(np.float64) @ w.T
    if scheme == "ours":
        xq, _ = act_ours(x)
        return xq @ w.T
    if scheme == "q8_0":
        xq, _ = act_q8_0(x)
        return xq @ w.T
    if scheme == "q8_1":
        # sum_b (dw qw + m) d16 q + m (s16 - d16 sum q): the minima see s16.
        xq, s16 = act_q8_0(x, with_s=True)
        out = xq @ w.T
        blocks = xq.reshape(x.shape[0], -1, 32).sum(axis=2)  # d16 * sum q
        return out + (s16 - blocks) @ minima.T
    if scheme == "q8_k":
        xq, _ = act_q8_k(x)
        return xq @ w.T
    if scheme == "f16":
        return f16(x) @ w.T
    raise ValueError(scheme)


def attention(q, k, v, n_head, n_head_kv, scale, scheme, window=0):
    """Causal attention of [tokens, heads * d] rows. scheme: exact (fp64),
    ours (K and V rounded to fp16: the cache; q and the weights fp32), llama
    (its non-flash path: also q rounded to fp16 for K·q, and the softmax
    weights to fp16 for V·p)."""
    n = q.shape[0]
    hd = q.shape[1] // n_head
    group = n_head // n_head_kv
    if scheme != "exact":
        k, v = f16(k), f16(v)
    if scheme == "llama":
        q = f16(q)
    out = np.zeros((n, n_head * hd))
    mask = np.tril(np.ones((n, n), dtype=bool))
    if window:
        mask &= ~np.tril(np.ones((n, n), dtype=bool), -window)
    for h in range(n_head):
        kh = k[:, (h // group) * hd:(h // group + 1) * hd]
        vh = v[:, (h // group) * hd:(h // group + 1) * hd]
        s_ = (q[:, h * hd:(h + 1) * hd] @ kh.T) * scale
        if scheme != "exact":
            s_ = s_.astype(np.float32).astype(np.float64)
        s_ = np.where(mask, s_, -np.inf)
        p = np.exp(s_ - s_.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        if scheme == "llama":
            p = f16(p)
        out[:, h * hd:(h + 1) * hd] = p @ vh
    return out


def rms_norm(x, w, eps):
    x = x.astype(np.float64)
    return x / np.sqrt((x * x).mean(axis=1, keepdims=True) + eps) * w


def rope(x, n_head, base, neox):
    """RoPE in fp64 of [tokens, heads * d] rows at positions 0..n-1."""
    n, width = x.shape
    hd = width // n_head
    inv = base ** (-np.arange(0, hd, 2) / hd)
    theta = np.arange(n)[:, None] * inv[None, :]
    c, s_ = np.cos(theta)[:, None, :], np.sin(theta)[:, None, :]
    y = x.reshape(n, n_head, hd).copy()
    if neox:
        a, b = y[..., :hd // 2].copy(), y[..., hd // 2:].copy()
        y[..., :hd // 2], y[..., hd // 2:] = a * c - b * s_, a * s_ + b * c
    else:
        a, b = y[..., 0::2].copy(), y[..., 1::2].copy()
        y[..., 0::2], y[..., 1::2] = a * c - b * s_, a * s_ + b * c
    return y.reshape(n, width)


def gelu_f16(g):
    """GELU (tanh) with input and result rounded to fp16, as ggml's GeGLU table."""
    h = f16(g)
    return np.where(g <= -10, 0, np.where(g >= 10, g, f16(
        0.5 * h * (1 + np.tanh(math.sqrt(2 / math.pi) * h * (1 + 0.044715 * h * h))))))


def cmd_ops(args):
    lc = LlamaCpp(args.model)
    text = open(args.text, encoding="utf-8").read()
    tokens = lc.tokenize(text, lc.add_bos)[:args.ctx]
    names = ["attn_norm", "Qcur", "Kcur", "Vcur", "kqv_out", "attn_out", "attn_post_norm",
             "ffn_inp", "ffn_norm", "ffn_gate", "ffn_up", "ffn_act", "ffn_out", "l_out"]
    _, parts = lc.run(tokens, kv=args.kv, names=names, threads=args.threads, all_parts=True)
    il = args.layer
    has = lambda name: f"{name}-{il}" in parts
    get = lambda name, i=-1: parts[f"{name}-{il}"][i].astype(np.float64)
    W = Weights(args.model)
    meta = {f.name: f for f in W.reader.fields.values()}
    arch = bytes(meta["general.architecture"].parts[-1]).decode()
    val = lambda key, default=None: (meta[f"{arch}.{key}"].parts[-1][0]
                                     if f"{arch}.{key}" in meta else default)
    gemma = arch == "gemma3"
    n_head, n_head_kv = int(val("attention.head_count")), int(val("attention.head_count_kv"))
    eps = float(val("attention.layer_norm_rms_epsilon"))
    base = float(val("rope.freq_base", 10000.0))
    if gemma and (il + 1) % 6 != 0:
        base = 10000.0  # sliding-window layers
    blk = f"blk.{il}."
    print(f"{args.model}, layer {il}, {len(tokens)} tokens, llama.cpp prefill ({args.kv} KV).")
    print("Each op recomputed in fp64 from llama.cpp's own input tensor, with llama.cpp's order")
    print("of roundings and with ours; median (max) over positions of ||a - b|| / ||b|| against")
    print("llama.cpp's output tensor.")
    print(f"{'op':<44} {'weight':>7} {'llama.cpp order':>20} {'our order':>20} {'exact':>20}")

    def row(label, wtype, outs, target):
        cells = " ".join(f"{np.median(rel_rows(o, target)):9.2e} ({rel_rows(o, target).max():7.1e})"
                         for o in outs)
        print(f"{label:<44} {wtype:>7} {cells}")

    def matmul(label, x, wname, target, post=lambda y: y):
        wtype = W.type_name(wname)
        w = W.matrix(wname)
        scheme = llama_activation(wtype)
        minima = W.q4_1_minima(wname) if scheme == "q8_1" else None
        outs = [post(product(x, w, wtype, s, minima)) for s in (scheme, "ours", "exact")]
        row(f"{label} ({scheme})", wtype, outs, target)

    x = get("attn_norm")
    # The first tensor named Qcur/Kcur/Vcur is the product, before QK-norm and RoPE.
    matmul("attn_q: attn_norm -> Qcur", x, blk + "attn_q.weight", get("Qcur", 0))
    matmul("attn_k: attn_norm -> Kcur", x, blk + "attn_k.weight", get("Kcur", 0))
    matmul("attn_v: attn_norm -> Vcur", x, blk + "attn_v.weight", get("Vcur", 0))
    hd = get("Qcur").shape[1] // n_head
    q_in, k_in = get("Qcur", 0), get("Kcur", 0)
    if gemma:  # QK-norm per head, then RoPE
        qn, kn = W.matrix(blk + "attn_q_norm.weight"), W.matrix(blk + "attn_k_norm.weight")
        q_in = rms_norm(q_in.reshape(-1, hd), qn, eps).reshape(q_in.shape)
        k_in = rms_norm(k_in.reshape(-1, hd), kn, eps).reshape(k_in.shape)
    roped = rope(q_in, n_head, base, neox=gemma)
    row(("q_norm + " if gemma else "") + "rope: Qcur -> Qcur", "", [roped] * 3, get("Qcur"))
    scale = (float(val("attention.scale", 0)) or 1.0 / math.sqrt(hd))
    qkv = [attention(get("Qcur"), get("Kcur"), get("Vcur", -1), n_head, n_head_kv, scale, s)
           for s in ("llama", "ours", "exact")]
    row("attention: Q, K, V -> kqv_out", "f16 KV", qkv, get("kqv_out"))
    if has("attn_out"):
        matmul("attn_output: kqv_out -> attn_out", get("kqv_out"), blk + "attn_output.weight",
               get("attn_out"))
    elif has("attn_post_norm"):
        pn = W.matrix(blk + "post_attention_norm.weight")
        matmul("attn_output + norm -> attn_post_norm", get("kqv_out"), blk + "attn_output.weight",
               get("attn_post_norm"), post=lambda y: rms_norm(y, pn, eps))
    ffn_in = get("sa_out") if gemma else get("ffn_inp")
    normed = rms_norm(ffn_in, W.matrix(blk + "ffn_norm.weight"), eps)
    row("rms_norm: ffn_inp -> ffn_norm", "F32", [normed] * 3, get("ffn_norm"))
    matmul("ffn_gate: ffn_norm -> ffn_gate", get("ffn_norm"), blk + "ffn_gate.weight",
           get("ffn_gate"))
    matmul("ffn_up: ffn_norm -> ffn_up", get("ffn_norm"), blk + "ffn_up.weight", get("ffn_up"))
    g, u = get("ffn_gate"), get("ffn_up")
    act_name = "ffn_geglu" if gemma else "ffn_swiglu"
    act = gelu_f16(g) * u if gemma else g / (1 + np.exp(-g)) * u
    row(f"{'geglu' if gemma else 'swiglu'}: gate, up -> {act_name}", "", [act] * 3, get(act_name))
    matmul(f"ffn_down: {act_name} -> ffn_out", get(act_name), blk + "ffn_down.weight",
           get("ffn_out"))

def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("layers", "perplexity", "ops"):
        s = sub.add_parser(name)
        s.add_argument("--model", required=True)
        s.add_argument("--text", default="tests/data/lighthouses.txt")
        s.add_argument("--ctx", type=int, default=256)
        s.add_argument("--kv", default="f16", choices=["f16", "f32"])
        s.add_argument("--threads", type=int, default=2)
    s = sub.choices["layers"]
    s.add_argument("--ubatch", type=int, default=0)
    s.add_argument("--flash", action="store_true")
    s.add_argument("--names", default="", help="comma-separated; default: all")
    s.add_argument("--reference", action="store_true", help="also the fp64 reference forward")
    s.add_argument("--check_callback", action="store_true",
                   help="check llama.cpp's logits do not change with the callback")
    s.add_argument("--llm_layers", default="build/bin/llm-layers")
    s.add_argument("--against", default="ours", choices=["ours", "llama_decode", "llama_flash"],
                   help="compare llama.cpp with this instead of ours")
    s.add_argument("--json", default="")
    s.add_argument("--keep", action="store_true", help="keep the tensor files")
    sub.choices["ops"].add_argument("--layer", type=int, default=0)
    sub.choices["perplexity"].add_argument("--llm_perplexity", default="build/bin/llm-perplexity")
    sub.choices["perplexity"].add_argument("--llm_layers", default="build/bin/llm-layers")
    args = p.parse_args()
    {"layers": cmd_layers, "perplexity": cmd_perplexity, "ops": cmd_ops}[args.cmd](args)


if __name__ == "__main__":
    main()
