"""Unit tests of llm_client.constrain, the ctypes binding of the grammar
engine (libllm_constrain.so), on a toy vocabulary: forced tokens, masks and
their wire encodings, accept and rollback, compile errors naming the
parameter, the parameters' checks, a missing or wrong library.

    PYTHONPATH=build/python python3 -m unittest discover -s clients/python/tests

Needs the library (the CMake build copies it into build/python/llm_client/):
without it the tests that use it are skipped, unless LLM_CONSTRAIN_REQUIRED=1
(ctest sets it where the build makes the library), when they fail.
"""

from __future__ import annotations

import os
import unittest
from unittest import mock

from llm_client import InvalidArgument, Unsupported
from llm_client.constrain import LIBRARY_ENV, Compiler, is_allowed, load_library, spec_from_params
from llm_client.pb import model_pb2

from test_llm_client import PIECES

try:
    load_library()
    MISSING = None
except Unsupported as e:
    MISSING = str(e)
    if os.environ.get("LLM_CONSTRAIN_REQUIRED") == "1":
        raise
needs_library = unittest.skipIf(MISSING is not None, f"no grammar engine library: {MISSING}")

A, B, C, EOS = 1, 2, 3, 0  # PIECES: 0 "<eos>", 1 "a", 2 "b", 3 "c", 4 + 5 "é"


def allowed_ids(mask: model_pb2.TokenMask, vocab_size: int) -> set[int]:
    """The tokens a wire mask allows (as the model service reads it)."""
    encoding = mask.WhichOneof("encoding")
    if encoding == "bitset":
        return {i for i in range(vocab_size) if is_allowed(mask.bitset, i)}
    ids = set(getattr(mask, encoding).ids)
    return ids if encoding == "allowed" else set(range(vocab_size)) - ids


def bits(bitset: bytes, vocab_size: int) -> set[int]:
    return {i for i in range(vocab_size) if is_allowed(bitset, i)}


