"""Wan 2.2 Animate over the video API, in-process (Starlette's test client) over a real JobRunner
and service on the tiny random Animate checkpoint, 48x32, 2 steps: the character, pose, face,
background and mask sent as files in a multipart form as the openai SDK sends one; the job's video
byte-identical to the service's on the same files read as `wanjax generate` reads them (the
character placed on its canvas the same way, the face video stretched from 20x12 to the model's
16x16 faces the same way), over two segments whose steps the progress counts
as one run's; bad Animate files refused with a 422 naming the field before anything is queued."""

import re

import numpy as np
import pytest
from in_process_server import finished, in_process_server
from PIL import Image
from video_diff import video_difference

from wanjax.adapters.media.readers import read_input
from wanjax.domain.inputs.reader import VideoSize
from wanjax.adapters.media.video_files import Mp4Sink
from wanjax.application.container import build_container
from wanjax.application.presets import resolve_config
from wanjax.domain.modes.animate.mode import ANIMATE

HEIGHT, WIDTH, FRAMES, FPS = 32, 48, 13, 16  # segments of 9 frames, 1 given: two segments
FACE = (12, 20)  # height, width: not the model's 16x16, which the run stretches it to
SETTINGS = {"dtype": "float32", "height": str(HEIGHT), "width": str(WIDTH), "num_inference_steps": "2",
            "segment_frame_length": "9", "max_sequence_length": "512", "fps": str(FPS)}  # fmt: skip
"""The parity test's sizes (tests/parity/test_animate_pipeline_parity.py): a worker that ran it
reads the VAE's and image encoder's programs from its compilation cache."""


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The inputs as files, by input name: the character at another size than the video's, the
    face video at another than the model's faces."""
    folder = tmp_path_factory.mktemp("animate-inputs")
    rng = np.random.default_rng(3)
    pixels = lambda *shape: rng.integers(0, 256, shape, dtype=np.uint8)  # noqa: E731
    mask = np.zeros((FRAMES, HEIGHT, WIDTH, 3), np.uint8)
    mask[:, 8:24, 16:32] = 255
    videos = {"pose_video": pixels(FRAMES, HEIGHT, WIDTH, 3), "face_video": pixels(FRAMES, *FACE, 3),
              "background_video": pixels(FRAMES, HEIGHT, WIDTH, 3), "mask": mask}  # fmt: skip
    paths = {"image": folder / "character.png"}
    Image.fromarray(pixels(40, 24, 3)).save(paths["image"])
    for name, frames in videos.items():
        paths[name] = folder / f"{name}.mp4"
        Mp4Sink().write(frames, paths[name], fps=FPS)
    return paths


@pytest.fixture(scope="module")
def served(tiny_animate_checkpoint, tmp_path_factory):
    """(config, service, runner, client) of one started server."""
    config = resolve_config(str(tiny_animate_checkpoint), SETTINGS)
    service = build_container(config).service()
    with in_process_server(service, config, tmp_path_factory.mktemp("animate-serve"), model="tiny-animate") as served:
        yield config, service, *served


def _submit(client, files, **fields):
    """A multipart submission of `files` (by client field: a path) and text `fields`."""
    uploads = {name: (path.name, path.read_bytes()) for name, path in files.items()}
    return client.post("/v1/videos", data={"prompt": "a dancer", **fields}, files=uploads)


def _client_files(files, *names):
    client_field = {field.name: field.http for field in ANIMATE.inputs}
    return {client_field[name]: files[name] for name in names}


def test_a_replacement_over_http_is_the_video_wanjax_generate_makes_of_the_same_files(served, files, tmp_path):
    config, service, runner, client = served
    response = _submit(client, _client_files(files, *files), seed="3")
    assert response.status_code == 202, response.text
    video = finished(client, response.json()["id"])
    assert video["status"] == "completed", video["error"]
    assert (video["num_frames"], video["seconds"]) == (FRAMES, "0.81")  # the pose video's length at 16 fps

    size = VideoSize(config.sampling.num_frames, HEIGHT, WIDTH)
    read = {field.name: read_input(field.kind, files[field.name], field.flag, size) for field in ANIMATE.inputs}
    steps = []
    request = config.request("a dancer", seed=3, **read)
    frames = service.generate(request, on_step=lambda done, total: steps.append((done, total))).array[0]
    assert frames.shape == (FRAMES, HEIGHT, WIDTH, 3)  # the pose video's length, over two segments
    assert steps == [(1, 4), (2, 4), (3, 4), (4, 4)]  # the progress (the job's, the CLI's bar) spans both
    Mp4Sink().write(frames, tmp_path / "cli.mp4", fps=FPS)  # as `wanjax generate` writes it
    served_bytes, cli_bytes = runner.files.video(video["id"]).read_bytes(), (tmp_path / "cli.mp4").read_bytes()
    assert served_bytes == cli_bytes, video_difference(served_bytes, cli_bytes)


def _tiny_mp4(tmp_path, frames, height, width):
    path = tmp_path / f"{frames}x{height}x{width}.mp4"
    Mp4Sink().write(np.zeros((frames, height, width, 3), np.uint8), path, fps=FPS)
    return path


@pytest.mark.parametrize(
    ("changes", "names", "message"),
    [({"pose_video": (1, HEIGHT, WIDTH)}, ("image", "pose_video", "face_video"), "the pose video has 1 frame"),
     ({}, ("image", "pose_video", "face_video", "background_video"), "needs both background_video and mask"),
     ({}, ("pose_video", "face_video"), "needs the character \\(input_reference\\)"),
     ({"face_video": b"not a video"}, ("image", "pose_video", "face_video"), "face_video .* is not an mp4")],
)  # fmt: skip
def test_bad_animate_files_are_a_422_naming_the_field(served, files, tmp_path, changes, names, message):
    *_, client = served
    given = dict(files)
    for name, change in changes.items():
        if isinstance(change, bytes):
            given[name] = tmp_path / "bad.mp4"
            given[name].write_bytes(change)
        else:
            given[name] = _tiny_mp4(tmp_path, *change)
    response = _submit(client, _client_files(given, *names))
    assert response.status_code == 422 and re.search(message, response.json()["error"]["message"]), response.text
