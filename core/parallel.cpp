#include <minigrad/core/parallel.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include <minigrad/core/error.h>

namespace minigrad {
namespace {

int threads_from_environment() {
  if (const char* s = std::getenv("MINIGRAD_NUM_THREADS")) {
    const int n = std::atoi(s);
    if (n > 0) return n;
  }
  const unsigned cores = std::thread::hardware_concurrency();
  return cores > 0 ? static_cast<int>(cores) : 1;
}

std::atomic<int>& configured_threads() {
  static std::atomic<int> n{threads_from_environment()};
  return n;
}

// True on a pool thread, and on the caller while it runs its own chunk: a parallel_for
// from there runs inline.
thread_local bool inside_parallel_region = false;

// Waits until ready() is true, polling for about kSpinMicroseconds, and says whether it
// became true in that time. The pool's threads spin before they sleep: waking a thread
// asleep on a condition variable took tens of microseconds on the 2-core development VM,
// a fifth of a 0.1 ms parallel sum, and ops run back to back, each one a parallel_for
// (docs/perf-notes.md). Past the spin the threads sleep, so an idle pool costs no CPU.
constexpr int64_t kSpinMicroseconds = 100;

template <typename Ready>
bool spin_until(const Ready& ready) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(kSpinMicroseconds);
  while (true) {
    for (int i = 0; i < 64; ++i) {
      if (ready()) return true;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();  // tells the core this is a spin loop (saves power, frees the sibling)
#endif
    }
    if (std::chrono::steady_clock::now() >= deadline) return ready();
  }
}

// The pool: workers wait (spinning, then asleep on `wake`) until `generation` moves on, run
// their chunk of the current job, and the last one to finish tells the caller, which waits
// the same way on `done`. One job at a time: the caller holds pool_mutex for the whole job.
class ThreadPool {
 public:
  explicit ThreadPool(int threads) {
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { work(i); });
  }
  ~ThreadPool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_.store(true);
    }
    wake_.notify_all();
    for (std::thread& t : workers_) t.join();
  }
  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs chunk(fn, ...) over `chunks` equal pieces of [begin, end): piece 0 here, the
  // others on workers 1 .. chunks-1.
  // The job is written under the mutex, and a worker copies it under the mutex once it sees
  // the generation move on.
  void run(int64_t begin, int64_t end, int chunks, detail::ChunkFn chunk, const void* fn) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_ = Job{begin, end, chunks, chunk, fn};
      remaining_.store(chunks - 1, std::memory_order_relaxed);
      error_ = nullptr;
      generation_.fetch_add(1, std::memory_order_relaxed);  // the mutex orders it with the job
    }
    wake_.notify_all();
    run_piece(job_, 0);
    auto finished = [this] { return remaining_.load(std::memory_order_acquire) == 0; };
    if (!spin_until(finished)) {
      std::unique_lock<std::mutex> lock(mutex_);
      done_.wait(lock, finished);
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (error_) std::rethrow_exception(error_);
  }

 private:
  struct Job {
    int64_t begin = 0, end = 0;
    int chunks = 0;
    detail::ChunkFn chunk = nullptr;
    const void* fn = nullptr;
  };

  void run_piece(const Job& job, int piece) {
    const int64_t n = job.end - job.begin;
    const int64_t b = job.begin + n * piece / job.chunks;
    const int64_t e = job.begin + n * (piece + 1) / job.chunks;
    inside_parallel_region = true;
    try {
      job.chunk(job.fn, b, e);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
    inside_parallel_region = false;
  }

  void work(int index) {
    uint64_t seen = 0;
    auto woken = [&] { return stopping_.load() || generation_.load(std::memory_order_acquire) != seen; };
    while (true) {
      if (!spin_until(woken)) {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, woken);
      }
      Job job;
      {
        // A worker this job needs (index < chunks) is waited for, so the caller cannot move on
        // to the next job before this worker has read this one.
        std::lock_guard<std::mutex> lock(mutex_);
        if (stopping_.load()) return;
        seen = generation_.load(std::memory_order_relaxed);
        job = job_;
      }
      if (index >= job.chunks) continue;  // this job has fewer pieces than threads
      run_piece(job, index);
      // The last piece tells the caller; notifying under the mutex means a caller that has
      // just found remaining_ nonzero and is about to sleep cannot miss it.
      if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lock(mutex_);
        done_.notify_one();
      }
    }
  }

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stopping_{false};
  Job job_;
  std::atomic<int> remaining_{0};
  std::exception_ptr error_;
};

std::mutex pool_mutex;  // guards `pool` itself (creation, replacement)
ThreadPool* pool = nullptr;

}  // namespace

int get_num_threads() { return configured_threads().load(std::memory_order_relaxed); }

void set_num_threads(int n) {
  MG_CHECK(n >= 1, "set_num_threads: the thread count must be at least 1, got {}", n);
  configured_threads().store(n, std::memory_order_relaxed);
}

namespace detail {

bool should_run_inline(int64_t begin, int64_t end, int64_t grain) {
  return end - begin <= std::max<int64_t>(grain, 1) || inside_parallel_region || get_num_threads() == 1;
}

void parallel_run(int64_t begin, int64_t end, int64_t grain, ChunkFn chunk, const void* fn) {
  const int threads = get_num_threads();
  const int64_t pieces = std::min<int64_t>(threads, (end - begin + grain - 1) / std::max<int64_t>(grain, 1));
  std::unique_lock<std::mutex> pool_lock(pool_mutex, std::try_to_lock);
  if (!pool_lock.owns_lock() || pieces <= 1) {  // another thread's job is running: do it here
    chunk(fn, begin, end);
    return;
  }
  // A pool of the configured size, replaced when set_num_threads changed it (never while a
  // job runs: we hold pool_mutex). The pool is never freed: its threads would otherwise be
  // joined during static destruction, after other statics they might touch are gone.
  if (pool == nullptr || pool->threads() != threads) {
    delete pool;
    pool = new ThreadPool(threads);
  }
  pool->run(begin, end, static_cast<int>(pieces), chunk, fn);
}

}  // namespace detail
}  // namespace minigrad
