"""The video API in-process (Starlette's test client) over a runner on fake model components:
submissions shaped as the openai SDK sends them (multipart, extras as text fields) or as JSON,
the video object, listing, deletion, and the errors for what cannot run."""

import base64
import io
import re
import sqlite3
import threading
import time

import numpy as np
import pytest
from fakes import FakeDenoiser, fake_service
from PIL import Image
from starlette.testclient import TestClient

from wanjax.adapters.sqlite_jobs import SqliteJobStore
from wanjax.application.job_requests import request_record
from wanjax.application.job_runner import JobRunner
from wanjax.domain.conditioning import ImageConditioning
from wanjax.domain.config import GenerationConfig
from wanjax.domain.jobs import Job, JobStatus
from wanjax.entrypoints.http_api import build_app
from wanjax.entrypoints.video_api import video_object

CONFIG = GenerationConfig.from_mapping(dict(height=64, width=96, num_frames=9, num_inference_steps=4, max_sequence_length=5))


@pytest.fixture
def runner(tmp_path):
    """An image-to-video model that also runs without an image (as TI2V does); not started (jobs
    stay queued) unless a test starts it."""
    service = fake_service(FakeDenoiser, image_conditioning=ImageConditioning.FIRST_FRAME)
    store = SqliteJobStore(tmp_path / "jobs.sqlite")
    return JobRunner(service, CONFIG, store, output_dir=tmp_path, queue_capacity=4, max_batch=1, model="wan-test")


@pytest.fixture
def client(runner):
    return TestClient(build_app(runner, token="s3cret"), headers={"Authorization": "Bearer s3cret"})


def _png() -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(np.full((8, 12, 3), 200, np.uint8)).save(buffer, format="PNG")
    return buffer.getvalue()


def _form(client, fields, files=None):
    """A multipart POST as the SDK makes it: every field as text, a list as `name[]` once per item;
    `files` by field, each (filename, bytes)."""
    parts = [(f'name="{name}[]"' if isinstance(value, list) else f'name="{name}"', str(item).encode())
             for name, value in fields.items() for item in (value if isinstance(value, list) else [value])]  # fmt: skip
    parts += [(f'name="{name}"; filename="{filename}"', data) for name, (filename, data) in (files or {}).items()]
    boundary = "wanjax-test-boundary"
    content = b"".join(f"--{boundary}\r\nContent-Disposition: form-data; {head}\r\n\r\n".encode() + data + b"\r\n"
                       for head, data in parts) + f"--{boundary}--\r\n".encode()  # fmt: skip
    return client.post("/v1/videos", content=content, headers={"content-type": f"multipart/form-data; boundary={boundary}"})


def test_an_sdk_shaped_submission_is_validated_once_and_kept_with_its_image_as_a_file(client, runner, tmp_path):
    fields = {"prompt": "a cat", "model": "wan-test", "seconds": "1", "size": "112x48", "seed": 7,
              "guidance_scale": 4.5, "sample_timesteps": [1000, 500]}  # fmt: skip
    response = _form(client, fields, files={"input_reference": ("cat.png", _png())})
    assert response.status_code == 202, response.text
    video = response.json()
    assert {k: video[k] for k in ("object", "model", "status", "progress", "size", "seconds", "prompt", "error")} == {
        "object": "video", "model": "wan-test", "status": "queued", "progress": 0, "size": "112x48",
        "seconds": "1.06", "prompt": "a cat", "error": None}  # fmt: skip
    assert isinstance(video["created_at"], int) and int(response.headers["openai-poll-after-ms"]) > 0
    assert response.headers["Location"] == f"/v1/videos/{video['id']}"
    request = runner.get(video["id"]).request
    assert (request["seed"], request["num_frames"], request["guidance_scale"]) == (7, 17, 4.5)  # 1 s at 16 fps
    assert request["sample_timesteps"] == [1000, 500] and request["media"] == ["image"]
    assert (runner.files.folder(video["id"]) / "input-image").read_bytes() == _png()
    with sqlite3.connect(tmp_path / "jobs.sqlite") as records:
        assert base64.b64encode(_png()).decode()[:40] not in str(records.execute("SELECT * FROM jobs").fetchall())


