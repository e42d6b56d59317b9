"""The real embedded SmolLM2 model through the real `parley` command."""

import os
from dataclasses import replace

import pytest

from tests.support.nodisk import run_parley, written_outside

pytestmark = pytest.mark.real


def test_piped_chat_with_the_embedded_model_writes_nothing_to_disk(tmp_path):
    # Short answers: the proof is the trace and a reply to each line, not their length.
    result = run_parley(
        tmp_path, b"What is the capital of France?\nWhat is 6 times 7?\n\xff\xfe Thanks!\n",
        "--ctx", "2048", "--answer-tokens", "64", trace=True)
    assert result.returncode == 0, result.stderr.decode()
    lines = [line for line in result.stdout.decode().splitlines() if line.strip()]
    # One reply for each message, in order: the model's, the local (one-line) answer, and
    # one to the line whose broken bytes were replaced rather than fatal.
    paris = next(i for i, line in enumerate(lines) if "Paris" in line)
    answer = next(i for i, line in enumerate(lines) if i > paris and "42" in line)
    assert len(lines) > answer + 1, lines
    assert written_outside(tmp_path) == []


def test_corrupt_model_file_is_one_clear_line_and_exit_2(tmp_path):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 100)
    result = run_parley(tmp_path, b"hi\n", "--llm-model", str(bad))
    assert result.returncode == 2
    err = result.stderr.decode().strip().splitlines()
    assert len(err) == 1 and str(bad) in err[0] and "--llm-model" in err[0]


def test_real_model_counts_tokens_and_reuses_prompt_prefix():
    from models.base import PromptMessage
    from models.embedded import default_llm
    from models.llama import LlamaChatModel

    model = LlamaChatModel(default_llm(), context_size=2048)
    assert model.count_tokens(PromptMessage("user", "hello there")) > 2
    history = [PromptMessage("system", "You are Parley."),
               PromptMessage("user", "Name a colour.")]
    first = list(model.stream(history, [], 16))
    answer = "".join(c.text for c in first if hasattr(c, "text"))
    history += [PromptMessage("assistant", answer), PromptMessage("user", "Another one.")]
    usage = list(model.stream(history, [], 16))[-1]
    assert usage.processed_tokens < usage.prompt_tokens / 2


def test_thread_flags_reach_llama_cpp_and_defaults_leave_a_core_free():
    from assistant.cli.main import build_parser
    from assistant.cli.settings import resolve, typed
    from assistant.session.engines import load_model

    def settings(*argv: str):
        return typed(resolve(build_parser().parse_args(["chat", *argv]), environ={})).model

    model = load_model(settings("--threads", "1", "--batch-threads", "2", "--ctx", "1024"))
    assert (model._llm.n_threads, model._llm.n_threads_batch) == (1, 2)
    default = load_model(settings("--ctx", "1024"))
    cores = os.cpu_count() or 1
    # Generating on every core stalls beside any other work; reading the prompt does not.
    assert default._llm.n_threads == 1 if cores < 4 else 2 <= default._llm.n_threads < cores
    assert default._llm.n_threads_batch == min(cores, 4)


@pytest.fixture(scope="module")
def small_model():
    from models.embedded import default_llm
    from models.llama import LlamaChatModel

    return LlamaChatModel(default_llm(), context_size=512)


def test_a_prompt_beyond_the_context_is_an_engine_error(small_model):
    from models.base import PromptMessage
    from models.errors import ContextExceeded, EngineError

    with pytest.raises(ContextExceeded, match="the context holds 512") as caught:
        list(small_model.stream([PromptMessage("user", "word " * 600)], [], 16))
    assert isinstance(caught.value, EngineError)


