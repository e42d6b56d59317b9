"""The proof that nothing of a conversation reaches the disk: `parley` run under strace.

Two layers watch the real `parley` command:

- **strace** (`-f`, every thread and child process) logs each call that can change the
  file system: the whole `%file` class (open/openat/openat2/creat with writing flags,
  mkdir(at), unlink(at), rename(at/at2), link, symlink, truncate, chmod, …) and writes
  through descriptors, however they were opened (`write`, `pwrite64`, `writev`, `ftruncate`,
  `fallocate`, `sendfile`, …), each descriptor decoded to its path (`-y`). This sees what
  llama.cpp, CTranslate2, onnxruntime, libsndfile, libpulse and any child process do.
- **An audit hook** inside the Python process stops it at once on a write from Python
  code, with the Python call named: faster to read when it fails.

Allowed are the test's own folder (what `--out` and `--audio-out` were given) and what a
conversation cannot be in, named one by one: `/proc`, `/sys`, `/dev/null`, the terminal,
and memory-only files (memfd). Pipes and sockets (the sound server's included) are not
files. `/dev/shm` is not allowed: it is a file system, even if it lives in memory.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

import pytest

CALLS = ",".join([
    "%file", "write", "pwrite64", "writev", "pwritev", "pwritev2", "ftruncate", "fallocate",
    "fchmod", "fchown", "fsetxattr", "fremovexattr", "sendfile", "splice",
    "copy_file_range", "memfd_create",
])
"""What strace logs: every call that changes a file by name or through a descriptor."""

ALLOWED_PREFIXES = ("/proc/", "/sys/", "/dev/pts/", "/memfd:")
ALLOWED_PATHS = ("/dev/null", "/dev/tty", "/dev/ptmx")

JACK_METADATA = Path(f"/dev/shm/jack_db-{os.getuid()}")
"""libjack's (empty) port-metadata database, opened read-write whenever PortAudio probes for
a JACK server, as it does on start; Parley never sets JACK metadata, so no conversation can
be in it. Allowed only where a test passes it, like the sound server's cookie."""

_WRITE_FLAGS = ("O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_APPEND", "O_TMPFILE")
_OPENS = {"open", "openat", "openat2", "creat"}
# Calls that only look at a file: logged because they are in %file, never a change.
_LOOKS = {
    "stat", "lstat", "fstat", "newfstatat", "statx", "statfs", "fstatfs", "access",
    "faccessat", "faccessat2", "readlink", "readlinkat", "getcwd", "chdir", "fchdir",
    "execve", "execveat", "getxattr", "lgetxattr", "listxattr", "llistxattr", "chroot",
    "inotify_add_watch", "fanotify_mark", "name_to_handle_at", "statmount", "quotactl",
    "uselib", "swapon", "swapoff", "mount", "umount2", "pivot_root", "acct",
    "memfd_create",
}
# Calls that change what their first descriptor argument points at.
_FD_WRITES = {
    "write", "pwrite64", "writev", "pwritev", "pwritev2", "ftruncate", "fallocate",
    "fchmod", "fchown", "fsetxattr", "fremovexattr",
}

_LINE = re.compile(r"^(?P<pid>\d+)\s+(?P<call>\w+)\((?P<args>.*)\)\s+=\s+(?P<ret>.*)$")
_FD_PATH = re.compile(r"^-?\w+<(?P<path>[^>]*)>")
_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')


def require_strace() -> str:
    """strace's path; without it the proof cannot be made, so the test fails (not skips)."""
    path = shutil.which("strace")
    if path is None:
        pytest.fail("strace is needed to prove nothing is written to disk: "
                    "`make test` installs it (or: sudo apt install strace)")
    return path


def traced(command: Sequence[str], log: Path) -> list[str]:
    """`command` run under strace, logging to `log` (outside what the test allows)."""
    return [require_strace(), "-f", "-qq", "-y", "--seccomp-bpf", "-e", f"trace={CALLS}",
            "-e", "signal=none", "-s", "256", "-o", str(log), *command]


def _joined(lines: list[str]) -> list[str]:
    """strace's log with calls split by other threads ("<unfinished …>") put back together."""
    pending: dict[str, str] = {}
    whole = []
    for line in lines:
        pid, _, rest = line.partition(" ")
        if rest.endswith("<unfinished ...>"):
            pending[pid] = rest.removesuffix("<unfinished ...>").rstrip()
        elif rest.startswith("<... "):
            resumed = rest.split("resumed>", 1)[1] if "resumed>" in rest else ""
            whole.append(f"{pid} {pending.pop(pid, '')}{resumed}")
        else:
            whole.append(line)
    return whole


def _decoded(text: str) -> str:
    return text.encode("latin-1", "backslashreplace").decode("unicode_escape", "replace")


