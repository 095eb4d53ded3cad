"""Wan 2.2 S2V over the video API, in-process (Starlette's test client) over a real JobRunner and
service on the tiny official-format S2V folder (tests/official_folders.py), 64x128 (the parity
test's size), 2 steps, clips of 8 frames: the reference image (`input_reference`, of another size
and aspect than the video) and 0.3 s of 16 kHz speech (`audio`: one clip) sent as files in a
multipart form; the job's video byte-identical to the service's on the same files read as
`wanjax generate` reads them; bad S2V files refused with a 422 naming the field before anything
is queued."""

import re
import wave

import numpy as np
import pytest
from in_process_server import finished, in_process_server
from official_folders import TEXT_LEN
from PIL import Image
from video_diff import video_difference

from wanjax.adapters.media.readers import read_input
from wanjax.adapters.media.video_files import Mp4Sink
from wanjax.application.container import build_container
from wanjax.application.presets import resolve_config
from wanjax.domain.inputs.reader import VideoSize
from wanjax.domain.modes.s2v.inputs import INPUTS

pytestmark = pytest.mark.filterwarnings("ignore:.*CUDA is not available:UserWarning")
HEIGHT, WIDTH, INFER_FRAMES, FPS, RATE = 64, 128, 8, 16, 16_000
FRAMES = INFER_FRAMES - 3  # one clip (0.3 s of speech), the first clip's 3 frames dropped
SETTINGS = {"dtype": "float32", "height": str(HEIGHT), "width": str(WIDTH), "num_inference_steps": "2",
            "max_sequence_length": str(TEXT_LEN), "text_embeddings_cache_dir": "none", "fps": str(FPS)}  # fmt: skip
HTTP = {field.name: field.http for field in INPUTS}


def _wav(path, samples: np.ndarray) -> None:
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1), out.setsampwidth(2), out.setframerate(RATE)
        out.writeframes(samples.astype("<i2").tobytes())


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The inputs as files, by input name."""
    folder = tmp_path_factory.mktemp("s2v-inputs")
    rng = np.random.default_rng(7)
    Image.fromarray(rng.integers(0, 256, (40, 100, 3), dtype=np.uint8)).save(folder / "reference.png")
    _wav(folder / "speech.wav", rng.standard_normal(int(0.3 * RATE)) * 3000)
    return {"image": folder / "reference.png", "audio": folder / "speech.wav"}


@pytest.fixture(scope="module")
def served(tiny_s2v_checkpoint, tmp_path_factory):
    """(config, service, runner, client) of one started server."""
    config = resolve_config(str(tiny_s2v_checkpoint), SETTINGS)
    service = build_container(config).service()
    with in_process_server(service, config, tmp_path_factory.mktemp("s2v-serve"), model="tiny-s2v") as served:
        yield config, service, *served


def _submit(client, files, **fields):
    """A multipart submission of `files` (by input name: a path) under their HTTP fields."""
    uploads = {HTTP[name]: (path.name, path.read_bytes()) for name, path in files.items()}
    return client.post("/v1/videos", data={"prompt": "a woman talks", **fields}, files=uploads)


def test_speech_to_video_over_http_is_the_video_wanjax_generate_makes_of_the_same_files(served, files, tmp_path):
    config, service, runner, client = served
    response = _submit(client, files, seed="3", infer_frames=str(INFER_FRAMES))
    assert response.status_code == 202, response.text
    video = finished(client, response.json()["id"])
    assert video["status"] == "completed", video["error"]
    assert video["num_frames"] == FRAMES

    size = VideoSize(config.sampling.num_frames, HEIGHT, WIDTH)
    read = {field.name: read_input(field.kind, files[field.name], field.flag, size) for field in INPUTS
            if field.name in files}  # fmt: skip
    request = config.request("a woman talks", seed=3, infer_frames=INFER_FRAMES, **read)
    frames = service.generate(request).array[0]
    assert frames.shape == (FRAMES, HEIGHT, WIDTH, 3)
    Mp4Sink().write(frames, tmp_path / "cli.mp4", fps=FPS)  # as `wanjax generate` writes it
    served_bytes, cli_bytes = runner.files.video(video["id"]).read_bytes(), (tmp_path / "cli.mp4").read_bytes()
    assert served_bytes == cli_bytes, video_difference(served_bytes, cli_bytes)


@pytest.mark.parametrize(
    ("audio", "names", "message"),
    [(b"not a sound", ("image", "audio"), "audio .*is not a wav, mp3 or flac file"),
     (np.zeros(400), ("image", "audio"), "audio is 400 samples at 16 kHz; wav2vec2 needs at least 720"),
     (None, ("audio",), "needs the reference image \\(input_reference\\)")],
)  # fmt: skip
def test_bad_s2v_files_are_a_422_naming_the_field(served, files, tmp_path, audio, names, message):
    *_, runner, client = served
    given = dict(files)
    if isinstance(audio, bytes):
        given["audio"] = tmp_path / "bad.wav"
        given["audio"].write_bytes(audio)
    elif audio is not None:
        given["audio"] = tmp_path / "short.wav"
        _wav(given["audio"], audio)
    listed = client.get("/v1/videos").json()
    response = _submit(client, {name: given[name] for name in names}, infer_frames=str(INFER_FRAMES))
    assert response.status_code == 422 and re.search(message, response.json()["error"]["message"]), response.text
    assert client.get("/v1/videos").json() == listed  # nothing queued
