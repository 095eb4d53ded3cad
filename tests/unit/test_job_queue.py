"""The bounded job queue: refusal when full, restored jobs always taken in, batching of compatible jobs."""

import pytest

from wanjax.application.job_queue import JobQueue, QueueFull
from wanjax.domain.config import GenerationConfig

CONFIG = GenerationConfig.from_mapping(dict(height=64, width=96, num_frames=9, num_inference_steps=4))


def _request(prompt="a cat", **fields):
    return CONFIG.request(prompt, **fields)


def test_a_full_queue_refuses_without_recording_and_has_room_again_once_a_job_is_taken():
    queue, recorded = JobQueue(capacity=2), []
    for job_id in ("a", "b"):
        queue.put(job_id, _request(), accept=lambda job_id=job_id: recorded.append(job_id))
    with pytest.raises(QueueFull, match="2 jobs"):
        queue.put("c", _request(), accept=lambda: recorded.append("c"))
    assert recorded == ["a", "b"] and len(queue) == 2

    assert [job_id for job_id, _ in queue.take(max_batch=1)] == ["a"]
    queue.put("c", _request())
    assert len(queue) == 2


def test_a_refused_accept_queues_nothing():
    queue = JobQueue(capacity=2)

    def store_down():
        raise OSError("disk full")

    with pytest.raises(OSError):
        queue.put("a", _request(), accept=store_down)
    assert len(queue) == 0


def test_restored_jobs_are_never_refused():
    queue = JobQueue(capacity=1)
    for job_id in ("a", "b", "c"):
        queue.restore(job_id, _request())
    assert len(queue) == 3


def test_take_batches_the_oldest_job_with_later_compatible_ones_in_queue_order():
    queue = JobQueue(capacity=10)
    queue.put("a", _request("one", seed=1))
    queue.put("tall", _request("two", height=128))  # another size: another compiled step
    queue.put("b", _request("three", seed=2, negative_prompt="dull"))
    queue.put("c", _request("four", seed=3))
    queue.put("d", _request("five", seed=4))

    assert [job_id for job_id, _ in queue.take(max_batch=3)] == ["a", "b", "c"]
    assert [job_id for job_id, _ in queue.take(max_batch=3)] == ["tall"]
    assert [job_id for job_id, _ in queue.take(max_batch=3)] == ["d"]
    assert queue.take(max_batch=3, timeout=0) == []


def test_a_removed_job_is_never_taken_and_removing_it_twice_says_so():
    queue = JobQueue(capacity=3)
    queue.put("a", _request())
    queue.put("b", _request())
    assert queue.remove("a") is True and queue.remove("a") is False
    assert [job_id for job_id, _ in queue.take(max_batch=4)] == ["b"]


def test_capacity_must_be_positive():
    with pytest.raises(ValueError, match="at least 1"):
        JobQueue(capacity=0)


def test_only_jobs_with_equal_loras_share_a_batch():
    style, other = ["style.safetensors:0.8"], ["style.safetensors:0.5"]
    queue = JobQueue(capacity=8)
    for job_id, loras in (("a", style), ("b", other), ("c", style), ("d", []), ("e", [*style, "x.safetensors"])):
        queue.put(job_id, _request(loras=loras, seed=len(queue)))
    assert [job_id for job_id, _ in queue.take(max_batch=4)] == ["a", "c"]
    assert [job_id for job_id, _ in queue.take(max_batch=4)] == ["b"]
    assert [job_id for job_id, _ in queue.take(max_batch=4)] == ["d"]


def test_only_jobs_with_equal_step_caches_share_a_batch():
    def cached(**keys):
        return CONFIG.with_cache({"cache_policy": "dbcache", **keys}, source="test")

    queue = JobQueue(capacity=8)
    for job_id, cache in (("a", cached()), ("b", cached(enable_taylorseer=True)), ("c", cached()), ("d", CONFIG.cache)):
        queue.put(job_id, _request(cache=cache, seed=len(queue)))
    assert [job_id for job_id, _ in queue.take(max_batch=4)] == ["a", "c"]
    assert [job_id for job_id, _ in queue.take(max_batch=4)] == ["b"]
    assert [job_id for job_id, _ in queue.take(max_batch=4)] == ["d"]
