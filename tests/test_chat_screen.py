"""`parley chat` in a real pseudo-terminal, read off an emulated screen as a person sees it
(escape sequences applied, not read as text), against a scripted model server."""

import os
import sys

import pexpect
import pyte

from tests.support.remote_model import ScriptedServer, stream, text

COLUMNS, ROWS = 100, 30


class Screen:
    """What the terminal shows: every byte Parley writes, run through a VT100 emulator."""

    def __init__(self) -> None:
        self.screen = pyte.Screen(COLUMNS, ROWS)
        self._stream = pyte.Stream(self.screen)

    def write(self, data: str) -> None:  # pexpect's logfile_read
        self._stream.feed(data)

    def flush(self) -> None:
        pass

    @property
    def lines(self) -> list[str]:
        return [line.rstrip() for line in self.screen.display]

    def is_bold(self, row: int, start: int, length: int) -> bool:
        return all(self.screen.buffer[row][x].bold for x in range(start, start + length))


def spawn_chat(url: str, screen: Screen) -> pexpect.spawn:
    env = {name: value for name, value in os.environ.items() if not name.startswith("PARLEY_")}
    env.update(PYTHONDONTWRITEBYTECODE="1", TERM="xterm-256color", HOME="/nonexistent")
    env.pop("NO_COLOR", None)
    child = pexpect.spawn(sys.executable, ["-m", "assistant", "chat", "--llm-url", url,
                                           "--no-local-intents"],
                          env=env, encoding="utf-8", timeout=30, dimensions=(ROWS, COLUMNS))
    child.logfile_read = screen
    return child


def test_the_chat_prompt_shows_as_a_bold_you_and_never_as_markup():
    screen = Screen()
    with ScriptedServer(stream(text("Hello ", "there."))) as server:
        child = spawn_chat(server.url, screen)
        try:
            child.expect("you> ")
            child.sendline("hi")
            child.expect("there.")
            child.expect("you> ")
            child.sendline("/quit")
            child.expect(pexpect.EOF)
            assert child.wait() == 0
        finally:
            child.close()
    shown = "\n".join(screen.lines)
    assert "[bold]" not in shown and "[/bold]" not in shown, shown
    prompts = [row for row, line in enumerate(screen.lines) if line.startswith("you>")]
    assert [screen.lines[row] for row in prompts] == ["you> hi", "you> /quit"], shown
    assert all(screen.is_bold(row, 0, len("you>")) for row in prompts), shown
    assert "Hello there." in shown
