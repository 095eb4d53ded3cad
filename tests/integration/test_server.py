"""`wanjax serve` as its clients see it: the `openai` SDK unchanged (and curl-style JSON) against a
real server on 127.0.0.1 (tests/serving.py), the demo model at 48x32, 5 frames, 2 steps. One
server serves the module; the two restart tests start their own and stop it mid-job, one with
SIGKILL, one with SIGTERM."""

import io
import signal
import sqlite3
import threading
import time

import httpx
import openai
import pytest
from PIL import Image
from serving import TOKEN, Server, free_port

from wanjax.entrypoints.cli import main

LONG = 100  # steps of a job that keeps the worker busy for at least 2 s
pytestmark = pytest.mark.filterwarnings("ignore:The Sora API:DeprecationWarning")


@pytest.fixture(scope="module")
def cache(demo_cache):
    return demo_cache.parent


@pytest.fixture(scope="module")
def server(cache, tmp_path_factory):
    server = Server(tmp_path_factory.mktemp("serve") / "out", cache).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def sdk(server):
    """The openai SDK as any of its users makes it; no retries, so that a 429 reaches the test."""
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key=TOKEN, max_retries=0)


def test_a_video_made_through_the_sdk_is_byte_identical_to_wanjax_generate(server, sdk, cache, tmp_path, monkeypatch):
    video = sdk.videos.create_and_poll(prompt="a fox", model="demo", seconds="0.3", size="48x32", extra_body={"seed": 3})
    assert (video.status, video.progress, video.seconds, video.size, video.error) == ("completed", 100, "0.31", "48x32", None)
    assert video.completed_at >= video.created_at and video.model == "demo" and video.object == "video"
    content = sdk.videos.download_content(video.id).read()
    thumbnail = sdk.videos.download_content(video.id, variant="thumbnail").read()
    assert thumbnail[:4] == b"RIFF" and thumbnail[8:12] == b"WEBP"
    assert int(sdk.videos.with_raw_response.retrieve(video.id).headers["openai-poll-after-ms"]) > 0

    monkeypatch.setenv("WANJAX_CACHE", str(cache))
    out = tmp_path / "fox.mp4"
    sizes = ["--height", "32", "--width", "48", "--num-frames", "5", "--steps", "2"]
    assert main(["generate", "--prompt", "a fox", "--seed", "3", *sizes, "--quiet", "--out", str(out)]) == 0
    assert content == out.read_bytes()
    assert not [p for p in server.output_dir.rglob("*") if ".partial-" in p.name]


DBCACHE = {"cache_policy": "dbcache", "Fn_compute_blocks": 1, "max_warmup_steps": 1, "residual_diff_threshold": 1,
           "enable_taylorseer": True, "taylorseer_order": 2}  # fmt: skip
"""DBCache with TaylorSeer on the demo's 2 blocks and 2 steps: the first computes, the second reuses."""


def test_a_request_given_dbcache_makes_the_video_wanjax_generate_makes_with_those_keys(sdk, cache, tmp_path, monkeypatch, capsys):
    video = sdk.videos.create_and_poll(prompt="a fox", size="48x32", seconds="0.3", extra_body={"seed": 3, **DBCACHE})
    assert video.status == "completed" and video.model_extra["cache"] == {**DBCACHE, "Bn_compute_blocks": 0,
        "warmup_interval": 1, "max_cached_steps": -1, "max_continuous_cached_steps": -1}  # fmt: skip
    monkeypatch.setenv("WANJAX_CACHE", str(cache))
    out = tmp_path / "fox.mp4"
    keys = [item for key, value in DBCACHE.items() for item in ("--set", f"{key}={str(value).lower()}")]
    sizes = ["--height", "32", "--width", "48", "--num-frames", "5", "--steps", "2"]
    assert main(["generate", "--prompt", "a fox", "--seed", "3", *sizes, *keys, "--out", str(out)]) == 0
    assert "cache_policy=dbcache: 1 of 2 steps skipped" in capsys.readouterr().out
    assert sdk.videos.download_content(video.id).read() == out.read_bytes()


