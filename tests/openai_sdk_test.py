#!/usr/bin/env python3
"""The gateway through the real `openai` Python SDK, with the real default model.

Starts tokenizer_server, model_server and llm_gateway (--max_concurrent 1, --max_queued 0) on
free loopback ports and speaks to the gateway with openai.OpenAI(base_url=...):
models list / retrieve; a greedy chat answers "What is the capital of France?
Answer in one word." with Paris, streamed and not, the same text both ways,
finish_reason and usage alike; n = 2 with a seed repeats with that seed;
stop strings; max_tokens -> finish_reason "length"; extension parameters
through extra_body; errors as the SDK's exception types (404 -> NotFoundError,
400 -> BadRequestError with its param and code, 429 -> RateLimitError); tools:
an answer with tools offered (text or calls), streamed and not alike, tool
results in the next turn, tool_choice none, bad tools as BadRequestError;
tool_choice required / a named function calling the tool, streamed as
deltas; structured output the SDK's way: chat.completions.parse (and
beta.chat.completions.parse) with a Pydantic model as response_format, and
pydantic_function_tool tools whose parsed_arguments come back as the model.

The SDK (tests/openai_sdk_requirements.txt, every version pinned) is installed
from PyPI into BUILD_DIR/openai-venv on the first run and reused after; the
test then runs itself again with that venv's python. Without PyPI it fails,
saying so (as scripts/fetch-model.sh needs PyPI for the model).

    python3 tests/openai_sdk_test.py [--build-dir build] [--model PATH] [-k NAME]

Cases are functions marked @case, run in order on one set of servers
(tests/sdk_harness.py); a new endpoint's cases (e.g. /v1/completions) are added
the same way. Prints each case and "N passed, N failed, N skipped"; exit status 0
when none fails.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sdk_harness import Cases, check, main, raises, run_cases

ROOT = Path(__file__).resolve().parent.parent
REQUIREMENTS = ROOT / "tests/openai_sdk_requirements.txt"
QUESTION = "What is the capital of France? Answer in one word."


# -- cases -----------------------------------------------------------------------

case = Cases()


class Context:
    def __init__(self, services, openai_module):
        self.openai = openai_module
        self.services = services
        self.model = services.model_id
        # No retries: a 429 or 5xx must reach the test as it is.
        self.client = openai_module.OpenAI(base_url=services.url + "/v1", api_key="unused",
                                           max_retries=0, timeout=120)

    def chat(self, content: str = QUESTION, **kwargs):
        kwargs.setdefault("temperature", 0)
        kwargs.setdefault("max_tokens", 32)
        return self.client.chat.completions.create(
            model=self.model, messages=[{"role": "user", "content": content}], **kwargs)

    def raises(self, exc_type, fn, **attrs):
        return raises(exc_type, fn, **attrs)


def collect_stream(stream) -> tuple[dict[int, str], dict[int, str], object]:
    """Text and finish_reason per choice index, and the usage of a chunk
    stream (read to its end)."""
    texts: dict[int, str] = {}
    finish: dict[int, str] = {}
    usage = None
    for chunk in stream:
        check(chunk.object == "chat.completion.chunk", f"chunk object {chunk.object!r}")
        if chunk.usage is not None:
            usage = chunk.usage
        for c in chunk.choices:
            texts.setdefault(c.index, "")
            if c.delta.content:
                texts[c.index] += c.delta.content
            if c.finish_reason is not None:
                finish[c.index] = c.finish_reason
    return texts, finish, usage


@case
def models_list_and_retrieve(t: Context):
    models = t.client.models.list().data
    check(len(models) == 1 and models[0].id == t.model, f"models: {models}")
    check(t.client.models.retrieve(t.model).id == t.model, "retrieve")
    t.raises(t.openai.NotFoundError, lambda: t.client.models.retrieve("gpt-4"), status_code=404)


@case
def chat_greedy_answers_paris_streamed_and_not_alike(t: Context):
    r = t.chat()
    check(r.object == "chat.completion" and r.id.startswith("chatcmpl-"), f"{r.object} {r.id}")
    check(r.model == t.model, f"model {r.model}")
    check(len(r.choices) == 1, f"{len(r.choices)} choices")
    answer = r.choices[0].message.content
    check("Paris" in answer, f"answer {answer!r} lacks Paris")
    check(r.choices[0].message.role == "assistant", "role")
    check(r.choices[0].finish_reason == "stop", f"finish_reason {r.choices[0].finish_reason}")
    u = r.usage
    check(u.prompt_tokens > 10 and u.completion_tokens > 0
          and u.total_tokens == u.prompt_tokens + u.completion_tokens, f"usage {u}")

    texts, finish, usage = collect_stream(
        t.chat(stream=True, stream_options={"include_usage": True}))
    check(texts == {0: answer}, f"streamed {texts!r} != non-streamed {answer!r}")
    check(finish == {0: "stop"}, f"streamed finish {finish}")
    check(usage is not None and usage.prompt_tokens == u.prompt_tokens
          and usage.completion_tokens == u.completion_tokens, f"streamed usage {usage} vs {u}")
    # Without include_usage no chunk carries usage.
    _, _, none = collect_stream(t.chat(stream=True))
    check(none is None, f"usage without include_usage: {none}")


@case
def n_choices_repeat_with_their_seed(t: Context):
    # top_k (an extension) lets the model send 50 logits a token, not all 49,152.
    kw = dict(temperature=0.9, top_p=0.95, n=2, max_tokens=16, extra_body={"top_k": 50})
    a = t.chat("Write a sentence about the sea.", seed=7, **kw)
    b = t.chat("Write a sentence about the sea.", seed=7, **kw)
    c = t.chat("Write a sentence about the sea.", seed=8, **kw)
    texts = lambda r: [ch.message.content for ch in r.choices]  # noqa: E731
    check([ch.index for ch in a.choices] == [0, 1], f"indexes {[ch.index for ch in a.choices]}")
    check(texts(a) == texts(b), f"seed 7 twice: {texts(a)} vs {texts(b)}")
    check(texts(a)[0] != texts(a)[1], f"both choices alike: {texts(a)}")
    check(texts(a) != texts(c), f"seeds 7 and 8 alike: {texts(a)}")
    all_length = all(ch.finish_reason == "length" for ch in a.choices)
    check(a.usage.completion_tokens == 32 if all_length else a.usage.completion_tokens < 32,
          f"usage {a.usage} with finish reasons {[ch.finish_reason for ch in a.choices]}")
    # Streamed, the same seed gives the same two texts, each with its index.
    s_texts, s_finish, _ = collect_stream(t.chat("Write a sentence about the sea.", seed=7,
                                                 stream=True, **kw))
    check(s_texts == {0: texts(a)[0], 1: texts(a)[1]}, f"streamed n=2: {s_texts}")
    check(set(s_finish) == {0, 1}, f"streamed finish {s_finish}")


@case
def stop_strings_never_reach_the_output(t: Context):
    r = t.chat(stop="aris")
    text = r.choices[0].message.content
    check("aris" not in text and "P" in text, f"text {text!r}")
    check(r.choices[0].finish_reason == "stop", f"finish {r.choices[0].finish_reason}")
    texts, finish, _ = collect_stream(t.chat(stop=["zzz", "aris"], stream=True))
    check(texts == {0: text} and finish == {0: "stop"}, f"streamed {texts} {finish}")


@case
def max_tokens_ends_with_length(t: Context):
    r = t.chat("Tell me a long story about a dragon.", max_tokens=5)
    check(r.choices[0].finish_reason == "length", f"finish {r.choices[0].finish_reason}")
    check(r.usage.completion_tokens == 5, f"usage {r.usage}")
    r = t.client.chat.completions.create(
        model=t.model, messages=[{"role": "user", "content": "Count to twenty."}],
        temperature=0, max_completion_tokens=3)
    check(r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 3,
          f"max_completion_tokens: {r.choices[0].finish_reason} {r.usage}")


@case
def extension_parameters_through_extra_body(t: Context):
    greedy = t.chat().choices[0].message.content
    # top_k 1 at temperature 1 is greedy.
    r = t.chat(temperature=1.0, seed=3, extra_body={"top_k": 1})
    check(r.choices[0].message.content == greedy, f"top_k 1: {r.choices[0].message.content!r}")


@case
def errors_surface_as_the_sdk_exceptions(t: Context):
    o = t.openai
    e = t.raises(o.NotFoundError, lambda: t.client.chat.completions.create(
        model="gpt-4", messages=[{"role": "user", "content": QUESTION}]),
        status_code=404, code="model_not_found", param="model")
    check(e.type == "invalid_request_error", f"type {e.type}")
    t.raises(o.BadRequestError, lambda: t.chat(top_p=7), status_code=400, param="top_p")
    t.raises(o.BadRequestError, lambda: t.chat(temperature=3), param="temperature")
    t.raises(o.BadRequestError, lambda: t.chat(n=9), param="n")
    t.raises(o.BadRequestError, lambda: t.client.chat.completions.create(
        model=t.model, messages=[{"role": "wizard", "content": "hi"}]),
        param="messages[0].role")
    # Refused before the stream begins: the SDK raises from create().
    t.raises(o.BadRequestError, lambda: t.chat(top_p=7, stream=True), param="top_p")
    t.raises(o.BadRequestError, lambda: t.chat(" cat" * 10000), param="messages",
             code="context_length_exceeded")


@case
def busy_gateway_is_rate_limited_and_a_closed_stream_frees_it(t: Context):
    # --max_concurrent 1 and no queue: a stream in flight makes the next request 429.
    stream = t.chat("Tell me a long story.", stream=True, max_tokens=2000, temperature=1.0,
                    logit_bias={"2": -100})  # EOS banned: it runs until closed
    chunks = 0
    for _ in stream:
        chunks += 1
        if chunks == 5:
            break
    t.raises(t.openai.RateLimitError, lambda: t.chat(max_tokens=4), status_code=429)
    stream.close()
    closed = time.monotonic()
    while True:
        try:
            r = t.chat(max_tokens=4)
            break
        except t.openai.RateLimitError:
            check(time.monotonic() - closed < 5, "still 429 5 s after the stream closed")
            time.sleep(0.05)
    check(r.choices[0].finish_reason in ("stop", "length"), f"after: {r}")


SCORED_TEXT = ("The lighthouse keeper climbed the stairs every evening at dusk. He trimmed the "
               "wick, polished the lens and watched the ships pass the rocks below.")


@case
def completions_echo_logprobs_match_llm_perplexity(t: Context):
    # How lm-evaluation-harness's local-completions scores text: echo the
    # prompt with its logprobs and generate nothing.
    r = t.client.completions.create(model=t.model, prompt=SCORED_TEXT, echo=True, logprobs=1,
                                    max_tokens=0)
    check(r.object == "text_completion", f"object {r.object!r}")
    choice = r.choices[0]
    check(choice.text == SCORED_TEXT, f"echoed text {choice.text!r}")
    lp = choice.logprobs
    n = len(lp.tokens)
    check(n > 10 and r.usage.prompt_tokens == n, f"{n} tokens, usage {r.usage}")
    check(lp.token_logprobs[0] is None, "the first token has a logprob")
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as text_file:
        text_file.write(SCORED_TEXT)
        text_file.flush()
        out = subprocess.run([str(t.services.bin_dir / "llm-perplexity"), "--model",
                              str(t.services.model), "--file", text_file.name, "--ctx", str(n),
                              "--score_from", "0", "--token_logprobs", "--threads", "2"],
                             capture_output=True, text=True, check=True)
    ref = json.loads(out.stdout.strip().splitlines()[-1])["token_logprobs"]
    check(len(ref) == n - 1, f"llm-perplexity scored {len(ref)} tokens, not {n - 1}")
    got = lp.token_logprobs[1:]
    worst = max(abs(a - b) for a, b in zip(got, ref))
    check(worst < 1e-3, f"a token's logprob differs by {worst}")
    check(abs(sum(got) - sum(ref)) < 1e-3, f"sums {sum(got)} vs {sum(ref)}")
    # max_tokens 1, as the harness sends it: the same scores, one token more.
    r1 = t.client.completions.create(model=t.model, prompt=SCORED_TEXT, echo=True, logprobs=1,
                                     max_tokens=1, temperature=0)
    check(r1.choices[0].logprobs.token_logprobs[:n] == lp.token_logprobs,
          "the scores differ with a generated token")
    check(len(r1.choices[0].logprobs.tokens) == n + 1, "no generated token after the echo")


@case
def completions_streamed_and_not_alike(t: Context):
    kwargs = dict(model=t.model, prompt="The capital of France is", temperature=0, max_tokens=8)
    plain = t.client.completions.create(**kwargs)
    streamed = "".join(c.choices[0].text for c in t.client.completions.create(stream=True,
                                                                               **kwargs))
    check(plain.choices[0].text == streamed, f"{plain.choices[0].text!r} vs {streamed!r}")
    check(plain.choices[0].finish_reason == "length", plain.choices[0].finish_reason)


@case
def chat_logprobs_list_the_greedy_token_first(t: Context):
    r = t.chat(logprobs=True, top_logprobs=2)
    content = r.choices[0].logprobs.content
    check(len(content) == r.usage.completion_tokens, f"{len(content)} entries")
    for entry in content:
        check(entry.logprob <= 0, f"logprob {entry.logprob}")
        check(len(entry.top_logprobs) == 2, f"{len(entry.top_logprobs)} alternatives")
        check(entry.top_logprobs[0].token == entry.token, "greedy did not pick the top token")
    text = "".join(e.token for e in content)
    check("Paris" in text, f"tokens {text!r}")


# -- tool calling ----------------------------------------------------------------

# tool_choice "required" and a named function are kept to a call by the
# constraint gateway/tool_calling.h builds (ChatToolPlan::constraint): the 135M
# model does not call a tool on its own.
WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "The current weather in a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "The city, e.g. Paris"}},
        "required": ["city"]}}}
TOOL_QUESTION = "What is the weather in Paris? Use the tool."


def answer_of_stream(stream) -> tuple[str, list[dict], str]:
    """Content, tool calls ({id, name, arguments} by index) and finish_reason of
    a one-choice chunk stream, accumulated as the SDK's users do."""
    content, calls, finish = "", {}, None
    for chunk in stream:
        for c in chunk.choices:
            if c.delta.content:
                content += c.delta.content
            for d in c.delta.tool_calls or []:
                call = calls.setdefault(d.index, {"id": None, "name": "", "arguments": ""})
                if d.id:
                    call["id"] = d.id
                if d.function and d.function.name:
                    call["name"] += d.function.name
                if d.function and d.function.arguments:
                    call["arguments"] += d.function.arguments
            if c.finish_reason is not None:
                finish = c.finish_reason
    return content, [calls[i] for i in sorted(calls)], finish


