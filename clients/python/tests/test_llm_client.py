"""Unit tests of llm_client without servers: the sampler, stop strings, token
text, logits decoding, and the generation loop over fake stubs (EOS,
max_tokens, stop strings, a full context, early close, errors).

    PYTHONPATH=build/python python3 -m unittest discover -s clients/python/tests
"""

from __future__ import annotations

import math
import struct
import unittest
from collections import Counter

import grpc

from llm_client import (Client, InvalidArgument, ResourceExhausted, Sampler, SamplingParams,
                        SessionNotFound, StopMatcher, TokenText, Unavailable)
from llm_client.pb import model_pb2, tokenizer_pb2
from llm_client.sampling import decode_logits, top_n_for


def softmax(xs, t=1.0):
    m = max(xs)
    e = [math.exp((x - m) / t) for x in xs]
    s = sum(e)
    return [v / s for v in e]


class SamplerTest(unittest.TestCase):
    LOGITS = [1.0, 3.0, 2.0, 3.0, -1.0, 0.5]

    def draws(self, params: SamplingParams, n=4000, seed=1, ids=None, logits=None):
        s = Sampler(params, seed)
        return Counter(s.sample(ids, logits or self.LOGITS) for _ in range(n))

    def test_greedy_takes_the_largest_logit_lowest_id_on_ties(self):
        s = Sampler(SamplingParams(temperature=0), 0)
        self.assertEqual(s.sample(None, self.LOGITS), 1)
        self.assertEqual(s.sample([9, 4, 7], [2.0, 5.0, 5.0]), 4)

    def test_top_k_one_is_greedy(self):
        self.assertEqual(self.draws(SamplingParams(temperature=1.5, top_k=1), n=50), {1: 50})

    def test_same_seed_same_draws_other_seed_other_draws(self):
        p = SamplingParams(temperature=1.0)
        a = [Sampler(p, 7).sample(None, self.LOGITS) for _ in range(1)]
        s1, s2, s3 = Sampler(p, 7), Sampler(p, 7), Sampler(p, 8)
        seq1 = [s1.sample(None, self.LOGITS) for _ in range(64)]
        seq2 = [s2.sample(None, self.LOGITS) for _ in range(64)]
        seq3 = [s3.sample(None, self.LOGITS) for _ in range(64)]
        self.assertEqual(seq1, seq2)
        self.assertNotEqual(seq1, seq3)
        self.assertEqual(a[0], seq1[0])

    def test_frequencies_follow_the_softmax_at_the_temperature(self):
        for t in (0.5, 1.0, 2.0):
            n = 20000
            counts = self.draws(SamplingParams(temperature=t), n=n, seed=3)
            for i, p in enumerate(softmax(self.LOGITS, t)):
                # 5 standard deviations of a binomial count.
                self.assertLess(abs(counts[i] - n * p), 5 * math.sqrt(n * p * (1 - p)) + 1,
                                f"token {i} at temperature {t}")

    def test_top_k_keeps_the_k_most_probable_ties_to_lower_ids(self):
        # Logits 3.0 at ids 1 and 3, 2.0 at id 2: top_k=2 keeps 1 and 3.
        self.assertEqual(set(self.draws(SamplingParams(top_k=2))), {1, 3})
        # top_k=1 among the tie: the lower id.
        self.assertEqual(set(self.draws(SamplingParams(top_k=1))), {1})

    def test_top_p_keeps_the_smallest_set_reaching_p(self):
        p = softmax(self.LOGITS)
        # p[1] = p[3] ~ 0.38 each, p[2] ~ 0.14: top_p 0.7 keeps {1, 3}; 0.8 adds 2.
        self.assertLess(p[1] + p[3], 0.8)
        self.assertGreater(p[1] + p[3], 0.7)
        self.assertEqual(set(self.draws(SamplingParams(top_p=0.7))), {1, 3})
        self.assertEqual(set(self.draws(SamplingParams(top_p=0.8))), {1, 2, 3})
        # With top_k the mass is renormalized over what top_k kept.
        self.assertEqual(set(self.draws(SamplingParams(top_k=3, top_p=0.75))), {1, 3})

    def test_min_p_drops_tokens_below_a_fraction_of_the_best(self):
        # p / p_max: ids 1, 3: 1; id 2: e^-1 ~ 0.37; id 0: e^-2 ~ 0.14.
        self.assertEqual(set(self.draws(SamplingParams(min_p=0.3))), {1, 2, 3})
        self.assertEqual(set(self.draws(SamplingParams(min_p=0.5))), {1, 3})

    def test_top_n_input_samples_among_the_ids_given(self):
        counts = self.draws(SamplingParams(top_k=2), ids=[40, 10, 30], logits=[2.0, 2.0, 0.0])
        self.assertEqual(set(counts), {10, 40})

    def test_bad_parameters_are_named(self):
        for params, name in [(SamplingParams(temperature=-1), "temperature"),
                             (SamplingParams(temperature=float("nan")), "temperature"),
                             (SamplingParams(top_k=-2), "top_k"),
                             (SamplingParams(top_p=0), "top_p"),
                             (SamplingParams(top_p=1.5), "top_p"),
                             (SamplingParams(min_p=2), "min_p"),
                             (SamplingParams(seed="x"), "seed")]:
            with self.assertRaises(InvalidArgument) as cm:
                params.validate()
            self.assertEqual(cm.exception.param, name)
            self.assertIn(name, str(cm.exception))

    def test_top_n_for_asks_for_what_is_exact(self):
        self.assertEqual(top_n_for(SamplingParams(temperature=0), 49152), 1)
        self.assertEqual(top_n_for(SamplingParams(top_k=40), 49152), 40)
        self.assertEqual(top_n_for(SamplingParams(top_p=0.9), 49152), 0)  # full logits
        self.assertEqual(top_n_for(SamplingParams(top_k=30000), 49152), 0)


