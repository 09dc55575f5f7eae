#!/usr/bin/env python3
"""Writes tokenize_input.jsonl and detokenize_input.jsonl: the inputs of the
recorded `llm tokenize` / `llm detokenize` outputs beside them
(tests/tokenizer_service_test.cc, LlmCliTest). Deterministic.

    python3 tests/data/tokenize_cli/make_input.py [SHARED_DIR]

The .expected files were written by the llm binary of commit d26e31c (before
the fast JSON lines path), with --vocab SHARED_DIR/tokenizer/cl100k_base.tiktoken;
the fast path must give the same bytes."""

import json
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
shared = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE.parents[2].parent / "shared"
texts = [json.loads(l)["text"] for l in
         (shared / "tokenizer" / "vectors" / "cl100k_base.jsonl").open(encoding="utf-8")
         if l.strip()]
rng = random.Random(7)
lines = []
for i, t in enumerate(texts):
    if len(t.encode("utf-8", "surrogatepass")) > 3000:
        continue
    # Python writes non-ASCII as \uXXXX (surrogate pairs above U+FFFF) with
    # ensure_ascii, raw UTF-8 without; spacing varies.
    sep = [(", ", ": "), (",", ":"), (" , ", " : ")][i % 3]
    lines.append(json.dumps({"text": t}, ensure_ascii=bool(i % 2), separators=sep))
# Hand-written lines: escapes, whitespace, other shapes, and invalid lines
# (each gives its error line).
lines += [
    r'{"text": "Hello, world!"}',
    r'{"text": ""}',
    '\t{ "text"\t:\t"tabs and spaces" }  ',
    '{"text": "crlf line"}\r',
    r'{"text": "quote \" backslash \\ slash \/ controls \b\f\n\r\t"}',
    r'{"text": "\u0000\u0001\u001f\u007f\u0080\u00ff\u0100\u07ff\u0800\uffff"}',
    r'{"text": "pairs \ud83d\ude00 \uD83E\uDD16 \udbff\udfff lower \ud83d\ude00"}',
    r'{"text": "caf\u00e9 \u4e2d\u6587 \u0627\u0644\u0639\u0631\u0628\u064a\u0629"}',
    '{"text": "raw caf\u00e9 \u4e2d\u6587 \U0001F600"}',
    r'{"text": "<|endoftext|> is ordinary text by default"}',
    r'{"text": "a", "other": 1}',
    r'{"other": 1, "text": "b"}',
    r'{"text": "first", "text": "second"}',
    r'{"te\u0078t": "escaped key"}',
    r'{"text": 5}',
    r'{"text": null}',
    r'{"ids": [1, 2]}',
    r'{}',
    r'[]',
    r'"text"',
    r'42',
    r'{"text": "unterminated}',
    r'{"text": "bad escape \x41"}',
    r'{"text": "lone high \ud83d"}',
    r'{"text": "lone high then text \ud83dx"}',
    r'{"text": "lone low \ude00"}',
    r'{"text": "short \u12"}',
    '{"text": "raw\tcontrol"}',
    '{"text": "a"} trailing',
    '{"text": "a"}}',
    '   ',
    '\r',
    '',
    r'{"text": "after an empty line"}',
    '{"text": "x" ' + '}',
]
raw = [l.encode("utf-8", "surrogatepass") for l in lines]
# Invalid UTF-8 on the wire: a cut-off character, an overlong form, a
# surrogate, bytes F5-FF, and a NUL byte.
raw += [b'{"text": "cut \xc3"}', b'{"text": "overlong \xc0\xaf"}',
        b'{"text": "surrogate \xed\xa0\x80"}', b'{"text": "high \xf5\xff"}',
        b'{"text": "nul \x00 byte"}', b'{"text": "last line without a newline"}']
(HERE / "tokenize_input.jsonl").write_bytes(b"\n".join(raw))

# Detokenize: ids of texts, and every kind of line.
ids_lines = []
for i in range(0, 400, 7):
    n = rng.randrange(0, 30)
    ids_lines.append(json.dumps({"ids": [rng.randrange(0, 100256) for _ in range(n)]},
                                separators=[(", ", ": "), (",", ":")][i % 2]))
ids_lines += [
    '{"ids": []}',
    '{"ids": [9906, 11, 1917, 0]}',
    '{"ids": [9906,11,1917,0]}   ',
    '{"ids": [100257]}',               # a special token's text
    '{"ids": [100256]}',               # a hole
    '{"ids": [100277]}',               # out of range
    '{"ids": [4294967295]}',
    '{"ids": [4294967296]}',
    '{"ids": [-1]}',
    '{"ids": [1.0]}',
    '{"ids": [1e2]}',
    '{"ids": [01]}',
    '{"ids": [1,]}',
    '{"ids": "1"}',
    '{"ids": [1], "x": 2}',
    '{"ids": [null]}',
    '{"id": [1]}',
    '[1, 2]',
    '{"ids": [220, 15722, 222]}',      # bytes that are not UTF-8 on their own
    '{"ids": [15722]}',
    '{"ids": [124, 125, 126, 127, 128, 129]}',
    '{"ids": [0, 1, 2, 197, 198, 199, 200, 201, 202, 203, 204, 205, 206, 207, 208]}',
    '{"ids": [1, 59, 56, 60, 62]}',    # quote, backslash and friends
    '{"ids": [9906]}',
]
(HERE / "detokenize_input.jsonl").write_text("\n".join(ids_lines) + "\n")
