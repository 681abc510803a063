// See mamba.h. The layer only moves rows between ranks and between layouts; every floating-point
// operation (projections, gating, scan, the sum of dB/dC over ranks) goes through Kernels<T>.
#include "model/mamba.h"

#include <algorithm>
#include <cmath>

#include "core/nvtx.h"

namespace dcp::model {

template <typename T>
MambaMixer<T>::MambaMixer(const std::string& name, const ModelConfig& c, ParamStore<T>& p,
                          Kernels<T>& k, comm::Communicator* own_group)
    : CpAware(own_group), name_(name), hidden_(c.hidden), heads_(c.mamba_heads),
      head_dim_(c.mamba_head_dim), state_(c.mamba_state), inner_(c.mamba_inner()), p_(p), k_(k) {
  DCP_REQUIRE(c.hidden >= 1 && c.mamba_heads >= 1 && c.mamba_head_dim >= 1 && c.mamba_state >= 1,
              "MambaMixer ", name, ": hidden ", c.hidden, ", mamba_heads ", c.mamba_heads,
              ", mamba_head_dim ", c.mamba_head_dim, ", mamba_state ", c.mamba_state,
              " must all be >= 1");
  if (own_group) check_cp_size(own_group->size());
  w_in_ = p.add(name + ".in_proj.weight", {in_proj_width(), hidden_},
                ParamInit::normal_std(c.init_std));
  // Mamba-2: dt ~ log-uniform(dt_min = 1e-3, dt_max = 1e-1), dt_bias = softplus^-1(dt) (mamba.h).
  dt_bias_ = p.add(name + ".dt_bias", {heads_},
                   ParamInit::uniform(std::log(std::expm1(1e-3)), std::log(std::expm1(1e-1))));
  a_log_ = p.add(name + ".A_log", {heads_}, ParamInit::log_uniform(1.0, 16.0));  // A_init_range
  d_ = p.add(name + ".D", {heads_}, ParamInit::constant(1.0));                   // Mamba-2: ones
  w_out_ = p.add(name + ".out_proj.weight", {hidden_, inner_}, ParamInit::normal_std(c.init_std));
}

template <typename T>
void MambaMixer<T>::check_cp_size(int size) const {
  DCP_REQUIRE(size >= 1 && heads_ % size == 0, "MambaMixer ", name_, ": CP size ", size,
              " does not divide its mamba_heads = ", heads_,
              " (every CP size a plan uses must divide the SSM heads)");
}

template <typename T>
void MambaMixer<T>::exchange(size_t block_elems) {
  const int cp = cp_size();
  if (cp == 1) {  // no communication: the one block is already where it belongs
    recv_.swap(send_);
    return;
  }
  recv_.resize(send_.size());
  const std::vector<size_t> counts(cp, block_elems);
  comm::Communicator& g = *cp_group();
  g.all_to_all_v(std::span<const T>(send_), std::span<const size_t>(counts), std::span<T>(recv_),
                 std::span<const size_t>(counts));
}

// Rank r sends to rank p, for each of its local rows, [xs of p's heads | B | C | dt of p's
// heads]; the block it receives from rank q holds q's local rows, which go back to their rows in
// sequence order, zz_[q].
template <typename T>
void MambaMixer<T>::to_heads_fwd(const MicroBatchView& mb) {
  const int cp = cp_size(), hl = heads_ / cp, xw = hl * head_dim_, N = state_;
  const int64_t n = mb.rows, total = mb.thd.total_tokens(), W = in_proj_width();
  const int64_t wh = xw + 2 * N + hl;
  send_.resize(static_cast<size_t>(cp * n * wh));
  for (int p = 0; p < cp; ++p)
    for (int64_t t = 0; t < n; ++t) {
      const T* row = zxbcdt_.data() + t * W;
      T* dst = send_.data() + (p * n + t) * wh;
      std::copy_n(row + col_xs() + p * xw, xw, dst);
      std::copy_n(row + col_b(), 2 * N, dst + xw);
      std::copy_n(row + col_dt() + p * hl, hl, dst + xw + 2 * N);
    }
  exchange(static_cast<size_t>(n * wh));
  h_xs_.resize(total * xw);
  h_b_.resize(total * N);
  h_c_.resize(total * N);
  h_dt_.resize(total * hl);
  for (int q = 0; q < cp; ++q)
    for (int64_t t = 0; t < n; ++t) {
      const int64_t g = zz_[q][t];
      const T* src = recv_.data() + (q * n + t) * wh;
      std::copy_n(src, xw, h_xs_.data() + g * xw);
      std::copy_n(src + xw, N, h_b_.data() + g * N);
      std::copy_n(src + xw + N, N, h_c_.data() + g * N);
      std::copy_n(src + xw + 2 * N, hl, h_dt_.data() + g * hl);
    }
}

// Redo the zigzag: the rows of rank q (zz_[q]) of this rank's heads go to q; the block from rank
// p holds p's heads of this rank's local rows.
template <typename T>
void MambaMixer<T>::from_heads_fwd(const MicroBatchView& mb) {
  const int cp = cp_size(), xw = heads_ / cp * head_dim_;
  const int64_t n = mb.rows;
  send_.resize(static_cast<size_t>(cp * n * xw));
  for (int q = 0; q < cp; ++q)
    for (int64_t t = 0; t < n; ++t)
      std::copy_n(h_y_.data() + zz_[q][t] * xw, xw, send_.data() + (q * n + t) * xw);
  exchange(static_cast<size_t>(n * xw));
  y_.resize(n * inner_);
  for (int p = 0; p < cp; ++p)
    for (int64_t t = 0; t < n; ++t)
      std::copy_n(recv_.data() + (p * n + t) * xw, xw, y_.data() + t * inner_ + p * xw);
}

// Backward of from_heads_fwd: dy_ [rows_local, d_inner] -> h_dy_ [total, heads/cp * head_dim].
template <typename T>
void MambaMixer<T>::to_heads_bwd(const MicroBatchView& mb) {
  const int cp = cp_size(), xw = heads_ / cp * head_dim_;
  const int64_t n = mb.rows, total = mb.thd.total_tokens();
  send_.resize(static_cast<size_t>(cp * n * xw));
  for (int p = 0; p < cp; ++p)
    for (int64_t t = 0; t < n; ++t)
      std::copy_n(dy_.data() + t * inner_ + p * xw, xw, send_.data() + (p * n + t) * xw);
  exchange(static_cast<size_t>(n * xw));
  h_dy_.resize(total * xw);
  for (int q = 0; q < cp; ++q)
    for (int64_t t = 0; t < n; ++t)
      std::copy_n(recv_.data() + (q * n + t) * xw, xw, h_dy_.data() + zz_[q][t] * xw);
}

// Backward of to_heads_fwd: the head-sharded gradients go back to the rows' owners; dxs and dt of
// rank p's heads fill p's columns, and the dB/dC of all ranks are summed in rank order.
template <typename T>
void MambaMixer<T>::from_heads_bwd(const MicroBatchView& mb) {
  const int cp = cp_size(), hl = heads_ / cp, xw = hl * head_dim_, N = state_;
  const int64_t n = mb.rows, W = in_proj_width(), wh = xw + 2 * N + hl;
  send_.resize(static_cast<size_t>(cp * n * wh));
  for (int q = 0; q < cp; ++q)
    for (int64_t t = 0; t < n; ++t) {
      const int64_t g = zz_[q][t];
      T* dst = send_.data() + (q * n + t) * wh;
      std::copy_n(h_dxs_.data() + g * xw, xw, dst);
      std::copy_n(h_db_.data() + g * N, N, dst + xw);
      std::copy_n(h_dc_.data() + g * N, N, dst + xw + N);
      std::copy_n(h_ddt_.data() + g * hl, hl, dst + xw + 2 * N);
    }
  exchange(static_cast<size_t>(n * wh));
  dbc_.resize(static_cast<size_t>(cp * n * 2 * N));  // [cp, n, 2N]: each rank's dB|dC
  for (int p = 0; p < cp; ++p)
    for (int64_t t = 0; t < n; ++t) {
      const T* src = recv_.data() + (p * n + t) * wh;
      T* row = dzxbcdt_.data() + t * W;
      std::copy_n(src, xw, row + col_xs() + p * xw);
      std::copy_n(src + xw, 2 * N, dbc_.data() + (p * n + t) * 2 * N);
      std::copy_n(src + xw + 2 * N, hl, row + col_dt() + p * hl);
    }
  for (int p = 1; p < cp; ++p)
    k_.add_inplace(dbc_.data(), dbc_.data() + p * n * 2 * N, n * 2 * N);
  for (int64_t t = 0; t < n; ++t)
    std::copy_n(dbc_.data() + t * 2 * N, 2 * N, dzxbcdt_.data() + t * W + col_b());
}

namespace {
std::vector<std::vector<int64_t>> zigzag_all(const attn::ThdBatch& b, int cp) {
  std::vector<std::vector<int64_t>> zz(cp);
  for (int q = 0; q < cp; ++q) zz[q] = attn::zigzag_rows(b, cp, q);
  return zz;
}
}  // namespace

template <typename T>
void MambaMixer<T>::forward(const MicroBatchView& mb, std::span<const T> x, std::span<T> y) {
  DCP_NVTX_RANGE();
  CpGroupScope scope(*this, *mb.psp);
  const int64_t n = mb.rows;
  DCP_CHECK(static_cast<int64_t>(x.size()) == n * hidden_ &&
                static_cast<int64_t>(y.size()) == n * hidden_,
            "MambaMixer ", name_, ": x has ", x.size(), " elements, y ", y.size(), ", expected ",
            n, " x ", hidden_);
  const int cp = cp_size(), r = cp_group()->rank(), hl = heads_ / cp;
  const int64_t W = in_proj_width();
  zz_ = zigzag_all(mb.thd, cp);
  x_.assign(x.begin(), x.end());
  zxbcdt_.resize(n * W);
  k_.linear_fwd(x.data(), p_.value(w_in_).data(), zxbcdt_.data(), n, hidden_, static_cast<int>(W));
  to_heads_fwd(mb);
  h_y_.resize(h_xs_.size());
  k_.ssm_scan_fwd(mb.thd, h_xs_.data(), h_dt_.data(), h_b_.data(), h_c_.data(),
                  p_.value(dt_bias_).data() + r * hl, p_.value(a_log_).data() + r * hl,
                  p_.value(d_).data() + r * hl, h_y_.data(), hl, head_dim_, state_);
  from_heads_fwd(mb);
  out_.resize(n * inner_);
  k_.silu_gate_fwd(zxbcdt_.data(), W, y_.data(), out_.data(), n, inner_);
  k_.linear_fwd(out_.data(), p_.value(w_out_).data(), y.data(), n, inner_, hidden_);
}

template <typename T>
void MambaMixer<T>::backward(const MicroBatchView& mb, std::span<const T> dy, std::span<T> dx) {
  DCP_NVTX_RANGE();
  CpGroupScope scope(*this, *mb.psp);
  const int64_t n = mb.rows;
  DCP_CHECK(static_cast<int64_t>(dy.size()) == n * hidden_ &&
                static_cast<int64_t>(dx.size()) == n * hidden_,
            "MambaMixer ", name_, " backward: dy has ", dy.size(), " elements, dx ", dx.size(),
            ", expected ", n, " x ", hidden_);
  DCP_CHECK(static_cast<int64_t>(x_.size()) == n * hidden_, "MambaMixer ", name_,
            " backward: the last forward had ", x_.size() / hidden_, " rows, this batch ", n);
  const int cp = cp_size(), r = cp_group()->rank(), hl = heads_ / cp;
  const int64_t W = in_proj_width(), total = mb.thd.total_tokens();
  DCP_CHECK(static_cast<int64_t>(h_xs_.size()) == total * hl * head_dim_, "MambaMixer ", name_,
            " backward: the last forward ran another batch or CP size (", h_xs_.size(),
            " head-sharded values, this batch needs ", total * hl * head_dim_, ")");
  zz_ = zigzag_all(mb.thd, cp);
  dout_.resize(n * inner_);
  k_.linear_bwd(out_.data(), p_.value(w_out_).data(), dy.data(), dout_.data(),
                p_.grad(w_out_).data(), n, inner_, hidden_);
  dzxbcdt_.resize(n * W);
  dy_.resize(n * inner_);
  k_.silu_gate_bwd(zxbcdt_.data(), W, y_.data(), dout_.data(), dzxbcdt_.data(), W, dy_.data(), n,
                   inner_);
  to_heads_bwd(mb);
  h_dxs_.resize(total * hl * head_dim_);
  h_ddt_.resize(total * hl);
  h_db_.resize(total * state_);
  h_dc_.resize(total * state_);
  k_.ssm_scan_bwd(mb.thd, h_xs_.data(), h_dt_.data(), h_b_.data(), h_c_.data(),
                  p_.value(dt_bias_).data() + r * hl, p_.value(a_log_).data() + r * hl,
                  p_.value(d_).data() + r * hl, h_dy_.data(), h_dxs_.data(), h_ddt_.data(),
                  h_db_.data(), h_dc_.data(), p_.grad(dt_bias_).data() + r * hl,
                  p_.grad(a_log_).data() + r * hl, p_.grad(d_).data() + r * hl, hl, head_dim_,
                  state_);
  from_heads_bwd(mb);
  k_.linear_bwd(x_.data(), p_.value(w_in_).data(), dzxbcdt_.data(), dx.data(),
                p_.grad(w_in_).data(), n, hidden_, static_cast<int>(W));
}

template class MambaMixer<float>;
template class MambaMixer<double>;

}  // namespace dcp::model