def test_a_json_body_takes_wanjax_fields_and_a_base64_first_frame(client, runner):
    body = {"prompt": "a cat", "num_frames": 5, "width": 48, "height": 32,
            "input_reference": "data:image/png;base64," + base64.b64encode(_png()).decode()}  # fmt: skip
    response = client.post("/v1/videos", json=body)
    assert response.status_code == 202 and response.json()["size"] == "48x32" and response.json()["seconds"] == "0.31"
    assert runner.get(response.json()["id"]).request["media"] == ["image"]


@pytest.mark.parametrize(
    ("fields", "files", "named"),
    [({"prompt": "x", "size": "1280x721"}, None, "size='1280x721'"), ({"prompt": "x", "seconds": "a while"}, None, "seconds"),
     ({"prompt": "x", "model": "sora-2"}, None, "model='sora-2'"), ({"prompt": "x", "colour": "red"}, None, "colour"),
     ({"prompt": "x", "seed": "seven"}, None, "seed='seven'"), ({"seed": 1}, None, "prompt"),
     ({"prompt": "x", "input_reference[image_url]": "https://x/y.png"}, None, "input_reference"),
     ({"prompt": "x"}, {"picture": ("p.png", _png())}, "picture"),
     ({"prompt": "x"}, {"input_reference": ("p.png", b"not an image")}, "input_reference"),
     ({"prompt": "x"}, {"input_reference": ("p.png", _png()[:40] + bytes(30))}, "input_reference"),
     ({"prompt": "x"}, {"video": ("v.mp4", b"\x00\x00\x00\x18ftypmp42" + bytes(100))}, "video (the request's file) is not a readable")],
)  # fmt: skip
def test_a_bad_submission_is_422_naming_what_is_wrong_and_queues_nothing(client, runner, fields, files, named):
    response = _form(client, fields, files)
    assert response.status_code == 422 and named in response.json()["error"]["message"]
    assert not re.search(r"object at 0x|Errno|'<none>'", response.text), response.text  # no reprs, no FFmpeg numbers
    assert "wanjax_queue_depth 0" in runner.metrics.text()


@pytest.mark.parametrize("content", [b"{not json", b"[1, 2]", b'"a cat"'])
def test_a_body_that_is_not_a_json_object_is_422(client, content):
    response = client.post("/v1/videos", content=content, headers={"content-type": "application/json"})
    assert response.status_code == 422 and "JSON object" in response.json()["error"]["message"]


def test_the_list_pages_by_cursor_newest_first_unless_asked(client):
    ids = [client.post("/v1/videos", json={"prompt": f"job {i}"}).json()["id"] for i in range(3)]
    first = client.get("/v1/videos", params={"limit": 2}).json()
    assert [v["id"] for v in first["data"]] == ids[:0:-1] and first["has_more"] and first["last_id"] == ids[1]
    rest = client.get("/v1/videos", params={"limit": 2, "after": first["last_id"]}).json()
    assert [v["id"] for v in rest["data"]] == ids[:1] and not rest["has_more"]
    assert [v["id"] for v in client.get("/v1/videos", params={"order": "asc"}).json()["data"]] == ids
    for query, named in [({"limit": 0}, "limit"), ({"order": "up"}, "order"), ({"after": "nope"}, "after")]:
        response = client.get("/v1/videos", params=query)
        assert response.status_code == 422 and named in response.json()["error"]["message"]


