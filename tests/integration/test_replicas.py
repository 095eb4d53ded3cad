"""Three `wanjax serve` replicas on 127.0.0.1 sharing one PostgreSQL job store (a schema of its own,
tests/postgres.py) and one output folder, the demo model at 48x32, 5 frames, batching off: any
replica answers for any job, a DELETE through one stops the job another runs, and with one replica
killed with SIGKILL mid-job and restarted, 30 jobs from concurrent clients each finish exactly once,
each video byte-identical to `wanjax generate`."""

import collections
import concurrent.futures
import re
import signal
import threading
import time

import pytest
from postgres import own_schema
from serving import Server
from video_diff import video_difference

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
    runs.write_text("")
    with own_schema() as url, pytest.MonkeyPatch.context() as env:
        env.setenv("WANJAX_TEST_RUNS", str(runs))
        env.setenv("WANJAX_TEST_RELEASE", str(folder / "release"))
        options = ("--jobs", url, "--lease-seconds", str(LEASE_SECONDS), "--max-batch", "1")

        def replica(index: int) -> Server:
            log = folder / f"replica-{index}.log"
            return Server(folder / "out", demo_cache.parent, queue_size=64, options=options, log=log)

        with concurrent.futures.ThreadPoolExecutor(3) as starting:
            replicas = list(starting.map(lambda index: replica(index).start(), range(3)))
        cluster = {"replicas": replicas, "new": replica, "runs": runs, "output": folder / "out",
                   "release": folder / "release"}  # fmt: skip
        yield cluster
        for server in cluster["replicas"]:
            if server.process.poll() is None:
                server.stop()


def _runs(cluster, event):
    """(pid, prompt) of each run that `event` (started, finished), as tests/slow_steps_serve.py records them."""
    lines = cluster["runs"].read_text().splitlines()
    return [tuple(line.split(" ", 2)[1:]) for line in lines if line.startswith(f"{event} ")]


def _running(cluster, pid):
    """How many runs the server of `pid` started and did not finish."""
    return sum(1 if event == "started" else -1 for event in ("started", "finished") for run in _runs(cluster, event)
               if run[0] == pid)  # fmt: skip


def _held_decode(cluster, prompt):
    """Submits a job whose VAE decode lasts until the test releases it (tests/slow_steps_serve.py),
    waits for its decode, and returns its id, the replica decoding it and the two others."""
    cluster["release"].unlink(missing_ok=True)
    cluster["runs"].write_text("")  # count this test's runs only
    video_id = cluster["replicas"][0].submit(prompt=f"held decode, {prompt}", num_inference_steps=STEPS).json()["id"]
    decoding = lambda: [pid for pid, text in _runs(cluster, "decoding") if text.endswith(prompt)]  # noqa: E731
    _until(decoding, "no replica decoded it")
    [holder] = [server for server in cluster["replicas"] if str(server.process.pid) == decoding()[0]]
    return video_id, holder, [server for server in cluster["replicas"] if server is not holder]


def _files(folder):
    """Each file in `folder` (none when it is absent) with what tells one write from another."""
    return {path.name: (path.stat().st_ino, path.stat().st_mtime_ns, path.read_bytes()) for path in folder.glob("*")}


def _logged(server, text):
    return text in server.log.read_text(errors="replace")


def test_a_replica_paused_past_its_lease_in_its_decode_writes_nothing_over_the_replica_that_took_its_job(cluster):
    video_id, paused, others = _held_decode(cluster, "paused")
    lost = f"job {video_id} is no longer this server's"
    paused.process.send_signal(signal.SIGSTOP)
    try:
        cluster["release"].touch()  # the decode of the replica that takes the job over is not held
        done = others[0].wait(video_id)  # after the lease (LEASE_SECONDS) and a run of its own
        folder = _files(cluster["output"] / video_id)
    finally:
        paused.process.send_signal(signal.SIGCONT)
    _until(lambda: _logged(paused, lost), "the paused replica did not end its run")
    assert done["status"] == "completed" and sorted(folder) == ["thumbnail.webp", "video.mp4"]
    assert others[1].client.get(f"/v1/videos/{video_id}").json() == done  # its times and status, unchanged
    assert _files(cluster["output"] / video_id) == folder  # the same files, not written again, no other
    assert paused.client.get(f"/v1/videos/{video_id}/content").content == folder["video.mp4"][2]