class LogitsTest(unittest.TestCase):
    def test_decodes_each_encoding(self):
        values = [0.5, -1.25, 3.0]
        f32 = model_pb2.Logits(encoding=model_pb2.LogitsOptions.LOGITS_FLOAT32,
                               float32=struct.pack("<3f", *values))
        ids, got = decode_logits(f32, 3)
        self.assertIsNone(ids)
        self.assertEqual(list(got), values)
        f16 = model_pb2.Logits(encoding=model_pb2.LogitsOptions.LOGITS_FLOAT16,
                               float16=struct.pack("<3e", *values))
        ids, got = decode_logits(f16, 3)
        self.assertIsNone(ids)
        self.assertEqual(list(got), values)
        top = model_pb2.Logits(encoding=model_pb2.LogitsOptions.LOGITS_TOP_N, top_ids=[2, 0],
                               top_logits=[3.0, 0.5])
        self.assertEqual(decode_logits(top, 3), ([2, 0], [3.0, 0.5]))

    def test_a_short_message_is_an_error(self):
        f32 = model_pb2.Logits(encoding=model_pb2.LogitsOptions.LOGITS_FLOAT32,
                               float32=b"\0" * 8)
        with self.assertRaises(InvalidArgument):
            decode_logits(f32, 3)


class TextTest(unittest.TestCase):
    def test_stop_string_split_across_pieces_never_reaches_the_output(self):
        m = StopMatcher(["\n\n", "END"])
        out = []
        for d in ["Hello", " E", "N", "o\n", "\nmore"]:
            released, stopped = m.feed(d)
            out.append(released)
            if stopped:
                break
        self.assertTrue(m.stopped)
        self.assertEqual("".join(out), "Hello ENo")
        self.assertEqual(m.finish(), "")

    def test_held_text_is_released_at_the_end(self):
        m = StopMatcher("STOP")
        self.assertEqual(m.feed("abc ST"), ("abc ", False))
        self.assertEqual(m.feed("O"), ("", False))
        self.assertEqual(m.finish(), "STO")

    def test_no_stop_strings_release_everything(self):
        m = StopMatcher()
        self.assertEqual(m.feed("abc"), ("abc", False))

    def test_empty_stop_string_is_refused(self):
        with self.assertRaises(InvalidArgument) as cm:
            StopMatcher(["a", ""])
        self.assertEqual(cm.exception.param, "stop")

    def test_a_character_split_across_tokens_comes_whole(self):
        t = TokenText()
        e_acute = "é".encode()
        self.assertEqual(t.feed(b"caf" + e_acute[:1]), "caf")
        self.assertEqual(t.feed(e_acute[1:]), "é")
        self.assertEqual(t.feed(b"\xe2\x82"), "")
        self.assertEqual(t.finish(), "\ufffd")


