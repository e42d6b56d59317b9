"""The local chat model: a GGUF through llama-cpp-python, with its own tokenizer and template."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from models.base import (
    CancelToken,
    ChatModel,
    Chunk,
    ModelCapabilities,
    PromptMessage,
    TextChunk,
    ToolSpec,
    UsageChunk,
)
from models.embedded import is_embedded_llm
from models.errors import ContextExceeded, EngineError
from models.interrupts import interrupts_kept
from models.openai_format import openai_messages, tool_schemas
from models.toolcalls import ToolCallScanner, describe_tools, render_call

log = logging.getLogger(__name__)

# A system message used only to measure what one more message costs, so that
# templates which add a default system prompt do not skew the count.
_PROBE = PromptMessage("system", "x")


class ModelLoadError(EngineError):
    """The model file is missing or is not a model llama.cpp can load."""


@dataclass(frozen=True)
class Sampling:
    """How the next token is drawn (llama.cpp's samplers)."""

    temperature: float = 0.3
    repeat_penalty: float = 1.15
    """Over the last 64 tokens only: it cannot see an earlier reply."""
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    top_p: float = 0.95
    min_p: float = 0.05
    top_k: int = 40


KEY_CACHE_TYPES = {"f16": 1, "q8_0": 8}
"""ggml's type numbers (GGML_TYPE_F16, GGML_TYPE_Q8_0), as llama.cpp takes them."""


PROMPT_BATCH = 64
"""Prompt tokens llama.cpp reads in one pass. Its attention scratch grows with this times
the tokens already cached, and stays resident: a 7,000-token prompt (a long summary) left
SmolLM2 242 MB larger with 512 a pass, 32 MB larger with 64, and 64 read prompts as fast
or faster (1,086 against 900 tokens/s at 500 tokens; 267 against 220 at 7,000). At 32 it
slowed (859 tokens/s at 500)."""

ASIDE_STATE_BYTES = 64 * 1024 * 1024
"""The largest processed prompt kept aside while a summary is written between turns.
SmolLM2 takes 18 KB a token (a 670-token prompt: 12 MB, saved or restored in about
50 ms); a bigger one (a long prompt, a bigger model) is read again instead of being held
twice in memory."""


class LlamaChatModel(ChatModel):
    """A GGUF chat model; reuses the previous prompt's common prefix between calls."""

    def __init__(
        self,
        path: Path,
        context_size: int = 8192,
        threads: int | None = None,
        batch_size: int = PROMPT_BATCH,
        batch_threads: int | None = None,
        seed: int = 7,
        sampling: Sampling | None = None,
        key_cache: str = "q8_0",
        mmap: bool = False,
    ) -> None:
        """`key_cache`: the type of the cached attention keys, "q8_0" or "f16". q8_0 halves
        their memory (44 MB of SmolLM2's 8,192-token cache) and measured no slower; the
        values stay f16, since a quantized value cache needs flash attention, which read
        prompts at half the speed on this CPU. `mmap`: map the file rather than read it.
        Where llama.cpp repacks the weights for the CPU (AMX, for one) a mapped file stays
        resident beside the repacked copy: reading it saved 67 MB."""
        path = Path(path)
        if key_cache not in KEY_CACHE_TYPES:
            raise ModelLoadError(f"unknown key cache type {key_cache!r}; use one of "
                                 f"{', '.join(KEY_CACHE_TYPES)}")
        if not path.is_file():
            raise ModelLoadError(f"no model file at {path}")
        try:
            from llama_cpp import Llama
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ModelLoadError(f"llama-cpp-python is not installed ({exc})") from exc
        _silence_llama_log()
        failure = None
        previous_hook = sys.unraisablehook
        sys.unraisablehook = _ignore_llama_teardown(previous_hook)
        with interrupts_kept():  # a Ctrl-C in llama.cpp's log callback is not lost
            try:
                self._llm = Llama(
                    str(path),
                    n_ctx=context_size,
                    n_threads=threads or default_threads(),
                    n_threads_batch=batch_threads or default_batch_threads(),
                    n_batch=batch_size,
                    seed=seed,
                    type_k=KEY_CACHE_TYPES[key_cache],
                    use_mmap=mmap,
                    verbose=False,
                )
            except (ValueError, RuntimeError) as exc:
                failure = str(exc)
            finally:
                sys.unraisablehook = previous_hook
        if failure is not None:
            raise ModelLoadError(f"{path} is not a GGUF model llama.cpp can load ({failure})")
        self.name = path.name
        self.context_size = context_size
        self.sampling = sampling or Sampling()
        self.seed = seed
        """Every generation starts its sampler from this seed: the same prompt gets the same
        answer, however many generations came before (llama-cpp-python otherwise draws each
        call's seed from the previous one, so one prompt read ahead more or less, or one
        summary between turns, changed every later answer)."""
        template = self._llm.metadata.get("tokenizer.chat_template")
        if not template:
            raise ModelLoadError(f"{path} has no chat template in its metadata")
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        self._template = env.from_string(template)
        self.capabilities = llama_capabilities(reads_tools(env, template),
                                               is_embedded_llm(path, self._llm.metadata))
        self._bos = self._token_text(self._llm.token_bos())
        self._eos = self._token_text(self._llm.token_eos())
        self._counts: dict[tuple, int] = {}
        self._overheads: dict[tuple, int] = {}
        self._probe_tokens = self._tokens(self._render([_PROBE], (), False))

    def _token_text(self, token: int) -> str:
        if token < 0:
            return ""
        return self._llm.detokenize([token]).decode("utf-8", "replace")

    def _as_template_messages(self, messages: Sequence[PromptMessage]) -> list[dict]:
        if self.capabilities.native_tools:
            return openai_messages(messages, arguments_as_text=False, call_content="",
                                   result_names=True)
        out: list[dict] = []
        for message in messages:
            if message.role != "tool":
                out.append({"role": message.role, "content": message.content})
            else:
                call_text = render_call(message.tool_name or "", message.tool_arguments)
                out.append({"role": "assistant", "content": call_text})
                out.append({"role": "user",
                            "content": f"Result of {message.tool_name}:\n{message.content}"})
        return out

    def _render(
        self, messages: Sequence[PromptMessage], tools: Sequence[ToolSpec], generation: bool
    ) -> str:
        items = self._as_template_messages(messages)
        extra: dict = {}
        if tools and self.capabilities.native_tools:
            extra["tools"] = tool_schemas(tools)
        elif tools and items and items[0]["role"] == "system":
            items[0] = {"role": "system",
                        "content": items[0]["content"] + "\n\n" + describe_tools(tools)}
        return self._template.render(
            messages=items, add_generation_prompt=generation, bos_token=self._bos,
            eos_token=self._eos, **extra)

    def _tokens(self, text: str) -> list[int]:
        return self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)

    def count_tokens(self, message: PromptMessage) -> int:
        key = (message.role, message.content, message.tool_name,
               json.dumps(message.tool_arguments, sort_keys=True))
        if key not in self._counts:
            rendered = self._render([_PROBE, message], (), False)
            self._counts[key] = max(1, len(self._tokens(rendered)) - len(self._probe_tokens))
        return self._counts[key]

    def overhead_tokens(self, tools: Sequence[ToolSpec]) -> int:
        key = tuple(json.dumps([t.name, t.description, t.parameters]) for t in tools)
        if key not in self._overheads:
            with_tools = len(self._tokens(self._render([_PROBE], tools, True)))
            self._overheads[key] = with_tools - len(self._probe_tokens) + 1
        return self._overheads[key]

    def prompt_tokens(
        self, messages: Sequence[PromptMessage], tools: Sequence[ToolSpec]
    ) -> list[int]:
        return self._tokens(self._render(messages, tools, True))

    def stream(
        self,
        messages: Sequence[PromptMessage],
        tools: Sequence[ToolSpec],
        max_tokens: int,
        cancel: CancelToken | None = None,
    ) -> Iterator[Chunk]:
        tokens = self.prompt_tokens(messages, tools)
        room = self.context_size - len(tokens)
        if room <= 0:
            raise ContextExceeded(f"the prompt has {len(tokens)} tokens; the context holds "
                                f"{self.context_size}")
        cached = self._cached_prefix(tokens)
        if cancel is not None and not self._read_prompt(tokens, cached, cancel):
            yield UsageChunk(len(tokens), self._llm.n_tokens - cached, 0)
            return
        scanner = ToolCallScanner(tools=tools)
        completion = 0
        pieces = self._llm.create_completion(
            tokens, max_tokens=min(max_tokens, room), stream=True,
            stop=[self._eos] if self._eos else None, seed=self.seed,
            **dataclasses.asdict(self.sampling))
        try:
            for piece in self._generated(pieces, "while answering"):
                completion += 1
                yield from scanner.feed(piece["choices"][0]["text"])
                if cancel is not None and cancel.cancelled:
                    break
        finally:
            pieces.close()
        yield from scanner.finish()
        yield UsageChunk(len(tokens), len(tokens) - cached, completion)

    @contextmanager
    def aside(self) -> Iterator[None]:
        # The summary's request takes llama.cpp's one cache: without this, a reply after a
        # summary the user cut short read its whole prompt again (2.4 s on two busy cores).
        import llama_cpp

        llm, state = self._llm, None
        try:
            if llm.n_tokens and llama_cpp.llama_state_get_size(llm.ctx) <= ASIDE_STATE_BYTES:
                state = llm.save_state()
        except Exception:  # only an optimisation: the prompt is read again if needed
            log.debug("keeping the processed prompt aside failed", exc_info=True)
        try:
            yield
        finally:
            if state is not None:
                try:
                    llm.load_state(state)
                except Exception:  # the cache may be half restored: read it all again
                    log.debug("restoring the processed prompt failed", exc_info=True)
                    llm.reset()

    def _read_prompt(self, tokens: list[int], cached: int, cancel: CancelToken) -> bool:
        """Evaluate the prompt after its cached prefix one batch at a time, so that a cancel
        stops it between two batches; False if cancelled. create_completion reads a whole
        prompt in one call, and a summary's request of 1,500 tokens is seconds of it: the
        user who speaks meanwhile must not wait for that. The last, partial batch is left
        to create_completion, so the batches (and the numbers) are exactly as before."""
        llm = self._llm
        end = cached + (len(tokens) - 1 - cached) // llm.n_batch * llm.n_batch
        if end > cached:
            llm.n_tokens = cached  # what follows the common prefix is the old prompt's
        for start in range(cached, end, llm.n_batch):
            if cancel.cancelled:
                return False
            try:
                llm.eval(tokens[start:start + llm.n_batch])
            except (RuntimeError, ValueError) as exc:
                raise EngineError(f"the language model {self.name} failed while reading the "
                                  f"prompt: {exc}") from exc
        return not cancel.cancelled

    def prefill(self, messages: Sequence[PromptMessage], tools: Sequence[ToolSpec],
                stop: CancelToken | None = None) -> int:
        # Without the generation prompt: the beginning the next prompt (one message more) shares.
        tokens = self._tokens(self._render(messages, tools, False))
        if not tokens or len(tokens) >= self.context_size:
            return 0
        cached = self._cached_prefix(tokens)
        if cached >= len(tokens) - 1:
            return 0
        # A batch at a time (the same batches as a reply's): closing need not wait for all.
        if not self._read_prompt(tokens, cached, stop or CancelToken()):
            return self._llm.n_tokens - cached
        # One generated token is the cheapest way through llama-cpp-python's public API to
        # evaluate a prompt; the next call's prefix match simply ignores it.
        pieces = self._llm.create_completion(tokens, max_tokens=1, temperature=0.0, stream=True,
                                             seed=self.seed)
        for _ in self._generated(pieces, "while reading the prompt ahead"):
            pass
        return len(tokens) - cached

    def _generated(self, pieces: Iterator[dict], doing: str) -> Iterator[dict]:
        """`pieces` from create_completion, with llama-cpp-python's failures (RuntimeError
        from llama_decode, ValueError for a prompt beyond the context) as EngineError."""
        while True:
            try:
                piece = next(pieces)
            except StopIteration:
                return
            except (RuntimeError, ValueError) as exc:
                raise EngineError(f"the language model {self.name} failed {doing}: "
                                  f"{exc}") from exc
            yield piece

    def _cached_prefix(self, tokens: list[int]) -> int:
        previous = self._llm._input_ids[: self._llm.n_tokens]
        same = 0
        for a, b in zip(previous, tokens, strict=False):
            if a != b:
                break
            same += 1
        # llama.cpp always evaluates the last prompt token again.
        return min(same, len(tokens) - 1)


