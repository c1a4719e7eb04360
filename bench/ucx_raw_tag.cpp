// ucx_raw_tag: UCX tag messages between two processes with nothing else in the way (one worker
// per process, busy-polled by the thread that posts), the baseline bench_ucx_channel compares
// against. Bandwidth of 1 MiB and 64 MiB messages, round trip of 4 KiB; prints JSON lines, the
// last holding "bench":"ucx_raw_tag" and the three figures.
//
//   ucx_raw_tag [peer|none]   (endpoint error handling mode; none by default)
//
// With peer error handling UCX 1.13 keeps to transports that detect a dead peer: on one host that
// means loopback TCP instead of shared memory and CMA. Each process runs on a core of its own.
#include <ucp/api/ucp.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "two_processes.h"

namespace {

using Clock = std::chrono::steady_clock;

constexpr uint64_t kGoTag = 1ull << 63;  // "post your sends": the receiver is ready
constexpr uint64_t kPingTag = 1ull << 62;

void check(ucs_status_t status, const char* what) {
  if (status != UCS_OK)
    throw std::runtime_error(std::string(what) + ": " + ucs_status_string(status));
}

// One context, one worker and one endpoint to the other process.
class Ucx {
 public:
  Ucx(int fd, ucp_err_handling_mode_t error_mode) {
    ucp_config_t* config = nullptr;
    check(ucp_config_read(nullptr, nullptr, &config), "ucp_config_read");
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features = UCP_FEATURE_TAG;
    ucs_status_t status = ucp_init(&params, config, &context_);
    ucp_config_release(config);
    check(status, "ucp_init");
    ucp_worker_params_t worker_params{};
    worker_params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    worker_params.thread_mode = UCS_THREAD_MODE_SINGLE;
    check(ucp_worker_create(context_, &worker_params, &worker_), "ucp_worker_create");
    ucp_address_t* address = nullptr;
    size_t length = 0;
    check(ucp_worker_get_address(worker_, &address, &length), "ucp_worker_get_address");
    auto* bytes = reinterpret_cast<const uint8_t*>(address);
    bench::write_blob(fd, {bytes, bytes + length});
    ucp_worker_release_address(worker_, address);
    std::vector<uint8_t> peer = bench::read_blob(fd);
    ucp_ep_params_t ep_params{};
    ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    ep_params.address = reinterpret_cast<const ucp_address_t*>(peer.data());
    ep_params.err_mode = error_mode;
    check(ucp_ep_create(worker_, &ep_params, &ep_), "ucp_ep_create");
  }

  ~Ucx() {
    ucp_request_param_t param{};
    wait(ucp_ep_close_nbx(ep_, &param));
    ucp_worker_destroy(worker_);
    ucp_cleanup(context_);
  }

  void* send(const void* data, size_t size, uint64_t tag) {
    ucp_request_param_t param{};
    return ucp_tag_send_nbx(ep_, data, size, tag, &param);
  }

  void* receive(void* data, size_t size, uint64_t tag) {
    ucp_request_param_t param{};
    return ucp_tag_recv_nbx(worker_, data, size, tag, ~uint64_t{0}, &param);
  }

  /// Progresses until `request` completes (nothing to wait for when it completed at once).
  void wait(void* request) {
    if (UCS_PTR_IS_ERR(request)) check(UCS_PTR_STATUS(request), "a UCX operation");
    if (!UCS_PTR_IS_PTR(request)) return;
    while (ucp_request_check_status(request) == UCS_INPROGRESS) ucp_worker_progress(worker_);
    ucs_status_t status = ucp_request_check_status(request);
    ucp_request_free(request);
    check(status, "a UCX operation");
  }

