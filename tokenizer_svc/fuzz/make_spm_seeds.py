#!/usr/bin/env python3
"""Writes the SentencePiece-style (tokenizer.ggml.model = "llama") seeds of
gguf_vocab_fuzzer: small GGUF vocabularies (under the fuzzer's 4,096-byte
-max_len), so that its mutations start inside the SPM loader and encoder.

    python3 tokenizer_svc/fuzz/make_spm_seeds.py tokenizer_svc/fuzz/seeds/gguf_vocab_fuzzer
"""
import os
import struct
import sys

U32, I32, F32, BOOL, STRING, ARRAY = 4, 5, 6, 7, 8, 9
SP = "\u2581"


def s(text):
    b = text.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def kv(key, vtype, value):
    out = s(key) + struct.pack("<I", vtype)
    if vtype == STRING:
        return out + s(value)
    if vtype == U32:
        return out + struct.pack("<I", value)
    if vtype == BOOL:
        return out + struct.pack("<?", value)
    etype, items = value
    out += struct.pack("<IQ", etype, len(items))
    fmt = {I32: "<i", F32: "<f"}
    for item in items:
        out += s(item) if etype == STRING else struct.pack(fmt[etype], item)
    return out


def gguf(pairs):
    return b"GGUF" + struct.pack("<IQQ", 3, 0, len(pairs)) + b"".join(pairs)


def vocab(tokens, scores=True, prefix=None, extra=()):
    texts = [t[0] for t in tokens]
    pairs = [kv("tokenizer.ggml.model", STRING, "llama"),
             kv("tokenizer.ggml.pre", STRING, "default"),
             kv("tokenizer.ggml.tokens", ARRAY, (STRING, texts)),
             kv("tokenizer.ggml.token_type", ARRAY, (I32, [t[2] for t in tokens])),
             kv("tokenizer.ggml.bos_token_id", U32, 1),
             kv("tokenizer.ggml.eos_token_id", U32, 2),
             kv("tokenizer.ggml.unknown_token_id", U32, 0)]
    if scores:
        pairs.append(kv("tokenizer.ggml.scores", ARRAY, (F32, [t[1] for t in tokens])))
    if prefix is not None:
        pairs.append(kv("tokenizer.ggml.add_space_prefix", BOOL, prefix))
    return gguf(pairs + list(extra))


def main():
    out = sys.argv[1]
    base = [("<unk>", 0, 2), ("<s>", 0, 3), ("</s>", 0, 3)]
    pieces = [(SP, -1, 1), ("a", -2, 1), ("b", -3, 1), ("c", -4, 1), ("ab", -5, 1), ("bc", -5, 1),
              (SP + "a", -6, 1), (SP + "ab", -7, 1), ("abc", -8, 1), ("<", -9, 1), ("s", -10, 1),
              (">", -11, 1), ("<s", -12, 1), ("H", -13, 1), ("e", -14, 1), ("l", -15, 1),
              ("o", -16, 1), ("ll", -17, 1), ("He", -18, 1), ("llo", -19, 1), ("Hello", -20, 1),
              ("\u4e2d", -21, 1)]
    some_bytes = [("<0x%02X>" % b, 0, 6) for b in (0x00, 0x0A, 0x20, 0x31, 0xE4, 0xB8, 0xAD, 0xFF)]
    seeds = {
        "spm_bytes_prefix": vocab(base + some_bytes + pieces),
        "spm_no_scores": vocab(base + pieces, scores=False, prefix=False),
        "spm_user_defined": vocab(base + pieces + [("<tag>", 0, 4), ("\n\n", 0, 4), ("<unused0>", 0, 5)],
                                  prefix=True),
    }
    for name, data in seeds.items():
        assert len(data) <= 4096, (name, len(data))
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