def test_delete_cancels_a_queued_job_and_a_second_delete_forgets_it(client, runner):
    job_id = _form(client, {"prompt": "a cat"}, {"input_reference": ("cat.png", _png())}).json()["id"]
    assert client.get(f"/v1/videos/{job_id}/content").status_code == 409
    assert client.delete(f"/v1/videos/{job_id}").json() == {"id": job_id, "object": "video.deleted", "deleted": True}
    video = client.get(f"/v1/videos/{job_id}").json()
    assert video["status"] == "failed" and video["error"]["code"] == "cancelled"
    assert not runner.files.folder(job_id).exists()
    assert client.delete(f"/v1/videos/{job_id}").status_code == 200
    assert client.get(f"/v1/videos/{job_id}").status_code == 404 and client.delete(f"/v1/videos/{job_id}").status_code == 404


def test_the_model_is_listed_and_the_page_needs_no_token_where_the_api_does(client, runner):
    (model,) = client.get("/v1/models").json()["data"]
    assert model["id"] == "wan-test" and model["defaults"]["width"] == 96
    assert client.get("/v1/models/wan-test").json()["id"] == "wan-test"
    bare = TestClient(build_app(runner, token="s3cret"))
    assert bare.get("/v1/models").status_code == 401 and bare.get("/v1/videos").status_code == 401
    page = bare.get("/")
    assert page.status_code == 200 and "<video" in bare.get("/page.js").text + page.text
    assert bare.get("/page.css").status_code == 200


@pytest.mark.parametrize(
    ("status", "steps", "wire", "progress", "code"),
    [(JobStatus.RUNNING, (4, 4), "in_progress", 99, None), (JobStatus.RUNNING, (1, 4), "in_progress", 25, None),
     (JobStatus.SUCCEEDED, (4, 4), "completed", 100, None), (JobStatus.CANCELLED, (2, 4), "failed", 50, "cancelled"),
     (JobStatus.FAILED, (0, 0), "failed", 0, "generation_failed")],
)  # fmt: skip
def test_a_jobs_state_reads_as_the_sdk_types_it(status, steps, wire, progress, code):
    record = request_record(CONFIG.request("a cat"))
    job = Job(id="a", request=record, status=status, created_at=10.7, finished_at=12.2 if status.finished else None,
              steps_done=steps[0], steps_total=steps[1], error="boom" if status is JobStatus.FAILED else None)  # fmt: skip
    video = video_object(job, model="m", fps=16)
    assert (video["status"], video["progress"], (video["error"] or {}).get("code")) == (wire, progress, code)
    assert (video["created_at"], video["completed_at"]) == (10, 12 if status.finished else None)
    assert (video["seconds"], video["size"]) == ("0.56", "96x64")


def test_a_completed_video_and_its_thumbnail_download_and_a_lost_file_is_410(runner):
    runner.start()
    client = TestClient(build_app(runner))
    job_id = client.post("/v1/videos", json={"prompt": "a cat"}).json()["id"]
    deadline = time.monotonic() + 30
    while client.get(f"/v1/videos/{job_id}").json()["status"] != "completed":
        assert time.monotonic() < deadline, "the job never completed"
        time.sleep(0.01)
    runner.stop()
    video = client.get(f"/v1/videos/{job_id}/content")
    thumbnail = client.get(f"/v1/videos/{job_id}/content", params={"variant": "thumbnail"})
    assert video.headers["content-type"] == "video/mp4" and video.content == runner.files.video(job_id).read_bytes()
    assert thumbnail.headers["content-type"] == "image/webp" and thumbnail.content[8:12] == b"WEBP"
    assert client.get(f"/v1/videos/{job_id}/content", params={"variant": "spritesheet"}).status_code == 422
    runner.files.video(job_id).unlink()
    gone = client.get(f"/v1/videos/{job_id}/content")
    assert gone.status_code == 410 and f"{job_id}/video.mp4 is gone" in gone.json()["error"]["message"]
    assert str(runner.files.root) not in gone.text  # the server's own paths are not told


