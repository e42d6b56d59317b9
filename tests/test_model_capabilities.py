"""Capabilities declared on the chat model: each engine says what it can do and what it is
known to do badly, and the code that uses it reads that, not which flags were typed."""

from __future__ import annotations

from pathlib import Path

import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

from assistant.cli.main import build_parser
from assistant.cli.settings import resolve, typed
from assistant.conversation import Conversation, ReplySettings
from assistant.session.engines import reply_settings
from assistant.tools import builtin_tools
from models.base import CancelToken, ChatModel, ModelCapabilities
from models.embedded import LLM_FILE, default_llm, is_embedded_llm
from models.llama import llama_capabilities, reads_tools
from models.openai_compat import OpenAIChatModel
from tests.support.command_line import chat_through_main
from tests.support.conversations import chat, filler
from tests.support.fakes import HeldSummaries, ScriptedChatModel

EMBEDDED = ModelCapabilities(native_tools=False, prefill=True, keeps_prompt_aside=True,
                             repeats_answers_it_sees=True, confused_by_the_date=True)
"""What the embedded SmolLM2-135M declares (tests/test_real_model.py checks the real one)."""

SMOLLM2 = {"general.basename": "smollm2", "general.size_label": "135M",
           "general.name": "Smollm2 135M 8k Lc100K Mix1 Ep2"}
QWEN = {"general.basename": "Qwen2.5-Coder", "general.size_label": "0.5B",
        "general.name": "Qwen2.5 Coder 0.5B Instruct"}
CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
          "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
WITH_TOOLS = ("{%- if tools %}<tools>{% for tool in tools %}{{ tool | tojson }}{% endfor %}"
              "</tools>{% endif %}" + CHATML)


def test_a_chat_model_declares_nothing_beyond_streaming_unless_it_says_so():
    assert ChatModel.capabilities == ModelCapabilities()
    assert not any(vars(ModelCapabilities()).values())


def test_a_remote_model_takes_tools_natively_and_has_no_habits_parley_knows():
    model = OpenAIChatModel("http://127.0.0.1:9/v1")  # nothing is asked of it here
    assert model.capabilities == ModelCapabilities(native_tools=True)


def test_the_embedded_model_is_known_by_its_file_or_its_metadata():
    assert is_embedded_llm(Path("/copies/any-name.gguf"), SMOLLM2)
    assert is_embedded_llm(Path("/x.gguf"), {"general.basename": "SmolLM2",
                                             "general.size_label": "135m"})
    assert is_embedded_llm(default_llm(), {})  # its file, however its metadata reads
    assert not is_embedded_llm(Path("/models/qwen2.5-coder-0.5b.gguf"), QWEN)
    assert not is_embedded_llm(Path(f"/elsewhere/{LLM_FILE}"), QWEN)  # a name is not enough
    assert not is_embedded_llm(Path("/x.gguf"), {"general.basename": "smollm2",
                                                 "general.size_label": "360M"})


def test_a_gguf_declares_what_llama_cpp_does_and_only_the_embedded_model_its_habits():
    assert llama_capabilities(native_tools=False, embedded=True) == EMBEDDED
    other = llama_capabilities(native_tools=True, embedded=False)
    assert other == ModelCapabilities(native_tools=True, prefill=True, keeps_prompt_aside=True)
    assert not other.repeats_answers_it_sees and not other.confused_by_the_date


def test_native_tools_means_a_template_that_reads_the_tools_variable():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    assert reads_tools(env, WITH_TOOLS)
    assert not reads_tools(env, CHATML)
    assert not reads_tools(env, "{# no tools here #}" + CHATML.replace("assistant", "tools"))


def test_a_model_that_cannot_prefill_is_not_asked_to():
    class NoPrefill(ScriptedChatModel):
        capabilities = ModelCapabilities()

        def prefill(self, messages, tools, stop=None) -> int:
            raise AssertionError("prefill was called on a model that cannot")

    model = NoPrefill()
    conversation = Conversation(model, builtin_tools())
    model.enqueue("Hi.")
    conversation.reply("hello", lambda event: None)
    assert conversation.prepare_next() == 0
    able = ScriptedChatModel()
    assert Conversation(able, builtin_tools()).prepare_next() > 0 and able.prefills


def test_a_summary_between_turns_is_written_aside_only_where_the_model_can():
    model = HeldSummaries()
    model.capabilities = ModelCapabilities(prefill=True)  # an aside() it does not declare
    conversation = Conversation(model, builtin_tools(),
                                ReplySettings(answer_tokens=256, idle_summaries=True))
    chat(conversation, model, filler(0), filler(1), filler(2))
    assert conversation.summarize_ahead(lambda event: None, CancelToken())
    assert model.asides == [False]


# -- the CLI's prompt settings come from the model -----------------------------------------

def args_of(*flags: str):
    return typed(resolve(build_parser().parse_args(["chat", *flags]), environ={})).model


class Embedded(ScriptedChatModel):
    """A stand-in with the embedded model's capabilities."""

    capabilities = EMBEDDED


@pytest.fixture(autouse=True)
def no_config_file(monkeypatch):
    monkeypatch.setenv("HOME", "/nonexistent")


@pytest.mark.parametrize("flags", [(), ("--llm-model", "/models/smollm2-copy.gguf"),
                                   ("--llm-url", "http://127.0.0.1:9/v1")])
def test_the_settings_follow_the_model_whatever_flags_chose_it(flags):
    args = args_of(*flags)
    embedded = reply_settings(args, model=Embedded())
    assert (embedded.recent_exchanges, embedded.tell_date) == (0, False)
    other = reply_settings(args, model=ScriptedChatModel())
    assert (other.recent_exchanges, other.tell_date) == (None, True)


@pytest.mark.parametrize(("chosen", "exchanges"), [("3", 3), ("all", None), ("0", 0)])
def test_model_exchanges_chosen_by_flag_still_override(chosen, exchanges):
    for model in (Embedded(), ScriptedChatModel()):
        settings = reply_settings(args_of("--model-exchanges", chosen), model=model)
        assert settings.recent_exchanges == exchanges
    assert not reply_settings(args_of("--model-exchanges", "all"), model=Embedded()).tell_date


def system_and_history(model: ScriptedChatModel) -> tuple[str, list[str]]:
    last = model.prompts[-1]
    return last[0].content, [m.content for m in last[1:]]


def test_chat_with_the_embedded_model_named_by_llm_model_gets_its_prompt_settings(
        monkeypatch, capsys):
    model = Embedded()
    model.enqueue("Paris.", "Berlin.")
    chat_through_main(monkeypatch, capsys, model, "capital of France?\ncapital of Germany?\n",
                      "--llm-model", str(default_llm()), "--no-local-intents")
    system, history = system_and_history(model)
    assert "Today is" not in system
    assert history == ["capital of Germany?"]  # no earlier exchange word for word


def test_chat_with_another_model_and_no_model_flags_tells_the_date_and_shows_exchanges(
        monkeypatch, capsys):
    model = ScriptedChatModel()
    model.enqueue("Paris.", "Berlin.")
    chat_through_main(monkeypatch, capsys, model, "capital of France?\ncapital of Germany?\n",
                      "--no-local-intents")
    system, history = system_and_history(model)
    assert "Today is" in system
    assert history == ["capital of France?", "Paris.", "capital of Germany?"]