# -- the generation loop over fake stubs ---------------------------------------

class FakeRpcError(grpc.RpcError):
    def __init__(self, code, details):
        self._code, self._details = code, details

    def code(self):
        return self._code

    def details(self):
        return self._details


class FakeResponses:
    """A DecodeStream call: one response per request, logits from `model.next_logits`."""

    def __init__(self, model, requests):
        self.model, self.requests, self.cancelled = model, requests, False

    def __iter__(self):
        return self

    def __next__(self):
        if self.cancelled:
            raise FakeRpcError(grpc.StatusCode.CANCELLED, "cancelled")
        req = next(self.requests)  # StopIteration when the client half-closes
        if self.model.fail_decode:
            raise FakeRpcError(grpc.StatusCode.NOT_FOUND, "session expired")
        return self.model.step(req.session_id, req.token, req.logits)

    def cancel(self):
        self.cancelled = True


# A 6-token vocabulary: 0 "<eos>", 1 "a", 2 "b", 3 "c", 4 half of "é", 5 the other half.
PIECES = [b"", b"a", b"b", b"c", "é".encode()[:1], "é".encode()[1:]]


class FakeTokenizer:
    def Info(self, req, timeout=None, metadata=None):
        return tokenizer_pb2.InfoResponse(vocab_size=len(PIECES), eos_id=0, add_bos=False)

    def Encode(self, req, timeout=None, metadata=None):
        return tokenizer_pb2.EncodeResponse(ids=[1 + (b % 3) for b in req.text_bytes])

    def Decode(self, req, timeout=None, metadata=None):
        if req.pieces:
            return tokenizer_pb2.DecodeResponse(pieces=[PIECES[i] for i in req.ids])
        return tokenizer_pb2.DecodeResponse(text=b"".join(PIECES[i] for i in req.ids))


class FakeModel:
    """Plays a script: the greedy token of each step (its logit 10, others 0)."""

    def __init__(self, script, context_length=64, fail_prefill=None):
        self.script = list(script)
        self.context_length = context_length
        self.fail_prefill = fail_prefill
        self.fail_decode = False
        self.sessions = {}
        self.released = []
        self.fed = []
        self.streams = []

    def logits(self, options):
        best = self.script.pop(0) if self.script else 0
        values = [10.0 if i == best else 0.0 for i in range(len(PIECES))]
        lse = math.log(sum(math.exp(v) for v in values))
        if options.encoding == model_pb2.LogitsOptions.LOGITS_TOP_N:
            order = sorted(range(len(values)), key=lambda i: (-values[i], i))[:options.top_n]
            return model_pb2.Logits(encoding=options.encoding, top_ids=order,
                                    top_logits=[values[i] for i in order], log_sum_exp=lse)
        return model_pb2.Logits(encoding=options.encoding, float32=struct.pack(
            f"<{len(values)}f", *values), log_sum_exp=lse)

    def Info(self, req, timeout=None, metadata=None):
        return model_pb2.ModelInfo(vocab_size=len(PIECES), context_length=self.context_length)

    def Prefill(self, req, timeout=None, metadata=None):
        if self.fail_prefill:
            raise FakeRpcError(*self.fail_prefill)
        sid = f"s{len(self.sessions)}"
        self.sessions[sid] = len(req.tokens)
        return model_pb2.PrefillResponse(session_id=sid, num_tokens=len(req.tokens),
                                         logits=self.logits(req.logits))

    def step(self, sid, token, options):
        self.sessions[sid] += 1
        self.fed.append(token)
        return model_pb2.DecodeTokenResponse(num_tokens=self.sessions[sid],
                                             logits=self.logits(options))

    def DecodeStream(self, requests, timeout=None, metadata=None):
        call = FakeResponses(self, requests)
        self.streams.append(call)
        return call

    def Release(self, req, timeout=None, metadata=None):
        self.released.append(req.session_id)
        return model_pb2.ReleaseResponse()


