"""A client's video request -> a validated GenerationRequest: the video API's fields (seconds,
size, model, input_reference) and wanjax's, media files decoded before queueing, and the record
a job keeps (media apart), read back as the same request."""

import io
import struct
import zlib

import numpy as np
import pytest
from fakes import FakeDenoiser, fake_service
from PIL import Image

from wanjax.adapters.media.video_files import Mp4Sink
from wanjax.application.job_requests import (
    frames_for_seconds,
    queued_request,
    request_from_record,
    request_record,
    validated_request,
)
from wanjax.domain.architectures import WAN22_ANIMATE_14B
from wanjax.domain.conditioning import ImageConditioning
from wanjax.domain.config import GenerationConfig, is_cache_key
from wanjax.domain.modes.base import ModelTraits
from wanjax.domain.specs import VaeSpec
from wanjax.domain.errors import ConfigError, InvalidRequestError

CONFIG = GenerationConfig.from_mapping(dict(height=32, width=48, num_frames=5, num_inference_steps=4, fps=16))


class _Checks:
    """A service on an Animate model (whose `check_model` the other modes' inputs pass) that checks nothing else."""

    traits = ModelTraits(transformer=WAN22_ANIMATE_14B, vae=VaeSpec(), image_conditioning=ImageConditioning.CHANNELS)

    def check(self, requests):
        self.checked = requests


def _png(value: int) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(np.full((8, 8, 3), value, np.uint8)).save(buffer, format="png")
    return buffer.getvalue()


def _request(fields, media=None, config=CONFIG):
    return validated_request({"prompt": "a fox", **fields}, media or {}, config, _Checks(), model="demo")


@pytest.mark.parametrize(("seconds", "fps", "frames"), [(5, 16, 81), (4, 16, 65), (5, 24, 121), (0.01, 16, 1), (0.3, 16, 5)])
def test_seconds_become_the_nearest_4k_plus_1_frames_at_the_models_rate(seconds, fps, frames):
    assert frames_for_seconds(seconds, fps) == frames


def test_the_video_api_fields_become_request_fields_and_wanjax_fields_win():
    request = _request({"seconds": "4", "size": "96x64", "model": "demo"})
    assert (request.num_frames, request.width, request.height) == (65, 96, 64)
    request = _request({"seconds": "4", "size": "96x64", "num_frames": 9, "width": 112})
    assert (request.num_frames, request.width, request.height) == (9, 112, 64)


def test_media_are_checked_undecoded_and_decoded_from_the_record_when_the_job_runs(tmp_path):
    request = _request({}, {"input_reference": _png(10), "last_image": _png(200)})
    assert request.input("image").shape == request.input("last_image").shape == (8, 8, 3)  # stand-ins: views, nothing decoded yet
    assert request.input("image").base is not None and not request.input("image").any()
    decoded = request_from_record(request_record(request), {"image": _png(10), "last_image": _png(200)}, CONFIG)
    assert decoded.input("image")[0, 0, 0] == 10 and decoded.input("last_image")[0, 0, 0] == 200

    Mp4Sink().write(np.full((7, 32, 48, 3), 128, np.uint8), tmp_path / "source.mp4", fps=16)
    video = (tmp_path / "source.mp4").read_bytes()
    request = _request({"strength": 0.5}, {"video": video})
    assert request.input("video").shape == (5, 32, 48, 3) and request.input("video").base is not None and request.options.strength == 0.5
    assert request_from_record(request_record(request), {"video": video}, CONFIG).input("video").shape == (5, 32, 48, 3)
    with pytest.raises(InvalidRequestError, match=r"video .* has 7 frame\(s\); num_frames=9 needs"):
        _request({"num_frames": 9}, {"video": video})


