#!/usr/bin/env python3
"""Records llama.cpp's outputs on a real model, for model_svc's tests.

Run once, by hand, when the model or the text changes:

  build/bench-venv/bin/pip install llama-cpp-python==0.3.16   # builds llama.cpp
  build/bench-venv/bin/python tests/data/llamacpp_reference.py \
      models/SmolLM2-135M-Instruct.Q4_1.gguf tests/data/lighthouses.txt \
      > tests/data/llamacpp_reference.json
  build/bench-venv/bin/python tests/data/llamacpp_reference.py --bos \
      models/gemma-3-270m-q4_k_m.gguf tests/data/lighthouses.txt \
      > tests/data/llamacpp_reference_gemma3.json

(The Gemma file was recorded with llama-cpp-python 0.3.36's library, built
by bench/model_bench.py, through LLAMA_CPP_LIB_PATH=build/bench-llama.cpp/
build/bin and PYTHONPATH=build/bench-llama.cpp/src-0.3.36.)

It writes, for the first 256 tokens of the text (tokenized by llama.cpp;
with --bos, after the model's BOS token), the top-1 token llama.cpp predicts
after every position with the gap between its top two logits, the
perplexity of the text's tokens, and the greedy continuation of a fixed
prompt. The top-1 tokens come from one batched evaluation of the text
(llama.cpp's prefill path); for scale, it also records those (and the
perplexity) of two other llama.cpp paths on the same file: one token per
evaluation (its decode path) and flash attention. Every path uses
llama.cpp's default f16 KV cache.
"""
import hashlib
import json
import sys

import numpy as np
from llama_cpp import Llama

N_TOKENS = 256
PROMPT = "The capital of France is"
CONTINUATION = 32


def perplexity(scores, tokens):
    """exp(mean negative log-likelihood of tokens[1:] given their prefixes)."""
    logits = np.asarray(scores[:len(tokens) - 1], dtype=np.float64)
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    nll = -log_probs[np.arange(len(tokens) - 1), tokens[1:]]
    return float(np.exp(nll.mean()))


def main():
    args = sys.argv[1:]
    bos = "--bos" in args
    args = [a for a in args if a != "--bos"]
    model_path, text_path = args[0], args[1]
    with open(model_path, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    text = open(text_path, encoding="utf-8").read()
    llm = Llama(model_path=model_path, n_ctx=512, n_batch=512, n_threads=2,
                logits_all=True, verbose=False, seed=0)
    tokens = llm.tokenize(text.encode("utf-8"), add_bos=bos, special=False)[:N_TOKENS]
    llm.reset()
    llm.eval(tokens)
    logits = np.array(llm.scores[:len(tokens)], dtype=np.float32)
    llm_scores = np.array(llm.scores[:len(tokens)], dtype=np.float32)
    top1 = logits.argmax(axis=1)
    other_paths = {}
    other_ppl = {}
    for name, batch, flash in (("decode_path", 1, False), ("flash_attn", 512, True)):
        other = Llama(model_path=model_path, n_ctx=512, n_batch=batch, n_ubatch=batch,
                      n_threads=2, logits_all=True, verbose=False, seed=0, flash_attn=flash)
        other.eval(tokens)
        other_top1 = np.array(other.scores[:len(tokens)], dtype=np.float32).argmax(axis=1)
        other_paths[name] = [int(t) for t in other_top1]
        other_ppl[name] = perplexity(other.scores, tokens)
    ordered = np.sort(logits, axis=1)
    margin = ordered[:, -1] - ordered[:, -2]

    llm.reset()
    prompt_tokens = llm.tokenize(PROMPT.encode("utf-8"), add_bos=bos, special=False)
    greedy = []
    for tok in llm.generate(prompt_tokens, temp=0.0, top_k=1, top_p=1.0, repeat_penalty=1.0):
        greedy.append(int(tok))
        if len(greedy) == CONTINUATION:
            break

    import llama_cpp
    json.dump({
        "producer": f"llama-cpp-python {llama_cpp.__version__} (llama.cpp), n_threads=2, "
                    "logits_all",
        "command": "build/bench-venv/bin/python tests/data/llamacpp_reference.py "
                   + ("--bos " if bos else "") + " ".join(args[:2]),
        "model_sha256": sha,
        "text": text_path.split("/")[-1],
        "tokens": [int(t) for t in tokens],
        "top1": [int(t) for t in top1],
        "top1_margin": [round(float(m), 4) for m in margin],
        # The same top-1 tokens from llama.cpp's other paths: n_batch 1 (one
        # token per evaluation), and flash attention (n_batch 512).
        "top1_decode_path": other_paths["decode_path"],
        "top1_flash_attn": other_paths["flash_attn"],
        # Perplexity of tokens[1:] (context: the 256 tokens, n_ctx 512).
        "perplexity": perplexity(llm_scores, tokens),
        "perplexity_decode_path": other_ppl["decode_path"],
        "perplexity_flash_attn": other_ppl["flash_attn"],
        "prompt": PROMPT,
        "prompt_tokens": [int(t) for t in prompt_tokens],
        "greedy_continuation": greedy,
        "greedy_text": llm.detokenize(greedy).decode("utf-8", errors="replace"),
    }, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
