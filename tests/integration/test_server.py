"""`wanjax serve` as a client sees it: a real server on 127.0.0.1 (a subprocess on a free port),
the demo model at 32x48, 5 frames, 2 steps. One server serves the module; the two restart tests
start their own and stop it mid-job, one with SIGKILL, one with SIGTERM. Each denoising step
lasts at least 20 ms longer (tests/slow_steps_serve.py), so a long job outlasts the test's
signal or cancel on any machine."""

import io
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from PIL import Image

from wanjax.entrypoints.cli import main

SMALL = ["--set", "height=32", "--set", "width=48", "--set", "num_frames=5", "--set", "num_inference_steps=2"]
QUEUE_SIZE = 3
LONG = 100  # steps of a job that keeps the worker busy for at least 2 s
TOKEN = "s3cret"
TESTS = Path(__file__).parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A `wanjax serve` subprocess and a client for it."""

    def __init__(self, output_dir: Path, cache: Path) -> None:
        self.output_dir, self.cache, self.port = output_dir, cache, _free_port()
        self.process = None

    def start(self) -> "Server":
        args = ["serve", "--port", str(self.port), "--output-dir", str(self.output_dir), "--token", TOKEN,
                "--queue-size", str(QUEUE_SIZE), "--max-batch", "4", *SMALL]  # fmt: skip
        env = {**os.environ, "WANJAX_CACHE": str(self.cache)}
        log = (self.output_dir.parent / f"{self.output_dir.name}.log").open("ab")
        command = [sys.executable, str(TESTS / "slow_steps_serve.py"), *args]
        self.process = subprocess.Popen(command, env=env, stdout=log, stderr=log)
        self.client = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", headers={"Authorization": f"Bearer {TOKEN}"})
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
        return self.client.post("/v1/videos", json=body)

    def wait(self, job_id: str, until=lambda job: job["status"] in ("succeeded", "failed", "cancelled")) -> dict:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            job = self.client.get(f"/v1/videos/{job_id}").json()
            if until(job):
                return job
            time.sleep(0.1)
        raise TimeoutError(f"job {job_id} stayed {job['status']}")


@pytest.fixture(scope="module")
def cache(demo_cache):
    return demo_cache.parent


@pytest.fixture(scope="module")
def server(cache, tmp_path_factory):
    server = Server(tmp_path_factory.mktemp("serve") / "out", cache).start()
    yield server
    server.stop()


def test_a_video_is_byte_identical_to_wanjax_generate(server, cache, tmp_path, monkeypatch):
    accepted = server.submit(prompt="a fox", seed=3)
    assert accepted.status_code == 202 and accepted.json()["status"] == "queued"
    job = server.wait(accepted.json()["id"])
    assert job["status"] == "succeeded" and job["progress"] == {"steps_done": 2, "steps_total": 2}
    assert job["timings"]["denoise"] > 0
    video = server.client.get(f"/v1/videos/{job['id']}/content")
    assert video.status_code == 200 and video.headers["content-type"] == "video/mp4"

    monkeypatch.setenv("WANJAX_CACHE", str(cache))
    out = tmp_path / "fox.mp4"
    sizes = ["--height", "32", "--width", "48", "--num-frames", "5", "--steps", "2"]
    assert main(["generate", "--prompt", "a fox", "--seed", "3", *sizes, "--quiet", "--out", str(out)]) == 0
    assert video.content == out.read_bytes()
    assert not [p for p in server.output_dir.iterdir() if ".partial-" in p.name]


@pytest.mark.parametrize(
    ("body", "field"),
    [({"prompt": "x", "height": 33}, "height"), ({"prompt": "x", "colour": 1}, "colour"), ({"seed": 1}, "prompt"),
     ({"prompt": "x", "num_frames": 6}, "num_frames"), ({"prompt": "x", "image": "%%"}, "image")],
)  # fmt: skip
def test_a_bad_field_is_422_naming_it_and_nothing_is_queued(server, body, field):
    response = server.client.post("/v1/videos", json=body)
    assert response.status_code == 422 and field in response.json()["error"]


def test_the_token_is_required_but_not_by_the_probes(server):
    assert httpx.post(f"{server.client.base_url}/v1/videos", json={"prompt": "x"}).status_code == 401
    assert httpx.get(f"{server.client.base_url}/healthz").status_code == 200
    assert "wanjax_queue_depth" in server.client.get("/metrics").text


def test_cancel_a_queued_and_a_running_job_and_429_when_the_queue_is_full(server):
    running = server.submit(prompt="long", num_inference_steps=LONG).json()["id"]
    server.wait(running, until=lambda job: job["status"] == "running")
    # Another size: none of these joins a batch with the running one, all wait in the queue.
    queued = [server.submit(prompt=f"q{i}", height=48).json()["id"] for i in range(QUEUE_SIZE)]
    refused = server.submit(prompt="one too many", height=48)
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) > 0

    assert server.client.delete(f"/v1/videos/{queued[0]}").json()["status"] == "cancelled"
    assert server.client.delete(f"/v1/videos/{running}").status_code == 202
    stopped = server.wait(running)
    assert stopped["status"] == "cancelled" and stopped["progress"]["steps_done"] < LONG
    assert server.client.get(f"/v1/videos/{running}/content").status_code == 409
    assert [server.wait(job_id)["status"] for job_id in queued[1:]] == ["succeeded"] * (QUEUE_SIZE - 1)
    metrics = server.client.get("/metrics").text
    assert 'wanjax_jobs_total{outcome="cancelled"} 2' in metrics


def test_a_load_run_completes_every_job_and_loses_none(server):
    """16 clients x 4 jobs through a queue of 3: refused submissions are retried, as Retry-After asks."""
    accepted, errors = [], []

    def client(index: int) -> None:
        for job in range(4):
            while True:
                response = server.submit(prompt=f"client {index} job {job}", seed=index * 10 + job)
                if response.status_code != 429:
                    break
                time.sleep(0.2)
            if response.status_code != 202:
                errors.append(response.text)
            else:
                accepted.append(response.json()["id"])

    threads = [threading.Thread(target=client, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and len(set(accepted)) == 64
    assert {server.wait(job_id)["status"] for job_id in accepted} == {"succeeded"}
    assert all((server.output_dir / f"{job_id}.mp4").is_file() for job_id in accepted)
    assert "wanjax_batches_total" in server.client.get("/metrics").text


def test_an_image_sent_as_a_multipart_file_is_validated_before_queueing(server):
    """The demo is a text-to-video model: the image reaches validation, which refuses it."""
    png = io.BytesIO()
    Image.new("RGB", (48, 32), (200, 120, 40)).save(png, format="PNG")
    refused = server.client.post(
        "/v1/videos", data={"request": '{"prompt": "a fox"}'}, files={"image": ("fox.png", png.getvalue(), "image/png")}
    )
    assert refused.status_code == 422 and "takes no image" in refused.json()["error"]


def test_sigterm_stops_the_running_job_at_its_next_step_and_a_restart_runs_it(cache, tmp_path):
    server = Server(tmp_path / "out", cache).start()
    running = server.submit(prompt="stopped mid-run", num_inference_steps=LONG).json()["id"]
    queued = server.submit(prompt="still queued", height=48).json()["id"]
    server.wait(running, until=lambda job: job["status"] == "running" and job["progress"]["steps_done"] > 0)
    server.stop(signal.SIGTERM)
    assert server.process.returncode == 128 + signal.SIGTERM
    with sqlite3.connect(tmp_path / "out" / "jobs.sqlite") as records:
        rows = dict(records.execute("SELECT id, status || ' ' || steps_done FROM jobs").fetchall())
    assert rows == {running: "queued 0", queued: "queued 0"}  # recorded for the restart, not left running

    server = Server(tmp_path / "out", cache).start()
    try:
        assert [server.wait(job_id)["status"] for job_id in (running, queued)] == ["succeeded"] * 2
    finally:
        server.stop()


def test_after_kill_9_a_restart_accounts_for_every_accepted_job(cache, tmp_path):
    server = Server(tmp_path / "out", cache).start()
    done = server.submit(prompt="done first").json()["id"]
    server.wait(done)
    mid = server.submit(prompt="killed mid-run", num_inference_steps=LONG).json()["id"]
    waiting = [server.submit(prompt=f"waiting {i}", num_inference_steps=LONG).json()["id"] for i in range(2)]
    server.wait(mid, until=lambda job: job["status"] == "running" and job["progress"]["steps_done"] > 0)
    server.stop(signal.SIGKILL)
    first_video = (tmp_path / "out" / f"{done}.mp4").read_bytes()

    server = Server(tmp_path / "out", cache).start()
    try:
        assert server.client.get(f"/v1/videos/{done}").json()["status"] == "succeeded"
        assert server.client.get(f"/v1/videos/{done}/content").content == first_video
        for job_id in (mid, *waiting):
            assert server.wait(job_id)["status"] == "succeeded"
    finally:
        server.stop()