def test_a_body_over_the_limit_is_413_whether_its_length_is_declared_or_streamed(runner):
    client = TestClient(build_app(runner, token="s3cret", max_body_mb=1 / 1024), headers={"Authorization": "Bearer s3cret"})
    body = b'{"prompt": "' + b"x" * 2000 + b'"}'
    declared = client.post("/v1/videos", content=body, headers={"content-type": "application/json"})
    streamed = client.post("/v1/videos", content=iter([body[:1000], body[1000:]]), headers={"content-type": "application/json"})
    for response in (declared, streamed):
        assert response.status_code == 413 and "--max-body-mb" in response.json()["error"]["message"]
    assert client.post("/v1/videos", json={"prompt": "small"}).status_code == 202


@pytest.mark.parametrize(
    ("content", "content_type", "status", "named"),
    [(b"[" * 100000 + b"]" * 100000, "application/json", 422, "JSON object"),
     (b'{"prompt": "x", "vace": {"video": "a.mp4"}}', "application/json", 422, "vace"),
     (b'{"prompt": "x", "reference_image": null}', "application/json", 422, "reference_image"),
     (b'{"prompt": "x", "num_inference_steps": 1000000000000}', "application/json", 422, "num_inference_steps"),
     (b'{"prompt": "x", "segment_frame_length": 33}', "application/json", 422, "segment_frame_length=33: a setting of the animate mode"),
     (b'{"prompt": "x", "segment_frame_length": [' + b"1," * 100000 + b'1]}', "application/json", 422, "segment_frame_length=[1, 1,"),
     (b'{"prompt": "x", "negative_prompt": "' + b"blurry " * 5000 + b'"}', "application/json", 422, "negative_prompt"),
     (b'{"prompt": "x"}', "text/plain", 415, "application/json or multipart/form-data")],
)  # fmt: skip
def test_a_hostile_body_is_a_4xx_naming_the_problem_never_a_500(client, content, content_type, status, named):
    response = client.post("/v1/videos", content=content, headers={"content-type": content_type})
    assert response.status_code == status and named in response.json()["error"]["message"]


def test_a_form_past_starlettes_limits_is_a_422_in_the_apis_shape(client):
    response = _form(client, {"prompt": "x", "negative_prompt": "b" * 2**21})
    assert response.status_code == 422 and "at most 1 MiB" in response.json()["error"]["message"]


def test_expert_switch_step_on_a_one_expert_model_is_refused_at_submission(client):
    response = client.post("/v1/videos", json={"prompt": "x", "expert_switch_step": 2})
    assert response.status_code == 422 and "this model has one transformer" in response.json()["error"]["message"]


def test_a_full_queue_is_429_before_the_media_are_read(client):
    for index in range(4):
        assert client.post("/v1/videos", json={"prompt": f"job {index}"}).status_code == 202
    refused = _form(client, {"prompt": "x"}, files={"input_reference": ("bad.png", b"not an image")})
    assert refused.status_code == 429  # a 422 would say the image was read


def test_a_store_that_cannot_write_turns_readyz_and_submissions_503_with_the_reason(client, runner):
    runner.store_error = "the job store jobs.sqlite cannot be used (database or disk is full); free disk space"
    ready = client.get("/readyz")
    assert ready.status_code == 503 and "disk is full" in ready.text
    refused = client.post("/v1/videos", json={"prompt": "x"})
    assert refused.status_code == 503 and "disk is full" in refused.json()["error"]["message"]
    assert int(refused.headers["Retry-After"]) > 0


def test_the_bearer_scheme_is_case_insensitive(runner):
    app = build_app(runner, token="s3cret")
    for given, status in [("bearer s3cret", 200), ("BEARER  s3cret", 200), ("Bearer wrong", 401), ("Basic s3cret", 401), ("s3cret", 401)]:
        assert TestClient(app).get("/v1/models", headers={"Authorization": given}).status_code == status, given