def client(model: FakeModel) -> Client:
    return Client.from_stubs(FakeTokenizer(), model, timeout=5)


class GenerateLoopTest(unittest.TestCase):
    def test_greedy_until_eos_releases_the_session(self):
        model = FakeModel([1, 2, 3, 0])
        g = client(model).generate("x", temperature=0)
        self.assertEqual((g.tokens, g.text, g.stop_reason), ([1, 2, 3], "abc", "eos"))
        self.assertEqual(g.prompt_tokens, 1)
        self.assertEqual(model.fed, [1, 2, 3])  # every output token fed, not EOS
        self.assertEqual(model.released, ["s0"])
        self.assertEqual(len(g.logprobs), 3)
        self.assertAlmostEqual(g.logprobs[0], 10 - math.log(math.exp(10) + 5), places=5)

    def test_max_tokens_stops_with_length(self):
        model = FakeModel([1, 2, 3, 1, 2])
        g = client(model).generate("x", temperature=0, max_tokens=2)
        self.assertEqual((g.tokens, g.stop_reason), ([1, 2], "length"))
        self.assertEqual(model.fed, [1])  # the last token is never sent

    def test_a_full_context_stops_with_context(self):
        model = FakeModel([1, 2, 3, 1, 2, 3], context_length=4)
        g = client(model).generate(tokens=[1, 1], temperature=0)
        self.assertEqual((g.tokens, g.stop_reason), ([1, 2, 3], "context"))

    def test_stop_string_across_tokens_is_cut(self):
        model = FakeModel([1, 2, 3, 1, 2, 0])
        s = client(model).stream("x", temperature=0, stop=["bc"])
        pieces = list(s)
        self.assertEqual(pieces, ["a"])
        self.assertEqual((s.result.text, s.result.stop_reason), ("a", "stop"))
        self.assertEqual(model.released, ["s0"])

    def test_a_character_split_across_tokens_is_one_piece(self):
        model = FakeModel([1, 4, 5, 0])
        s = client(model).stream("x", temperature=0)
        self.assertEqual(list(s), ["a", "é"])
        self.assertEqual(s.result.tokens, [1, 4, 5])

    def test_sampling_is_reproducible_with_a_seed(self):
        runs = [client(FakeModel([1, 2, 3, 1, 2, 3] * 3)).generate(
            "x", temperature=2.0, seed=s, max_tokens=12) for s in (5, 5, 6)]
        self.assertEqual(runs[0].tokens, runs[1].tokens)
        self.assertEqual(runs[0].seed, 5)
        self.assertNotEqual(runs[0].tokens, runs[2].tokens)  # temperature 2 spreads the draws

    def test_closing_a_stream_early_cancels_and_releases(self):
        model = FakeModel([1, 2, 3, 1, 2, 3, 0])
        s = client(model).stream("x", temperature=0)
        self.assertEqual(next(s), "a")
        s.close()
        self.assertTrue(model.streams[0].cancelled)
        self.assertEqual(model.released, ["s0"])
        self.assertIsNone(s.result)

    def test_service_errors_become_exceptions_and_release(self):
        model = FakeModel([1, 2, 3], fail_prefill=(grpc.StatusCode.RESOURCE_EXHAUSTED, "KV full"))
        with self.assertRaises(ResourceExhausted) as cm:
            client(model).generate("x", temperature=0)
        self.assertIn("KV full", str(cm.exception))
        self.assertIn("llm.v1.Model/Prefill", str(cm.exception))

        model = FakeModel([1, 2, 3, 0])
        model.fail_decode = True
        with self.assertRaises(SessionNotFound):
            client(model).generate("x", temperature=0)
        self.assertEqual(model.released, ["s0"])

        class Down(FakeTokenizer):
            def Info(self, req, timeout=None, metadata=None):
                raise FakeRpcError(grpc.StatusCode.UNAVAILABLE, "connection refused")
        with self.assertRaises(Unavailable):
            Client.from_stubs(Down(), FakeModel([])).generate("x")

    def test_bad_arguments_are_refused_before_any_call(self):
        c = client(FakeModel([]))
        for kwargs, param in [({"temperature": -1}, "temperature"), ({"top_p": 2}, "top_p"),
                              ({"max_tokens": 0}, "max_tokens"), ({"stop": [""]}, "stop")]:
            with self.assertRaises(InvalidArgument) as cm:
                c.stream("x", **kwargs)
            self.assertEqual(cm.exception.param, param)
        with self.assertRaises(InvalidArgument) as cm:
            c.generate(tokens=list(range(64)) * 2, temperature=0)
        self.assertEqual(cm.exception.param, "prompt")


