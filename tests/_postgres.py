"""A throw-away PostgreSQL server on a loopback port, for the tests that need a real RDB."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path


def _bindir() -> Path | None:
    found = shutil.which("initdb")
    if found:
        return Path(os.path.realpath(found)).parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(candidates[-1]).parent if candidates else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TemporaryPostgres:
    """``initdb`` + ``pg_ctl start`` in a temporary folder; root runs the server as ``postgres``."""

    def __init__(self) -> None:
        self.bindir = _bindir()
        if self.bindir is None:
            raise RuntimeError("no PostgreSQL server binaries (initdb) found; .ci/run installs Debian's postgresql")
        self.datadir = Path(tempfile.mkdtemp(prefix="optuna-wpca-pg-"))
        self.port = _free_port()
        self._as = []
        if os.geteuid() == 0:
            shutil.chown(self.datadir, user="postgres", group="postgres")
            self._as = ["runuser", "-u", "postgres", "--"]

    def _run(self, *cmd: str) -> None:
        subprocess.run([*self._as, *cmd], check=True, capture_output=True, text=True, timeout=120)

    def start(self) -> str:
        data = str(self.datadir / "data")
        self._run(str(self.bindir / "initdb"), "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8")
        options = f"-p {self.port} -k {self.datadir} -c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=off"
        self._run(str(self.bindir / "pg_ctl"), "-D", data, "-o", options, "-l", str(self.datadir / "log"), "-w",
                  "start")
        self._run(str(self.bindir / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres",
                  "optuna_wpca")
        return f"postgresql+psycopg2://postgres@127.0.0.1:{self.port}/optuna_wpca"

    def stop(self) -> None:
        try:
            self._run(str(self.bindir / "pg_ctl"), "-D", str(self.datadir / "data"), "-m", "fast", "-w", "stop")
        finally:
            shutil.rmtree(self.datadir, ignore_errors=True)