def test_the_sdk_lists_videos_by_cursor_and_the_served_model(server, sdk):
    made = [sdk.videos.create(prompt=f"listed {i}", extra_body={"seed": i}).id for i in range(3)]
    listed = [video.id for video in sdk.videos.list(limit=2, order="asc")]  # the SDK follows `after`
    assert [video_id for video_id in listed if video_id in made] == made
    assert sdk.videos.list(limit=1).data[0].id == made[-1]
    assert [model.id for model in sdk.models.list()] == ["demo"]
    for video_id in made:
        server.wait(video_id)


def test_sdk_delete_stops_a_running_job_and_removes_its_files(server, sdk):
    video = sdk.videos.create(prompt="long", extra_body={"num_inference_steps": LONG})
    server.wait(video.id, until=lambda v: v["status"] == "in_progress" and v["progress"] > 0)
    deleted = sdk.videos.delete(video.id)
    assert (deleted.id, deleted.deleted, deleted.object) == (video.id, True, "video.deleted")
    stopped = sdk.videos.poll(video.id)
    assert stopped.status == "failed" and stopped.error.code == "cancelled" and stopped.progress < 100
    assert not (server.output_dir / video.id).exists()
    with pytest.raises(openai.ConflictError):
        sdk.videos.download_content(video.id)


@pytest.mark.parametrize(
    ("create", "named"),
    [({"size": "48x33"}, "size='48x33'"), ({"model": "sora-2"}, "model='sora-2'"), ({"seconds": "soon"}, "seconds"),
     ({"extra_body": {"num_frames": 6}}, "num_frames"), ({"extra_body": {"colour": 1}}, "colour"),
     ({"extra_body": {"cache_policy": "dbcache", "Fn_compute_blocks": 3}}, "Fn_compute_blocks=3: this transformer has 2 blocks")],
)  # fmt: skip
def test_a_bad_field_is_422_naming_it(sdk, create, named):
    with pytest.raises(openai.UnprocessableEntityError, match=named):
        sdk.videos.create(prompt="x", **create)


def test_an_image_for_a_text_to_video_model_is_refused_before_queueing(sdk):
    png = io.BytesIO()
    Image.new("RGB", (48, 32), (200, 120, 40)).save(png, format="PNG")
    with pytest.raises(openai.UnprocessableEntityError, match="takes no image"):
        sdk.videos.create(prompt="a fox", input_reference=("fox.png", png.getvalue(), "image/png"))


def test_a_request_whose_memory_plan_does_not_fit_is_422_before_queueing(server):
    response = server.submit(prompt="huge", width=16384, height=16384, num_frames=321)
    message = response.json()["error"]["message"]
    assert response.status_code == 422 and "GiB" in message and "What would make it fit" in message
    assert "wanjax_queue_depth 0" in server.client.get("/metrics").text


def test_a_second_server_on_the_same_folder_refuses_to_start_naming_the_first(server, capsys):
    status = main(["serve", "--port", str(free_port()), "--output-dir", str(server.output_dir), "--token", "t"])
    assert status == 2
    assert f"{server.output_dir} is in use by another wanjax serve (pid {server.process.pid})" in capsys.readouterr().err


def test_the_token_is_required_but_not_by_the_probes(server):
    assert httpx.post(f"{server.url}/v1/videos", json={"prompt": "x"}).status_code == 401
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=f"{server.url}/v1", api_key="wrong", max_retries=0).models.list()
    assert httpx.get(f"{server.url}/healthz").status_code == 200
    assert "wanjax_queue_depth" in server.client.get("/metrics").text


def _cancelled_total(server) -> int:
    line = 'wanjax_jobs_total{outcome="cancelled"} '
    return sum(int(row.removeprefix(line)) for row in server.client.get("/metrics").text.splitlines() if row.startswith(line))