def test_a_delete_through_another_replica_during_the_decode_leaves_no_record_folder_or_file(cluster):
    video_id, decoding, others = _held_decode(cluster, "deleted")
    assert others[0].client.delete(f"/v1/videos/{video_id}").json()["deleted"] is True
    assert not (cluster["output"] / video_id).exists()
    cluster["release"].touch()
    ended = others[1].wait(video_id, until=lambda video: video["completed_at"] is not None)  # by the decoding replica
    assert ended["status"] == "failed" and ended["error"]["code"] == "cancelled"
    assert not (cluster["output"] / video_id).exists()
    assert others[1].client.delete(f"/v1/videos/{video_id}").json()["deleted"] is True  # forgotten now
    assert decoding.client.get(f"/v1/videos/{video_id}").status_code == 404
    assert not [path for path in cluster["output"].rglob("*") if video_id in str(path)]


def _until(condition, what, seconds=120):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_a_delete_through_one_replica_stops_the_job_another_runs(cluster):
    replicas = cluster["replicas"]
    cluster["runs"].write_text("")  # count this test's runs only
    video_id = replicas[0].submit(prompt="long, deleted elsewhere", num_inference_steps=LONG).json()["id"]
    _until(lambda: _runs(cluster, "started"), "no replica ran it")
    [(pid, _)] = _runs(cluster, "started")
    other = next(server for server in replicas if str(server.process.pid) != pid)
    progress = lambda: other.client.get(f"/v1/videos/{video_id}").json()["steps_done"]  # noqa: E731
    _until(lambda: progress() > 0, "its progress is not reported by another replica")
    asked = time.monotonic()
    assert other.client.delete(f"/v1/videos/{video_id}").json()["deleted"] is True
    stopped = other.wait(video_id, until=lambda video: video["completed_at"] is not None)  # recorded by its runner
    assert time.monotonic() - asked < 10  # its next step, not the 20 s its remaining steps take
    assert stopped["error"]["code"] == "cancelled" and stopped["steps_done"] < LONG
    assert _runs(cluster, "finished") == [] and not (cluster["output"] / video_id).exists()


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
    for thread in clients:
        thread.join()
    assert errors == [] and len(set(accepted)) == JOBS
    killed = replicas[0]
    pid = str(killed.process.pid)
    _until(lambda: _running(cluster, pid) > 0, "the first replica ran no job")
    time.sleep(0.05)
    killed.stop(signal.SIGKILL)
    assert _running(cluster, pid) > 0  # killed in the middle of a run
    replicas[0] = cluster["new"](3).start()

    videos = {video_id: replicas[index % 3].wait(video_id) for index, video_id in enumerate(accepted)}
    assert {video["status"] for video in videos.values()} == {"completed"}
    runs = collections.Counter(prompt for _, prompt in _runs(cluster, "finished"))
    assert runs == {f"replica test {k}": JOBS // REQUESTS for k in range(REQUESTS)}  # each job run to its end once

    monkeypatch.setenv("WANJAX_CACHE", str(killed.cache))
    made = {}
    for k in range(REQUESTS):
        out = tmp_path / f"{k}.mp4"
        assert main(["generate", "--prompt", f"replica test {k}", "--seed", str(k), "--height", "32", "--width", "48",
                     "--num-frames", "5", "--steps", str(STEPS), "--quiet", "--out", str(out)]) == 0  # fmt: skip
        made[f"replica test {k}"] = out.read_bytes()
    for index, (video_id, video) in enumerate(videos.items()):
        content = replicas[(index + 1) % 3].client.get(f"/v1/videos/{video_id}/content").content  # another replica's
        assert content == made[video["prompt"]], f"video {video_id}: {video_difference(content, made[video['prompt']])}"
    assert not [path for path in cluster["output"].rglob("*") if re.search(r"\.partial-", path.name)]