def check_answer_with_tools(r, tools: list[dict]) -> None:
    """A chat.completion answered with tools offered: a text answer, or calls
    to those tools with JSON-object arguments and finish_reason tool_calls."""
    m = r.choices[0].message
    names = {t["function"]["name"] for t in tools}
    if m.tool_calls:
        check(r.choices[0].finish_reason == "tool_calls", f"finish {r.choices[0].finish_reason}")
        for call in m.tool_calls:
            check(call.type == "function" and call.function.name in names, f"call {call}")
            check(isinstance(json.loads(call.function.arguments), dict), f"arguments {call}")
    else:
        check(isinstance(m.content, str) and m.content, f"no calls and no content: {m}")
        check(r.choices[0].finish_reason in ("stop", "length"),
              f"finish {r.choices[0].finish_reason}")


@case
def tools_auto_answers_streamed_and_not_alike(t: Context):
    r = t.chat(TOOL_QUESTION, tools=[WEATHER_TOOL], max_tokens=48)
    check_answer_with_tools(r, [WEATHER_TOOL])
    m = r.choices[0].message
    content, calls, finish = answer_of_stream(
        t.chat(TOOL_QUESTION, tools=[WEATHER_TOOL], max_tokens=48, stream=True))
    check(finish == r.choices[0].finish_reason, f"streamed finish {finish}")
    check(content == (m.content or ""), f"streamed content {content!r} vs {m.content!r}")
    want = [{"name": c.function.name, "arguments": c.function.arguments}
            for c in m.tool_calls or []]
    check([{"name": c["name"], "arguments": c["arguments"]} for c in calls] == want,
          f"streamed calls {calls} vs {want}")
    print(f"     (the model {'called ' + str(want) if want else 'answered ' + repr(m.content)})")