def test_animate_files_stand_in_at_the_shapes_they_are_read_in_and_survive_the_record(tmp_path):
    """Whole videos counted and sized from their headers (the pose video's length, the face video's
    size; the fitted ones at the video's size; the character at its own, which the run letterboxes),
    kept in the record for a restart, decoded whole."""
    videos = {"pose_video": (11, 32, 48), "face_video": (11, 16, 16), "background_video": (7, 64, 96),
              "mask": (3, 32, 48)}  # fmt: skip
    files = {}
    for name, shape in videos.items():
        Mp4Sink().write(np.full((*shape, 3), 255, np.uint8), tmp_path / f"{name}.mp4", fps=16)
        files[name] = (tmp_path / f"{name}.mp4").read_bytes()
    request = _request({"segment_frame_length": 5}, {"input_reference": _png(9), **files})
    stand_ins = {name: request.input(name).shape for name in ("image", *videos)}
    assert stand_ins == {"image": (8, 8, 3), "pose_video": (11, 32, 48, 3), "face_video": (11, 16, 16, 3),
                         "background_video": (7, 32, 48, 3), "mask": (3, 32, 48)}  # fmt: skip
    record = request_record(request)
    assert record["output_frames"] == 11  # the pose video's, not num_frames=5
    queued = queued_request(record, CONFIG)
    assert queued == request and {name: queued.input(name).shape for name in stand_ins} == stand_ins
    decoded = request_from_record(record, {"image": _png(9), **files}, CONFIG)
    assert {name: decoded.input(name).shape for name in stand_ins} == stand_ins
    assert decoded.input("image").min() == decoded.input("image").max() == 9  # as sent: no canvas yet
    Mp4Sink().write(np.zeros((1, 32, 48, 3), np.uint8), tmp_path / "one.mp4", fps=16)
    with pytest.raises(InvalidRequestError, match=r"the pose video has 1 frame\(s\); Animate needs more than"):
        _request({}, {"input_reference": _png(9), **files, "pose_video": (tmp_path / "one.mp4").read_bytes()})


