"""scripts/system-deps.sh, which `make test` and CI call: what a machine without chromium gets."""

import os
import shutil
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "system-deps.sh"


def _path_without_chromium(tmp_path: Path, uid: int) -> str:
    """A PATH with no chromium and an `id` that reports ``uid`` (bash's builtins do the rest)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "id").write_text(f"#!/bin/sh\necho {uid}\n")
    (bin_dir / "id").chmod(0o755)
    for tool in ("ls",):
        os.symlink(shutil.which(tool), bin_dir / tool)
    return str(bin_dir)


def test_without_root_it_stops_with_one_line_naming_the_command(tmp_path):
    env = {"PATH": _path_without_chromium(tmp_path, 1000)}
    result = subprocess.run(["/bin/bash", str(SCRIPT)], env=env, capture_output=True, text=True)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "chromium" in lines[0] and "sudo apt-get install -y" in lines[0], result.stderr
    assert result.stdout == ""


def test_with_everything_there_it_does_nothing(tmp_path):
    bin_dir = Path(_path_without_chromium(tmp_path, 1000))
    for name in ("chromium", "initdb"):
        (bin_dir / name).write_text("#!/bin/sh\n")
        (bin_dir / name).chmod(0o755)
    result = subprocess.run(["/bin/bash", str(SCRIPT)], env={"PATH": str(bin_dir)}, capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout == "" and result.stderr == ""
