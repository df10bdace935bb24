"""Rank 0's request path in: a closed-loop client and the ingress thread, over a socketpair."""

from __future__ import annotations

import json
import queue
import random
import socket
import threading

from .simulation import MAX_DECODE_STEPS, MIN_DECODE_STEPS, TokenizedRequest, Workload

# A few requests per read, as a server reading its connections would. Each read releases
# the GIL, which bounds how long ingress holds it at a stretch.
RECV_BYTES = 8192


class LoadClient:
    """Closed-loop client (`client` thread): a new request as soon as one completes."""

    def __init__(
        self, workload: Workload, concurrency: int, sock: socket.socket, seed: int
    ) -> None:
        self._workload = workload
        self._rng = random.Random(seed)
        self._slots = threading.Semaphore(concurrency)
        self._sock = sock
        self._next_id = 0
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="client", daemon=True)
        self._thread.start()

    def completed(self, count: int) -> None:
        if count:
            self._slots.release(count)

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=5)
        self._sock.close()

    def _request_line(self) -> str:
        prompt = self._rng.choice(self._workload.prompts)
        max_tokens = self._rng.randint(MIN_DECODE_STEPS, MAX_DECODE_STEPS)
        self._next_id += 1
        return f'{{"id": {self._next_id}, "prompt": {prompt}, "max_tokens": {max_tokens}}}\n'

    def _run(self) -> None:
        while not self._stopping.is_set():
            if not self._slots.acquire(timeout=0.05):
                continue
            count = 1
            # One send per burst: every socket call releases the GIL and must win it back.
            while count < 512 and self._slots.acquire(blocking=False):
                count += 1
            lines = "".join(self._request_line() for _ in range(count))
            try:
                self._sock.sendall(lines.encode())
            except OSError:
                return


class Ingress:
    """Request ingress (`ingress` thread): JSON lines -> tokenized requests on the queue."""

    def __init__(
        self, workload: Workload, sock: socket.socket, requests: queue.Queue[TokenizedRequest]
    ) -> None:
        self._workload = workload
        self._sock = sock
        self._requests = requests
        self._stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="ingress", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._sock.close()
        self.thread.join(timeout=5)

    def _admit(self, line: bytes) -> None:
        body = json.loads(line)
        token_ids = self._workload.tokenize(body["prompt"])
        self._requests.put(TokenizedRequest(body["id"], token_ids, body["max_tokens"]))

    def _run(self) -> None:
        pending = b""
        while not self._stopping.is_set():
            try:
                chunk = self._sock.recv(RECV_BYTES)
            except OSError:
                return
            if not chunk:
                return
            lines = (pending + chunk).split(b"\n")
            pending = lines.pop()
            for line in lines:
                if self._stopping.is_set():
                    return
                self._admit(line)
