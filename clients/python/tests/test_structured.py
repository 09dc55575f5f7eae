"""Unit tests of structured output in the generation loop (llm_client/
structured.py, Client.generate(json_schema=..., regex=..., choice=...)) over
fake stubs of a model service that applies token masks: masks on Prefill and
every Decode, forced tokens prefilled or fed in one step, exact draws from the
restricted distribution, speculation cut by the grammar and masked per row,
stops inside forced tokens, and the errors (a server without masks or
ignoring them, a tokenizer without pieces, a refused constraint, a bad
library path).

    PYTHONPATH=build/python python3 -m unittest discover -s clients/python/tests

Needs the grammar engine's library, as test_constrain.py says.
"""

from __future__ import annotations

import math
import struct
import unittest
from collections import Counter

from llm_client import Client, InvalidArgument, LlmError, Unsupported
from llm_client.pb import model_pb2, tokenizer_pb2

from test_constrain import A, B, C, EOS, allowed_ids, needs_library
from test_llm_client import PIECES, CycleModel, FakeTokenizer


class MaskingModel(CycleModel):
    """A model service that applies token masks (ModelInfo.token_mask): each
    row's favourite token comes from the script (logit 10, others 0; the
    favourite masked out: the lowest allowed id wins at 0), or fixed `values`
    are the logits; masked tokens are -inf in float32 rows and absent from
    top-N rows, and log_sum_exp is over the allowed ones. Sessions, proposals
    and the requests as CycleModel's; records the Prefill requests too.
    apply_masks=False: a server that ignores the masks."""

    def __init__(self, script, context_length=64, values=None, apply_masks=True,
                 token_mask=True):
        super().__init__(context_length=context_length)
        self.script = list(script)
        self.values = values
        self.apply_masks = apply_masks
        self.token_mask = token_mask
        self.prefills = []

    def Info(self, req, timeout=None, metadata=None):
        return model_pb2.ModelInfo(vocab_size=len(PIECES), context_length=self.context_length,
                                   token_mask=self.token_mask)

    def after(self, history, options, mask=None):
        if self.values is not None:
            values = list(self.values)
        else:
            best = self.script.pop(0) if self.script else 0
            values = [10.0 if i == best else 0.0 for i in range(len(PIECES))]
        allowed = (allowed_ids(mask, len(PIECES)) if self.apply_masks and mask is not None
                   else set(range(len(PIECES))))
        values = [v if i in allowed else -math.inf for i, v in enumerate(values)]
        lse = math.log(sum(math.exp(v) for v in values if v > -math.inf))
        if options.encoding == model_pb2.LogitsOptions.LOGITS_TOP_N:
            order = sorted(allowed, key=lambda i: (-values[i], i))[:options.top_n]
            return model_pb2.Logits(encoding=options.encoding, top_ids=order,
                                    top_logits=[values[i] for i in order], log_sum_exp=lse)
        return model_pb2.Logits(encoding=options.encoding,
                                float32=struct.pack(f"<{len(values)}f", *values),
                                log_sum_exp=lse)

    def Prefill(self, req, timeout=None, metadata=None):
        self.prefills.append(req)
        return super().Prefill(req, timeout, metadata)


def constrained(model: MaskingModel) -> Client:
    return Client.from_stubs(FakeTokenizer(), model, timeout=5)


