"""The simulated parts: a CUDA stream whose kernels are sleeps, and the prompt workload."""

from __future__ import annotations

import json
import queue
import random
import string
import threading
import time
from dataclasses import dataclass
from typing import Any

MIN_DECODE_STEPS, MAX_DECODE_STEPS = 5, 30
PROMPT_POOL_SIZE = 64
VOCAB_SIZE = 32000
NUM_WORDS = 8000
MAX_PIECES = 9


class StreamEvent:
    """A CUDA-event stand-in: `time` is the stream clock when the event was reached."""

    __slots__ = ("_reached", "time")

    def __init__(self) -> None:
        self._reached = threading.Event()
        self.time = 0.0

    def synchronize(self) -> float:
        self._reached.wait()
        return self.time


class SimulatedStream:
    """A FIFO of device ops run by the `device` thread; kernels are sleeps (no GIL needed).

    The stream keeps its own clock: an op starts at max(clock, time it was enqueued), so an
    event's time is what a real stream would report even when this thread is late to get the
    GIL back after a kernel. Only the wake-up of a waiting host thread can be late.
    """

    def __init__(self) -> None:
        self._ops: queue.SimpleQueue[tuple[str, float, Any]] = queue.SimpleQueue()
        self._clock = 0.0
        self._thread = threading.Thread(target=self._run, name="device", daemon=True)
        self._thread.start()

    def record(self, event: StreamEvent) -> None:
        self._ops.put(("event", time.perf_counter(), event))

    def launch(self, seconds: float) -> None:
        self._ops.put(("kernel", time.perf_counter(), seconds))

    def close(self) -> None:
        self._ops.put(("stop", 0.0, None))
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while True:
            kind, enqueued_at, arg = self._ops.get()
            if kind == "stop":
                return
            self._clock = max(self._clock, enqueued_at)
            if kind == "kernel":
                self._clock += arg
                delay = self._clock - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
            else:
                arg.time = self._clock
                arg._reached.set()


@dataclass(frozen=True)
class TokenizedRequest:
    request_id: int
    token_ids: list[int]
    max_tokens: int


class Workload:
    """Seeded prompts and a word-piece tokenizer.

    Each vocabulary word maps to 1-9 token ids (a tokenizer with its word cache warm), so
    tokenizing costs one dictionary lookup and one list extend per word, all under the GIL.
    """

    def __init__(self, seed: int, tokens: int) -> None:
        rng = random.Random(seed)
        words: set[str] = set()
        while len(words) < NUM_WORDS:
            words.add("".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 9))))
        vocabulary = sorted(words)
        self.pieces = {
            word: tuple(rng.randrange(VOCAB_SIZE) for _ in range(rng.randint(1, MAX_PIECES)))
            for word in vocabulary
        }
        self.prompts = [self._prompt(rng, vocabulary, tokens) for _ in range(PROMPT_POOL_SIZE)]

    def _prompt(self, rng: random.Random, vocabulary: list[str], tokens: int) -> str:
        """A prompt of about `tokens` (+-25%) token ids, JSON-encoded once up front."""
        target = max(1, round(tokens * rng.uniform(0.75, 1.25)))
        words: list[str] = []
        count = 0
        while count < target:
            word = rng.choice(vocabulary)
            words.append(word)
            count += len(self.pieces[word])
        return json.dumps(" ".join(words))

    def tokenize(self, prompt: str) -> list[int]:
        pieces = self.pieces
        token_ids: list[int] = []
        for word in prompt.split():
            token_ids += pieces[word]
        return token_ids
