"""The MCP servers Parley is connected to, each in the background on one event loop.

Parley's replies are threads; the `mcp` SDK is asynchronous. The hub runs one asyncio
loop on a thread of its own, with a task per server that starts it, lists its tools and
then holds the connection open (the SDK's contexts must be entered and left by the same
task). A call from a reply is sent to that loop and waited for with the server's
timeout. A server that fails to start, hangs or dies is one line (`warn`), its tools are
withdrawn (`on_tools(name, None)`), and it stays stopped until `restart_failed()`: never
restarted in a loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from assistant.mcp_client.config import ServerConfig
from assistant.mcp_client.transport import transport_for

log = logging.getLogger(__name__)

REQUEST_TIMEOUT = -32001
"""The MCP SDK's error code for a request it stopped waiting for."""
START_GRACE_S = 2.0
"""Added to a call's wait beyond the server's own timeout, for the SDK to say so first."""
WATCH_S = 10.0
"""How often an idle server is asked for its tools, so that one that has gone (exited,
crashed, hung) has its tools withdrawn before the model is offered them again."""
STOP_GRACE_S = 5.0
"""How long a cancelled server has to end its process: the SDK gives a stdio server 2 s
after closing its input, then terminates it, then kills it."""


class Status(Enum):
    STARTING = "starting"
    READY = "ready"
    FAILED = "failed"
    DISABLED = "disabled"


class CallFailed(Exception):
    """A call that got no answer: the server is gone, hung or broke the protocol. The
    message is a sentence for the user and the model."""


@dataclass
class ServerState:
    config: ServerConfig
    status: Status = Status.STARTING
    tools: list[Any] = field(default_factory=list)
    """The `mcp.types.Tool`s it listed (all of them; the config picks what is used)."""
    problem: str = ""
    """Why it failed, for `parley tools` and `/tools`."""
    client: Any = None
    stop: asyncio.Event | None = None
    task: asyncio.Task | None = None
    generation: int = 0
    """Counts its starts, so a late report of an old run changes nothing."""
    settled: bool = False
    """Its start is over and said: its tools offered, or its failure's line written."""
    calls: int = 0
    """Calls waiting for its answer (an idle server is pinged, a busy one is not)."""


ToolsChanged = Callable[[str, "list[Any] | None"], None]
"""Told a server's listed tools when it is ready, None when they are withdrawn."""


