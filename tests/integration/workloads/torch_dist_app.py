"""A small torch.distributed job for gilprof's tests: gloo on CPU, run under torchrun.

Every rank runs a step loop that calls `torch.distributed.broadcast_object_list` once per
step: rank 0 sends the requests its ingress thread parsed since the last step, the other
ranks receive them. Rank 0's ingress thread (named "ingress") parses fake JSON requests.
Once warm (the first step done), rank 0 prints "step 1 t=<wall clock>", then every 200th
step; the loop ends when --stop-file exists or after --max-seconds.

    torchrun --standalone --nproc-per-node 2 torch_dist_app.py --stop-file /tmp/stop
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import threading
import time

import torch
import torch.distributed as dist


def fake_request(number: int) -> str:
    return json.dumps({"id": number, "prompt": list(range(number % 50, number % 50 + 200))})


def parse_request(raw: str) -> dict:
    """Ingress work: decode and check one request (pure Python, holds the GIL)."""
    request = json.loads(raw)
    request["tokens"] = sum(request["prompt"])
    return request


def ingress(requests: queue.Queue, stop: threading.Event) -> None:
    number = 0
    while not stop.is_set():
        for _ in range(20):
            requests.put(parse_request(fake_request(number)))
            number += 1
        time.sleep(0.002)


def build_batch(requests: queue.Queue) -> list[dict]:
    batch: list[dict] = []
    while len(batch) < 64:
        try:
            batch.append(requests.get_nowait())
        except queue.Empty:
            break
    return batch


def step_loop(rank: int, requests: queue.Queue, args: argparse.Namespace) -> int:
    deadline = time.monotonic() + args.max_seconds
    step = 0
    while True:
        # Rank 0 decides when to end, and says so in the broadcast: every rank then leaves
        # the loop after the same step (a rank that stopped alone would hang the others).
        done = rank == 0 and (time.monotonic() > deadline or os.path.exists(args.stop_file))
        payload = [build_batch(requests), done] if rank == 0 else [None, None]
        dist.broadcast_object_list(payload, src=0)
        if payload[1]:
            return step
        step += 1
        if rank == 0 and (step == 1 or step % 200 == 0):
            print(f"step {step} t={time.time():.3f}", flush=True)
        time.sleep(0.001)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--stop-file", required=True)
    parser.add_argument("--max-seconds", type=float, default=60.0)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.set_num_threads(1)
    requests: queue.Queue = queue.Queue(maxsize=2000)
    stop = threading.Event()
    if rank == 0:
        threading.Thread(target=ingress, args=(requests, stop), name="ingress", daemon=True).start()
    steps = step_loop(rank, requests, args)
    stop.set()
    dist.barrier()  # every rank leaves the loop before the group goes
    dist.destroy_process_group()
    print(f"rank {rank} done after {steps} steps", flush=True)


if __name__ == "__main__":
    main()