@needs_library
class BindingTest(unittest.TestCase):
    def setUp(self):
        self.compiler = Compiler(PIECES, end_ids=[EOS], vocab_size=len(PIECES))

    def matcher(self, **params):
        return self.compiler.compile(spec_from_params(**params)).matcher()

    def test_forced_tokens_mask_accept_rollback(self):
        m = self.matcher(regex="ab[abc]c")
        self.assertEqual(m.forced_tokens(), [A, B])
        self.assertEqual(m.forced_tokens(1), [A])
        self.assertEqual(m.accepted, 0)  # forced_tokens does not advance
        self.assertEqual(bits(m.fill_mask(), 6), {A})
        self.assertTrue(m.accept(A) and m.accept(B))
        self.assertEqual(bits(m.fill_mask(), 6), {A, B, C})
        self.assertFalse(m.accept(EOS))  # not complete: refused, nothing changes
        self.assertEqual(m.accepted, 2)
        self.assertTrue(m.accept(C))
        self.assertEqual(m.forced_tokens(), [C])
        self.assertTrue(m.accept(C))
        self.assertTrue(m.can_end())
        self.assertEqual(bits(m.fill_mask(), 6), {EOS})
        self.assertTrue(m.accept(EOS) and m.is_terminated())
        m.rollback(3)
        self.assertEqual((m.accepted, m.is_terminated()), (2, False))
        self.assertEqual(bits(m.fill_mask(), 6), {A, B, C})
        with self.assertRaises(InvalidArgument) as cm:
            m.rollback(3)
        self.assertIn("cannot roll back 3 tokens", str(cm.exception))
        m.reset()
        self.assertEqual(m.accepted, 0)

    def test_a_character_split_across_tokens_is_forced_whole(self):
        self.assertEqual(self.matcher(regex="é+").forced_tokens(), [4, 5])

    def test_wire_masks_are_the_cheapest_encoding_of_the_same_set(self):
        # The 128 ASCII characters and an end token: a bitset is 17 bytes.
        vocab = [bytes([i]) for i in range(128)] + [b""]
        compiler = Compiler(vocab, end_ids=[128])
        seen = set()
        for spec, encoding in [(dict(regex="[ab]x"), "allowed"),
                               (dict(regex="[^a]x"), "disallowed"),
                               (dict(regex="[a-zA-Z0-9_ ]*"), "bitset")]:
            m = compiler.compile(spec_from_params(**spec)).matcher()
            got, data = m.wire_mask()
            self.assertEqual(got, encoding, spec)
            mask = (model_pb2.TokenMask(bitset=data) if got == "bitset" else
                    model_pb2.TokenMask(**{got: model_pb2.TokenIds(ids=data)}))
            self.assertEqual(allowed_ids(mask, 129), bits(m.fill_mask(), 129), spec)
            seen.add(got)
        self.assertEqual(len(seen), 3)

    def test_a_spec_that_does_not_compile_names_the_parameter_and_why(self):
        for params, param, why in [(dict(regex="("), "regex", "parenthesis"),
                                   (dict(json_schema={"not": {}}), "json_schema", "'not'"),
                                   (dict(grammar="root ::= "), "grammar", "grammar"),
                                   (dict(json_object=True, max_whitespace=1), "json_object",
                                    "whitespace")]:
            with self.assertRaises(InvalidArgument) as cm:
                self.matcher(**params)
            self.assertEqual(cm.exception.param, param)
            self.assertIn(f"the {param} constraint: ", str(cm.exception))
            self.assertIn(why, str(cm.exception))

    def test_a_bad_vocabulary_is_refused(self):
        with self.assertRaises(InvalidArgument) as cm:
            Compiler(PIECES, end_ids=[6])
        self.assertIn("6", str(cm.exception))
        with self.assertRaises(InvalidArgument):
            Compiler([])

    def test_parameters(self):
        self.assertIsNone(spec_from_params())
        spec = spec_from_params(json_schema={"type": "integer"}, strict=True, compact_json=True)
        self.assertEqual((spec.kind, spec.text, spec.flags), ("json_schema",
                                                              '{"type": "integer"}', 1 | 2))
        self.assertEqual(spec_from_params(choice=["x", "y"]).choices, ("x", "y"))
        for params, param in [(dict(regex="a", choice=["a"]), "choice"),
                              (dict(json_object=True, grammar="root ::= \"a\""), "json_object"),
                              (dict(choice="ab"), "choice"), (dict(choice=[]), "choice"),
                              (dict(choice=["a", ""]), "choice"), (dict(regex=""), "regex"),
                              (dict(json_schema=3), "json_schema"),
                              (dict(json_schema={"x": {1, 2}}), "json_schema"),
                              (dict(json_object=1), "json_object"),
                              (dict(max_whitespace="20"), "max_whitespace")]:
            with self.assertRaises(InvalidArgument, msg=params) as cm:
                spec_from_params(**params)
            self.assertEqual(cm.exception.param, param, params)


class LibraryTest(unittest.TestCase):
    def test_a_missing_library_says_where_it_looked_and_how_to_give_it(self):
        for path in ("/nonexistent/libllm_constrain.so", os.devnull):
            with self.assertRaises(Unsupported) as cm:
                load_library(path)
            message = str(cm.exception)
            self.assertIn(path, message)
            self.assertIn(LIBRARY_ENV, message)
            self.assertIn("structured output", message)
        with mock.patch.dict(os.environ, {LIBRARY_ENV: "/nonexistent/env.so"}):
            with self.assertRaises(Unsupported) as cm:
                load_library()
            self.assertIn("/nonexistent/env.so", str(cm.exception))

    def test_another_library_is_not_taken_for_it(self):
        with self.assertRaises(Unsupported) as cm:
            load_library("libc.so.6")
        self.assertIn("not the grammar engine's library", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
