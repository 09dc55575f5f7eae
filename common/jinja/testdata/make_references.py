#!/usr/bin/env python3
"""Renders every template in templates/ on the conversations below with Python's
jinja2 exactly as Hugging Face transformers' apply_chat_template does, and writes
references.json, which jinja_reference_test.cc checks byte for byte.

transformers' environment: ImmutableSandboxedEnvironment(trim_blocks=True,
lstrip_blocks=True, extensions=[AssistantTracker, loopcontrols]), globals raise_exception (raises
TemplateError) and strftime_now, the filter tojson = json.dumps(ensure_ascii=False,
...); render(messages=..., tools=None, documents=None, add_generation_prompt=...,
bos_token=..., eos_token=...). strftime_now is pinned to DATE (UTC) so that the
output is reproducible; the C++ test passes the same instant.

Run (jinja2 3.1.6 from the repository's reference venv):
    /work/main/build/ref-venv/bin/python common/jinja/testdata/make_references.py

A sweep over another set of templates (names not in TOKENS get <s> / </s>;
templates that jinja2 cannot parse are skipped, other jinja2 errors recorded as
error_other), checked with JINJA_TESTDATA=DIR build/bin/jinja_reference_test:
    python make_references.py --templates DIR/templates --out DIR/references.json
"""
import argparse
import datetime
import json
import os

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
DATE = datetime.datetime(2025, 1, 15, 12, 0, 0, tzinfo=datetime.timezone.utc)

# Each model's BOS / EOS text (None: the tokenizer has none).
TOKENS = {
    "HuggingFaceTB-SmolLM2-135M-Instruct": ("<|im_start|>", "<|im_end|>"),
    "HuggingFaceTB-SmolLM3-3B": (None, "<|im_end|>"),
    "Qwen-Qwen2.5-7B-Instruct": (None, "<|im_end|>"),
    "Qwen-QwQ-32B": (None, "<|im_end|>"),
    "Qwen-Qwen3-0.6B": (None, "<|im_end|>"),
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    "meta-llama-Llama-3.1-8B-Instruct": ("<|begin_of_text|>", "<|eot_id|>"),
    "meta-llama-Llama-3.2-3B-Instruct": ("<|begin_of_text|>", "<|eot_id|>"),
    "meta-llama-Llama-3.3-70B-Instruct": ("<|begin_of_text|>", "<|eot_id|>"),
    "microsoft-Phi-3.5-mini-instruct": ("<s>", "<|endoftext|>"),
    "mistralai-Mistral-7B-Instruct-v0.2-v1-system": ("<s>", "</s>"),
    "mistralai-Mistral-Nemo-Instruct-2407": ("<s>", "</s>"),
    "google-gemma-2-2b-it": ("<bos>", "<eos>"),
    "google-gemma-3-it": ("<bos>", "<eos>"),
    "HuggingFaceH4-zephyr-7b-beta": ("<s>", "</s>"),
}

SYSTEM = {"role": "system", "content": "You are a concise assistant."}
U1 = {"role": "user", "content": "What is the capital of France?"}
A1 = {"role": "assistant", "content": "The capital of France is Paris."}
U2 = {"role": "user", "content": "And of Italy?"}
A2 = {"role": "assistant", "content": "Rome."}
U_WS = {"role": "user", "content": "  Héllo, wörld! 👋 \"quotes\" and 'apostrophes'\n\n"}
A_THINK = {"role": "assistant",
           "content": "<think>\nThe user greets me.\n</think>\n\nHello! How can I help?"}

CONVERSATIONS = {
    "system_user": [SYSTEM, U1],
    "user": [U1],
    "multi_turn": [U1, A1, U2],
    "system_multi_turn": [SYSTEM, U1, A1, U2],
    "multi_turn_assistant_last": [U1, A1, U2, A2],
    "whitespace_unicode": [U_WS],
    "think_history": [U_WS, A_THINK, U2],
}


class AssistantTracker(jinja2.ext.Extension):
    """transformers' {% generation %}...{% endgeneration %}: renders its body as it is
    (transformers also records where it lies, for assistant-token masks)."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        call = self.call_method("_render", [])
        return jinja2.nodes.CallBlock(call, [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def environment():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt):
        return DATE.strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[AssistantTracker, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--templates", default=os.path.join(HERE, "templates"))
    parser.add_argument("--out", default=os.path.join(HERE, "references.json"))
    args = parser.parse_args()
    env = environment()
    cases = []
    names = sorted(n[:-len(".jinja")] for n in os.listdir(args.templates) if n.endswith(".jinja"))
    tokens = {}
    for name in names:
        with open(os.path.join(args.templates, name + ".jinja"), encoding="utf-8") as f:
            try:
                template = env.from_string(f.read())
            except jinja2.exceptions.TemplateSyntaxError as e:
                print("skipped %s: jinja2 cannot parse it (%s)" % (name, e))
                continue
        bos, eos = TOKENS.get(name, ("<s>", "</s>"))
        tokens[name] = {"bos_token": bos, "eos_token": eos}
        for conv_name, messages in CONVERSATIONS.items():
            for gen in (True, False):
                case = {"template": name, "conversation": conv_name,
                        "add_generation_prompt": gen}
                try:
                    case["output"] = template.render(
                        messages=messages, tools=None, documents=None,
                        add_generation_prompt=gen, bos_token=bos, eos_token=eos)
                except jinja2.exceptions.TemplateError as e:
                    case["error"] = str(e)
                except Exception as e:  # a TypeError inside the template, ...
                    case["error_other"] = "%s: %s" % (type(e).__name__, e)
                cases.append(case)
    out = {
        "generator": "common/jinja/testdata/make_references.py (jinja2 %s)" % jinja2.__version__,
        "date_unix_seconds": int(DATE.timestamp()),
        "tokens": tokens,
        "conversations": CONVERSATIONS,
        "cases": cases,
    }
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    errors = sum("error" in c for c in cases)
    print("%d cases (%d raise an error) in %s" % (len(cases), errors, args.out))


if __name__ == "__main__":
    main()