@needs_library
class ConstrainedLoopTest(unittest.TestCase):
    def test_forced_tokens_are_prefilled_and_fed_in_one_step_with_masks(self):
        # "ab" is forced at the start, one of a/b/c drawn (the model prefers
        # c), then "c" is forced after it, then only the end is allowed.
        model = MaskingModel([C, A, A])
        g = constrained(model).generate("x", temperature=0, regex="ab[abc]c")
        self.assertEqual((g.text, g.tokens, g.stop_reason), ("abcc", [A, B, C, C], "eos"))
        self.assertEqual(g.forced_tokens, 3)
        self.assertEqual(g.logprobs[:2], [0.0, 0.0])
        self.assertEqual(g.logprobs[3], 0.0)
        self.assertAlmostEqual(g.logprobs[2], 10 - math.log(math.exp(10) + 2), places=5)
        self.assertEqual(g.prompt_tokens, 1)
        prefill = model.prefills[0]
        self.assertEqual(list(prefill.tokens), [1 + ord("x") % 3, A, B])
        self.assertEqual(allowed_ids(prefill.mask, 6), {A, B, C})
        (step,) = model.requests  # the drawn c and the forced c: one step
        self.assertEqual((step.token, list(step.proposed)), (C, [C]))
        self.assertEqual(allowed_ids(step.mask, 6), set(range(6)))  # not drawn from
        self.assertEqual([allowed_ids(m, 6) for m in step.proposed_masks], [{EOS}])
        self.assertFalse(step.lookahead)
        self.assertEqual(model.released, ["s0"])

    def test_the_draw_follows_the_mask_not_the_models_favourite(self):
        model = MaskingModel([A, A, A, A])  # the model wants "a" every time
        g = constrained(model).generate("x", temperature=0, choice=["bc", "cb"])
        self.assertEqual((g.text, g.stop_reason, g.forced_tokens), ("bc", "eos", 1))
        self.assertEqual(allowed_ids(model.prefills[0].mask, 6), {B, C})
        for top_k in (0, 2):  # full logits and top-N
            g = constrained(MaskingModel([A] * 4)).generate("x", temperature=1.0, top_k=top_k,
                                                            seed=4, regex="[bc][bc]")
            self.assertRegex(g.text, "^[bc][bc]$")

    def test_draws_follow_the_restricted_distribution(self):
        # Fixed logits over a, b, c (and a large one at the masked "é"
        # halves): a draw from [ac] is softmax(logits / T) over {a, c}.
        values = [0.0, 1.0, 3.0, 2.0, 5.0, 5.0]
        client = constrained(MaskingModel([], values=values))
        for t, top_k in ((1.0, 0), (0.5, 0), (1.0, 2)):
            n = 1500
            counts = Counter(client.generate("x", temperature=t, top_k=top_k, seed=s,
                                             max_tokens=1, regex="[ac]").tokens[0]
                             for s in range(n))
            self.assertEqual(set(counts), {A, C})
            p_a = 1 / (1 + math.exp((values[C] - values[A]) / t))
            self.assertLess(abs(counts[A] - n * p_a), 5 * math.sqrt(n * p_a * (1 - p_a)),
                            f"temperature {t}, top_k {top_k}: {counts}")

    def test_forced_tokens_stop_at_max_tokens_and_stop_strings(self):
        model = MaskingModel([])
        g = constrained(model).generate("x", temperature=0, regex="abcabc", max_tokens=2)
        self.assertEqual((g.tokens, g.stop_reason, g.forced_tokens), ([A, B], "length", 2))
        self.assertEqual(list(model.prefills[0].tokens)[1:], [A, B])
        s = constrained(MaskingModel([])).stream("x", temperature=0, regex="abcabc", stop="bc")
        self.assertEqual((list(s), s.result.text, s.result.stop_reason), (["a"], "a", "stop"))

    def test_speculation_is_cut_by_the_grammar_and_masked_per_row(self):
        class Cycle(MaskingModel):  # the favourite follows the last token: a -> b -> c -> a
            def after(self, history, options, mask=None):
                self.script = [1 + history[-1] % 3]
                return super().after(history, options, mask)

        plain_model, fast_model = Cycle([]), Cycle([])
        plain = constrained(plain_model).generate("abcabc", temperature=0, regex="[abc]{9}")
        fast = constrained(fast_model).generate("abcabc", temperature=0, regex="[abc]{9}",
                                                speculate=4)
        self.assertEqual((fast.tokens, fast.text), (plain.tokens, plain.text))
        self.assertEqual((len(fast.tokens), fast.stop_reason), (9, "eos"))
        self.assertGreater(fast.accepted_tokens, 4)
        self.assertLess(len(fast_model.requests), len(plain_model.requests))
        # Each row's mask is the grammar's after the tokens before it: a, b
        # or c until 9 characters, then the end; no proposal past them (the
        # n-gram proposals of the second step go one further).
        prompt = 6
        self.assertEqual(max(fast_model.lengths), prompt + 9)
        for r, before in zip(fast_model.requests, fast_model.bases):
            self.assertEqual(len(r.proposed_masks), len(r.proposed))
            for chars, mask in enumerate([r.mask, *r.proposed_masks], start=before - prompt + 1):
                self.assertEqual(allowed_ids(mask, 6), {A, B, C} if chars < 9 else {EOS})

    def test_a_server_without_token_masks_is_refused_before_any_call(self):
        model = MaskingModel([A], token_mask=False)
        with self.assertRaises(Unsupported) as cm:
            constrained(model).stream("x", regex="a")
        self.assertIn("token_mask", str(cm.exception))
        self.assertEqual(cm.exception.param, "regex")
        self.assertEqual(model.prefills, [])

    def test_a_server_that_ignores_the_mask_fails(self):
        model = MaskingModel([A], apply_masks=False)
        with self.assertRaises(LlmError) as cm:
            constrained(model).generate("x", temperature=0, regex="[bc]+")
        self.assertEqual(cm.exception.code, "FAILED_PRECONDITION")
        self.assertIn("did it apply the token mask", str(cm.exception))
        self.assertEqual(model.released, ["s0"])

    def test_a_refused_constraint_raises_at_stream_before_any_generation(self):
        model = MaskingModel([A])
        c = constrained(model)
        with self.assertRaises(InvalidArgument) as cm:
            c.stream("x", regex="(")
        self.assertEqual(cm.exception.param, "regex")
        self.assertIn("the regex constraint: ", str(cm.exception))
        with self.assertRaises(InvalidArgument) as cm:
            c.stream("x", regex="a", choice=["a"])
        self.assertEqual(cm.exception.param, "choice")
        self.assertEqual(model.prefills, [])

    def test_a_tokenizer_without_pieces_is_unsupported(self):
        class NoPieces(FakeTokenizer):
            def Decode(self, req, timeout=None, metadata=None):
                return tokenizer_pb2.DecodeResponse(text=b"".join(PIECES[i] for i in req.ids))

        with self.assertRaises(Unsupported) as cm:
            Client.from_stubs(NoPieces(), MaskingModel([A])).stream("x", regex="a")
        self.assertIn("pieces", str(cm.exception))


class LibraryPathTest(unittest.TestCase):
    def test_a_client_with_a_bad_library_path_raises_before_any_call(self):
        model = MaskingModel([A])
        c = Client.from_stubs(FakeTokenizer(), model, constrain_library="/nonexistent/lib.so")
        with self.assertRaises(Unsupported) as cm:
            c.stream("x", regex="a")
        self.assertIn("/nonexistent/lib.so", str(cm.exception))
        self.assertEqual(model.prefills, [])
        self.assertEqual(c.generate("x", temperature=0, max_tokens=1).tokens, [A])  # the rest works


if __name__ == "__main__":
    unittest.main()
