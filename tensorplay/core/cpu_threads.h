// How many threads the calling thread's host kernels (the products) may use. Each thread has its
// own count, so two pipeline stages on two threads of one process can each compute on one core.
#pragma once

namespace tensorplay {

/// Sets the number of threads the calling thread's host products use (>= 1); like PyTorch's
/// torch.set_num_threads, but per calling thread. Throws std::invalid_argument for n < 1.
void set_num_threads(int n);

/// The calling thread's count: what set_num_threads gave on this thread, else the process
/// default (set_default_num_threads, else the environment variable TENSORPLAY_NUM_THREADS), else
/// the thread's share of the host's cores (thread_share).
int get_num_threads();

/// Sets the count of every thread that has not called set_num_threads (>= 1), e.g. one thread
/// per pipeline stage for all stage threads of a process.
void set_default_num_threads(int n);
/// Forgets set_default_num_threads: threads that set nothing take TENSORPLAY_NUM_THREADS or their
/// share of the cores again.
void reset_default_num_threads();

/// The rule for a thread with no thread setting at all: its share of the host's cores,
/// cores / (ranks_on_host * compute_threads), at least one. `ranks_on_host` is how many processes
/// of the job share the host (LOCAL_WORLD_SIZE), `compute_threads` how many threads of this
/// process compute at once (the embedded runtime's stage actors). Arguments below 1 count as 1.
int thread_share(int cores, int ranks_on_host, int compute_threads);

/// The cores this process may count as its own: the cores it may run on (its CPU affinity) over
/// the processes of the job on this host (set_ranks_on_host), at least one. Below 2, the UCX
/// channel's progress thread does not poll during a step (docs/performance.md).
int cores_per_rank();

/// True when the job has more processes on this host (set_ranks_on_host) than this process may
/// run on cores (its CPU affinity): its ranks then take turns on the cores.
bool host_oversubscribed();

/// Tells every thread of this process that `ranks` processes of the job share this host
/// (init_process_group passes LOCAL_WORLD_SIZE), so each takes its share of the cores. Throws
/// std::invalid_argument for ranks < 1.
void set_ranks_on_host(int ranks);

/// Tells the calling thread that `compute_threads` threads of this process (itself included)
/// compute at once, so its default count becomes its share (thread_share). Explicit settings
/// (set_num_threads, set_default_num_threads, TENSORPLAY_NUM_THREADS) still win. 1 restores the
/// process's own share. Throws std::invalid_argument for n < 1.
void set_compute_threads(int compute_threads);

}  // namespace tensorplay
