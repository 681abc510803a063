// Pipeline schedules as Megatron runs them: the op orders and call lists (pipeline_calls.h).
#include "sim/pipeline_calls.h"

#include <algorithm>
#include <vector>

namespace dcp::sim::detail {

Op interleaved_op(int k, bool bwd, int vpp, int group) {
  const int span = group * vpp;
  const int r = k % span;
  int chunk = r / group;
  if (bwd) chunk = vpp - 1 - chunk;
  return Op{(k / span) * group + r % group, chunk, bwd};
}

int interleaved_warmup(int s, int pp, int vpp, int group, int m) {
  return std::min((pp - s - 1) * 2 + (vpp - 1) * group, m * vpp);
}

std::vector<Op> stage_order(int s, int pp, int vpp, int group, int m) {
  std::vector<Op> order;
  if (vpp == 1) {
    const int warm = std::min(pp - s - 1, m);
    for (int i = 0; i < warm; ++i) order.push_back({i, 0, false});
    for (int i = 0; i < m - warm; ++i) {
      order.push_back({warm + i, 0, false});
      order.push_back({i, 0, true});
    }
    for (int i = m - warm; i < m; ++i) order.push_back({i, 0, true});
    return order;
  }
  const int total = m * vpp;
  auto op_of = [&](int k, bool bwd) { return interleaved_op(k, bwd, vpp, group); };
  const int warm = interleaved_warmup(s, pp, vpp, group, m);
  for (int k = 0; k < warm; ++k) order.push_back(op_of(k, false));
  for (int k = 0; k < total - warm; ++k) {
    order.push_back(op_of(warm + k, false));
    order.push_back(op_of(k, true));
  }
  for (int k = total - warm; k < total; ++k) order.push_back(op_of(k, true));
  return order;
}

std::vector<Item> blocking_1f1b_items(int s, int pp, int m) {
  const bool first = s == 0, last = s == pp - 1;
  const int warm = std::min(pp - s - 1, m), rem = m - warm;
  std::vector<Item> items;
  const auto op = [&](int mb, bool bwd) { items.push_back({false, {mb, 0, bwd}, {}}); };
  const auto call = [&](int peer, int send_f, int recv_f, int send_b, int recv_b) {
    items.push_back({true, {}, {peer, send_f, recv_f, send_b, recv_b}});
  };
  for (int i = 0; i < warm; ++i) {
    if (!first) call(s - 1, -1, i, -1, -1);  // recv_forward
    op(i, false);
    if (!last) call(s + 1, i, -1, -1, -1);  // send_forward
  }
  if (rem > 0 && !first) call(s - 1, -1, warm, -1, -1);  // recv_forward
  for (int i = 0; i < rem; ++i) {
    op(warm + i, false);
    if (!last) call(s + 1, warm + i, -1, -1, i);  // send_forward_recv_backward
    op(i, true);
    if (!first) {
      if (i == rem - 1)
        call(s - 1, -1, -1, i, -1);  // send_backward
      else
        call(s - 1, -1, warm + i + 1, i, -1);  // send_backward_recv_forward
    }
  }
  for (int i = rem; i < m; ++i) {
    if (!last) call(s + 1, -1, -1, -1, i);  // recv_backward
    op(i, true);
    if (!first) call(s - 1, -1, -1, i, -1);  // send_backward
  }
  return items;
}

VStage interleaved_items(int s, int pp, int vpp, int group, int m) {
  const bool first = s == 0, last = s == pp - 1;
  const int total = m * vpp;
  const int warm = interleaved_warmup(s, pp, vpp, group, m), rem = total - warm;
  const auto op_of = [&](int k, bool bwd) { return interleaved_op(k % total, bwd, vpp, group); };
  const auto receives = [&](int k, bool fwd) {  // recv_tensor_from_previous_stage(k, fwd).recv
    if (!(fwd ? first : last)) return true;
    if (k < pp - 1) return false;
    return op_of(k - (pp - 1), !fwd).chunk != (fwd ? vpp - 1 : 0);
  };
  VStage st;
  st.items.reserve(4 * static_cast<size_t>(total) + 2);  // 2 T ops, at most 2 T + 2 calls
  st.calls.reserve(2 * static_cast<size_t>(total) + 2);
  const auto op = [&](const Op& o) { st.items.push_back({false, o, -1}); };
  // A call in direction fwd; send: the op whose output it sends (nullptr: none); recv: whether
  // it receives.
  const auto call = [&](bool blocking, const Op* send, bool recv, bool fwd) {
    VCall c;
    c.blocking = blocking;
    c.fwd = fwd;
    if (send) c.part[c.parts++] = VPart{true, fwd, send->mb, send->chunk * pp + s, -1};
    if (recv) c.part[c.parts++] = VPart{false, fwd, -1, -1, -1};
    st.items.push_back({true, {}, static_cast<int>(st.calls.size())});
    st.calls.push_back(c);
  };
  const auto sends_fwd = [&](const Op& f) { return !(last && f.chunk == vpp - 1); };
  const auto sends_bwd = [&](const Op& b) { return !(first && b.chunk == 0); };
  if (!first) call(true, nullptr, true, true);  // recv_forward
  for (int k = 0; k < warm; ++k) {
    const Op f = op_of(k, false);
    op(f);
    call(true, sends_fwd(f) ? &f : nullptr, receives(k, true) && k != total - 1, true);
    if (k == warm - 1 && rem > 0) call(false, nullptr, !last, false);
  }
  for (int k = 0; k < rem; ++k) {
    const Op f = op_of(warm + k, false);
    op(f);
    call(false, sends_fwd(f) ? &f : nullptr, receives(warm + k, true) && k != rem - 1, true);
    const Op b = op_of(k, true);
    op(b);
    call(false, sends_bwd(b) ? &b : nullptr, receives(k, false), false);
  }
  if (rem == 0 && !last) call(true, nullptr, true, false);  // recv_backward
  for (int k = rem; k < total; ++k) {
    const Op b = op_of(k, true);
    op(b);
    call(true, sends_bwd(b) ? &b : nullptr, receives(k, false) && k != total - 1, false);
  }
  return st;
}

}  // namespace dcp::sim::detail