def test_without_a_token_other_hosts_and_other_sites_pages_are_refused(runner):
    client = TestClient(build_app(runner), base_url="http://127.0.0.1:8000")
    assert client.get("/v1/models").status_code == 200
    rebound = client.get("/v1/models", headers={"Host": "attacker.example:8000"})
    assert rebound.status_code == 403 and "Host" in rebound.json()["error"]["message"]
    form = client.post("/v1/videos", content=b'{"prompt": "x"}', headers={"content-type": "text/plain", "Origin": "http://attacker.example"})
    assert form.status_code == 403 and "--token" in form.json()["error"]["message"]
    other_port = client.post("/v1/videos", json={"prompt": "x"}, headers={"Origin": "http://127.0.0.1:3000"})
    assert other_port.status_code == 403
    same_page = client.post("/v1/videos", json={"prompt": "x"}, headers={"Origin": "http://127.0.0.1:8000"})
    assert same_page.status_code == 202


def test_a_running_jobs_video_so_far_is_its_partial_content(tmp_path):
    """The job's frames go into its mp4 as they are decoded; while it runs, `variant=partial` is a
    playable mp4 of its whole fragments so far; once completed, the video itself."""
    import av

    config = GenerationConfig.from_mapping(dict(height=64, width=96, num_frames=81, num_inference_steps=2,
                                                max_sequence_length=5))  # fmt: skip
    runner = JobRunner(fake_service(FakeDenoiser), config, SqliteJobStore(tmp_path / "jobs.sqlite"),
                       output_dir=tmp_path, queue_capacity=4, max_batch=1, model="wan-test")  # fmt: skip
    written, release = threading.Event(), threading.Event()
    video_writer = runner.files.video_writer

    def held_after_writing(job_id, fps):
        video = video_writer(job_id, fps)
        append = video.append

        def append_then_wait(frames):
            append(frames)
            written.set()
            assert release.wait(30), "the test never released the run"

        video.append = append_then_wait
        return video

    runner.files.video_writer = held_after_writing
    client = TestClient(build_app(runner))
    job_id = client.post("/v1/videos", json={"prompt": "a cat"}).json()["id"]
    queued = client.get(f"/v1/videos/{job_id}/content", params={"variant": "partial"})
    assert queued.status_code == 409 and "none of its frames are written yet" in queued.json()["error"]["message"]
    runner.start()
    try:
        assert written.wait(30), "the job never wrote its frames"
        running = client.get(f"/v1/videos/{job_id}")
        assert running.json()["status"] == "in_progress"
        assert (running.json()["segments_done"], running.json()["segments_total"]) == (1, 1)
        partial = client.get(f"/v1/videos/{job_id}/content", params={"variant": "partial"})
        assert partial.status_code == 200 and partial.headers["content-type"] == "video/mp4"
        with av.open(io.BytesIO(partial.content)) as container:
            frames = [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]
        assert 0 < len(frames) < 81 and frames[0].shape == (64, 96, 3)  # x264's lookahead holds the last back
    finally:
        release.set()
    deadline = time.monotonic() + 30
    while client.get(f"/v1/videos/{job_id}").json()["status"] != "completed":
        assert time.monotonic() < deadline, "the job never completed"
        time.sleep(0.01)
    runner.stop()
    done = client.get(f"/v1/videos/{job_id}/content", params={"variant": "partial"})
    assert done.content == runner.files.video(job_id).read_bytes() and runner.files.partial(job_id) is None
    with av.open(io.BytesIO(done.content)) as container:
        assert sum(1 for _ in container.decode(video=0)) == 81
    assert not [p for p in tmp_path.rglob("*") if ".partial-" in p.name]


POLICY_FORMS = {
    "magcache": {"cache_model": "wan2.1-t2v-1.3b", "magcache_thresh": "0.3"},
    "teacache": {"cache_model": "wan2.1-t2v-1.3b", "teacache_thresh": "0.2"},
    "cfg_cache": {"cfg_cache_interval": "3"},
    "sencache": {"sencache_K": "2"},
    "dbcache": {"Fn_compute_blocks": "4", "Bn_compute_blocks": "1", "residual_diff_threshold": "0.2",
                "enable_taylorseer": "true", "taylorseer_order": "2"},
}  # fmt: skip
"""Each policy's keys as the SDK sends them (`extra_body`: every value as text)."""


