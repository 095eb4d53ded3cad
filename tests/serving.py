"""A real `wanjax serve` for tests: a subprocess on a free port of 127.0.0.1 over the demo model,
each denoising step at least 20 ms longer (tests/slow_steps_serve.py), so that a long job
outlasts a test's signal or cancel on any machine."""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

SMALL = ["--set", "height=32", "--set", "width=48", "--set", "num_frames=5", "--set", "num_inference_steps=2"]
TOKEN = "s3cret"
TESTS = Path(__file__).parent
FINISHED = ("completed", "failed")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A `wanjax serve` subprocess (with SMALL and the token TOKEN) and an httpx client for it."""

    def __init__(self, output_dir: Path, cache: Path, *, queue_size: int = 3, options: tuple[str, ...] = (),
                 log: Path | None = None) -> None:  # fmt: skip
        """`options`: more of `wanjax serve`'s flags; `log`: its output (default: beside `output_dir`)."""
        self.output_dir, self.cache, self.port, self.queue_size = output_dir, cache, free_port(), queue_size
        self.log = log or output_dir.parent / f"{output_dir.name}.log"
        self.options = options
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = None

    def start(self) -> "Server":
        args = ["serve", "--port", str(self.port), "--output-dir", str(self.output_dir), "--token", TOKEN,
                "--queue-size", str(self.queue_size), "--max-batch", "4", *SMALL, *self.options]  # fmt: skip
        env = {**os.environ, "WANJAX_CACHE": str(self.cache)}
        log = self.log.open("ab")
        command = [sys.executable, str(TESTS / "slow_steps_serve.py"), *args]
        self.process = subprocess.Popen(command, env=env, stdout=log, stderr=log)
        self.client = httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {TOKEN}"})
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            assert self.process.poll() is None, f"the server exited; see {log.name}"
            try:
                if self.client.get("/readyz").status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.3)
        raise TimeoutError("the server did not get ready")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        self.process.send_signal(sig)
        self.process.wait(60)
        self.client.close()

    def submit(self, **body) -> httpx.Response:
        """A JSON submission, as curl sends one."""
        return self.client.post("/v1/videos", json=body)

    def wait(self, video_id: str, until=lambda video: video["status"] in FINISHED) -> dict:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            video = self.client.get(f"/v1/videos/{video_id}").json()
            if until(video):
                return video
            time.sleep(0.1)
        raise TimeoutError(f"video {video_id} stayed {video['status']}")
