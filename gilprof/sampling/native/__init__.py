"""The native locator: where a thread running without the GIL is, from the kernel's on-CPU
samples (perf.py), named by mapped file and function (symbols.py), classed by
gilprof.native_classes (locator.py)."""
