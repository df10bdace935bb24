"""Target for the captured austin output next to this file (austin 3.7.0, Python 3.11.7).

    python capture_target.py & sleep 0.7
    austin -p $! -i 20ms -x 1 -o wall.austin        # wall mode
    austin -p $! -i 20ms -x 1 -f -o full.austin     # full metrics: time,idle,memory
    kill %1

Threads: MainThread sleeps, `spinner` runs hot() without pause, `sleeper` sleeps in nap().
"""

import threading
import time


def hot(n):
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


def work(stop):
    while not stop.is_set():
        hot(50_000)


def nap(stop):
    while not stop.is_set():
        time.sleep(0.05)


stop = threading.Event()
threads = [
    threading.Thread(target=work, args=(stop,), name="spinner"),
    threading.Thread(target=nap, args=(stop,), name="sleeper"),
]
for t in threads:
    t.start()
time.sleep(20)
stop.set()
