"""Where a JSON object or list that is still being streamed ends.

The tool-call scanner holds back a JSON value that might be a call until it is complete;
this finds its end without parsing it again for every token, and says what would close
it if the model stops in the middle (a missing last brace is a common small-model slip).
"""

from __future__ import annotations

_CLOSING = {"{": "}", "[": "]"}


class JsonSpan:
    """The extent of one JSON object or list, read as its text arrives.

    `advance(text)` takes the whole text from the opening bracket on (the same text, grown)
    and returns the length of the value once it is closed, else None. Only brackets and
    strings are tracked: whether the value is valid JSON is for `json.loads` to say.
    """

    def __init__(self) -> None:
        self._read = 0
        self._open: list[str] = []
        self._in_string = False
        self._escaped = False
        self.end: int | None = None

    def advance(self, text: str) -> int | None:
        if self.end is not None:
            return self.end
        for index in range(self._read, len(text)):
            char = text[index]
            if self._in_string:
                if self._escaped:
                    self._escaped = False
                elif char == "\\":
                    self._escaped = True
                elif char == '"':
                    self._in_string = False
            elif char == '"':
                self._in_string = True
            elif char in _CLOSING:
                self._open.append(_CLOSING[char])
            elif char in "}]" and self._open:
                self._open.pop()  # a mismatched bracket is json.loads's to report
                if not self._open:
                    self.end = index + 1
                    self._read = self.end
                    return self.end
        self._read = len(text)
        return None

    def completion(self) -> str:
        """What would close the value read so far: a quote if a string is open, then the
        brackets still open, innermost first."""
        return ('"' if self._in_string else "") + "".join(reversed(self._open))
