"""The real embedded SmolLM2 model through the real `parley` command."""

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.real

# Runs `parley` with an audit hook that kills the process on any file opened for
# writing (or directory made, or file renamed/removed) outside the allowed folder.
GUARD = textwrap.dedent("""
    import os, sys
    allowed = os.environ["PARLEY_TEST_ALLOWED_DIR"]
    WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
    def ok(path):
        path = os.path.realpath(os.fsdecode(path)) if isinstance(path, (str, bytes)) else ""
        return not path or path.startswith(allowed) or path.startswith("/dev/")
    def hook(event, args):
        bad = False
        if event == "open" and args[0] is not None and not isinstance(args[0], int):
            mode, flags = args[1] or "", args[2] or 0
            if any(c in mode for c in "wax+") or flags & WRITE_FLAGS:
                bad = not ok(args[0])
        elif event in ("os.mkdir", "os.rename", "os.remove", "os.rmdir", "shutil.rmtree"):
            bad = not ok(args[0])
        if bad:
            sys.stderr.write(f"WROTE TO DISK: {event} {args[:2]}\\n")
            os._exit(99)
    sys.addaudithook(hook)
    from assistant.cli.main import main
    sys.exit(main(sys.argv[1:]))
""")


def run_parley(tmp_path: Path, stdin: bytes, *flags: str, trace: bool = False):
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1",
               PARLEY_TEST_ALLOWED_DIR=str(tmp_path.resolve()))
    command = [sys.executable, "-c", GUARD, *flags]
    if trace:
        command = ["strace", "-f", "-qq", "-e", "trace=open,openat,creat,rename,unlink",
                   "-o", str(tmp_path / "trace"), *command]
    return subprocess.run(command, input=stdin, capture_output=True, env=env, timeout=600)


def written_outside(tmp_path: Path) -> list[str]:
    """Files the traced process opened for writing outside `tmp_path` (strace's log)."""
    written = []
    for line in (tmp_path / "trace").read_text().splitlines():
        if any(flag in line for flag in ("O_WRONLY", "O_RDWR", "O_CREAT", "rename", "unlink")):
            path = line.split('"')[1] if '"' in line else ""
            if path and not path.startswith(("/dev/", str(tmp_path))) and "ENOENT" not in line:
                written.append(line)
    return written


def test_piped_chat_with_the_embedded_model_writes_nothing_to_disk(tmp_path):
    trace = shutil.which("strace") is not None
    result = run_parley(
        tmp_path, b"Hello! What is the capital of France?\n\xff\xfe broken bytes\n",
        "--ctx", "2048", trace=trace)
    assert result.returncode == 0, result.stderr.decode()
    lines = [line for line in result.stdout.decode().splitlines() if line.strip()]
    assert len(lines) >= 2, result.stdout  # one reply for each message, none fatal
    if trace:
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
    from assistant.cli.main import build_parser, load_model

    args = build_parser().parse_args(["chat", "--threads", "1", "--batch-threads", "2",
                                      "--ctx", "1024"])
    model = load_model(args)
    assert (model._llm.n_threads, model._llm.n_threads_batch) == (1, 2)
    default = load_model(build_parser().parse_args(["chat", "--ctx", "1024"]))
    cores = os.cpu_count() or 1
    # Generating on every core stalls beside any other work; reading the prompt does not.
    assert default._llm.n_threads == 1 if cores < 4 else 2 <= default._llm.n_threads < cores
    assert default._llm.n_threads_batch == min(cores, 4)
