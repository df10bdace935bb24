"""A miniature of a TensorRT-LLM disaggregated GEN server's rank-0 host path.

Run from the `examples` folder (or with it on PYTHONPATH):

    mpiexec -n 4 python -m disagg_gen --impl before --duration 20
    mpiexec -n 4 python -m disagg_gen --impl after --duration 20 \\
        --log-file after.log --ground-truth after.json

`python examples/disagg_gen/server.py ...` runs the same thing from anywhere.

Rank 0 runs four Python threads on one GIL, as the real leader process does:

- `client`: a closed-loop load generator that keeps `--concurrency` requests in flight and
  sends them as JSON lines over a socketpair.
- `ingress`: parses the JSON and tokenizes each prompt (pure Python), then queues it.
- `executor-loop`: the overlap-scheduler loop. Each iteration fetches queued requests
  (`_fetch_new_requests`), broadcasts them to every rank (`safe_broadcast`), routes them
  across the attention-DP ranks (`DefaultADPRouter._balance_requests_across_ranks`),
  launches the step on the simulated device, then waits for the previous step, handles
  its responses and sends their new tokens to every rank with mpi4py's lowercase `bcast`
  (`broadcast_sample_state`). It prints TensorRT-LLM's iteration log line for every step.
- `device`: a simulated CUDA stream; kernels are sleeps, so the device never needs the GIL
  to make progress.

The watched functions delegate to `gilprof.reference` (`--impl before|after|fast`), so the
same job shows the regression and the fix. Other ranks receive each broadcast and sleep
through their device step. Modules: `simulation` (stream, workload), `network` (client,
ingress), `hotspots` (the watched functions, the MPI adapter), `executor` (the loop, the
other ranks), `main` (options, ground truth, entry point). See README.md for the timing
model and measured figures.
"""

from __future__ import annotations

import sys
from pathlib import Path

try:
    import gilprof.reference  # noqa: F401
except ImportError:  # running from a checkout without gilprof installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
