// NCCL backend (label gpu; under mpirun, one rank per GPU). Skips without a CUDA device or with
// fewer devices than ranks. Exercises device and host (staged) buffers, the grouped ring
// exchange, every collective and split.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <vector>
#include <string>
#include <cuda_runtime.h>

#include "comm/mpi_comm.h"
#include "comm/nccl_comm.h"

namespace dcp::comm {
namespace {

bool enough_devices() {
  int ndev = 0, size = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess) ndev = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return ndev >= size && ndev > 0;
}

bool gpu_required() {  // ci/gpu.sh sets DCP_REQUIRE_GPU=1: there a skip would hide a broken setup
  const char* r = std::getenv("DCP_REQUIRE_GPU");
  return r && std::string(r) == "1";
}

#define DCP_SKIP_WITHOUT_GPU()                                                          \
  if (!enough_devices()) {                                                              \
    if (gpu_required()) FAIL() << "no CUDA device (or fewer devices than MPI ranks)";   \
    GTEST_SKIP() << "no CUDA device (or fewer devices than MPI ranks)";                 \
  }

TEST(NcclComm, RingWithHostBuffers) {
  DCP_SKIP_WITHOUT_GPU();
  auto c = nccl_communicator(MPI_COMM_WORLD);
  const int r = c->rank(), p = c->size();
  std::vector<double> s(33, r + 0.5), got(33, -1);
  auto sq = c->isend(std::span<const double>(s), (r + 1) % p, 0);
  auto rq = c->irecv(std::span<double>(got), (r + p - 1) % p, 0);
  rq->wait();
  sq->wait();
  for (double x : got) ASSERT_EQ(x, (r + p - 1) % p + 0.5);
}

TEST(NcclComm, CollectivesOnDeviceAndHostBuffers) {
  DCP_SKIP_WITHOUT_GPU();
  auto c = nccl_communicator(MPI_COMM_WORLD);
  const int r = c->rank(), n = c->size();
  float* dev = nullptr;
  ASSERT_EQ(cudaMalloc(&dev, 4 * sizeof(float)), cudaSuccess);
  const float init[4] = {1.0f * r, 2.0f, 3.0f, 4.0f};
  ASSERT_EQ(cudaMemcpy(dev, init, sizeof(init), cudaMemcpyHostToDevice), cudaSuccess);
  c->all_reduce(std::span<float>(dev, 4));
  float host[4];
  ASSERT_EQ(cudaMemcpy(host, dev, sizeof(host), cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(dev);
  EXPECT_EQ(host[0], static_cast<float>(n * (n - 1) / 2));
  EXPECT_EQ(host[1], 2.0f * n);
  std::vector<int64_t> all(n);
  const int64_t mine = 10 + r;
  c->all_gather(std::span<const int64_t>(&mine, 1), std::span<int64_t>(all));
  for (int q = 0; q < n; ++q) EXPECT_EQ(all[q], 10 + q);
  std::vector<double> blocks(n, 1.0 + r), out(1);
  c->reduce_scatter(std::span<const double>(blocks), std::span<double>(out));
  EXPECT_EQ(out[0], n + n * (n - 1) / 2.0);
  c->barrier();
  auto sub = c->split(0, -r);
  ASSERT_NE(sub, nullptr);
  EXPECT_EQ(sub->rank(), n - 1 - r);
}

// A device buffer written on the default stream and handed straight to a collective: the
// communicator's own stream is non-blocking, so without its wait on stream 0's work
// (ready_to_launch) NCCL could read the buffer before the write. A ~1 ms memset of a large scratch
// buffer queued first keeps the write pending when the collective is launched. Out of place: on
// one rank NCCL launches nothing for an in-place sum, but copies send to recv on its stream.
TEST(NcclComm, ACollectiveReadsWhatTheDefaultStreamWroteBeforeIt) {
  DCP_SKIP_WITHOUT_GPU();
  auto c = nccl_communicator(MPI_COMM_WORLD);
  const int n = c->size();
  constexpr size_t kScratch = size_t{1} << 31, kCount = size_t{1} << 20;
  void* scratch = nullptr;
  float *dev = nullptr, *out = nullptr;
  ASSERT_EQ(cudaMalloc(&scratch, kScratch), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dev, kCount * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&out, kCount * sizeof(float)), cudaSuccess);
  for (int rep = 0; rep < 3; ++rep) {
    ASSERT_EQ(cudaMemset(dev, 0, kCount * sizeof(float)), cudaSuccess);  // the old values, synchronously
    ASSERT_EQ(cudaMemset(out, 0, kCount * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ASSERT_EQ(cudaMemsetAsync(scratch, rep, kScratch, nullptr), cudaSuccess);
    ASSERT_EQ(cudaMemsetAsync(dev, 0x3F, kCount * sizeof(float), nullptr), cudaSuccess);  // 0x3F3F3F3F ~0.747
    c->all_reduce_raw(dev, out, kCount, dtype_of<float>(), ReduceOp::sum);
    std::vector<float> host(kCount);
    ASSERT_EQ(cudaMemcpy(host.data(), out, kCount * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    float one = 0;
    const uint32_t bits = 0x3F3F3F3Fu;
    std::memcpy(&one, &bits, sizeof(one));
    for (size_t i = 0; i < kCount; i += 4099) ASSERT_FLOAT_EQ(host[i], n * one) << "element " << i << " rep " << rep;
    ASSERT_FLOAT_EQ(host[kCount - 1], n * one);
  }
  cudaFree(out);
  cudaFree(dev);
  cudaFree(scratch);
}

// A request destroyed before it finished aborts the communicator (communicator.h): its receive
// is never launched later with another batch into a buffer that no longer exists, and the
// communicator refuses further work with an error instead of hanging.
TEST(NcclComm, AnAbandonedRequestAbortsTheCommunicator) {
  DCP_SKIP_WITHOUT_GPU();
  auto c = nccl_communicator(MPI_COMM_WORLD);
  auto own = c->split(c->rank(), 0);  // a communicator of this rank alone, so the abort is local
  ASSERT_NE(own, nullptr);
  {
    std::vector<double> got(5, -1);
    auto rq = own->irecv(std::span<double>(got), 0, 3);
  }  // abandoned unlaunched
  std::vector<double> x(5, 1.0), y(5, 0.0);
  try {
    auto sq = own->isend(std::span<const double>(x), 0, 4);
    auto rq = own->irecv(std::span<double>(y), 0, 4);
    rq->wait();
    FAIL() << "the communicator kept working after an abandoned request";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("aborted"), std::string::npos) << e.what();
  }
  c->barrier();
}

}  // namespace
}  // namespace dcp::comm

int main(int argc, char** argv) {
  dcp::comm::MpiRuntime mpi(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