def reads_tools(env, template: str) -> bool:
    """Whether a chat template reads the `tools` variable: it then renders tool descriptions
    and calls itself (a word "tools" in its text, a comment say, is not enough)."""
    from jinja2 import meta

    return "tools" in meta.find_undeclared_variables(env.parse(template))


def llama_capabilities(native_tools: bool, embedded: bool) -> ModelCapabilities:
    """A GGUF's capabilities: llama.cpp reads prompts ahead and keeps them aside for any
    model; the embedded SmolLM2-135M's known habits are its own."""
    return ModelCapabilities(native_tools=native_tools, prefill=True, keeps_prompt_aside=True,
                             repeats_answers_it_sees=embedded, confused_by_the_date=embedded)


_LOG_CALLBACK = None


def _ignore_llama_teardown(fallback):
    """A failed load runs llama-cpp-python's __del__ on a half-built model, which raises;
    that noise would bury the one line that tells the user what to do."""

    def hook(unraisable) -> None:
        if unraisable.exc_type is KeyboardInterrupt:
            return  # Ctrl-C in a callback: interrupts_kept() raises it once the load returns
        module = getattr(type(unraisable.object), "__module__", "") or ""
        owner = getattr(unraisable.object, "__module__", "") or ""
        if not (module.startswith("llama_cpp") or owner.startswith("llama_cpp")):
            fallback(unraisable)

    return hook


