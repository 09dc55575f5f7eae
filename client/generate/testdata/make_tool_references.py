#!/usr/bin/env python3
"""Renders real chat templates (common/jinja/testdata/templates) on conversations
with tools, tool calls and tool results, with Python's jinja2 exactly as Hugging
Face transformers' apply_chat_template does (make_references.py's environment),
and writes tool_references.json, which chat_template_tools_test.cc checks byte for
byte against ChatTemplate::Render (tools and messages given as the gateway gives
them: OpenAI tool objects, tool calls with their arguments as JSON text).

Messages are as transformers receives them from a client: an assistant message
that calls tools has content "" (the gateway passes "" for a null content) and
tool_calls with the arguments as a dict; a tool message has tool_call_id and name.

Run (jinja2 3.1.6, Debian 12's python3-jinja2):
    python3 client/generate/testdata/make_tool_references.py
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
JINJA_TESTDATA = os.path.join(HERE, "..", "..", "..", "common", "jinja", "testdata")
sys.path.insert(0, JINJA_TESTDATA)
import jinja2  # noqa: E402
import make_references  # noqa: E402  (its environment, tokens and date)

TEMPLATES = [
    "Qwen-Qwen2.5-7B-Instruct",
    "Qwen-Qwen3-0.6B",
    "meta-llama-Llama-3.1-8B-Instruct",
    "meta-llama-Llama-3.2-3B-Instruct",
    "mistralai-Mistral-Nemo-Instruct-2407",
    "HuggingFaceTB-SmolLM2-135M-Instruct",
]

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city's name"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}
TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "The time now in a time zone.",
        "parameters": {
            "type": "object",
            "properties": {"zone": {"type": "string"}},
            "required": ["zone"],
        },
    },
}
TOOLS = [WEATHER, TIME]

SYSTEM = {"role": "system", "content": "You are a concise assistant."}
USER = {"role": "user", "content": "What is the weather in Paris?"}
CALL = {"role": "assistant", "content": "", "tool_calls": [
    {"id": "call00001", "type": "function",
     "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}]}
RESULT = {"role": "tool", "tool_call_id": "call00001", "name": "get_weather",
          "content": "{\"temperature\": 18, \"sky\": \"cloudy\"}"}
TWO_CALLS = {"role": "assistant", "content": "Let me look.", "tool_calls": [
    {"id": "call00001", "type": "function",
     "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
    {"id": "call00002", "type": "function",
     "function": {"name": "get_time", "arguments": {"zone": "Europe/Paris"}}}]}
RESULT2 = {"role": "tool", "tool_call_id": "call00002", "name": "get_time", "content": "14:05"}
ANSWER = {"role": "assistant", "content": "It is 18 degrees and cloudy in Paris."}

# name -> (messages, tools)
CONVERSATIONS = {
    "tools_user": ([USER], TOOLS),
    "tools_system_user": ([SYSTEM, USER], TOOLS),
    "round_trip": ([SYSTEM, USER, CALL, RESULT], TOOLS),
    "round_trip_answered": ([USER, CALL, RESULT, ANSWER, {"role": "user", "content": "Thanks"}],
                            TOOLS),
    "parallel_calls": ([USER, TWO_CALLS, RESULT, RESULT2], TOOLS),
    "history_without_tools": ([USER, CALL, RESULT], None),
}


def main():
    env = make_references.environment()
    cases = []
    for name in TEMPLATES:
        with open(os.path.join(JINJA_TESTDATA, "templates", name + ".jinja"),
                  encoding="utf-8") as f:
            template = env.from_string(f.read())
        bos, eos = make_references.TOKENS[name]
        for conv_name, (messages, tools) in CONVERSATIONS.items():
            case = {"template": name, "conversation": conv_name}
            try:
                case["output"] = template.render(
                    messages=messages, tools=tools, documents=None, add_generation_prompt=True,
                    bos_token=bos, eos_token=eos)
            except jinja2.exceptions.TemplateError as e:
                case["error"] = str(e)
            cases.append(case)
    out = {
        "generator": "client/generate/testdata/make_tool_references.py (jinja2 %s)"
                     % jinja2.__version__,
        "date_unix_seconds": int(make_references.DATE.timestamp()),
        "tokens": {n: {"bos_token": make_references.TOKENS[n][0],
                       "eos_token": make_references.TOKENS[n][1]} for n in TEMPLATES},
        "conversations": {n: {"messages": m, "tools": t}
                          for n, (m, t) in CONVERSATIONS.items()},
        "cases": cases,
    }
    with open(os.path.join(HERE, "tool_references.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print("%d cases (%d raise an error)" % (len(cases), sum("error" in c for c in cases)))


if __name__ == "__main__":
    main()