@case
def tool_results_reach_the_next_turn(t: Context):
    messages = [
        {"role": "user", "content": "What is the weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_abc", "type": "function",
             "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris"})}}]},
        {"role": "tool", "tool_call_id": "call_abc", "content": "18 degrees and sunny"},
    ]
    r = t.client.chat.completions.create(model=t.model, messages=messages, tools=[WEATHER_TOOL],
                                         temperature=0, max_tokens=32)
    check_answer_with_tools(r, [WEATHER_TOOL])
    # tool_choice "none": no tools in the prompt, a text answer.
    r = t.client.chat.completions.create(model=t.model, messages=messages, tools=[WEATHER_TOOL],
                                         tool_choice="none", temperature=0, max_tokens=32)
    check(r.choices[0].message.tool_calls is None and r.choices[0].message.content,
          f"tool_choice none: {r.choices[0].message}")


@case
def bad_tools_are_bad_requests(t: Context):
    bad = {"type": "function", "function": {"name": "f", "parameters": {"type": "string"}}}
    t.raises(t.openai.BadRequestError, lambda: t.chat(tools=[bad]), status_code=400,
             param="tools[0].function.parameters")
    t.raises(t.openai.BadRequestError, lambda: t.chat(
        tools=[WEATHER_TOOL], tool_choice={"type": "function", "function": {"name": "nope"}}),
        param="tool_choice")


