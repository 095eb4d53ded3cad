"""The generation service called from many threads at once, from a fresh (unloaded) start.

Demo model, tiny sizes. Text embeddings are not cached on disk, so every fresh service loads
its text encoder (transformers) while the other threads wait: before the load lock, four threads
loading it at once failed with "Cannot copy out of meta tensor". The cache policy (cfg_cache,
interval 2) skips different steps for different step counts, so a report swapped between
concurrent runs would show. Each fresh service compiles its executables again (the test
session keeps JAX's persistent compilation cache off, tests/conftest.py), so the threads also
meet while compiling.
"""

import threading

import numpy as np
import pytest

from wanjax.application.container import build_container
from wanjax.application.presets import resolve_config

THREADS = 8
REPETITIONS = 5
SETTINGS = {"cache_policy": "cfg_cache", "cfg_cache_interval": "2", "text_embeddings_cache_dir": "off"}
# (prompt, seed, steps) per thread: mixed prompts, seeds and step counts.
REQUESTS = [
    (prompt, seed, steps)
    for prompt, seed, steps in zip(
        ["a fox in the snow", "a koi pond at dawn", "rain on a tin roof", "a lighthouse at night"] * 2,
        [3, 11, 3, 5, 8, 11, 2, 9],
        [3, 4, 5, 3, 4, 5, 3, 4],
    )
]


@pytest.fixture(autouse=True)
def demo_in_session_cache(demo_cache, monkeypatch):
    monkeypatch.setenv("WANJAX_CACHE", str(demo_cache.parent))


def _fresh_service():
    config = resolve_config("demo", SETTINGS)
    return config, build_container(config).service()


def _request(config, index):
    prompt, seed, steps = REQUESTS[index]
    return config.request(prompt, seed=seed, height=32, width=48, num_frames=5, num_inference_steps=steps)


def _report_fields(report):
    return [report.transformer_ran, report.blocks_ran, report.unconditional_ran]


def _concurrently(service, requests):
    """Every request on its own thread, all released at once; the results by request index."""
    start = threading.Barrier(len(requests))
    results, errors = [None] * len(requests), []

    def run(index):
        start.wait()
        try:
            results[index] = service.generate(requests[index])
        except Exception as error:  # recorded, so the test names every failure, not the first
            errors.append((index, repr(error)))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(requests))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    return results


def test_threads_on_a_fresh_service_each_get_the_result_they_would_get_alone():
    config, alone_service = _fresh_service()
    requests = [_request(config, i) for i in range(THREADS)]
    alone = [alone_service.generate(r) for r in requests]
    reports = {tuple(map(tuple, _report_fields(result.cache_report))) for result in alone}
    assert len(reports) >= 3, "the requests must differ in what their cache plans skip, or this shows nothing"

    for _ in range(REPETITIONS):
        _, service = _fresh_service()
        results = _concurrently(service, requests)
        for index, (got, expected) in enumerate(zip(results, alone)):
            assert got.array.tobytes() == expected.array.tobytes(), f"request {index}: another video"
            for got_flags, expected_flags in zip(_report_fields(got.cache_report), _report_fields(expected.cache_report)):
                np.testing.assert_array_equal(got_flags, expected_flags, err_msg=f"request {index}: another report")
