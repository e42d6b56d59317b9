"""Sound's one error root: whatever fails in `audio/` is an `AudioError`."""


class AudioError(Exception):
    """A sound device or an audio file cannot be used; the message says what to do."""
