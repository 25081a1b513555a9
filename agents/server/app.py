"""The serving half of an inference server: model, KServe v2 REST handlers, batching, stats.

Imported by agents/server.py only after its cheap start-up checks pass, because importing torch
costs seconds and a crash-looping server should fail fast.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
import traceback
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pydantic_core
import torch

from agents.fsutil import atomic_write_json
from agents.server import tensors
from agents.server.batcher import Batcher, BatchError
from agents.server.metrics import ServerMetrics
from agents.spec import ModelConfig, ServerSpec, load_model_config

MAX_BODY_BYTES = 256 * 1024 * 1024
STATS_INTERVAL_S = 0.5
_INFER = re.compile(r"^/v2/models/([^/]+)(?:/versions/[^/]+)?/infer$")
_MODEL = re.compile(r"^/v2/models/([^/]+)(?:/versions/[^/]+)?(/ready)?$")


class App:
    """What the HTTP handlers share: the spec, the model's tensors contract, the batcher, metrics."""

    def __init__(self, spec: ServerSpec, config: ModelConfig, device: str) -> None:
        self.spec = spec
        self.config = config
        self.device = device
        self.ready = threading.Event()
        self.started_at = time.time()
        self.model: torch.jit.ScriptModule | None = None
        self.metrics = ServerMetrics(spec.workload, lambda: self.batcher.depth())
        self.batcher = Batcher(self.run, spec.batch, spec.max_queue_delay_ms / 1000.0, self.metrics.observe_batch)

    def run(self, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        """One forward pass on the server's device; outputs come back on the CPU."""
        assert self.model is not None
        with torch.inference_mode():
            result = self.model(*(t.to(self.device) for t in inputs))
            outputs = tensors.as_tensor_list(result, self.config)
            if self.device.startswith("cuda"):
                torch.cuda.synchronize()
        return [o.cpu() for o in outputs]

    def stats(self) -> dict[str, Any]:
        """The per-server document the agent merges into its status."""
        return {
            "pid": os.getpid(),
            "ready": self.ready.is_set(),
            "error": None,
            "device": self.device,
            "started_at": self.started_at,
            "updated_at": time.time(),
            **self.metrics.snapshot(),
        }


def load_torchscript(app: App, warmup_runs: int = 3) -> None:
    """Load model.pt once, run full batches to warm it up, and check it matches model.yaml."""
    with warnings.catch_warnings():  # TorchScript is the served format; torch 2.x calls it deprecated
        warnings.simplefilter("ignore", DeprecationWarning)
        model = torch.jit.load(str(Path(app.spec.model_dir) / "model.pt"), map_location=app.device)
    model.eval()
    app.model = model
    example = tensors.example_inputs(app.config, app.spec.batch)
    for _ in range(warmup_runs):
        outputs = app.run(example)
    _check_outputs(outputs, app.config, app.spec.batch)


def _check_outputs(outputs: list[torch.Tensor], config: ModelConfig, batch: int) -> None:
    """A model that disagrees with model.yaml fails at start, not on the first client."""
    for spec, out in zip(config.outputs, outputs):
        want = [batch, *spec.shape]
        shape_ok = len(out.shape) == len(want) and all(w in (-1, g) for w, g in zip(want, out.shape))
        if not shape_ok:
            raise ValueError(
                f"model.yaml output {spec.name!r}: expected shape {want}, the model returns {list(out.shape)}"
            )
        if out.dtype != tensors.TORCH_DTYPES[spec.datatype]:
            raise ValueError(
                f"model.yaml output {spec.name!r}: declared {spec.datatype}, the model returns {out.dtype}"
            )


class Handler(BaseHTTPRequestHandler):
    """KServe v2 REST subset; every error is a JSON `{"error": ...}` with a 4xx/5xx code."""

    protocol_version = "HTTP/1.1"
    server_version = "igniter-server/0.1"
    disable_nagle_algorithm = True  # headers and body are separate writes: Nagle + delayed ACK adds 40 ms

    @property
    def app(self) -> App:
        return self.server.app  # type: ignore[attr-defined]

    def log_message(self, format: str, *args: Any) -> None:
        """Access logs would dominate the server's log; errors are logged where they happen."""

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            self._send(200, self.app.metrics.exposition(), "text/plain; version=0.0.4")
        elif path == "/v2/health/live":
            self._json(200, {"live": True})
        elif path == "/v2/health/ready":
            self._json(200 if self.app.ready.is_set() else 503, {"ready": self.app.ready.is_set()})
        elif path == "/v2":
            self._json(200, {"name": "igniter-server", "version": "0.1", "extensions": []})
        elif match := _MODEL.match(path):
            self._model_get(match.group(1), bool(match.group(2)))
        else:
            self._json(404, {"error": f"no route GET {path}"})

    def _model_get(self, name: str, ready_only: bool) -> None:
        if name != self.app.spec.workload:
            self._json(404, {"error": f"unknown model {name!r}; this server serves {self.app.spec.workload!r}"})
        elif ready_only:
            self._json(200 if self.app.ready.is_set() else 503, {"name": name, "ready": self.app.ready.is_set()})
        else:
            self._json(200, tensors.metadata(self.app.config, name))

    def do_POST(self) -> None:
        started = time.perf_counter()
        match = _INFER.match(self.path.split("?", 1)[0])
        body = self._read_body()
        if body is None:
            return
        if match is None:
            self._json(404, {"error": f"no route POST {self.path}"})
            return
        code, reply, items = self._infer(match.group(1), body)
        self._json(code, reply)
        self.app.metrics.observe_request(code, time.perf_counter() - started, items)

    def _infer(self, name: str, body: bytes) -> tuple[int, dict[str, Any], int]:
        """Decode, batch, encode; map each failure to its HTTP code."""
        app = self.app
        if name != app.spec.workload:
            return 404, {"error": f"unknown model {name!r}; this server serves {app.spec.workload!r}"}, 0
        if not app.ready.is_set():
            return 503, {"error": "model is not ready yet"}, 0
        try:
            decoded = tensors.decode(body, app.config, app.spec.batch, self._header_length())
            outputs = app.batcher.submit(decoded.tensors, decoded.n)
            return 200, tensors.encode(outputs, app.config, decoded, name), decoded.n
        except tensors.BadRequest as exc:
            return 400, {"error": str(exc)}, 0
        except BatchError as exc:
            return exc.status, {"error": str(exc)}, 0
        except Exception as exc:  # a bug of ours: answer 500 and log it, never drop the connection
            traceback.print_exc()
            return 500, {"error": f"internal error: {type(exc).__name__}: {exc}"}, 0

    def _header_length(self) -> int | None:
        """The binary tensor extension's JSON header size, if the client uses it."""
        value = self.headers.get("Inference-Header-Content-Length")
        if value is None:
            return None
        if not value.strip().isdigit():
            raise tensors.BadRequest(f"Inference-Header-Content-Length must be a number, got {value!r}")
        return int(value)

    def _read_body(self) -> bytes | None:
        """The request body, or None after answering 411/413/400 for a body we will not read."""
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            self.close_connection = True
            self._json(411 if length is None else 400, {"error": "a numeric Content-Length header is required"})
            return None
        if int(length) > MAX_BODY_BYTES:
            self.close_connection = True
            self._json(413, {"error": f"body of {length} bytes exceeds {MAX_BODY_BYTES}"})
            return None
        return self.rfile.read(int(length))

    def _json(self, code: int, obj: dict[str, Any]) -> None:
        self._send(code, pydantic_core.to_json(obj), "application/json")

    def _send(self, code: int, body: bytes, ctype: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256  # bursts of concurrent clients must not overflow the listen backlog

    def __init__(self, app: App) -> None:
        super().__init__((app.spec.host, app.spec.port), Handler)
        self.app = app


def _every(interval_s: float, stop: threading.Event, fn: Any) -> threading.Thread:
    """Run fn every interval until stop is set, on a daemon thread."""

    def loop() -> None:
        while not stop.wait(interval_s):
            fn()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    return thread


def pick_device(requested: str) -> str:
    """`cuda` means the GPU must work (CUDA_VISIBLE_DEVICES leaves this process one: cuda:0)."""
    if requested == "cpu":
        return "cpu"
    if not torch.cuda.is_available():
        raise RuntimeError("device cuda requested but torch sees no CUDA device")
    return "cuda:0"


def serve(spec: ServerSpec, device: str, stats_file: Path | None, stop: threading.Event) -> None:
    """Bind, load, warm up, serve until stop; stats go to stats_file every half second."""
    app = App(spec, load_model_config(spec.model_dir), pick_device(device))
    write_stats = (lambda: atomic_write_json(stats_file, app.stats())) if stats_file else (lambda: None)
    httpd = Server(app)
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()
    write_stats()
    _every(STATS_INTERVAL_S, stop, write_stats)
    load_torchscript(app)
    app.batcher.start()
    app.ready.set()
    write_stats()
    print(f"igniter-server {spec.name}: ready on {spec.host}:{spec.port} ({app.device})", file=sys.stderr, flush=True)
    stop.wait()
    app.ready.clear()
    httpd.shutdown()
    app.batcher.stop()
    httpd.server_close()
    write_stats()
