/* A CPU stand-in for a GPU driver under blocking synchronization, built by the tests.
 *
 * bd_launch(ms) hands a "kernel" of ms milliseconds to the library's own device thread (a
 * pthread, not a Python thread); bd_sync() blocks in pthread_cond_wait until the device
 * thread says it is done, as CUDA's blocking-sync schedule sleeps in the driver instead of
 * spinning. Both are called through ctypes, which releases the GIL around the call.
 */
#include <pthread.h>
#include <time.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work = PTHREAD_COND_INITIALIZER;
static pthread_cond_t done = PTHREAD_COND_INITIALIZER;
static double kernel_ms = 0.0;
static int pending = 0, finished = 0, started = 0;

static void *device(void *unused) {
    (void)unused;
    for (;;) {
        pthread_mutex_lock(&lock);
        while (!pending) pthread_cond_wait(&work, &lock);
        double ms = kernel_ms;
        pending = 0;
        pthread_mutex_unlock(&lock);
        struct timespec t = {(time_t)(ms / 1000), (long)((ms - (long)(ms / 1000) * 1000) * 1e6)};
        nanosleep(&t, 0);
        pthread_mutex_lock(&lock);
        finished = 1;
        pthread_cond_signal(&done);
        pthread_mutex_unlock(&lock);
    }
    return 0;
}

void bd_launch(double ms) {
    pthread_mutex_lock(&lock);
    if (!started) {
        pthread_t thread;
        pthread_create(&thread, 0, device, 0);
        started = 1;
    }
    kernel_ms = ms;
    finished = 0;
    pending = 1;
    pthread_cond_signal(&work);
    pthread_mutex_unlock(&lock);
}

void bd_sync(void) {
    pthread_mutex_lock(&lock);
    while (!finished) pthread_cond_wait(&done, &lock);
    pthread_mutex_unlock(&lock);
}
