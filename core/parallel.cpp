#include "core/parallel.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "core/error.h"

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

// The pool: workers sleep on `wake` until `generation` moves on, run their chunk of the
// current job, and the last one to finish wakes the caller through `done`. One job at a
// time: the caller holds pool_mutex for the whole job.
class ThreadPool {
 public:
  explicit ThreadPool(int threads) {
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { work(i); });
  }
  ~ThreadPool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : workers_) t.join();
  }
  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs chunk(fn, ...) over `chunks` equal pieces of [begin, end): piece 0 here, the
  // others on workers 1 .. chunks-1.
  void run(int64_t begin, int64_t end, int chunks, detail::ChunkFn chunk, const void* fn) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_ = Job{begin, end, chunks, chunk, fn};
      remaining_ = chunks - 1;
      error_ = nullptr;
      ++generation_;
    }
    wake_.notify_all();
    run_piece(0);
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return remaining_ == 0; });
    if (error_) std::rethrow_exception(error_);
  }

 private:
  struct Job {
    int64_t begin = 0, end = 0;
    int chunks = 0;
    detail::ChunkFn chunk = nullptr;
    const void* fn = nullptr;
  };

  void run_piece(int piece) {
    const int64_t n = job_.end - job_.begin;
    const int64_t b = job_.begin + n * piece / job_.chunks;
    const int64_t e = job_.begin + n * (piece + 1) / job_.chunks;
    inside_parallel_region = true;
    try {
      job_.chunk(job_.fn, b, e);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
    inside_parallel_region = false;
  }

  void work(int index) {
    uint64_t seen = 0;
    while (true) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
        if (stopping_) return;
        seen = generation_;
        if (index >= job_.chunks) continue;  // this job has fewer pieces than threads
      }
      run_piece(index);
      std::lock_guard<std::mutex> lock(mutex_);
      if (--remaining_ == 0) done_.notify_one();
    }
  }

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  uint64_t generation_ = 0;
  bool stopping_ = false;
  Job job_;
  int remaining_ = 0;
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
