"""The one core: a turn as straight-line code over stages, events through a callback."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from functools import partial

from assistant import history_tool
from assistant.confirmation import Approve
from assistant.events import (
    Error,
    Event,
    ReplyDone,
    Sentence,
    Stage,
    TextDelta,
    ToolCall,
    ToolResult,
)
from assistant.guarded_answer import GuardedAnswer, prompt_text
from assistant.local.answers import LocalAnswer, LocalIntents
from assistant.model_reply import ModelReply
from assistant.prompt import NEXT_MESSAGE_TOKENS, PromptBuilder
from assistant.reply_settings import ReplySettings
from assistant.sentences import split_sentences
from assistant.summarizer import Summarizer
from assistant.tool_offers import offered_for
from assistant.tools import Failure, ToolOutput, ToolRegistry, failed
from memory.conversation_state import ConversationState
from memory.fitting import CurrentMessageTooLong
from memory.history import History, Message
from memory.search import HistorySearch, SearchIndexCache
from memory.summary import RunningSummary
from models.base import CancelToken, ChatModel, ToolCallChunk, ToolSpec
from models.errors import EngineError

log = logging.getLogger(__name__)


def internal_error(exc: Exception) -> Error:
    return Error(Stage.INTERNAL, (
        f"Something went wrong inside Parley ({type(exc).__name__}: {exc}). The "
        "conversation is kept; try again. `--debug` shows the details."))


class Conversation:
    """One conversation with one model; `reply()` is shared by chat, voice and replay."""

    def __init__(
        self,
        model: ChatModel,
        tools: ToolRegistry | None = None,
        settings: ReplySettings | None = None,
        clock: Callable[[], float] = time.monotonic,
        local: LocalIntents | None = None,
        state: ConversationState | None = None,
    ) -> None:
        self.model = model
        self.local = local
        """Everyday requests answered before the model (None: the model answers all)."""
        self.tools = tools or ToolRegistry()
        self.settings = settings or ReplySettings()
        self.state = state if state is not None else ConversationState()
        """The history and summary, with the listener that saves them (`assistant.saved`)."""
        self.clock = clock
        self._search_cache = SearchIndexCache()

    @property
    def history(self) -> History:
        return self.state.history

    @property
    def summary(self) -> RunningSummary:
        """The running summary; it changes through `state.set_summary`."""
        return self.state.summary

    @property
    def prompts(self) -> PromptBuilder:
        """The prompt builder for this conversation's settings."""
        return PromptBuilder(self.model, self.settings.system_prompt,
                             self.settings.answer_tokens, self.settings.recall_hints,
                             self._search_cache, self.settings.recent_exchanges,
                             self.history.now, self.settings.tell_date)

    @property
    def summarizer(self) -> Summarizer:
        """What writes the running summary, with this conversation's model and settings."""
        return Summarizer(self.model, self.state, self.prompts, self.settings.summary_seconds,
                          self.clock)

    def fork(self, tools: ToolRegistry | None = None) -> Conversation:
        """A scratch copy to answer in (a speculative reply): the same model, settings and
        local intents, its own history and summary (saved by nothing until it is confirmed
        or adopted), `tools` if given."""
        twin = Conversation(self.model, tools or self.tools, self.settings, self.clock,
                            self.local, self.state.fork())
        twin._search_cache = self._search_cache  # a cache of immutable messages: shareable
        return twin

    def confirm_fork(self, twin: Conversation) -> None:
        """A fork's reply is this conversation's now, though adopted only once it is done:
        a saved conversation saves the fork's messages from here."""
        self.state.confirm(twin.state)

    def adopt(self, twin: Conversation, forked_from: tuple[Message, ...]) -> bool:
        """Take a fork's history and summary as this conversation's own (saving what it
        added); False (nothing taken) if this conversation changed since `forked_from` (a
        /clear meanwhile)."""
        return self.state.adopt(twin.state, forked_from)

    def clear(self) -> None:
        """Forget the whole conversation, its summary included."""
        self.state.clear()
        self._search_cache = SearchIndexCache()

    def summarize_ahead(self, emit: Callable[[Event], None], cancel: CancelToken) -> bool:
        """Between turns: write the summary the coming turns will need (`Summarizer.ahead`);
        False when cancelled."""
        return self.summarizer.ahead(self._idle_specs(), emit, cancel)

    def reply(
        self,
        text: str,
        emit: Callable[[Event], None],
        cancel: CancelToken | None = None,
        first_clause_words: int = 0,
        local_first: bool = True,
        approve: Approve | None = None,
    ) -> ReplyDone | None:
        """Answer `text`, emitting events; returns the final event, or None for an error.

        `first_clause_words` lets the first `Sentence` end at a comma once it has that
        many words (voice speaks it while the rest is written). `local_first=False`: the
        local intents were tried already (`reply_locally`); the model answers. `approve`
        answers the question of a tool that asks first (without it, such a tool refuses).
        """
        cancel = cancel or CancelToken()
        text = text.strip()
        if not text:
            return None
        started = self.clock()
        local = self._local_answer(text) if local_first else None
        if local is not None:
            return self._answer_locally(text, local, emit, first_clause_words)
        turn = self._begin(text, emit, cancel, first_clause_words, started, approve)
        try:
            if not self._summarize_before(turn):
                return self._undo(turn, ReplyDone("", cancelled=True))
            turn.research()
        except CurrentMessageTooLong as exc:
            return self._undo(turn, Error(Stage.PROMPT, (
                f"That message is too long for the model's context: it needs about "
                f"{exc.needed:,} tokens and {exc.room:,} are free. Shorten it or start "
                "Parley with a larger --ctx. It was not added to the conversation.")))
        except EngineError as exc:  # the engine failed: keep everything said before
            log.debug("the model failed", exc_info=True)
            return self._undo(turn, Error(Stage.MODEL, f"The model failed to answer ({exc}). "
                                                       "The conversation is kept; try again."))
        except Exception as exc:  # a bug in Parley: say so, log it, keep the conversation
            log.exception("the reply to message #%d failed", turn.user.seq)
            return self._undo(turn, internal_error(exc))
        return self._finish(turn)

    def _begin(self, text: str, emit: Callable[[Event], None], cancel: CancelToken,
               first_clause_words: int, started: float, approve: Approve | None) -> ModelReply:
        """The user's message joins the history (so a saved conversation has it before the
        model runs), with the tools its reply is offered."""
        user = self.history.add("user", text)
        tools = self._tools_over(self.history.messages[:-1], text)
        shown = GuardedAnswer(emit, prompt_text(self.settings.system_prompt, tools.specs()),
                              cancel, first_clause_words, self.settings.guard_replies)
        return ModelReply(self.model, self.prompts, self.state, user, tools, shown, emit,
                          cancel, partial(self._run_tool, approve=approve), self.clock,
                          self.settings.max_tool_calls, self.settings.answer_tokens, started)

    def _summarize_before(self, turn: ModelReply) -> bool:
        """The summary the reply needs, unless it is written between turns (then the reply
        goes on with the last one written); False if cancelled."""
        if self.settings.idle_summaries:
            return True
        specs = turn.tools.specs() if self.settings.max_tool_calls else []
        return self.summarizer.before_reply(turn.user.seq, specs, turn.emit, turn.cancel)

    def _undo(self, turn: ModelReply, event: ReplyDone | Error) -> ReplyDone | None:
        """The reply ends without an answer: the user's message leaves the history."""
        self.history.remove_from(turn.user.seq)
        turn.emit(event)
        return event if isinstance(event, ReplyDone) else None

    def _finish(self, turn: ModelReply) -> ReplyDone:
        """The answer joins the history (a reply cancelled before any text is forgotten)."""
        cancelled = turn.cancel.cancelled
        answer = turn.shown.finish(cancelled)
        if answer:
            self.history.add("assistant", answer)
        elif cancelled:
            self.history.remove_from(turn.user.seq)
        self._keep_limit()
        usage = turn.usage
        done = ReplyDone(answer, cancelled, usage.prompt_tokens, usage.processed_tokens,
                         usage.completion_tokens)
        log.debug("reply to #%d done in %.0f ms (%d tool calls%s)", turn.user.seq,
                  (self.clock() - turn.started) * 1000, turn.calls,
                  ", cancelled" if cancelled else "")
        turn.emit(done)
        return done

    def reply_locally(self, text: str, emit: Callable[[Event], None]
                      ) -> tuple[bool, ReplyDone | None]:
        """Answer `text` if a local intent matches it, without the model: (True, the final
        event, or None for an error). (False, None), with nothing emitted or added to the
        conversation, if none matches: `reply(local_first=False)` is then for the model."""
        text = text.strip()
        local = self._local_answer(text) if text else None
        if local is None:
            return False, None
        return True, self._answer_locally(text, local, emit, 0)

    def _local_answer(self, text: str) -> LocalAnswer | None:
        if self.local is None:
            return None
        started = self.clock()
        last = next((m.content for m in reversed(self.history.messages)
                     if m.role == "assistant"), None)
        answer = self.local.answer(text, last, self.tools.names())
        log.debug("local intents: %s in %.1f ms", answer.intent if answer else "no match",
                  (self.clock() - started) * 1000)
        return answer

    def _answer_locally(self, text: str, local: LocalAnswer, emit: Callable[[Event], None],
                        first_clause_words: int) -> ReplyDone | None:
        """A request a template matched: its tool runs and its answer is said, no model.

        The history gets what a model's turn would leave: the message, the tool call with
        its result, the answer.
        """
        if local.stop:  # "never mind": nothing to answer, nothing worth keeping
            done = ReplyDone("")
            emit(done)
            return done
        tools = self._tools_over(self.history.messages)
        user = self.history.add("user", text)
        said = local.said
        try:
            if local.tool == history_tool.NAME and local.tool not in tools.names():
                # Nothing earlier to look back on (so no such tool): no search, nothing found.
                said = local.speak(ToolOutput("", ()))
            elif local.tool is not None:
                output = self._run_tool(tools, ToolCallChunk(local.tool, local.arguments), emit)
                said = local.speak(output)
        except Exception as exc:  # a bug in Parley: say so, log it, keep the conversation
            log.exception("the local answer to message #%d failed", user.seq)
            self.history.remove_from(user.seq)
            emit(internal_error(exc))
            return None
        emit(TextDelta(said))
        for sentence in split_sentences(said, first_clause_words):
            emit(Sentence(sentence))
        self.history.add("assistant", said)
        self._keep_limit()
        done = ReplyDone(said)
        emit(done)
        return done

    def _keep_limit(self) -> None:
        if self.settings.max_messages is not None:
            self.history.keep_last(self.settings.max_messages)
            self._search_cache.forget_missing(self.history.messages)

    def prepare_next(self, stop: CancelToken | None = None) -> int:
        """Process the next reply's prompt beginning now, while the user is talking.

        It is the prompt the next reply builds, without the message not yet said (room is
        kept for it): llama.cpp then reuses it, and the reply only processes the user's
        new message. Returns the tokens processed: 0 for a model that cannot read a prompt
        ahead (`ModelCapabilities.prefill`), which is then not asked to. `stop` cancelled
        (Parley is closing) ends it between two of the model's steps.
        """
        if not self.model.capabilities.prefill:
            log.debug("the model %s cannot read a prompt ahead: nothing prepared",
                      self.model.name)
            return 0
        specs = self._idle_specs()
        started = self.clock()
        try:
            prompt = self.prompts.build(self.history.messages, self.summary,
                                        self.history.next_seq, specs,
                                        reserve=NEXT_MESSAGE_TOKENS, recall=False)
            processed = self.model.prefill(prompt.messages, specs, stop)
        except (CurrentMessageTooLong, EngineError):  # only an optimisation: the reply does it
            log.debug("preparing the next prompt failed", exc_info=True)
            return 0
        except Exception:  # a bug, but one that must not stop a conversation
            log.exception("preparing the next prompt failed")
            return 0
        log.debug("prepared the next prompt: %d tokens processed in %.0f ms", processed,
                  (self.clock() - started) * 1000)
        return processed

    def _idle_specs(self) -> list[ToolSpec]:
        """The tools the next reply is offered, as far as is known before its message."""
        if not self.settings.max_tool_calls:
            return []
        return self._tools_over(self.history.messages, "").specs()

    def _tools_over(self, earlier: tuple[Message, ...], request: str | None = None
                    ) -> ToolRegistry:
        """The tools of a reply that follows `earlier`: those `request` could need (all
        without one: a local answer's), and conversation_history once there is something
        to look back on (its own results only repeat other messages).

        Only a model that reads tools natively is offered fewer: a small one (Qwen2.5-
        Coder-0.5B) called a timer for "how do I read a container's logs". A model told
        its tools in the system prompt (the embedded one, which rarely calls any) keeps
        them all: offered per request, they would change the prompt's beginning, and a
        reply would read its whole prompt again instead of the part prepared ahead (a
        request with "one" or "now" in it: 309 tokens instead of 30)."""
        if request is None:
            tools = self.tools
        else:
            tools = offered_for(request, self.tools, self.model.capabilities.native_tools)
        earlier_said = [m for m in earlier if m.tool != history_tool.NAME]
        if not earlier_said:
            return tools
        return tools.with_tool(history_tool.history_tool(
            HistorySearch(earlier_said, self._search_cache)))

    def note_heard(self, heard: str) -> None:
        """The last reply was spoken and the user cut it short: keep it, saying what they heard.

        The model then knows which part of its answer the user actually got.
        """
        last = self.history.messages[-1] if len(self.history) else None
        if last is None or last.role != "assistant":
            return
        heard = heard.strip()
        note = (f"[Spoken aloud; the user interrupted after hearing: “{heard}”]" if heard
                else "[Spoken aloud; the user interrupted before hearing any of it]")
        self.history.replace_content(last.seq, f"{last.content}\n{note}")

    def _run_tool(self, tools: ToolRegistry, call: ToolCallChunk,
                  emit: Callable[[Event], None], approve: Approve | None = None) -> ToolOutput:
        """Run `call`; its text goes to the history (what the model reads), its output
        (with the value a local answer is made from) is returned."""
        started = self.clock()
        name = call.name
        if call.error:
            output = failed(Failure.UNREADABLE_CALL, f"{call.error}. Try again.")
        else:
            emit(ToolCall(name, call.arguments, tools.label(name, call.arguments)))
            output = tools.call(name, call.arguments, approve)
        emit(ToolResult(name or "tool", output.text, output.is_error))
        log.debug("tool %s ran in %.1f ms%s", name or "?", (self.clock() - started) * 1000,
                  " (error)" if output.is_error else "")
        query = " ".join(str(v) for v in call.arguments.values())[:200]
        self.history.add("tool", output.text, tool=name or "tool", query=query,
                         arguments=call.arguments)
        return output
