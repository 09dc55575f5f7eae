#!/usr/bin/env python3
"""Records llama.cpp's SentencePiece (SPM) tokenization, for spm_reference_test.

Run by hand when the vocabulary, the texts or llama.cpp change. The file in
this directory was made with llama-cpp-python 0.3.36's bundled llama.cpp
(bench/llama_cpp_bench.sh builds it into build/bench-llama.cpp):

  LLAMA_CPP_LIB_PATH=build/bench-llama.cpp/build/bin \\
  PYTHONPATH=build/bench-llama.cpp/src-0.3.36 build/ref-venv/bin/python \\
      tokenizer_svc/testdata/spm_reference.py models/gemma-3-270m-q4_k_m.gguf \\
      ../shared > tokenizer_svc/testdata/gemma3_reference.jsonl

Texts: the 432 texts of ../shared/tokenizer/vectors/cl100k_base.jsonl, the 46
of ../shared/conformance/llama-vocab/ggml-vocab-llama-bpe.gguf.inp, and the
hard cases below. One JSON line per (text, special): "text" (or "hex", the
text's bytes, when it is not valid UTF-8), "special" (llama.cpp's
parse_special: control tokens match), "ids" (llama_tokenize, no BOS) and,
when it is not the text, "decoded_hex": llama_detokenize of those ids
(remove_special=false, unparse_special=true).
The first line names the vocabulary: {"vocab": file name, "sha256": ...}.
"""
import ctypes
import hashlib
import json
import os
import sys

import llama_cpp
from llama_cpp import Llama

HARD = [
    b"", b" ", b"  ", b"   ", b" Hello", b"  Hello", b"Hello ", b"Hello  world",
    b"\n", b"\n\n", b"\n\n\n", b" \n", b"\n ", b"\t", b"\t\t", b"a\tb", b"\r\n", b"\r",
    b"Hello\nworld", b"  leading and trailing  ", b"caf\xc3\xa9", b"na\xc3\xafve r\xc3\xa9sum\xc3\xa9",
    "日本語のテキスト".encode(), "中文字符测试".encode(), "한국어".encode(),
    "😀😃🎉 emoji 👩‍👩‍👧".encode(), "\u2581".encode(), "a\u2581b".encode(), b"\xe2\x96",
    b"\xff", b"\xfe\xff", b"\xc0\xaf", b"\x80abc", b"abc\xe2", b"\xf0\x9f\x98", b"\x00", b"\x00\x01\x7f",
    b"<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n", b"<bos>", b"<eos>", b"<pad>",
    b"<unk>", b"<mask>", b"<unused0>", b"<0x41>", b"<s>", b"</s>", b"<start_of_image>",
    b"Hello<end_of_turn>world", b"<start_of_turn> x", b"x <end_of_turn>",
    b"int main() {\n    return 0;\n}\n", b"    indented", b"1234567890 3.14159",
    b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", b"________________",
    b"https://example.com/path?q=1&r=2", b"'s 've 're", b"ALL CAPS TEXT",
]


def detokenize(model, ids):
    vocab = llama_cpp.llama_model_get_vocab(model)
    arr = (llama_cpp.llama_token * len(ids))(*ids)
    size = 64 + 64 * len(ids)
    buf = ctypes.create_string_buffer(size)
    n = llama_cpp.llama_detokenize(vocab, arr, len(ids), buf, size, False, True)
    assert 0 <= n <= size, n
    return buf.raw[:n]


def main():
    model_path, shared = sys.argv[1], sys.argv[2]
    with open(model_path, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    texts = [json.loads(line)["text"].encode()
             for line in open(os.path.join(shared, "tokenizer/vectors/cl100k_base.jsonl"))]
    inp = open(os.path.join(shared, "conformance/llama-vocab/ggml-vocab-llama-bpe.gguf.inp"),
               "rb").read()
    texts += inp.split(b"\n__ggml_vocab_test__\n")[:-1]
    llm = Llama(model_path=model_path, vocab_only=True, verbose=False)
    print(json.dumps({"vocab": os.path.basename(model_path), "sha256": sha}))
    for special in (False, True):
        for text in (HARD if special else texts + HARD):
            ids = llm.tokenize(text, add_bos=False, special=special)
            line = {}
            try:
                line["text"] = text.decode("utf-8")
            except UnicodeDecodeError:
                line["hex"] = text.hex()
            line["special"] = special
            line["ids"] = ids
            decoded = detokenize(llm._model.model, ids)
            if decoded != text:
                line["decoded_hex"] = decoded.hex()
            print(json.dumps(line, ensure_ascii=False))


if __name__ == "__main__":
    main()