@case
def tool_choice_required_and_named_call_the_tool(t: Context):
    time_tool = {"type": "function", "function": {
        "name": "get_time", "parameters": {"type": "object", "properties": {
            "zone": {"type": "string"}}, "required": ["zone"]}}}
    for choice, name in (("required", None), ({"type": "function",
                                               "function": {"name": "get_time"}}, "get_time")):
        r = t.chat(TOOL_QUESTION, tools=[WEATHER_TOOL, time_tool], tool_choice=choice,
                   max_tokens=64)
        calls = r.choices[0].message.tool_calls
        check(calls and r.choices[0].finish_reason == "tool_calls", f"{choice}: {r}")
        for call in calls:
            args = json.loads(call.function.arguments)
            check(call.function.name == (name or call.function.name), f"{choice}: {call}")
            required = {"get_weather": "city", "get_time": "zone"}[call.function.name]
            check(isinstance(args.get(required), str), f"{choice}: arguments {args}")
        content, streamed, finish = answer_of_stream(
            t.chat(TOOL_QUESTION, tools=[WEATHER_TOOL, time_tool], tool_choice=choice,
                   max_tokens=64, stream=True))
        check(finish == "tool_calls" and [c["arguments"] for c in streamed]
              == [c.function.arguments for c in calls], f"{choice} streamed: {streamed}")