def test_llama_cpp_failures_while_generating_are_engine_errors(small_model, monkeypatch):
    from models.base import PromptMessage
    from models.errors import EngineError

    def failing(*args, **kwargs):
        yield {"choices": [{"text": "Hel"}]}
        raise RuntimeError("llama_decode returned -3")

    monkeypatch.setattr(small_model._llm, "create_completion", failing)
    with pytest.raises(EngineError, match="failed while answering: llama_decode") as caught:
        list(small_model.stream([PromptMessage("user", "Say hello.")], [], 8))
    assert isinstance(caught.value.__cause__, RuntimeError)
    with pytest.raises(EngineError, match="failed while reading the prompt ahead"):
        small_model.prefill([PromptMessage("system", "You are Parley, a test."),
                             PromptMessage("user", "Count the stars in this sentence.")], [])



def test_a_prompt_read_ahead_stops_between_two_batches_when_parley_closes(small_model):
    from models.base import CancelToken, PromptMessage

    messages = [PromptMessage("system", "You are Parley, a test."),
                PromptMessage("user", " ".join(f"Stone number {n} is grey." for n in range(60)))]
    closing = CancelToken()
    closing.cancel()
    assert small_model.prefill(messages, [], closing) == 0  # not one batch read
    read = small_model.prefill(messages, [])
    assert read > 64  # read whole when not stopped: several of llama.cpp's batches
    assert small_model.prefill(messages, []) == 0  # and kept


# What Qwen2.5's and Llama 3.1's templates do with tools: print each call's arguments with
# `tojson` (a JSON string would come out quoted), and the tool's name on its result.
TOOL_TEMPLATE = """\
{% if tools %}<tools>{% for tool in tools %}{{ tool | tojson }}{% endfor %}</tools>{% endif %}
{% for message in messages %}
{% if message.tool_calls %}{% for call in message.tool_calls %}
<call>{"name": "{{ call.function.name }}", "arguments": {{ call.function.arguments | tojson }}}\
</call>{{ message.content }}
{% endfor %}
{% elif message.role == "tool" %}<result of="{{ message.name }}">{{ message.content }}</result>
{% else %}<{{ message.role }}>{{ message.content }}
{% endif %}
{% endfor %}
"""


def test_templates_that_know_tools_get_calls_and_results_they_can_print(small_model,
                                                                        monkeypatch):
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    from models.base import PromptMessage, ToolSpec
    from models.llama import reads_tools

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    assert reads_tools(env, TOOL_TEMPLATE)
    monkeypatch.setattr(small_model, "_template", env.from_string(TOOL_TEMPLATE))
    monkeypatch.setattr(small_model, "capabilities",
                        replace(small_model.capabilities, native_tools=True))
    text = small_model._render(
        [PromptMessage("user", "What time is it?"),
         PromptMessage("tool", "12:00", "clock", {"zone": "UTC"})],
        [ToolSpec("clock", "Tells the time.", {"type": "object"})], True)
    assert '<call>{"name": "clock", "arguments": {"zone": "UTC"}}</call>\n' in text
    assert '<result of="clock">12:00</result>' in text
    assert '"name": "clock"' in text.split("</tools>")[0]


def test_the_embedded_model_declares_what_it_can_do_and_its_habits(small_model):
    from models.base import ModelCapabilities

    assert small_model.capabilities == ModelCapabilities(
        native_tools=False, prefill=True, keeps_prompt_aside=True,
        repeats_answers_it_sees=True, confused_by_the_date=True)


def test_the_embedded_model_file_named_by_llm_model_gets_its_prompt_settings():
    from assistant.cli.main import build_parser
    from assistant.cli.settings import resolve, typed
    from assistant.session.engines import load_model, reply_settings
    from models.embedded import default_llm

    args = resolve(build_parser().parse_args(
        ["chat", "--llm-model", str(default_llm()), "--ctx", "1024", "--answer-tokens", "256"]),
        environ={})
    chosen = typed(args).model
    settings = reply_settings(chosen, model=load_model(chosen))
    assert (settings.recent_exchanges, settings.tell_date) == (0, False)
