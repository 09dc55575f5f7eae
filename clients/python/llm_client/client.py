"""A Python client of the tokenizer and model services, with a generation loop.

    from llm_client import Client

    with Client("127.0.0.1:50051", "127.0.0.1:50052", wait_ready=60) as c:
        for piece in c.stream("Once upon a time", max_tokens=64, temperature=0.8, seed=7,
                              stop=["\\n\\n"]):
            print(piece, end="", flush=True)
        g = c.generate("The three primary colors are", temperature=0, max_tokens=24)
        print(g.text, g.tokens, g.stop_reason)

The loop is `llm generate --raw`'s: Encode the prompt (BOS when the vocabulary
asks for it), Prefill it into a new model session, then sample a token from
each position's logits (sampling.py), send it on one DecodeStream and read the
next logits, until the end token (EOS / EOT), a stop string, max_tokens or a
full context; the session is released at the end, also when the caller stops
iterating early. No chat template is applied: the prompt is the model's input
(the HTTP gateway, llm_gateway, applies the model's template; see README.md).

Threads: a Client may run generations from several threads at once (gRPC
stubs are thread-safe); one Stream is one thread's.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Sequence

import grpc

from .constrain import Constraint, ConstraintSpec, load_library, spec_from_params
from .errors import InvalidArgument, LlmError, Unavailable, Unsupported, from_rpc_error
from .ngram import MAX_PROPOSED_TOKENS, propose_by_ngram
from .sampling import Sampler, SamplingParams, decode_logits, top_n_for
from .text import StopMatcher, TokenText

try:
    from .pb import model_pb2, model_pb2_grpc, tokenizer_pb2, tokenizer_pb2_grpc
except ImportError as e:  # pragma: no cover - a source checkout without a build
    raise ImportError(
        "llm_client: the gRPC stubs (llm_client.pb) are generated at build time; build the "
        "llm_client_python target (cmake --build --preset default) and put build/python on "
        f"PYTHONPATH ({e})") from e
from .structured import Grammar, compiler_for  # noqa: E402 (needs the stubs)

_TOKENIZER = "llm.v1.Tokenizer"
_MODEL = "llm.v1.Model"
# Full float32 logits of a 262k-token vocabulary are 1 MiB, the vocabulary's
# token bytes a few MiB: above gRPC's default 4 MiB receive limit.
_CHANNEL_OPTIONS = [("grpc.max_receive_message_length", 256 << 20)]
# The most bytes of full logits a step with proposals asks for (1 + proposals
# rows), half the model server's default --max_message_bytes, as the C++ loop.
_MAX_PROPOSALS_RESPONSE_BYTES = 8 << 20


@dataclass
class Generation:
    """A finished generation.

    text: the output (cut before a stop string); tokens: the generated ids
    (without the end token); logprobs: each token's log-probability under the
    model (before temperature and filters); stop_reason: "eos" (the end
    token), "stop" (a stop string), "length" (max_tokens) or "context" (the
    model's context is full), as `llm generate --json` says; prompt_tokens:
    the prompt's length in tokens; seed: the seed used (None for greedy);
    proposed_tokens / accepted_tokens: speculative decoding's proposals sent
    and kept (`speculate`); forced_tokens: the tokens a constraint forced
    (fed without a draw, logprob 0; counted in tokens), as `llm generate
    --json` says.
    """

    text: str = ""
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    stop_reason: str = ""
    prompt_tokens: int = 0
    seed: int | None = None
    proposed_tokens: int = 0
    accepted_tokens: int = 0
    forced_tokens: int = 0


class Stream:
    """An iterator of the text pieces of one generation, as they are produced
    (a piece per token, except while a token ends inside a character or text is
    held back because it may begin a stop string). After the last piece,
    `result` holds the Generation. close() (or leaving a `with` block, or
    dropping the iterator) stops the generation and releases its session."""

    def __init__(self, run: Iterator[str]):
        self._run = run
        self.result: Generation | None = None

    def __iter__(self) -> "Stream":
        return self

    def __next__(self) -> str:
        return next(self._run)

    def close(self) -> None:
        self._run.close()

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def text(self) -> str:
        """Reads the rest of the stream and returns the whole text."""
        for _ in self:
            pass
        assert self.result is not None
        return self.result.text


class Client:
    """Clients of both services.

    tokenizer, model: "host:port" addresses (any target gRPC accepts).
    timeout: deadline of each unary call and of each decode step, in seconds.
    wait_ready: how long the first call waits for a service that is still
    starting (UNAVAILABLE), in seconds. credentials: grpc.ChannelCredentials
    for TLS (e.g. grpc.ssl_channel_credentials(root_ca)), None for plaintext.
    auth_token: sent as "authorization: Bearer TOKEN" on every call (the
    servers' --auth_token_file). constrain_library: the path of the grammar
    engine's library (libllm_constrain.so) for structured output; None: as
    llm_client.constrain.load_library finds it ($LLM_CONSTRAIN_LIBRARY, then
    beside the package, then the dynamic loader's path).
    """

    def __init__(self, tokenizer: str = "127.0.0.1:50051", model: str = "127.0.0.1:50052", *,
                 timeout: float = 60.0, wait_ready: float = 0.0,
                 credentials: grpc.ChannelCredentials | None = None,
                 auth_token: str | None = None,
                 constrain_library: str | os.PathLike | None = None):
        def channel(address: str) -> grpc.Channel:
            if credentials is not None:
                return grpc.secure_channel(address, credentials, options=_CHANNEL_OPTIONS)
            return grpc.insecure_channel(address, options=_CHANNEL_OPTIONS)

        self._channels = [channel(tokenizer), channel(model)]
        self._init(tokenizer_pb2_grpc.TokenizerStub(self._channels[0]),
                   model_pb2_grpc.ModelStub(self._channels[1]), tokenizer, model, timeout,
                   wait_ready, auth_token, constrain_library)

    @classmethod
    def from_stubs(cls, tokenizer_stub, model_stub, *, timeout: float = 60.0,
                   wait_ready: float = 0.0,
                   constrain_library: str | os.PathLike | None = None) -> "Client":
        """A Client over given stubs (or objects with the same methods: tests)."""
        self = cls.__new__(cls)
        self._channels = []
        self._init(tokenizer_stub, model_stub, None, None, timeout, wait_ready, None,
                   constrain_library)
        return self

    def _init(self, tok, model, tok_addr, model_addr, timeout, wait_ready, auth_token,
              constrain_library):
        self._tok, self._model = tok, model
        self._addr = {_TOKENIZER: tok_addr, _MODEL: model_addr}
        self._timeout = timeout
        self._wait_ready = wait_ready
        self._metadata = (("authorization", f"Bearer {auth_token}"),) if auth_token else None
        self._lock = threading.Lock()
        self._tokenizer_info = None
        self._model_info = None
        self._token_bytes: list[bytes] | None = None
        self._constrain_library = constrain_library
        self._compiler = None  # structured output's, made on first use

    def close(self) -> None:
        for c in self._channels:
            c.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- calls ---------------------------------------------------------------

    def _call(self, service: str, name: str, request, *, wait: bool = False):
        """One unary call; grpc.RpcError becomes an LlmError. With `wait`,
        UNAVAILABLE is retried until wait_ready has passed."""
        stub = self._tok if service == _TOKENIZER else self._model
        deadline = time.monotonic() + (self._wait_ready if wait else 0)
        while True:
            try:
                return getattr(stub, name)(request, timeout=self._timeout,
                                           metadata=self._metadata)
            except grpc.RpcError as e:
                if (wait and e.code() == grpc.StatusCode.UNAVAILABLE
                        and time.monotonic() < deadline):
                    time.sleep(0.1)
                    continue
                raise from_rpc_error(e, f"{service}/{name}", self._addr[service]) from None

    @property
    def tokenizer_info(self):
        """The tokenizer's llm.v1.InfoResponse (fetched once)."""
        if self._tokenizer_info is None:
            self._tokenizer_info = self._call(_TOKENIZER, "Info", tokenizer_pb2.InfoRequest(),
                                              wait=True)
        return self._tokenizer_info

    @property
    def model_info(self):
        """The model's llm.v1.ModelInfo (fetched once)."""
        if self._model_info is None:
            self._model_info = self._call(_MODEL, "Info", model_pb2.ModelInfoRequest(), wait=True)
        return self._model_info

    def wait_ready(self) -> None:
        """Fetches both services' Info, waiting up to wait_ready seconds for a
        service that is still starting. Raises Unavailable after that."""
        _ = self.tokenizer_info, self.model_info

    def encode(self, text: str | bytes, *, add_bos: bool | None = None,
               allow_special: bool = False) -> list[int]:
        """Token ids of `text`. add_bos: None = as the vocabulary asks;
        allow_special: special-token text ("<|im_start|>") becomes the token."""
        if add_bos is None:
            add_bos = self.tokenizer_info.add_bos
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        options = tokenizer_pb2.EncodeOptions(add_bos=add_bos, allow_all_special=allow_special)
        return list(self._call(_TOKENIZER, "Encode",
                               tokenizer_pb2.EncodeRequest(text_bytes=data, options=options)).ids)

    def decode(self, ids: Sequence[int]) -> str:
        """The text of `ids` (invalid UTF-8 as U+FFFD)."""
        text = self._call(_TOKENIZER, "Decode", tokenizer_pb2.DecodeRequest(ids=list(ids))).text
        return text.decode("utf-8", errors="replace")

    def _vocabulary_bytes(self) -> list[bytes]:
        """Each token's bytes, fetched once ([] from a server older than
        DecodeRequest.pieces)."""
        if self._token_bytes is None:
            with self._lock:
                if self._token_bytes is None:
                    n = self.tokenizer_info.vocab_size
                    r = self._call(_TOKENIZER, "Decode",
                                   tokenizer_pb2.DecodeRequest(ids=range(n), pieces=True))
                    # A server older than `pieces` answers text only: decode per token.
                    self._token_bytes = list(r.pieces) if len(r.pieces) == n else []
        return self._token_bytes

    def _bytes_of(self, token: int) -> bytes:
        """A token's bytes, from the vocabulary's pieces fetched once."""
        vocabulary = self._vocabulary_bytes()
        if token < len(vocabulary):
            return vocabulary[token]
        return self._call(_TOKENIZER, "Decode", tokenizer_pb2.DecodeRequest(ids=[token])).text

    def compile_constraint(self, spec: ConstraintSpec) -> Constraint:
        """`spec` compiled for the model's vocabulary (cached: a spec seen
        before takes microseconds). The first call loads the grammar engine's
        library, checks that the model service applies token masks, fetches
        the vocabulary's bytes and makes the compiler (0.1 s at SmolLM2's
        49k tokens). Raises Unsupported when the library or the services lack
        what structured output needs, InvalidArgument naming the constraint's
        parameter and what it breaks or what is not supported."""
        load_library(self._constrain_library)  # before any call: a clear error
        if not self.model_info.token_mask:
            raise Unsupported(f"structured output ({spec.kind}=) needs a model service that "
                              f"applies token masks, and the one at {self._addr[_MODEL]} does "
                              f"not (ModelInfo.token_mask is false: an older model_server)",
                              method=f"{_MODEL}/Info", address=self._addr[_MODEL],
                              param=spec.kind)
        if self._compiler is None:
            token_bytes = self._vocabulary_bytes()
            with self._lock:
                if self._compiler is None:
                    self._compiler = compiler_for(self.tokenizer_info, self.model_info,
                                                  token_bytes, self._constrain_library)
        return self._compiler.compile(spec)

    # -- generation ----------------------------------------------------------

    def stream(self, prompt: str | bytes | None = None, *, tokens: Sequence[int] | None = None,
               max_tokens: int | None = None, temperature: float = 1.0, top_k: int = 0,
               top_p: float = 1.0, min_p: float = 0.0, seed: int | None = None,
               stop: str | Iterable[str] = (), allow_special: bool = False,
               speculate: int = 0, json_schema: dict | str | None = None,
               json_object: bool = False, regex: str | None = None, grammar: str | None = None,
               choice: Sequence[str] | None = None, strict: bool = False,
               compact_json: bool = False, any_order: bool = False, lenient: bool = False,
               max_whitespace: int = 20) -> Stream:
        """Generates from `prompt` (encoded as encode() does) or from `tokens`;
        returns a Stream of text pieces. Parameters are checked here
        (InvalidArgument naming the parameter); service errors are raised while
        iterating, as LlmError subclasses (errors.py).

        speculate (0..16): speculative decoding, as `llm generate --speculate`:
        each decode step also sends up to that many tokens found by n-gram
        lookup in the conversation (propose_by_ngram), and keeps those the
        sampler draws itself from their logits; the output is the same.

        Structured output, at most one of: json_schema (a dict, or the
        schema's JSON text), json_object=True (any JSON object), regex (the
        whole output matches it), grammar (GBNF with a rule `root`), choice
        (a list: the output is exactly one of them); with strict,
        compact_json, any_order, lenient and max_whitespace as `llm generate`'s
        flags (llm_client.constrain.ConstraintSpec). It runs as `llm generate
        --json-schema ...` runs (structured.py): same masks, same forced
        tokens, the same greedy tokens. The constraint is compiled here (the
        first one fetches the vocabulary): one the engine refuses raises
        InvalidArgument whose `param` is the parameter and whose message
        names what is unsupported; Unsupported without the grammar engine's
        library or from services that cannot constrain."""
        params = SamplingParams(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p,
                                seed=seed)
        params.validate()
        if (prompt is None) == (tokens is None):
            raise InvalidArgument("give a prompt or tokens, not both or neither", param="prompt")
        if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
            raise InvalidArgument(f"max_tokens must be an integer >= 1, got {max_tokens!r}",
                                  param="max_tokens")
        if not isinstance(speculate, int) or isinstance(speculate, bool) or \
                not 0 <= speculate <= MAX_PROPOSED_TOKENS:
            raise InvalidArgument(f"speculate must be an integer in [0, {MAX_PROPOSED_TOKENS}], "
                                  f"got {speculate!r}", param="speculate")
        matcher = StopMatcher(stop)
        spec = spec_from_params(json_schema=json_schema, json_object=json_object, regex=regex,
                                grammar=grammar, choice=choice, strict=strict,
                                compact_json=compact_json, any_order=any_order, lenient=lenient,
                                max_whitespace=max_whitespace)
        constraint = self.compile_constraint(spec) if spec is not None else None
        if params.greedy:
            seed = None
        elif seed is None:
            seed = int.from_bytes(os.urandom(8), "little")
        stream = Stream(iter(()))
        stream._run = self._generate(stream, prompt, tokens, params, seed, max_tokens, matcher,
                                     allow_special, speculate, constraint)
        return stream

    def generate(self, prompt: str | bytes | None = None, **kwargs) -> Generation:
        """stream(...) read to its end: the Generation."""
        with self.stream(prompt, **kwargs) as s:
            for _ in s:
                pass
            assert s.result is not None
            return s.result

    def _generate(self, out: Stream, prompt, tokens, params: SamplingParams, seed,
                  max_tokens: int | None, matcher: StopMatcher, allow_special: bool,
                  speculate: int = 0, constraint: Constraint | None = None) -> Iterator[str]:
        info = self.tokenizer_info
        model = self.model_info
        end_ids = {i for f in ("eos_id", "eot_id") if info.HasField(f)
                   for i in [getattr(info, f)]}
        ids = list(tokens) if tokens is not None else self.encode(prompt,
                                                                  allow_special=allow_special)
        if not ids:
            raise InvalidArgument("the prompt has no tokens", param="prompt")
        if len(ids) >= model.context_length:
            raise InvalidArgument(f"the prompt is {len(ids)} tokens; the model's context holds "
                                  f"{model.context_length}", param="prompt")
        vocab = model.vocab_size
        n = top_n_for(params, vocab)
        options = (model_pb2.LogitsOptions(encoding=model_pb2.LogitsOptions.LOGITS_TOP_N, top_n=n)
                   if n else model_pb2.LogitsOptions(encoding=model_pb2.LogitsOptions.LOGITS_FLOAT32))
        # The next token is the argmax: let the server start it (not when
        # speculating: a guess would mostly be dropped by the next proposals).
        lookahead = params.greedy and speculate == 0
        sampler = Sampler(params, seed if seed is not None else 0)
        result = Generation(prompt_tokens=len(ids), seed=seed)
        text = TokenText()
        pieces: list[str] = []
        limit = max_tokens or 1 << 30
        # Rows of full logits in a response with proposals: within 8 MiB.
        max_rows = (_MAX_PROPOSALS_RESPONSE_BYTES // (4 * vocab)
                    if options.encoding == model_pb2.LogitsOptions.LOGITS_FLOAT32 else 1 << 30)

        def proposal_room(most: int) -> int:
            # Proposals become tokens after the one sent: within max_tokens,
            # the context (with it) and the response's size.
            return min(most, limit - len(result.tokens), model.context_length - num_tokens - 1,
                       max_rows - 1)

        def emit(token: int) -> str:
            # The text a token releases; sets result.stop_reason at a stop
            # string.
            released, stopped = matcher.feed(text.feed(self._bytes_of(token)))
            if released:
                pieces.append(released)
            if stopped:
                result.stop_reason = "stop"
            return released

        def emit_forced(forced: list[int]) -> Iterator[str]:
            # Forced tokens joined the session without a draw (logprob 0: the
            # grammar allows nothing else); the output may stop inside them.
            for token in forced:
                result.tokens.append(token)
                result.logprobs.append(0.0)
                result.forced_tokens += 1
                released = emit(token)
                if released:
                    yield released
                if not result.stop_reason and len(result.tokens) == max_tokens:
                    result.stop_reason = "length"
                if result.stop_reason:
                    return

        # Structured output: the forced start (a schema's `{"name": "`) is
        # prefilled with the prompt, and the first draw is masked.
        state = Grammar(constraint, vocab) if constraint is not None else None
        prefill_request = model_pb2.PrefillRequest(tokens=ids, logits=options,
                                                   lookahead=lookahead)
        forced: list[int] = []
        if state is not None:
            forced = state.forced(min(limit, model.context_length - len(ids) - 1))
            prefill_request.tokens.extend(forced)
            prefill_request.mask.CopyFrom(state.mask())
        prefill = self._call(_MODEL, "Prefill", prefill_request)
        session = prefill.session_id
        num_tokens = prefill.num_tokens
        logits = prefill.logits
        requests: queue.Queue = queue.Queue()
        responses = None
        timed_out = threading.Event()
        in_flight = False  # a sent token whose response is still to be read
        # Speculation: (proposed token, logits after it) of the last step still
        # to check, and whether the session holds rejected proposals (rolled
        # back by the next request's truncate_to). num_tokens counts the
        # accepted tokens only.
        rows: list = []
        overhang = False
        proposed: list[int] = []
        forced_step = False  # the proposals in flight are forced tokens

        def next_response():
            timer = threading.Timer(self._timeout, lambda: (timed_out.set(), responses.cancel()))
            timer.daemon = True
            timer.start()
            try:
                return next(responses)
            except grpc.RpcError as e:
                if timed_out.is_set():
                    raise Unavailable(f"no decode step answered within {self._timeout} s",
                                      code="DEADLINE_EXCEEDED", method=f"{_MODEL}/DecodeStream",
                                      address=self._addr[_MODEL]) from None
                raise from_rpc_error(e, f"{_MODEL}/DecodeStream", self._addr[_MODEL]) from None
            except StopIteration:
                raise LlmError("the model service ended the decode stream early",
                               method=f"{_MODEL}/DecodeStream",
                               address=self._addr[_MODEL]) from None
            finally:
                timer.cancel()

        finished = False
        try:
            yield from emit_forced(forced)
            while not result.stop_reason:
                top_ids, values = decode_logits(logits, vocab)
                token = sampler.sample(top_ids, values)
                if state is not None:
                    state.accept(token)
                # The last step fed rows[0]'s token after the previous one: a
                # draw of the same token accepts it (the rejection rule for a
                # proposal made with certainty), any other rejects the rest.
                fed = None
                if rows:
                    if token == rows[0][0]:
                        fed = rows.pop(0)[1]
                    else:
                        rows = []
                if token in end_ids:
                    result.stop_reason = "eos"
                    break
                value = values[token] if top_ids is None else values[top_ids.index(token)]
                result.tokens.append(token)
                result.logprobs.append(float(value) - logits.log_sum_exp)
                if fed is not None:
                    result.accepted_tokens += 1
                    num_tokens += 1
                    overhang = bool(rows)  # all accepted: nothing to roll back
                if len(result.tokens) == max_tokens:
                    result.stop_reason = "length"
                elif fed is not None:
                    pass  # already in the session
                elif num_tokens >= model.context_length:
                    result.stop_reason = "context"
                else:  # send the token first: the model computes while we detokenize
                    if responses is None:
                        responses = self._model.DecodeStream(iter(requests.get, None),
                                                             metadata=self._metadata)
                    # The tokens a constraint forces after this one go in
                    # this step, as proposals sure to be kept.
                    proposed = (state.forced(proposal_room(MAX_PROPOSED_TOKENS))
                                if state is not None else [])
                    forced_step = bool(proposed)
                    if not forced_step:
                        room = proposal_room(speculate)
                        proposed = propose_by_ngram(ids + result.tokens, room) if room > 0 else []
                    request = model_pb2.DecodeTokenRequest(
                        session_id=session, token=token, logits=options,
                        lookahead=lookahead and not proposed, proposed=proposed)
                    if state is not None:
                        proposed = state.mask_step(request, forced_step)
                    if overhang:
                        request.truncate_to = num_tokens
                    requests.put(request)
                    in_flight = True
                released = emit(token)
                if released:
                    yield released
                if result.stop_reason:
                    break
                if fed is not None:
                    logits = fed
                    continue
                r = next_response()
                in_flight = False
                if len(r.proposed_logits) != len(proposed):
                    raise LlmError(
                        "the model service ignored the tokens a constraint forced (it predates "
                        "speculation)" if forced_step else
                        "the model service does not support speculative decoding "
                        "(no proposed_logits); generate without speculate",
                        method=f"{_MODEL}/DecodeStream", address=self._addr[_MODEL])
                num_tokens, logits = r.num_tokens - len(proposed), r.logits
                if forced_step:
                    # The forced tokens are in the session; the logits after
                    # the last are the next to draw from.
                    num_tokens += len(proposed)
                    logits = r.proposed_logits[-1]
                    yield from emit_forced(proposed)
                    proposed, forced_step = [], False
                    continue
                rows = list(zip(proposed, r.proposed_logits))
                overhang = bool(proposed)
                result.proposed_tokens += len(proposed)
            if not matcher.stopped:
                released, stopped = matcher.feed(text.finish())
                tail = released + matcher.finish()
                if stopped:
                    result.stop_reason = "stop"
                if tail:
                    pieces.append(tail)
                    yield tail
            if responses is not None:
                requests.put(None)  # half-close: the server ends the call after its last answer
                if in_flight:
                    next_response()
                for _ in responses:
                    pass
            finished = True
        except grpc.RpcError as e:
            raise from_rpc_error(e, f"{_MODEL}/DecodeStream", self._addr[_MODEL]) from None
        finally:
            if responses is not None and not finished:
                requests.put(None)
                responses.cancel()
            try:
                self._model.Release(model_pb2.ReleaseRequest(session_id=session),
                                    timeout=min(self._timeout, 10), metadata=self._metadata)
            except grpc.RpcError:
                pass  # the session expires on its own
        result.text = "".join(pieces)
        out.result = result