# -- structured output the SDK's way ----------------------------------------------

def parse_methods(t: Context):
    """The SDK's parse entry points: chat.completions.parse, and the older
    beta.chat.completions.parse where this version still has it."""
    methods = [("chat.completions.parse", t.client.chat.completions.parse)]
    beta = getattr(getattr(t.client, "beta", None), "chat", None)
    if beta is not None and hasattr(beta.completions, "parse"):
        methods.append(("beta.chat.completions.parse", beta.completions.parse))
    return methods


@case
def parse_with_a_pydantic_model(t: Context):
    from pydantic import BaseModel, Field

    class Capital(BaseModel):
        country: str
        city: str
        population_millions: float = Field(ge=0)
        landmarks: list[str] = Field(max_length=3)

    messages = [{"role": "user", "content": "Describe the capital of France as JSON."}]
    for name, parse in parse_methods(t):
        r = parse(model=t.model, messages=messages, response_format=Capital, temperature=0,
                  max_tokens=160)
        m = r.choices[0].message
        check(r.choices[0].finish_reason == "stop", f"{name}: finish {r.choices[0]}")
        check(isinstance(m.parsed, Capital), f"{name}: parsed {m.parsed!r} from {m.content!r}")
        check(Capital.model_validate_json(m.content) == m.parsed, f"{name}: {m.content!r}")
        check(m.refusal is None, f"{name}: refusal {m.refusal!r}")


@case
def parse_with_pydantic_function_tools(t: Context):
    from pydantic import BaseModel

    class GetWeather(BaseModel):
        """The current weather in a city."""
        city: str
        unit: str

    for name, parse in parse_methods(t):
        r = parse(model=t.model, messages=[{"role": "user", "content": TOOL_QUESTION}],
                  tools=[t.openai.pydantic_function_tool(GetWeather)], tool_choice="required",
                  temperature=0, max_tokens=64)
        calls = r.choices[0].message.tool_calls
        check(calls and r.choices[0].finish_reason == "tool_calls", f"{name}: {r}")
        for call in calls:
            check(call.function.name == "GetWeather", f"{name}: {call}")
            check(isinstance(call.function.parsed_arguments, GetWeather),
                  f"{name}: parsed_arguments {call.function.parsed_arguments!r}")


# -- main --------------------------------------------------------------------------

def run(args) -> int:
    import openai
    from llm_servers import GatewayServices

    print(f"openai {openai.__version__}")
    with GatewayServices(args.build_dir, args.model,
                         gateway_flags=["--max_concurrent", "1", "--max_queued", "0"]) as services:
        failed = run_cases(case, Context(services, openai), services, args.k)
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main(__file__, __doc__, REQUIREMENTS, "openai-venv", run))
