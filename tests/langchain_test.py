#!/usr/bin/env python3
"""The gateway through LangChain's ChatOpenAI, with the real default model.

Starts tokenizer_server, model_server and llm_gateway on free loopback ports and
speaks to the gateway as a LangChain user does, with
langchain_openai.ChatOpenAI(base_url=...):

  - with_structured_output(Model) by each of its methods: json_schema (the
    default: response_format json_schema), function_calling (a tool named after
    the model, tool_choice that tool) and json_mode (response_format
    json_object, any object, so its model's keys have defaults): an instance
    of the Pydantic model comes back, and include_raw=True says it parsed
    without error;
  - bind_tools([...]) with tool_choice "any" and a named tool: the AIMessage's
    tool_calls carry the tool's name and arguments as a dict, streamed chunks add
    up to the same calls, and a ToolMessage with the call's id is answered in the
    next turn.

LangChain (tests/langchain_requirements.txt, every version pinned) is installed
from PyPI into BUILD_DIR/langchain-venv on the first run and reused after
(tests/sdk_harness.py).

    python3 tests/langchain_test.py [--build-dir build] [--model PATH] [-k NAME]
"""

from __future__ import annotations

import sys
from pathlib import Path

from sdk_harness import Cases, check, main, run_cases

ROOT = Path(__file__).resolve().parent.parent
REQUIREMENTS = ROOT / "tests/langchain_requirements.txt"

case = Cases()


class Context:
    def __init__(self, services):
        from langchain_openai import ChatOpenAI

        self.services = services
        # Greedy, no retries: an error must reach the test as it is.
        self.llm = ChatOpenAI(base_url=services.url + "/v1", api_key="unused",
                              model=services.model_id, temperature=0, max_tokens=160,
                              max_retries=0, timeout=120)


def models():
    from pydantic import BaseModel, Field

    class Capital(BaseModel):
        """The capital of a country."""
        country: str = Field(description="The country")
        city: str = Field(description="Its capital")
        population_millions: float = Field(ge=0)

    class AnyCapital(BaseModel):
        """json_mode's model: the mode asks for any JSON object, not the
        schema's, so a key the 135M model leaves out must have a default."""
        country: str = ""
        city: str = ""

    class GetWeather(BaseModel):
        """The current weather in a city."""
        city: str = Field(description="The city, e.g. Paris")

    return Capital, AnyCapital, GetWeather


@case
def structured_output_by_each_method(t: Context):
    Capital, AnyCapital, _ = models()
    question = "Describe the capital of France as JSON with country, city and population."
    for method, model in (("json_schema", Capital), ("function_calling", Capital),
                          ("json_mode", AnyCapital)):
        out = t.llm.with_structured_output(model, method=method, include_raw=True).invoke(
            question)
        check(out["parsing_error"] is None, f"{method}: {out['parsing_error']} in {out['raw']}")
        check(isinstance(out["parsed"], model), f"{method}: parsed {out['parsed']!r} "
                                                f"from {out['raw']}")
        print(f"     {method}: {out['parsed']!r}")


@case
def bind_tools_calls_the_tool_streamed_and_not_alike(t: Context):
    *_, GetWeather = models()
    question = "What is the weather in Paris?"
    for choice in ("any", "GetWeather"):
        llm = t.llm.bind_tools([GetWeather], tool_choice=choice)
        m = llm.invoke(question)
        check(m.tool_calls, f"{choice}: no tool_calls in {m}")
        for call in m.tool_calls:
            check(call["name"] == "GetWeather" and isinstance(call["args"].get("city"), str),
                  f"{choice}: {call}")
            check(call["id"], f"{choice}: a call without an id: {call}")
        total = None
        for chunk in llm.stream(question):
            total = chunk if total is None else total + chunk
        check([(c["name"], c["args"]) for c in total.tool_calls]
              == [(c["name"], c["args"]) for c in m.tool_calls],
              f"{choice} streamed: {total.tool_calls} vs {m.tool_calls}")


@case
def a_tool_result_is_answered(t: Context):
    from langchain_core.messages import HumanMessage, ToolMessage

    *_, GetWeather = models()
    question = HumanMessage("What is the weather in Paris?")
    call = t.llm.bind_tools([GetWeather], tool_choice="GetWeather").invoke([question])
    check(call.tool_calls, f"no call: {call}")
    result = ToolMessage("18 degrees and sunny", tool_call_id=call.tool_calls[0]["id"])
    answer = t.llm.bind_tools([GetWeather]).invoke([question, call, result])
    check(answer.content or answer.tool_calls, f"an empty answer: {answer}")
    print(f"     (the model answered {answer.content!r} {answer.tool_calls})")


# -- main --------------------------------------------------------------------------

def run(args) -> int:
    import langchain_openai  # noqa: F401 - its version, below
    from importlib.metadata import version
    from llm_servers import GatewayServices

    print(f"langchain-openai {version('langchain-openai')}, "
          f"langchain-core {version('langchain-core')}")
    with GatewayServices(args.build_dir, args.model) as services:
        failed = run_cases(case, Context(services), services, args.k)
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main(__file__, __doc__, REQUIREMENTS, "langchain-venv", run))
