"""The no-disk proof itself catches each way a process can change a file, and nothing else."""

import os
import subprocess
import sys
import textwrap

import pytest

from tests.support.nodisk import changes_outside, traced

# Each line changes the file system in a different way; the proof must see every one.
CHANGES = {
    "open for writing": "open(f'{out}/a', 'w').write('x')",
    "os.open O_CREAT": "os.close(os.open(f'{out}/b', os.O_CREAT | os.O_WRONLY))",
    "mkdir": "os.mkdir(f'{out}/d')",
    "mkdirat": "os.mkdir('d2', dir_fd=os.open(out, os.O_RDONLY))",
    "rename": "os.rename(f'{ok}/keep', f'{out}/moved')",
    "renameat2 (replace)": "os.replace(f'{ok}/keep2', f'{out}/moved2')",
    "unlink": "os.unlink(f'{out}/victim')",
    "unlinkat": "os.unlink('victim2', dir_fd=os.open(out, os.O_RDONLY))",
    "rmdir": "os.rmdir(f'{out}/emptydir')",
    "symlink": "os.symlink('/etc/hostname', f'{out}/link')",
    "truncate": "os.truncate(f'{out}/victim3', 0)",
    "chmod": "os.chmod(f'{out}/victim4', 0o600)",
    "a write through a descriptor opened before the process": "os.write(inherited, b'x')",
    "/dev/shm": "open('/dev/shm/parley-test', 'w').write('x')",
    "C code, which no Python audit hook sees": (
        "import ctypes; libc = ctypes.CDLL(None); libc.fopen.restype = ctypes.c_void_p; "
        "libc.fclose(ctypes.c_void_p(libc.fopen(f'{out}/c'.encode(), b'w')))"),
    "a child process": "subprocess.run(['sh', '-c', f'echo x > {out}/child'])",
    "a temporary file removed again": "tempfile.TemporaryFile(dir=out).write(b'x')",
}


def run_traced(tmp_path, code: str):
    ok, out = tmp_path / "ok", tmp_path / "out"
    ok.mkdir(), out.mkdir(), (out / "emptydir").mkdir()
    for name in ("keep", "keep2"):
        (ok / name).write_text("x")
    for name in ("victim", "victim2", "victim3", "victim4"):
        (out / name).write_text("x")
    script = textwrap.dedent(f"""
        import os, subprocess, tempfile
        ok, out, inherited = {str(ok)!r}, {str(out)!r}, {{fd}}
        print("to a pipe is fine"); open(f"{{ok}}/allowed", "w").write("fine")
        open("/dev/null", "w").write("fine")
        {code}
    """)
    with open(out / "inherited", "w") as inherited:
        fd = inherited.fileno()
        subprocess.run(traced([sys.executable, "-c", script.replace("{fd}", str(fd))],
                              tmp_path / "trace"),
                       check=True, pass_fds=(fd,), capture_output=True, timeout=60)
    return changes_outside(tmp_path / "trace", [ok])


@pytest.mark.parametrize("how", CHANGES)
def test_every_kind_of_change_outside_the_allowed_folder_is_caught(tmp_path, how):
    try:
        caught = run_traced(tmp_path, CHANGES[how])
    finally:
        if os.path.exists("/dev/shm/parley-test"):
            os.unlink("/dev/shm/parley-test")
    assert caught, f"{how} was not seen"


def test_reading_pipes_and_the_allowed_folder_are_not_changes(tmp_path):
    assert run_traced(tmp_path, "open('/etc/hostname').read(); os.listdir(out)") == []
