// How many threads the calling thread's host kernels (the products) may use. Each thread has its
// own count, so two pipeline stages on two threads of one process can each compute on one core.
#pragma once

namespace tensorplay {

/// Sets the number of threads the calling thread's host products use (>= 1); like PyTorch's
/// torch.set_num_threads, but per calling thread. Throws std::invalid_argument for n < 1.
void set_num_threads(int n);

/// The calling thread's count: what set_num_threads gave on this thread, else the process
/// default (set_default_num_threads, else the environment variable TENSORPLAY_NUM_THREADS, else
/// the number of hardware threads).
int get_num_threads();

/// Sets the count of every thread that has not called set_num_threads (>= 1), e.g. one thread
/// per pipeline stage for all stage threads of a process.
void set_default_num_threads(int n);

}  // namespace tensorplay
