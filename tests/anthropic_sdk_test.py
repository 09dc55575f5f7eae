#!/usr/bin/env python3
"""The gateway's Anthropic Messages API through the real `anthropic` Python SDK,
with the real default model.

Starts tokenizer_server, model_server and llm_gateway (with an API key, which the
SDK sends as x-api-key) on free loopback ports and speaks to the gateway with
anthropic.Anthropic(base_url=...): a greedy message answers "What is the capital
of France? Answer in one word." with Paris (system prompt as a string and as
blocks), streamed (the SDK's messages.stream and the raw events in Anthropic's
order) and not, the same text; stop_sequences -> stop_reason "stop_sequence"
with the sequence; max_tokens -> "max_tokens"; count_tokens equals a message's
usage.input_tokens; the key as Authorization: Bearer too; errors as the SDK's
exception types (404 NotFoundError, 400 BadRequestError, 401
AuthenticationError); a tool result in the conversation answered; a tool round
trip (tool_use forced with tool_choice {"type": "tool"}, then tool_result).

The SDK (tests/anthropic_sdk_requirements.txt, every version pinned) is installed
from PyPI into BUILD_DIR/anthropic-venv on the first run and reused after
(tests/sdk_harness.py).

    python3 tests/anthropic_sdk_test.py [--build-dir build] [--model PATH] [-k NAME]
"""

from __future__ import annotations

import sys
from pathlib import Path

from sdk_harness import Cases, check, main, raises, run_cases

ROOT = Path(__file__).resolve().parent.parent
REQUIREMENTS = ROOT / "tests/anthropic_sdk_requirements.txt"
QUESTION = "What is the capital of France? Answer in one word."
API_KEY = "sk-ant-test-key"
# Greedy. The SDK has no sampling arguments (recent Claude models take none);
# the API still reads temperature, top_p and top_k from the body.
GREEDY = {"temperature": 0}

# The tool round trip makes the 135M model call the tool with tool_choice
# {"type": "tool"}: the tool-call constraint (gateway/tool_calling.h,
# ChatToolPlan::constraint) keeps its answer to the call.

WEATHER_TOOL = {
    "name": "get_weather",
    "description": "The current weather in a city.",
    "input_schema": {"type": "object", "properties": {
        "city": {"type": "string", "description": "The city, e.g. Paris"}},
        "required": ["city"]},
}

case = Cases()


class Context:
    def __init__(self, services, anthropic_module):
        self.anthropic = anthropic_module
        self.services = services
        self.model = services.model_id
        self.client = anthropic_module.Anthropic(base_url=services.url, api_key=API_KEY,
                                                 max_retries=0, timeout=120)

    def message(self, content: str = QUESTION, **kwargs):
        kwargs.setdefault("extra_body", GREEDY)
        kwargs.setdefault("max_tokens", 32)
        return self.client.messages.create(
            model=self.model, messages=[{"role": "user", "content": content}], **kwargs)


def text_of(message) -> str:
    return "".join(b.text for b in message.content if b.type == "text")


@case
def message_answers_paris(t: Context):
    m = t.message()
    check(m.type == "message" and m.role == "assistant" and m.id.startswith("msg_"),
          f"{m.type} {m.role} {m.id}")
    check(m.model == t.model, f"model {m.model}")
    check("Paris" in text_of(m), f"answer {m.content}")
    check(m.stop_reason == "end_turn" and m.stop_sequence is None, f"stop {m.stop_reason}")
    check(m.usage.input_tokens > 10 and m.usage.output_tokens > 0, f"usage {m.usage}")
    # A system prompt, as a string and as text blocks: the same answer.
    a = t.message(system="Answer briefly.")
    b = t.message(system=[{"type": "text", "text": "Answer briefly."}])
    check(text_of(a) == text_of(b), f"system string {text_of(a)!r} vs blocks {text_of(b)!r}")


@case
def streamed_message_is_the_same_in_anthropics_event_order(t: Context):
    want = text_of(t.message())
    with t.client.messages.stream(model=t.model, max_tokens=32, extra_body=GREEDY,
                                  messages=[{"role": "user", "content": QUESTION}]) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    check(text == want, f"streamed {text!r} vs {want!r}")
    check(text_of(final) == want and final.stop_reason == "end_turn", f"final {final}")
    # The SSE event names as sent (the SDK's own iterator drops pings).
    with t.client.messages.with_streaming_response.create(
            model=t.model, max_tokens=32, extra_body=GREEDY, stream=True,
            messages=[{"role": "user", "content": QUESTION}]) as raw:
        events = [line[len("event: "):] for line in raw.iter_lines()
                  if line.startswith("event: ")]
    order = [e for i, e in enumerate(events) if i == 0 or events[i - 1] != e]
    check(order == ["message_start", "content_block_start", "ping", "content_block_delta",
                    "content_block_stop", "message_delta", "message_stop"], f"events {order}")


@case
def stop_sequences_and_max_tokens(t: Context):
    m = t.message(stop_sequences=["zzz", "aris"])
    check(m.stop_reason == "stop_sequence" and m.stop_sequence == "aris", f"{m}")
    check("aris" not in text_of(m) and "P" in text_of(m), f"text {text_of(m)!r}")
    m = t.message("Tell me a long story about a dragon.", max_tokens=3)
    check(m.stop_reason == "max_tokens" and m.usage.output_tokens == 3, f"{m}")