def _png_header(width: int, height: int) -> bytes:
    """A png that declares its size and holds one row of pixels: decoding it would fail."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    pixels = zlib.compress(bytes(1 + 3 * width))
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


def test_an_image_is_bounded_by_the_videos_size_before_it_is_decoded():
    with pytest.raises(InvalidRequestError, match=r"input_reference .* is 12000x12000: .* at most 36 times"):
        _request({}, {"input_reference": _png_header(12000, 12000)})
    assert _request({}, {"input_reference": _png_header(48 * 6, 32 * 6)}).input("image").shape == (32 * 6, 48 * 6, 3)


def test_a_lone_animate_video_on_a_model_without_animate_says_the_model_does_not_take_it(tmp_path):
    Mp4Sink().write(np.zeros((5, 32, 48, 3), np.uint8), tmp_path / "pose.mp4", fps=16)
    for name in ("pose_video", "face_video"):
        with pytest.raises(InvalidRequestError, match="this model has no Animate blocks and does not take them"):
            validated_request({"prompt": "a dancer"}, {name: (tmp_path / "pose.mp4").read_bytes()}, CONFIG,
                              fake_service(FakeDenoiser), model="demo")  # fmt: skip


def test_a_model_that_takes_no_image_refuses_one_before_reading_it():
    with pytest.raises(InvalidRequestError, match="takes no image"):
        validated_request({"prompt": "a fox"}, {"input_reference": _png_header(12000, 12000)}, CONFIG,
                          fake_service(FakeDenoiser), model="demo")  # fmt: skip


@pytest.mark.parametrize("named", ["source.mp4", "no-such-file.mp4"])
def test_a_playlist_never_reaches_ffmpeg_and_says_nothing_of_the_servers_files(tmp_path, monkeypatch, named):
    Mp4Sink().write(np.full((7, 32, 48, 3), 128, np.uint8), tmp_path / "source.mp4", fps=16)
    monkeypatch.chdir(tmp_path)
    playlist = f"ffconcat version 1.0\nfile '{named}'\n".encode()
    with pytest.raises(InvalidRequestError) as refused:
        _request({}, {"video": playlist})
    assert str(refused.value) == "video (the request's file) is not an mp4, mov, mkv or webm file; send the video as one of those"


def test_the_memory_plan_is_checked_before_anything_is_queued():
    def refuse(request):
        raise InvalidRequestError(f"this request needs about 9.0 GiB ({request.width}x{request.height})")

    with pytest.raises(InvalidRequestError, match=r"9.0 GiB \(4096x4096\)"):
        validated_request({"prompt": "a fox", "size": "4096x4096"}, {}, CONFIG, _Checks(), model="demo", check_memory=refuse)


def test_the_record_is_the_same_request_on_a_server_with_other_defaults():
    request = _request({"seed": 9, "sample_timesteps": [1000, 500], "guidance_scale": 3.5}, {"input_reference": _png(7)})
    record = request_record(request)
    assert record["media"] == ["image"] and "image" not in record and record["num_frames"] == 5
    other = GenerationConfig.from_mapping(dict(height=64, width=64, num_frames=9, num_inference_steps=8, seed=1))
    again = request_from_record(record, {"image": _png(7)}, other)
    assert again == request and again.input("image").shape == (8, 8, 3) and again.input("image")[0, 0, 0] == 7


def test_a_request_chooses_its_step_cache_by_its_keys_and_its_record_keeps_it():
    dbcache = {"cache_policy": "dbcache", "Fn_compute_blocks": "1", "residual_diff_threshold": 1,
               "enable_taylorseer": True, "taylorseer_order": 2}  # fmt: skip
    request = _request(dbcache)
    cache = request.cache
    assert (cache.policy, cache.Fn_compute_blocks, cache.residual_diff_threshold) == ("dbcache", 1, 1.0)
    assert (cache.enable_taylorseer, cache.taylorseer_order, cache.max_warmup_steps) == (True, 2, 8)  # cache-dit's default
    assert _request({}).cache == CONFIG.cache  # no key given: the server's
    record = request_record(request)
    assert record["cache_policy"] == "dbcache" and "cache" not in record
    other = CONFIG.with_overrides({"cache_policy": "teacache", "cache_model": "wan2.1-t2v-1.3b", "Fn_compute_blocks": "3"})
    assert request_from_record(record, {}, other) == request and queued_request(record, other) == request
    before = {name: value for name, value in record.items() if not is_cache_key(name)}  # a record of before
    assert request_from_record(before, {}, other).cache == other.cache


@pytest.mark.parametrize(
    ("fields", "media", "message"),
    [
        ({"size": "big"}, {}, "size='big': give WIDTHxHEIGHT"),
        ({"size": "50x32"}, {}, "size='50x32' gives width=50: must be a multiple of 16"),
        ({"seconds": "soon"}, {}, "seconds='soon': give the duration as a number of seconds"),
        ({"seconds": -1}, {}, "seconds=-1"),
        ({"seconds": "1e308"}, {}, "seconds='1e308'"),
        ({"model": "sora-2"}, {}, "model='sora-2': this server serves 'demo'"),
        ({"image": "AAAA"}, {}, "image: send it as the file `input_reference`"),
        ({"cache": {"cache_policy": "dbcache"}}, {}, "cache: give the step cache's keys as fields of their own"),
        ({"magcache_calibration": True}, {}, "magcache_calibration: .* `wanjax generate"),
        ({"use_magcache": True}, {}, "'use_magcache' is maxdiffusion's switch; .*: cache_policy=magcache"),
        ({"cache_policy": "fastcache"}, {}, "cache_policy='fastcache': must be one of none, .*, dbcache"),
        ({"cache_policy": "dbcache", "Fn_compute_blocks": 0}, {}, "Fn_compute_blocks=0: must be an integer >= 1"),
        ({"cache_policy": "dbcache", "Fn_compute_blocks": 1.5}, {}, "Fn_compute_blocks=1.5 is not a valid int"),
        ({"enable_taylorseer": "maybe"}, {}, "enable_taylorseer='maybe' is not a valid bool \\(true or false\\)"),
        ({"cache_policy": "dbcache", "warmup_interval": 0}, {}, "warmup_interval=0: must be a non-zero integer"),
        ({"reference_image": {}}, {}, "reference_image: VACE inputs are taken by `wanjax generate` only"),
        ({"pose_video": "AAAA"}, {}, "pose_video: send it as the file `pose_video`"),
        ({}, {"input_reference": _png(1), "last_image": b"not a png"}, "last_image .* is not"),
        ({}, {"video": b"not a video"}, "video .* is not an mp4, mov, mkv or webm file"),
        ({}, {"video": b"\x00\x00\x00\x20ftypisom" + bytes(100)}, "video .* is not a readable video file"),
        ({}, {"input_reference": b"GIF89a" + bytes(30)}, "input_reference .* is not a readable png/jpeg/webp image"),
        ({"num_inference_steps": 10**12}, {}, "num_inference_steps=1000000000000: must be an integer from 1 to 1000"),
    ],
)
def test_bad_fields_name_the_field_as_the_client_gave_it(fields, media, message):
    with pytest.raises(InvalidRequestError, match=message):
        _request(fields, media)


def test_the_models_refusal_names_the_clients_field_not_the_cli_flag():
    with pytest.raises(InvalidRequestError, match="takes no image; drop input_reference or use") as refused:
        validated_request({"prompt": "a fox"}, {"input_reference": _png(1)}, CONFIG, fake_service(FakeDenoiser), model="demo")
    assert "--" not in str(refused.value)


def test_an_unknown_field_is_named():
    with pytest.raises(ConfigError, match="colour"):
        _request({"colour": "red"})