def test_every_step_cache_is_offered_with_its_keys_at_the_servers_values(client):
    (model,) = client.get("/v1/models").json()["data"]
    assert model["defaults"]["cache_policy"] == "none"
    policies = model["cache_policies"]
    assert list(policies) == ["none", *POLICY_FORMS]
    assert policies["dbcache"] == {"Fn_compute_blocks": 8, "Bn_compute_blocks": 0, "residual_diff_threshold": 0.08,
                                   "max_warmup_steps": 8, "warmup_interval": 1, "max_cached_steps": -1,
                                   "max_continuous_cached_steps": -1, "enable_taylorseer": False,
                                   "taylorseer_order": 1}  # fmt: skip


@pytest.mark.parametrize("policy", list(POLICY_FORMS))
def test_a_request_runs_the_step_cache_it_chooses_with_its_keys(tmp_path, policy):
    """Each policy by name through the app, as the SDK's form sends it: shown in the video object,
    and planned for the run the model makes, whatever the server's own policy (teacache)."""
    config = CONFIG.with_overrides({"cache_policy": "teacache", "cache_model": "wan2.1-t2v-1.3b"})
    denoiser = FakeDenoiser()
    runner = JobRunner(fake_service(lambda: denoiser), config, SqliteJobStore(tmp_path / "jobs.sqlite"),
                       output_dir=tmp_path, queue_capacity=4, max_batch=1, model="wan-test")  # fmt: skip
    client = TestClient(build_app(runner))
    response = _form(client, {"prompt": "a cat", "cache_policy": policy, **POLICY_FORMS[policy]})
    assert response.status_code == 202, response.text
    shown = response.json()["cache"]
    assert shown["cache_policy"] == policy and all(str(shown[key]).lower() == value for key, value in POLICY_FORMS[policy].items()
                                                   if key != "cache_model")  # fmt: skip
    runner.start()
    try:
        deadline = time.monotonic() + 30
        while client.get(f"/v1/videos/{response.json()['id']}").json()["status"] != "completed":
            assert time.monotonic() < deadline, "the job never completed"
            time.sleep(0.01)
    finally:
        runner.stop()
    (plan,) = denoiser.plans
    assert list(plan.cache.features) == [policy]
    if policy == "dbcache":
        rule = plan.cache.features["dbcache"].rule
        assert (rule.first_blocks, rule.last_blocks, rule.threshold, rule.taylorseer_order) == (4, 1, 0.2, 2)


@pytest.mark.parametrize(
    ("fields", "named"),
    [({"cache_policy": "dbcache", "Fn_compute_blocks": "41"}, "Fn_compute_blocks=41: this transformer has 40 blocks"),
     ({"cache_policy": "dbcache", "taylorseer_order": "two"}, "taylorseer_order='two': not a number"),
     ({"cache_policy": "dbcache", "residual_diff_threshold": "nan"}, "residual_diff_threshold='nan'"),
     ({"cache_policy": "cfg_cache", "guidance_scale": "1"}, "cfg_cache"),
     ({"cache_policy": "magcache"}, "cache_policy=magcache needs mag_ratios"),
     ({"magcache_calibration": "true"}, "magcache_calibration: a calibration run's curve"),
     ({"cache_policy": "dbcache", "cache": '{"Fn_compute_blocks": 1}'}, "cache: give the step cache's keys as fields")],
)  # fmt: skip
def test_a_bad_step_cache_is_422_naming_the_key_and_the_fix(client, runner, fields, named):
    response = _form(client, {"prompt": "x", **fields})
    assert response.status_code == 422 and named in response.json()["error"]["message"], response.text
    assert "wanjax_queue_depth 0" in runner.metrics.text()