 private:
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_ep_h ep_ = nullptr;
};

// Rounds of `messages` messages of `size` bytes from rank 0 to rank 1; each round starts when the
// receiver, its receives posted, says go. Returns GiB/s at rank 1 (0 at rank 0).
double bandwidth(Ucx& ucx, int rank, size_t size, int messages, int warmup, int rounds) {
  uint64_t go = 0;
  if (rank == 0) {
    std::vector<uint8_t> buffer(size, 1);
    for (int round = 0; round < warmup + rounds; ++round) {
      ucx.wait(ucx.receive(&go, sizeof go, kGoTag));
      std::vector<void*> requests;
      for (int i = 0; i < messages; ++i) requests.push_back(ucx.send(buffer.data(), size, i));
      for (void* r : requests) ucx.wait(r);
    }
    return 0;
  }
  std::vector<std::vector<uint8_t>> buffers(messages, std::vector<uint8_t>(size, 0));
  Clock::duration measured{};
  for (int round = 0; round < warmup + rounds; ++round) {
    std::vector<void*> requests;
    for (int i = 0; i < messages; ++i) requests.push_back(ucx.receive(buffers[i].data(), size, i));
    const Clock::time_point start = Clock::now();
    ucx.wait(ucx.send(&go, sizeof go, kGoTag));
    for (void* r : requests) ucx.wait(r);
    if (round >= warmup) measured += Clock::now() - start;
  }
  const double bytes = double(size) * messages * rounds;
  return bytes / std::chrono::duration<double>(measured).count() / double(1 << 30);
}

// Ping-pong of `size` bytes; returns the mean round trip in microseconds at rank 0.
double round_trip(Ucx& ucx, int rank, size_t size, int warmup, int iterations) {
  std::vector<uint8_t> out(size, 2), in(size, 0);
  Clock::time_point start;
  for (int i = 0; i < warmup + iterations; ++i) {
    if (i == warmup) start = Clock::now();
    if (rank == 0) {
      void* reply = ucx.receive(in.data(), size, kPingTag);
      ucx.wait(ucx.send(out.data(), size, kPingTag));
      ucx.wait(reply);
    } else {
      ucx.wait(ucx.receive(in.data(), size, kPingTag));
      ucx.wait(ucx.send(out.data(), size, kPingTag));
    }
  }
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count() / iterations;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "none";
  if (mode != "peer" && mode != "none") {
    std::fprintf(stderr, "usage: ucx_raw_tag [peer|none]\n");
    return 2;
  }
  const ucp_err_handling_mode_t error_mode =
      mode == "peer" ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
  return bench::run_two_processes(
      [&](int rank, int fd) {
        Ucx ucx(fd, error_mode);
        const double bw_1mib = bandwidth(ucx, rank, 1 << 20, 64, 2, 8);
        const double bw_64mib = bandwidth(ucx, rank, 64 << 20, 2, 2, 8);
        const double rtt_4kib = round_trip(ucx, rank, 4096, 500, 5000);
        if (rank == 1) {  // the receiver measured the bandwidth: hand it to rank 0 to print
          const double figures[2] = {bw_1mib, bw_64mib};
          bench::write_all(fd, figures, sizeof figures);
          return 0;
        }
        double figures[2];
        bench::read_all(fd, figures, sizeof figures);
        const char* m = mode.c_str();
        std::printf(
            "{\"test\":\"bandwidth\",\"error_mode\":\"%s\",\"bytes\":%d,\"gib_per_s\":%.3f}\n", m,
            1 << 20, figures[0]);
        std::printf(
            "{\"test\":\"bandwidth\",\"error_mode\":\"%s\",\"bytes\":%d,\"gib_per_s\":%.3f}\n", m,
            64 << 20, figures[1]);
        std::printf("{\"test\":\"round_trip\",\"error_mode\":\"%s\",\"bytes\":4096,\"us\":%.2f}\n",
                    m, rtt_4kib);
        std::printf(
            "{\"bench\":\"ucx_raw_tag\",\"error_mode\":\"%s\",\"bw_1mib_gib_per_s\":%.3f,"
            "\"bw_64mib_gib_per_s\":%.3f,\"rtt_4kib_us\":%.2f}\n",
            m, figures[0], figures[1], rtt_4kib);
        return 0;
      },
      std::chrono::seconds(120), /*pin=*/true);
}