class CycleModel(FakeModel):
    """Speculation: the greedy token after a position depends on the history
    (mostly 1 -> 2 -> 3 -> 1, but a 2 after every 5th position), so n-gram
    proposals are often right and sometimes wrong. Holds each session's
    tokens; applies proposed and truncate_to as the model service does, and
    records the requests, each one's session length before its token (bases)
    and after its proposals (lengths). A subclass's after() makes each row
    (with its mask, None when the request has none)."""

    def __init__(self, context_length=200):
        super().__init__([], context_length=context_length)
        self.held = {}
        self.requests = []
        self.bases = []
        self.lengths = []

    def after(self, history, options, mask=None):
        best = 2 if len(history) % 5 == 0 else 1 + history[-1] % 3
        self.script = [best]
        return self.logits(options)

    def Prefill(self, req, timeout=None, metadata=None):
        sid = f"s{len(self.held)}"
        self.held[sid] = list(req.tokens)
        return model_pb2.PrefillResponse(
            session_id=sid, num_tokens=len(req.tokens),
            logits=self.after(self.held[sid], req.logits,
                              req.mask if req.HasField("mask") else None))

    def DecodeStream(self, requests, timeout=None, metadata=None):
        model = self

        class Call(FakeResponses):
            def __next__(self):
                req = next(self.requests)
                model.requests.append(req)
                held = model.held[req.session_id]
                if req.HasField("truncate_to"):
                    del held[req.truncate_to:]
                model.bases.append(len(held))
                held.append(req.token)
                r = model_pb2.DecodeTokenResponse(logits=model.after(
                    held, req.logits, req.mask if req.HasField("mask") else None))
                for i, p in enumerate(req.proposed):
                    held.append(p)
                    mask = req.proposed_masks[i] if req.proposed_masks else None
                    r.proposed_logits.append(model.after(held, req.logits, mask))
                r.num_tokens = len(held)
                model.lengths.append(len(held))
                return r
        return Call(self, requests)


class SpeculationTest(unittest.TestCase):
    def test_the_output_is_the_same_with_fewer_steps(self):
        plain_model, fast_model = CycleModel(), CycleModel()
        plain = client(plain_model).generate("xyzxyz", temperature=0, max_tokens=40)
        fast = client(fast_model).generate("xyzxyz", temperature=0, max_tokens=40, speculate=4)
        self.assertEqual(fast.tokens, plain.tokens)
        self.assertEqual(fast.text, plain.text)
        self.assertEqual(fast.logprobs, plain.logprobs)
        self.assertEqual(plain.proposed_tokens, 0)
        self.assertGreater(fast.accepted_tokens, 10)
        self.assertGreater(fast.proposed_tokens, fast.accepted_tokens)
        self.assertLess(len(fast_model.requests), len(plain_model.requests) / 2)
        self.assertTrue(any(r.HasField("truncate_to") for r in fast_model.requests))
        # The session holds the output (and at most rejected proposals after it).
        held = fast_model.held["s0"]
        self.assertEqual(held[6:6 + len(fast.tokens) - 1], fast.tokens[:-1])

    def test_sampling_with_a_seed_is_the_same(self):
        plain = client(CycleModel()).generate("xyz", temperature=2.0, seed=9, max_tokens=30)
        fast = client(CycleModel()).generate("xyz", temperature=2.0, seed=9, max_tokens=30,
                                             speculate=3)
        self.assertEqual(fast.tokens, plain.tokens)

    def test_bad_speculate_is_refused(self):
        for bad in (-1, 17, 2.5, True):
            with self.assertRaises(InvalidArgument) as cm:
                client(CycleModel()).stream("x", speculate=bad)
            self.assertEqual(cm.exception.param, "speculate")


if __name__ == "__main__":
    unittest.main()
