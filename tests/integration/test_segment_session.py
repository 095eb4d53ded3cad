"""A video made in segments runs in one denoising session: the text's cross-attention K/V and the
RoPE tables are made once for all segments, the denoising step compiles once, and a segment of the
shape of one before compiles nothing at all (JAX's own compile events, counted from the moment the
second segment's frames are out until the third's are). Each segment's frames are handed on as soon
as it is decoded, and they make the video the whole run returns. A tiny Wan 2.2 Animate model,
three segments of 9 frames overlapping by 1."""

from __future__ import annotations

import attrs
import numpy as np
import pytest
from animate_videos import random_animate_videos

from wanjax.application.container import build_container
from wanjax.application.presets import resolve_config

HEIGHT, WIDTH, FRAMES, SEGMENT, FACE, STEPS = 32, 48, 25, 9, 16, 2


@pytest.fixture(scope="module")
def run(tiny_animate_checkpoint):
    config = resolve_config(str(tiny_animate_checkpoint), {"dtype": "float32", "max_sequence_length": "8"})
    container = build_container(config)
    videos = random_animate_videos(FRAMES, HEIGHT, WIDTH, face=(FACE, FACE))
    request = config.request(
        "a dancer spins", height=HEIGHT, width=WIDTH, num_inference_steps=STEPS, guidance_scale=2.0,
        image=videos["image"], pose_video=videos["pose"], face_video=videos["face"],
        segment_frame_length=SEGMENT, seed=3,
    )  # fmt: skip
    return container, request


def test_segments_share_one_session_and_compile_nothing_anew(run, compile_counter, monkeypatch):
    container, request = run
    service, program = container.service(), container.denoiser().program
    made = {"text K/V": 0, "RoPE": 0}

    def counted(name, make):
        def making(*args, **kwargs):
            made[name] += 1
            return make(*args, **kwargs)

        return making

    monkeypatch.setattr(program, "_text_kv", counted("text K/V", program._text_kv))
    monkeypatch.setattr(program, "_rope_tables", counted("RoPE", program._rope_tables))
    parts, compiles = [], []

    def on_frames(frames):
        parts.append(frames)
        compiles.append(compile_counter.count)

    result = service.generate(request, on_frames=on_frames)
    assert result.array is None  # handed on, not held
    assert [p.shape[1] for p in parts] == [9, 8, 8]  # the first segment's 9 frames, then 8 new each
    assert compiles[2] == compiles[1], "the third segment compiled what the second had"
    assert program.num_compiled == 1  # one denoising step for every segment
    assert made == {"text K/V": 2, "RoPE": 1}  # the K/V's shapes (compiling) and values once; RoPE once

    whole = service.generate(request).array  # the same run, its frames gathered
    np.testing.assert_array_equal(np.concatenate(parts, axis=1), whole)
    assert whole.shape == (1, FRAMES, HEIGHT, WIDTH, 3)


def test_the_memory_plan_holds_one_segments_frames_however_long_the_video(run):
    container, request = run
    planner = container.memory_planner()
    long_pose = np.concatenate([request.input("pose_video")] * 8)  # 200 frames, 25 segments
    long_face = np.concatenate([request.input("face_video")] * 8)
    longer = attrs.evolve(request, inputs={**request.inputs, "pose_video": long_pose, "face_video": long_face})
    short_plan, long_plan = planner.plan(request), planner.plan(longer)
    frames = dict(short_plan.host_parts)["decoded frames, one segment"]
    assert frames == SEGMENT * HEIGHT * WIDTH * 3  # uint8 RGB
    assert long_plan.parts == short_plan.parts and long_plan.host_parts == short_plan.host_parts