def _changed_paths(call: str, args: str) -> list[str]:
    """The paths a successful call changed (empty for calls that change nothing)."""
    if call in _LOOKS:
        return []
    if call in _OPENS:
        flags = args[args.rfind('"') + 1:] if call != "creat" else "O_CREAT"
        return [""] if any(flag in flags for flag in _WRITE_FLAGS) else []
    if call in _FD_WRITES:
        match = _FD_PATH.match(args)
        path = match["path"] if match else ""
        return [path] if path.startswith("/") else []  # pipe:[…], socket:[…]: not files
    if call in ("sendfile", "splice", "copy_file_range"):
        target = args.split(", ")[0 if call == "sendfile" else 2]
        match = _FD_PATH.match(target)
        return [match["path"]] if match and match["path"].startswith("/") else []
    # Everything else in %file names what it changes: a path, maybe after a directory fd.
    paths, directory = [], ""
    for part in re.split(r",\s(?=(?:[^\"]*\"[^\"]*\")*[^\"]*$)", args):
        fd = _FD_PATH.match(part)
        if fd:
            directory = fd["path"]
        elif part.startswith('"'):
            name = _decoded(_QUOTED.match(part)[1]) if _QUOTED.match(part) else part
            paths.append(name if name.startswith("/") else os.path.join(directory, name))
    return paths


def changes_outside(log: Path, allowed: Sequence[Path]) -> list[str]:
    """The logged calls that changed a file outside `allowed` (folders or single files)
    and the named exceptions."""
    folders = [str(Path(folder).resolve()) for folder in allowed]

    def permitted(path: str) -> bool:
        path = os.path.normpath(path.removesuffix(" (deleted)")) if path else path
        return (path in ALLOWED_PATHS or path.startswith(ALLOWED_PREFIXES)
                or any(path == f or path.startswith(f + os.sep) for f in folders))

    bad = []
    for line in _joined(log.read_text(errors="replace").splitlines()):
        match = _LINE.match(line)
        if match is None or match["ret"].startswith("-1 "):
            continue  # a failed call changed nothing
        paths = _changed_paths(match["call"], match["args"])
        if paths == [""]:  # an open for writing: the path it opened is in its result
            opened = _FD_PATH.match(match["ret"])
            paths = [opened["path"] if opened else match["args"]]
        if any(not permitted(path) for path in paths):
            bad.append(line)
    return bad


# Stops `parley` on any file opened for writing (or directory made, file renamed or
# removed) by Python code outside the allowed folder, naming the call.
GUARD = textwrap.dedent("""
    import os, sys
    allowed = os.environ["PARLEY_TEST_ALLOWED_DIR"]
    WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
    DEVICES = ("/dev/null", "/dev/tty", "/dev/ptmx")
    def ok(path):
        path = os.path.realpath(os.fsdecode(path)) if isinstance(path, (str, bytes)) else ""
        return (not path or path == allowed or path.startswith(allowed + os.sep)
                or path in DEVICES or path.startswith("/dev/pts/"))
    def hook(event, args):
        bad = False
        if event == "open" and args[0] is not None and not isinstance(args[0], int):
            mode, flags = args[1] or "", args[2] or 0
            if any(c in mode for c in "wax+") or flags & WRITE_FLAGS:
                bad = not ok(args[0])
        elif event in ("os.mkdir", "os.rename", "os.remove", "os.rmdir", "shutil.rmtree",
                       "os.truncate", "os.chmod", "os.link", "os.symlink"):
            bad = not ok(args[0])
        if bad:
            sys.stderr.write(f"WROTE TO DISK: {event} {args[:2]}\\n")
            os._exit(99)
    sys.addaudithook(hook)
    pinned = os.environ.get("PARLEY_TEST_NOW")
    if pinned:  # the wall clock starts at this time (the date reaches the model's prompt)
        import datetime as dt, time
        import assistant.tools, memory.history
        start, began = dt.datetime.fromisoformat(pinned), time.monotonic()
        class PinnedClock(dt.datetime):
            @classmethod
            def now(cls, tz=None):
                at = start + dt.timedelta(seconds=time.monotonic() - began)
                return at if tz is None else at.astimezone(tz)
        memory.history.datetime = assistant.tools.datetime = PinnedClock
    from assistant.cli.main import main
    sys.exit(main(sys.argv[1:]))
""")


def guarded_parley(flags: Sequence[str]) -> list[str]:
    """The `parley` command line with the audit hook in front of `main()`."""
    return [sys.executable, "-c", GUARD, *flags]


def guarded_env(allowed: Path, **extra: str) -> dict[str, str]:
    return dict(os.environ, PYTHONDONTWRITEBYTECODE="1",
                PARLEY_TEST_ALLOWED_DIR=str(allowed.resolve()), **extra)


def run_parley(tmp_path: Path, stdin: bytes, *flags: str, trace: bool = False,
               now: str | None = None):
    """Run `parley FLAGS` with the audit hook (and strace into `tmp_path/trace`); with
    `now` (ISO 8601, local time), its wall clock starts then."""
    command = guarded_parley(flags)
    if trace:
        command = traced(command, tmp_path / "trace")
    extra = {"PARLEY_TEST_NOW": now} if now else {}
    return subprocess.run(command, input=stdin, capture_output=True,
                          env=guarded_env(tmp_path, **extra), timeout=600)


def written_outside(tmp_path: Path) -> list[str]:
    """What the traced run changed outside `tmp_path` (its strace log, `tmp_path/trace`)."""
    return changes_outside(tmp_path / "trace", [tmp_path])
