/* A CPU stand-in for a GPU driver's wait and for a compute kernel, built by the tests.
 *
 * fake_device_wait spins until another thread sets *flag, reading the clock on every turn
 * as CUDA's default (spin) synchronization does; fake_compute burns the CPU for a given
 * wall time. Both are called through ctypes, which releases the GIL around the call, so
 * the calling thread runs native code without the GIL, as in `.item()` or a collective.
 */
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

long fake_device_wait(volatile int *flag) {
    long turns = 0;
    while (!__atomic_load_n(flag, __ATOMIC_ACQUIRE)) {
        now();
        turns++;
    }
    return turns;
}

double fake_compute(double seconds) {
    double end = now() + seconds, x = 0.0;
    while (now() < end) {
        for (int i = 0; i < 2000; i++) x += (double)i * 0.5;
    }
    return x;
}
