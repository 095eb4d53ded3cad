"""A load run against a running `wanjax serve`: C clients each submit J jobs (a refused one, 429,
is sent again after the Retry-After the server gives), then wait for all; prints the outcomes
(every accepted job must finish: none lost), jobs/s and p50/p95 latency (accepted -> finished).

    .venv/bin/python tests/benchmarks/serve_load.py --url http://127.0.0.1:8000 --clients 16 --jobs 4

Not a pytest file: run it by hand against a server started with the settings to measure
(e.g. --max-batch 1 and --max-batch 4 for the batching effect; docs/serving.md).
"""

import argparse
import statistics
import threading
import time
from collections import Counter

import httpx


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--token")
    args = parser.parse_args()
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    client = httpx.Client(base_url=args.url, headers=headers, timeout=30)
    accepted: list[str] = []
    refusals = Counter[int]()

    def submit(index: int) -> None:
        for job in range(args.jobs):
            body = {"prompt": f"client {index} job {job}", "seed": index * args.jobs + job}
            while (response := client.post("/v1/videos", json=body)).status_code == 429:
                refusals[429] += 1
                time.sleep(float(response.headers["Retry-After"]))
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
            if job["status"] in ("completed", "failed"):
                finished[job_id] = job
        time.sleep(0.2)
    elapsed = time.perf_counter() - start
    latencies = sorted(job["timings"]["total"] for job in finished.values())
    outcomes = Counter(job["status"] for job in finished.values())
    p95 = latencies[max(0, round(0.95 * len(latencies)) - 1)]
    print(f"{args.clients} clients x {args.jobs} jobs: {len(accepted)} accepted ({refusals[429]} submissions "
          f"refused with 429 and sent again), outcomes {dict(outcomes)}")  # fmt: skip
    print(f"{elapsed:.1f} s: {len(finished) / elapsed:.2f} jobs/s, latency p50 {statistics.median(latencies):.1f} s, "
          f"p95 {p95:.1f} s")  # fmt: skip
    batches = [line for line in client.get("/metrics").text.splitlines() if line.startswith("wanjax_batches_total")]
    print("\n".join(batches))


if __name__ == "__main__":
    main()