class McpHub:
    def __init__(self, servers: list[ServerConfig], on_tools: ToolsChanged,
                 warn: Callable[[str], None], server_stderr: bool = False) -> None:
        self._states = {s.name: ServerState(s, Status.STARTING if s.enabled else Status.DISABLED,
                                            settled=not s.enabled)
                        for s in servers}
        self._on_tools = on_tools
        self._warn = warn
        self._server_stderr = server_stderr
        """Let stdio servers write to Parley's stderr (--debug); otherwise it is discarded."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._settled = threading.Condition(self._lock)
        self._closing = False

    @property
    def servers(self) -> list[ServerState]:
        return list(self._states.values())

    def start(self) -> None:
        """Start every enabled server in the background; returns at once."""
        if self._thread is not None or not any(s.config.enabled for s in self.servers):
            return
        ready = threading.Event()

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            ready.set()
            self._loop.run_forever()
            self._loop.close()

        self._thread = threading.Thread(target=run, name="mcp", daemon=True)
        self._thread.start()
        ready.wait()
        for state in self.servers:
            if state.config.enabled:
                self._launch(state)

    def wait_started(self, timeout_s: float | None = None) -> bool:
        """Wait until no server is still starting (for `parley tools` and tests)."""
        with self._settled:
            return self._settled.wait_for(lambda: all(s.settled for s in self.servers),
                                          timeout_s)

    def restart_failed(self) -> list[str]:
        """Start again the servers that failed; their names."""
        names = []
        for state in self.servers:
            if state.status is Status.FAILED:
                if self._thread is None:
                    self.start()
                with self._lock:
                    state.status, state.problem, state.settled = Status.STARTING, "", False
                self._launch(state)
                names.append(state.config.name)
        return names

    def call(self, server: str, tool: str, arguments: dict) -> Any:
        """Call a tool and wait for its `CallToolResult`; a CallFailed if the server does
        not answer in its timeout, is gone, or breaks the protocol (the server is then
        stopped and its tools withdrawn)."""
        state = self._states[server]
        if state.status is not Status.READY or self._loop is None:
            why = state.problem or state.status.value
            raise CallFailed(f"the MCP server {server!r} is not running ({why}); /tools "
                             "starts it again")
        timeout = state.config.timeout_s
        client, generation = state.client, state.generation
        with self._lock:
            state.calls += 1
        future = asyncio.run_coroutine_threadsafe(
            client.call_tool(tool, arguments, read_timeout_seconds=timeout), self._loop)
        try:
            return future.result(timeout + START_GRACE_S)
        except (TimeoutError, concurrent.futures.TimeoutError):
            future.cancel()
            problem = f"{tool} did not answer within {timeout:g} s"
        except concurrent.futures.CancelledError:
            problem = f"the call to {tool} was stopped"
        except Exception as exc:  # the SDK's errors, a closed connection, invalid results
            problem = (f"{tool} did not answer within {timeout:g} s" if _timed_out(exc)
                       else _describe(exc, tool))
            if _answered_with_error(exc):  # the server is alive and said no: not a failure
                raise CallFailed(f"{server} refused the call: {problem}") from exc
        finally:
            with self._lock:
                state.calls -= 1
        self._fail(state, generation, problem)
        raise CallFailed(f"the MCP server {server!r} failed: {problem}")

    def close(self) -> None:
        """Stop every server and the loop (servers are child processes: they end too)."""
        loop = self._loop
        if loop is None:
            return
        self._closing = True
        for state in self.servers:
            if state.stop is not None:
                loop.call_soon_threadsafe(state.stop.set)
        tasks = [s.task for s in self.servers if s.task is not None]
        # A server still starting is inside the SDK's handshake, where the stop event is
        # not heard: cancelling unwinds its transport, which ends its process.
        starting = [s.task for s in self.servers
                    if s.task is not None and s.status is not Status.READY]

        async def finish() -> None:
            for task in starting:
                task.cancel()
            if tasks:
                await asyncio.wait(tasks, timeout=5)
            late = [task for task in tasks if not task.done()]
            for task in late:
                task.cancel()
            if late:  # the cancelled tasks' clean-up ends their processes: wait for it
                await asyncio.wait(late, timeout=STOP_GRACE_S)

        try:
            asyncio.run_coroutine_threadsafe(finish(), loop).result(5 + STOP_GRACE_S + 1)
        except Exception:  # closing must not fail an exit
            log.debug("stopping the MCP servers", exc_info=True)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(5)
        self._loop = self._thread = None
        self._closing = False

    def _launch(self, state: ServerState) -> None:
        loop = self._loop
        assert loop is not None

        def begin() -> None:
            state.generation += 1
            state.stop = asyncio.Event()
            state.task = loop.create_task(self._run(state, state.generation),
                                          name=f"mcp-{state.config.name}")
            loop.call_later(state.config.timeout_s, self._start_timed_out, state,
                            state.generation)

        loop.call_soon_threadsafe(begin)

    def _start_timed_out(self, state: ServerState, generation: int) -> None:
        """A server still starting after its timeout is hung: its task is cancelled (in
        the task itself the SDK's contexts unwind and the process is stopped)."""
        if state.generation == generation and state.status is Status.STARTING:
            self._fail(state, generation,
                       f"it did not start within {state.config.timeout_s:g} s")
            if state.task is not None:
                state.task.cancel()

    async def _run(self, state: ServerState, generation: int) -> None:
        """One run of a server, all in this task (the SDK's contexts are entered and left
        by the same task): connect, list its tools, hold the connection until stopped."""
        from mcp import Client

        config = state.config
        try:
            client = Client(transport_for(config, self._server_stderr),
                            read_timeout_seconds=config.timeout_s)
            await client.__aenter__()
            try:
                tools = await _list_tools(client)
                with self._lock:
                    if state.generation != generation or state.status is not Status.STARTING:
                        return
                    state.client, state.tools, state.status = client, tools, Status.READY
                self._on_tools(config.name, tools)
                self._settle(state)  # once its tools are offered
                log.debug("MCP server %s ready with %d tools", config.name, len(tools))
                await self._hold(client, state, generation)
            finally:
                await self._leave(client, config.name)
        except asyncio.CancelledError:  # its start timed out, or Parley is closing…
            if not self._closing:  # …or the SDK's own tasks ended the connection
                self._fail(state, generation, "it stopped answering (the connection ended)")
        except Exception as exc:  # any start failure is one line, never a traceback
            log.debug("the MCP server %s failed", config.name, exc_info=True)
            problem = _start_problem(exc, config)
            if config.command and not self._server_stderr and problem.startswith("it failed"):
                problem += " (--debug shows what it wrote)"
            self._fail(state, generation, problem)

    async def _hold(self, client: Any, state: ServerState, generation: int) -> None:
        """Hold the connection until the server is stopped. An idle server is asked for
        its tools now and then (MCP's ping is gone from its 2026 protocol; listing tools
        is in every version): one that exited or hung while no call was made is found out
        then, not when the model next calls it."""
        assert state.stop is not None
        while True:
            try:
                await asyncio.wait_for(state.stop.wait(), WATCH_S)
                return
            except TimeoutError:
                pass
            if state.calls:
                continue  # a server may answer one request at a time: never ask a busy one
            try:
                await asyncio.wait_for(client.list_tools(cache_mode="bypass"),
                                       state.config.timeout_s)
            except Exception as exc:
                if state.stop.is_set():
                    return
                problem = (f"it stopped answering (nothing within {state.config.timeout_s:g} s)"
                           if isinstance(exc, TimeoutError)
                           else f"it stopped answering ({_describe(exc, 'a check')})")
                self._fail(state, generation, problem)
                return

    @staticmethod
    async def _leave(client: Any, name: str) -> None:
        try:
            await client.__aexit__(None, None, None)
        except BaseException:  # a server already gone fails its goodbye: nothing to do
            log.debug("closing the MCP server %s", name, exc_info=True)

    def _fail(self, state: ServerState, generation: int, problem: str) -> None:
        with self._lock:
            if state.generation != generation or state.status is Status.FAILED:
                return
            was_ready = state.status is Status.READY
            state.status, state.problem, state.tools = Status.FAILED, problem, []
        if state.stop is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(state.stop.set)
        if was_ready:
            self._on_tools(state.config.name, None)
        withdrawn = "its tools are withdrawn" if was_ready else "its tools are not offered"
        self._warn(f"MCP server {state.config.name!r} ({state.config.where}): {problem}; "
                   f"{withdrawn} (/tools starts it again).")
        self._settle(state)  # once its line is written

    def _settle(self, state: ServerState) -> None:
        with self._lock:
            state.settled = True
            self._settled.notify_all()


async def _list_tools(client: Any) -> list[Any]:
    tools: list[Any] = []
    cursor = None
    for _ in range(100):  # a server that pages forever is not listed forever
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def _start_problem(exc: BaseException, config: ServerConfig) -> str:
    if config.cwd and not Path(config.cwd).is_dir():
        return f"cannot start it: no folder {config.cwd!r} (check its cwd)"
    if isinstance(exc, FileNotFoundError) or (
            isinstance(exc, OSError) and exc.errno == 2 and config.command):
        return (f"cannot start it: no program {config.command!r} (check the command, or "
                "install the server)")
    if isinstance(exc, PermissionError):
        return f"cannot start {config.command!r}: permission denied"
    return f"it failed to start ({_describe(exc, 'the connection')})"


def _describe(exc: BaseException, what: str) -> str:
    """A short, readable cause, from the first exception of a group (anyio's task groups
    raise groups)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip() or type(exc).__name__
    if "Connection closed" in text:
        return f"the server closed the connection during {what} (it may have exited)"
    if len(text) > 200:
        text = text[:200] + "…"
    return f"{type(exc).__name__}: {text}" if type(exc).__name__ not in text else text


def _timed_out(exc: BaseException) -> bool:
    from mcp.shared.exceptions import MCPError

    return isinstance(exc, MCPError) and exc.code == REQUEST_TIMEOUT


def _answered_with_error(exc: BaseException) -> bool:
    """A JSON-RPC error the server sent about the request (unknown tool, invalid params):
    the server is working."""
    from mcp.shared.exceptions import MCPError

    if not isinstance(exc, MCPError):
        return False
    from mcp_types.jsonrpc import CONNECTION_CLOSED

    # The SDK's own "Connection closed" shares its code with JSON-RPC's generic server
    # error, which a working server may send: the message tells them apart.
    closed = exc.code == CONNECTION_CLOSED and "Connection closed" in str(exc)
    return not closed and exc.code != REQUEST_TIMEOUT
