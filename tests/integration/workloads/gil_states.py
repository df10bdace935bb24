"""Threads in known, stable GIL states, for checking the thread-state reader.

usage: gil_states.py PIDFILE

- `sleeper` waits on an Event that is never set: idle, on its own futex (not the GIL's);
- `spinner` runs Python bytecode: it needs the GIL all the time;
- `holder` then enters one C call that never returns and never releases the GIL (sum over a
  huge range runs in C without checking for drop requests), so from then on it holds the GIL
  and `spinner` (and the main thread, if it wants the GIL) waits for it.
The PID file is written just before `holder` starts; kill the process to end it.
"""

import os
import sys
import threading
import time


def sleeper(event: threading.Event) -> None:
    event.wait()


def spinner() -> None:
    x = 0
    while True:
        x += 1


def hold() -> None:
    sum(range(10**15))


never = threading.Event()
threading.Thread(target=sleeper, args=(never,), name="sleeper", daemon=True).start()
threading.Thread(target=spinner, name="spinner", daemon=True).start()
time.sleep(0.3)
with open(sys.argv[1] + ".tmp", "w") as handle:
    handle.write(str(os.getpid()))
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
threading.Thread(target=hold, name="holder", daemon=True).start()
never.wait()