@case
def count_tokens_counts_the_prompt(t: Context):
    kwargs = dict(model=t.model, system="Answer briefly.",
                  messages=[{"role": "user", "content": QUESTION}])
    n = t.client.messages.count_tokens(**kwargs).input_tokens
    m = t.client.messages.create(max_tokens=4, extra_body=GREEDY, **kwargs)
    check(n == m.usage.input_tokens, f"count_tokens {n} vs usage {m.usage.input_tokens}")
    with_tools = t.client.messages.count_tokens(tools=[WEATHER_TOOL], **kwargs).input_tokens
    check(with_tools > n, f"tools add no tokens: {with_tools} vs {n}")


@case
def the_api_key_as_x_api_key_or_bearer(t: Context):
    a = t.anthropic
    bearer = a.Anthropic(base_url=t.services.url, auth_token=API_KEY, max_retries=0)
    m = bearer.messages.create(model=t.model, max_tokens=4, extra_body=GREEDY,
                               messages=[{"role": "user", "content": QUESTION}])
    check(m.stop_reason in ("end_turn", "max_tokens"), f"{m}")
    wrong = a.Anthropic(base_url=t.services.url, api_key="sk-wrong", max_retries=0)
    e = raises(a.AuthenticationError, lambda: wrong.messages.create(
        model=t.model, max_tokens=4, messages=[{"role": "user", "content": "hi"}]),
        status_code=401)
    check(API_KEY not in str(e) and "sk-wrong" not in str(e), f"the key echoed: {e}")


@case
def errors_surface_as_the_sdk_exceptions(t: Context):
    a = t.anthropic
    e = raises(a.NotFoundError, lambda: t.client.messages.create(
        model="claude-sonnet-4-5", max_tokens=4, messages=[{"role": "user", "content": "hi"}]),
        status_code=404)
    check(e.body["type"] == "error" and e.body["error"]["type"] == "not_found_error", f"{e.body}")
    e = raises(a.BadRequestError, lambda: t.message(extra_body={"temperature": 1.5}),
               status_code=400)
    check(e.body["error"]["type"] == "invalid_request_error", f"{e.body}")
    raises(a.BadRequestError, lambda: t.client.messages.create(
        model=t.model, max_tokens=4, messages=[{"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": "AAAA"}}]}]), status_code=400)


@case
def a_tool_result_in_the_conversation_is_answered(t: Context):
    m = t.client.messages.create(
        model=t.model, max_tokens=32, extra_body=GREEDY, tools=[WEATHER_TOOL], messages=[
            {"role": "user", "content": "What is the weather in Paris?"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_01", "name": "get_weather",
                 "input": {"city": "Paris"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01",
                 "content": "18 degrees and sunny"}]},
        ])
    check(m.stop_reason in ("end_turn", "max_tokens", "tool_use"), f"{m}")
    for block in m.content:
        check(block.type in ("text", "tool_use"), f"block {block}")
        if block.type == "tool_use":
            check(block.name == "get_weather" and isinstance(block.input, dict), f"{block}")
    print(f"     (the model answered {[b.model_dump() for b in m.content]})")


@case
def tool_round_trip(t: Context):
    question = {"role": "user", "content": "What is the weather in Paris?"}
    m = t.client.messages.create(model=t.model, max_tokens=64, extra_body=GREEDY,
                                 tools=[WEATHER_TOOL],
                                 tool_choice={"type": "tool", "name": "get_weather"},
                                 messages=[question])
    check(m.stop_reason == "tool_use", f"stop {m.stop_reason}: {m}")
    uses = [b for b in m.content if b.type == "tool_use"]
    check(len(uses) == 1 and uses[0].name == "get_weather"
          and isinstance(uses[0].input.get("city"), str), f"tool_use {uses}")
    answer = t.client.messages.create(
        model=t.model, max_tokens=32, extra_body=GREEDY, tools=[WEATHER_TOOL], messages=[
            question,
            {"role": "assistant", "content": [b.model_dump() for b in m.content]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": uses[0].id,
                                          "content": "18 degrees and sunny"}]},
        ])
    check(text_of(answer) or answer.stop_reason == "tool_use", f"answer {answer}")
    # Streamed, the forced call arrives as a tool_use block with its input.
    with t.client.messages.stream(model=t.model, max_tokens=64, extra_body=GREEDY,
                                  tools=[WEATHER_TOOL],
                                  tool_choice={"type": "tool", "name": "get_weather"},
                                  messages=[question]) as stream:
        final = stream.get_final_message()
    check([b.input for b in final.content if b.type == "tool_use"] == [uses[0].input],
          f"streamed {final.content}")


def run(args) -> int:
    import anthropic
    from llm_servers import GatewayServices

    print(f"anthropic {anthropic.__version__}")
    with GatewayServices(args.build_dir, args.model, api_key=API_KEY) as services:
        failed = run_cases(case, Context(services, anthropic), services, args.k)
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main(__file__, __doc__, REQUIREMENTS, "anthropic-venv", run))
