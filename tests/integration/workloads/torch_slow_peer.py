"""torch.distributed on gloo (CPU), under torchrun: rank 0 does --fast-ms of Python work per
step, every other rank sleeps --slow-ms, then all meet in a collective, so rank 0 waits for
its slow peers:

--op all_reduce: `dist.all_reduce` of a small tensor;
--op broadcast_object: SGLang's `broadcast_pyobj` shape: rank 0 pickles its requests into a
  uint8 tensor and `dist.broadcast`s its size, then its bytes; the others receive them.

Rank 0 writes TensorRT-LLM-style iteration lines to --steps-log and its PID to --pidfile.
"""

from __future__ import annotations

import argparse
import os
import pickle
import time

import torch
import torch.distributed as dist


def host_work(seconds: float) -> int:
    end = time.perf_counter() + seconds
    total = 0
    while time.perf_counter() < end:
        for i in range(200):
            total += i * i
    return total


def broadcast_pyobj(data: dict, rank: int) -> dict:
    if rank == 0:
        payload = torch.frombuffer(bytearray(pickle.dumps(data)), dtype=torch.uint8)
        size = torch.tensor([payload.numel()], dtype=torch.long)
        dist.broadcast(size, src=0)
        dist.broadcast(payload, src=0)
        return data
    size = torch.tensor([0], dtype=torch.long)
    dist.broadcast(size, src=0)
    payload = torch.empty(int(size.item()), dtype=torch.uint8)
    dist.broadcast(payload, src=0)
    return pickle.loads(payload.numpy().tobytes())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--op", choices=("all_reduce", "broadcast_object"), required=True)
    parser.add_argument("--fast-ms", type=float, default=3.0)
    parser.add_argument("--slow-ms", type=float, default=25.0)
    parser.add_argument("--duration", type=float, default=12.0)
    parser.add_argument("--steps-log", required=True)
    parser.add_argument("--pidfile", required=True)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    if rank == 0:
        with open(args.pidfile, "w", encoding="ascii") as handle:
            handle.write(str(os.getpid()))
    tensor = torch.zeros(4)
    deadline = time.monotonic() + args.duration
    index, prev = 0, time.perf_counter()
    log = open(args.steps_log if rank == 0 else os.devnull, "w", encoding="utf-8")  # noqa: SIM115
    stop = False
    while not stop:  # rank 0 decides when all stop, inside each step's collective
        if rank == 0:
            host_work(args.fast_ms / 1e3)
        else:
            time.sleep(args.slow_ms / 1e3)
        done = rank == 0 and time.monotonic() >= deadline
        if args.op == "all_reduce":
            tensor.zero_()
            tensor[0] = float(done)
            dist.all_reduce(tensor)
            stop = bool(tensor[0].item())
        else:
            stop = bool(broadcast_pyobj({"stop": done, "requests": [index] * 64}, rank)["stop"])
        top = time.perf_counter()
        log.write(
            f"iter = {index}, global_rank = {rank}, rank = {rank}, host_step_time = "
            f"{(top - prev) * 1e3:.2f}ms, prev_device_step_time = N/A, "
            "num_scheduled_requests: 1, states = {}\n"
        )
        log.flush()
        index, prev = index + 1, top
    log.close()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