def _silence_llama_log() -> None:
    """llama.cpp logs to stderr even when not verbose; Parley's terminal is the user's."""
    global _LOG_CALLBACK
    if _LOG_CALLBACK is None:
        import ctypes

        import llama_cpp

        @llama_cpp.llama_log_callback
        def quiet(level, text, user_data):  # noqa: ARG001 - ctypes signature
            return None

        _LOG_CALLBACK = quiet
        llama_cpp.llama_log_set(quiet, ctypes.c_void_p(0))


def default_threads() -> int:
    """Generation threads: half the cores, at most 4 (1 on a 2-core machine).

    llama.cpp's threads wait for each other at every layer by spinning (OpenMP). With as
    many threads as cores, anything else running (Whisper, Piper, the sound server, a
    browser) leaves one of them waiting for a core at every step: on 2 cores SmolLM2 went
    from 88 to 24 tokens/s beside one busy process with 2 threads, while 1 thread kept 62.
    """
    return max(1, min(4, (os.cpu_count() or 1) // 2))


def default_batch_threads() -> int:
    """Prompt-processing threads: every core, at most 4. Large batches do enough work
    between waits that contention costs little (2 threads: 198 tokens/s alone, 101 beside a
    busy process, against 109 and 112 with 1)."""
    return max(1, min(4, os.cpu_count() or 1))


__all__ = [
    "LlamaChatModel",
    "ModelLoadError",
    "TextChunk",
    "default_batch_threads",
    "default_threads",
]