def test_cancel_a_queued_and_a_running_job_and_429_when_the_queue_is_full(server):
    cancelled = _cancelled_total(server)
    running = server.submit(prompt="long", num_inference_steps=LONG).json()["id"]
    server.wait(running, until=lambda video: video["status"] == "in_progress")
    # Another size: none of these joins a batch with the running one, all wait in the queue.
    queued = [server.submit(prompt=f"q{i}", height=48).json()["id"] for i in range(server.queue_size)]
    refused = server.submit(prompt="one too many", height=48)
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) > 0

    assert server.client.delete(f"/v1/videos/{queued[0]}").json()["deleted"] is True
    assert server.client.get(f"/v1/videos/{queued[0]}").json()["error"]["code"] == "cancelled"
    assert server.client.delete(f"/v1/videos/{running}").status_code == 200
    stopped = server.wait(running)
    assert stopped["error"]["code"] == "cancelled" and stopped["steps_done"] < LONG
    assert [server.wait(video_id)["status"] for video_id in queued[1:]] == ["completed"] * (server.queue_size - 1)
    assert _cancelled_total(server) == cancelled + 2


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
    assert {server.wait(video_id)["status"] for video_id in accepted} == {"completed"}
    assert all((server.output_dir / video_id / "video.mp4").is_file() for video_id in accepted)
    assert "wanjax_batches_total" in server.client.get("/metrics").text


def test_sigterm_stops_the_running_job_at_its_next_step_and_a_restart_runs_it(cache, tmp_path):
    server = Server(tmp_path / "out", cache).start()
    running = server.submit(prompt="stopped mid-run", num_inference_steps=LONG).json()["id"]
    queued = server.submit(prompt="still queued", height=48).json()["id"]
    server.wait(running, until=lambda video: video["status"] == "in_progress" and video["steps_done"] > 0)
    server.stop(signal.SIGTERM)
    assert server.process.returncode == 128 + signal.SIGTERM
    with sqlite3.connect(tmp_path / "out" / "jobs.sqlite") as records:
        rows = dict(records.execute("SELECT id, status || ' ' || steps_done FROM jobs").fetchall())
    assert rows == {running: "queued 0", queued: "queued 0"}  # recorded for the restart, not left running

    server = Server(tmp_path / "out", cache).start()
    try:
        assert [server.wait(video_id)["status"] for video_id in (running, queued)] == ["completed"] * 2
    finally:
        server.stop()


def test_after_kill_9_a_restart_accounts_for_every_accepted_job(cache, tmp_path):
    server = Server(tmp_path / "out", cache).start()
    done = server.submit(prompt="done first").json()["id"]
    server.wait(done)
    mid = server.submit(prompt="killed mid-run", num_inference_steps=LONG).json()["id"]
    waiting = [server.submit(prompt=f"waiting {i}", num_inference_steps=LONG).json()["id"] for i in range(2)]
    server.wait(mid, until=lambda video: video["status"] == "in_progress" and video["steps_done"] > 0)
    server.stop(signal.SIGKILL)
    first_video = (tmp_path / "out" / done / "video.mp4").read_bytes()

    server = Server(tmp_path / "out", cache).start()
    try:
        assert server.client.get(f"/v1/videos/{done}").json()["status"] == "completed"
        assert server.client.get(f"/v1/videos/{done}/content").content == first_video
        for video_id in (mid, *waiting):
            assert server.wait(video_id)["status"] == "completed"
    finally:
        server.stop()


def test_sigterm_ends_a_run_stuck_before_its_next_step_within_the_stop_timeout(cache, tmp_path):
    server = Server(tmp_path / "out", cache, options=("--stop-timeout", "1")).start()
    stuck = server.submit(prompt="stuck in a long compile").json()["id"]
    server.wait(stuck, until=lambda video: video["status"] == "in_progress")
    started = time.monotonic()
    server.stop(signal.SIGTERM)
    assert server.process.returncode == 128 + signal.SIGTERM and time.monotonic() - started < 15
    with sqlite3.connect(tmp_path / "out" / "jobs.sqlite") as records:  # left running: the next start runs it
        assert records.execute("SELECT status FROM jobs WHERE id = ?", (stuck,)).fetchone() == ("running",)


def test_a_second_sigterm_ends_the_server_at_once_with_143(cache, tmp_path):
    server = Server(tmp_path / "out", cache).start()  # the default --stop-timeout: 30 s
    stuck = server.submit(prompt="stuck in a long VAE decode").json()["id"]
    server.wait(stuck, until=lambda video: video["status"] == "in_progress")
    started = time.monotonic()
    server.process.send_signal(signal.SIGTERM)
    time.sleep(1)
    server.stop(signal.SIGTERM)
    assert server.process.returncode == 128 + signal.SIGTERM and time.monotonic() - started < 15
