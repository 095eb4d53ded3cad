"""A load run against a running `wanjax serve`: C clients each submit J jobs (retrying on 429 as
Retry-After asks), then wait for all; prints jobs/s and p50/p95 latency (accepted -> finished).

    .venv/bin/python tests/benchmarks/serve_load.py --url http://127.0.0.1:8000 --clients 8 --jobs 3

Not a pytest file: run it by hand against a server started with the settings to measure
(e.g. --max-batch 1 and --max-batch 4 for the batching effect; docs/serving.md).
"""

import argparse
import statistics
import threading
import time

import httpx


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--jobs", type=int, default=3)
    parser.add_argument("--token")
    args = parser.parse_args()
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    client = httpx.Client(base_url=args.url, headers=headers, timeout=30)
    accepted: list[str] = []

    def submit(index: int) -> None:
        for job in range(args.jobs):
            while (response := client.post("/v1/videos", json={"prompt": f"client {index} job {job}", "seed": job})).status_code == 429:
                time.sleep(float(response.headers.get("Retry-After", 1)) / 10)
            response.raise_for_status()
            accepted.append(response.json()["id"])

    start = time.perf_counter()
    threads = [threading.Thread(target=submit, args=(i,)) for i in range(args.clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    finished = {}
    while len(finished) < len(accepted):
        for job_id in set(accepted) - set(finished):
            job = client.get(f"/v1/videos/{job_id}").json()
            if job["status"] in ("succeeded", "failed", "cancelled"):
                finished[job_id] = job
        time.sleep(0.2)
    elapsed = time.perf_counter() - start
    latencies = sorted(job["timings"]["total"] for job in finished.values())
    outcomes = statistics.multimode(job["status"] for job in finished.values())
    p95 = latencies[max(0, round(0.95 * len(latencies)) - 1)]
    print(f"{len(finished)} jobs ({outcomes}) in {elapsed:.1f} s: {len(finished) / elapsed:.2f} jobs/s, "
          f"latency p50 {statistics.median(latencies):.1f} s, p95 {p95:.1f} s")  # fmt: skip
    batches = [line for line in client.get("/metrics").text.splitlines() if line.startswith("wanjax_batches_total")]
    print("\n".join(batches))


if __name__ == "__main__":
    main()
