"""Three `wanjax serve` replicas on 127.0.0.1 sharing one PostgreSQL job store (a schema of its own,
tests/postgres.py) and one output folder, the demo model at 48x32, 5 frames, batching off: any
replica answers for any job, a DELETE through one stops the job another runs, and with one replica
killed with SIGKILL mid-job and restarted, 30 jobs from concurrent clients each finish exactly once,
each video byte-identical to `wanjax generate`."""

import collections
import re
import signal
import threading
import time

import pytest
from postgres import own_schema
from serving import Server

from wanjax.entrypoints.cli import main

LEASE_SECONDS = 3
STEPS = 8  # a job's steps: long enough (8 x 20 ms and more) for the kill to find one mid-run
REQUESTS = 3  # the distinct requests (prompt and seed) the 30 jobs repeat, each compared to `wanjax generate`
JOBS = 30
LONG = 1000  # steps of a job that runs for 20 s at least


@pytest.fixture(scope="module")
def cluster(demo_cache, tmp_path_factory):
    """The three replicas (started together), their shared output folder and the file their runs
    are counted in (tests/slow_steps_serve.py); a replica the test replaces is stopped too."""
    folder = tmp_path_factory.mktemp("replicas")
    runs = folder / "runs.txt"
    with own_schema() as url, pytest.MonkeyPatch.context() as env:
        env.setenv("WANJAX_TEST_RUNS", str(runs))
        options = ("--jobs", url, "--lease-seconds", str(LEASE_SECONDS), "--max-batch", "1")

        def replica(index: int) -> Server:
            log = folder / f"replica-{index}.log"
            return Server(folder / "out", demo_cache.parent, queue_size=64, options=options, log=log)

        replicas = [replica(index) for index in range(3)]
        starting = [threading.Thread(target=server.start) for server in replicas]
        for thread in starting:
            thread.start()
        for thread in starting:
            thread.join()
        cluster = {"replicas": replicas, "new": replica, "runs": runs, "output": folder / "out"}
        yield cluster
        for server in cluster["replicas"]:
            if server.process.poll() is None:
                server.stop()


def _replicas_running(replicas, video_id):
    """The replicas that report the job's live progress: the one running it."""
    return [server for server in replicas if server.client.get(f"/v1/videos/{video_id}").json()["steps_done"] > 0]


def test_a_delete_through_one_replica_stops_the_job_another_runs(cluster):
    first, second, third = cluster["replicas"]
    video_id = first.submit(prompt="long, deleted elsewhere", num_inference_steps=LONG).json()["id"]
    deadline = time.monotonic() + 120
    while not (holders := _replicas_running(cluster["replicas"], video_id)):
        assert time.monotonic() < deadline, "no replica ran the job"
        time.sleep(0.1)
    [holder] = holders
    other = next(server for server in (second, third, first) if server is not holder)
    asked = time.monotonic()
    assert other.client.delete(f"/v1/videos/{video_id}").json()["deleted"] is True
    stopped = holder.wait(video_id, until=lambda video: video["completed_at"] is not None)  # recorded by its runner
    assert time.monotonic() - asked < 10  # its next step, not the 20 s its remaining steps take
    assert stopped["error"]["code"] == "cancelled" and stopped["steps_done"] < LONG
    assert third.client.get(f"/v1/videos/{video_id}").json()["error"]["code"] == "cancelled"
    assert not (cluster["output"] / video_id).exists()


def test_kill_9_of_a_replica_mid_job_and_a_restart_lose_no_job_and_run_none_twice(cluster, tmp_path, monkeypatch):
    replicas = cluster["replicas"]
    cluster["runs"].write_text("")  # count this test's runs only
    accepted, errors = [], []

    def client(index: int) -> None:
        for job in range(JOBS // 6):
            number = index * (JOBS // 6) + job
            server = replicas[number % 3]
            response = server.submit(prompt=f"replica test {number % REQUESTS}", seed=number % REQUESTS,
                                     num_inference_steps=STEPS)  # fmt: skip
            (accepted if response.status_code == 202 else errors).append(response.json().get("id", response.text))

    clients = [threading.Thread(target=client, args=(index,)) for index in range(6)]
    for thread in clients:
        thread.start()
    killed = replicas[0]
    deadline = time.monotonic() + 120
    mid_run = None
    while mid_run is None:  # a job the first replica is running, some of its steps done
        assert time.monotonic() < deadline, "the first replica ran no job"
        for video_id in list(accepted):
            video = killed.client.get(f"/v1/videos/{video_id}").json()
            if video["status"] == "in_progress" and 0 < video["steps_done"] < STEPS:
                mid_run = video_id
                break
        time.sleep(0.05)
    killed.stop(signal.SIGKILL)
    assert replicas[1].client.get(f"/v1/videos/{mid_run}").json()["status"] == "in_progress"  # killed before its end
    for thread in clients:
        thread.join()
    assert errors == [] and len(set(accepted)) == JOBS
    replicas[0] = cluster["new"](3).start()

    videos = {video_id: replicas[index % 3].wait(video_id) for index, video_id in enumerate(accepted)}
    assert {video["status"] for video in videos.values()} == {"completed"}
    runs = collections.Counter(cluster["runs"].read_text().splitlines())
    assert runs == {f"replica test {k}": JOBS // REQUESTS for k in range(REQUESTS)}  # each job run to its end once
    assert replicas[1].client.get(f"/v1/videos/{mid_run}").json()["status"] == "completed"

    monkeypatch.setenv("WANJAX_CACHE", str(killed.cache))
    made = {}
    for k in range(REQUESTS):
        out = tmp_path / f"{k}.mp4"
        assert main(["generate", "--prompt", f"replica test {k}", "--seed", str(k), "--height", "32", "--width", "48",
                     "--num-frames", "5", "--steps", str(STEPS), "--quiet", "--out", str(out)]) == 0  # fmt: skip
        made[f"replica test {k}"] = out.read_bytes()
    for index, (video_id, video) in enumerate(videos.items()):
        content = replicas[(index + 1) % 3].client.get(f"/v1/videos/{video_id}/content").content  # another replica's
        assert content == made[video["prompt"]], f"video {video_id} differs from wanjax generate"
    assert not [path for path in cluster["output"].rglob("*") if re.search(r"\.partial-", path.name)]
