// See stage_ops.h.
#include "exec/stage_ops.h"

#include "attn/attn_shape.h"
#include "attn/flash_ring.h"
#include "attn/thd.h"
#include "core/error.h"

namespace dcp::exec {

double StageOp::flops() const {
  if (kind == OpKind::gemm) return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  if (kind != OpKind::attention) return 0.0;
  attn::AttnShape s;
  s.causal = step == attn::RingStep::diagonal;
  double pairs = 0;
  for (size_t j = 0; j < len_q.size(); ++j)
    for (int32_t i = 0; i < len_q[j]; ++i) pairs += attn::keys_attended(s, i, len_q[j], len_k[j]);
  const double f = 4.0 * heads * head_dim * pairs;
  return pass == Pass::bwd ? 2.5 * f : f;
}

namespace {

std::vector<int32_t> real_lengths(const attn::ThdBatch& b) {
  std::vector<int32_t> out;
  for (int j = 0; j < b.batch(); ++j) out.push_back(b.seqlen(j));
  return out;
}

struct Builder {
  const cost::ModelConfig& m;
  int64_t T;
  StageWork w;

  void gemm(Pass p, int layer, const char* name, int64_t mm, int64_t nn, int64_t kk, GemmForm form, bool acc) {
    StageOp o;
    o.kind = OpKind::gemm;
    o.pass = p;
    o.layer = layer;
    o.name = name;
    o.m = mm;
    o.n = nn;
    o.k = kk;
    o.form = form;
    o.accumulate_fp32 = acc;
    w.ops.push_back(o);
  }
  // A linear layer with weight W [out, in] (GemmForm): forward X [T, in] W^T; backward dgrad
  // dY [T, out] W and wgrad dY^T X [out, in] accumulated into fp32.
  void linear(Pass p, int layer, const char* name, const char* dgrad, const char* wgrad, int64_t in, int64_t out) {
    if (p == Pass::bwd) {
      gemm(p, layer, dgrad, T, in, out, GemmForm::nn, false);
      gemm(p, layer, wgrad, out, in, T, GemmForm::tn, true);
    } else {
      gemm(p, layer, name, T, out, in, GemmForm::nt, false);
    }
  }
  void elem(OpKind kind, Pass p, int layer, const char* name, int64_t rows, int64_t width) {
    StageOp o;
    o.kind = kind;
    o.pass = p;
    o.layer = layer;
    o.name = name;
    o.rows = rows;
    o.width = width;
    w.ops.push_back(o);
  }
};

}  // namespace

StageWork stage_ops(const cost::ModelConfig& model, const std::vector<int64_t>& lengths, int cp_size, int cp_rank,
                    int layers, bool last_stage, bool recompute_full) {
  cost::validate_model(model);
  DCP_REQUIRE(cp_size >= 1 && cp_rank >= 0 && cp_rank < cp_size, "stage_ops: cp_rank ", cp_rank, " of a group of ",
              cp_size);
  DCP_REQUIRE(layers >= 0, "stage_ops: layers ", layers, " < 0");
  std::vector<int32_t> lens;
  for (int64_t L : lengths) {
    DCP_REQUIRE(L >= 0 && L <= int64_t{1} << 30, "stage_ops: sequence length ", L, " outside [0, 2^30]");
    lens.push_back(static_cast<int32_t>(L));
  }
  const attn::ThdBatch b = attn::make_thd_batch(lens, cp_size);
  const attn::RingSetup ring(b, cp_size, attn::AttnShape{});
  const int64_t h = model.hidden, q = model.q_dim(), kv = model.kv_dim();
  const int64_t ffn_out = model.swiglu ? 2 * model.ffn : model.ffn;
  Builder B{model, ring.local_rows, {}};
  B.w.rows = ring.local_rows;
  const int64_t T = B.T;

  // The ring steps of this rank: (step type, query lengths, key lengths).
  struct Step {
    attn::RingStep type;
    std::vector<int32_t> lq, lk;
    int64_t transfer_rows;
    std::shared_ptr<const std::vector<int64_t>> gather_rows;  // read-half rows (lower, upper)
  };
  std::vector<Step> steps;
  const auto& mine = ring.lay[static_cast<size_t>(cp_rank)];
  for (int i = 0; i < cp_size; ++i) {
    const int src = (cp_rank - i + cp_size) % cp_size;
    const auto& theirs = ring.lay[static_cast<size_t>(src)];
    const attn::RingStep t = attn::ring_step_type(cp_size, cp_rank, i, true);
    // The ring sends src's whole local KV block every step (TE's p2p); the lower step reads its
    // front half.
    const int64_t sent = i == 0 ? 0 : theirs.local.total_tokens();
    if (t == attn::RingStep::diagonal)
      steps.push_back({t, real_lengths(mine.local), real_lengths(theirs.local), sent, nullptr});
    else if (t == attn::RingStep::lower)
      steps.push_back({t, real_lengths(mine.local), real_lengths(theirs.front), sent,
                       std::make_shared<const std::vector<int64_t>>(theirs.front_rows)});
    else
      steps.push_back({t, real_lengths(mine.back), real_lengths(theirs.local), sent,
                       std::make_shared<const std::vector<int64_t>>(mine.back_rows)});
  }
  static const char* kStepNames[] = {"attn.step0", "attn.step1", "attn.step2", "attn.step3", "attn.step4",
                                     "attn.step5", "attn.step6", "attn.step7", "attn.stepN"};
  const auto attention = [&](Pass p, int layer) {
    for (size_t i = 0; i < steps.size(); ++i) {
      StageOp o;
      o.kind = OpKind::attention;
      o.pass = p;
      o.layer = layer;
      o.name = kStepNames[i < 8 ? i : 8];
      o.step = steps[i].type;
      o.len_q = steps[i].lq;
      o.len_k = steps[i].lk;
      o.transfer_rows = steps[i].transfer_rows;
      o.cp_size = cp_size;
      o.local_rows = ring.local_rows;
      o.last_step = i + 1 == steps.size();
      o.gather_rows = steps[i].gather_rows;
      o.heads = model.heads;
      o.kv_heads = model.kv_heads;
      o.head_dim = static_cast<int>(model.head_dim_or_default());
      B.w.ops.push_back(std::move(o));
    }
  };
  const auto forward = [&](Pass p, int layer) {
    B.elem(OpKind::rmsnorm, p, layer, "norm1", T, h);
    B.linear(p, layer, "qkv", "qkv.dgrad", "qkv.wgrad", h, q + 2 * kv);
    B.elem(OpKind::rope, p, layer, "rope", T, q + kv);
    attention(p, layer);
    B.linear(p, layer, "proj", "proj.dgrad", "proj.wgrad", q, h);
    B.elem(OpKind::residual, p, layer, "residual1", T, h);
    B.elem(OpKind::rmsnorm, p, layer, "norm2", T, h);
    B.linear(p, layer, "fc1", "fc1.dgrad", "fc1.wgrad", h, ffn_out);
    B.elem(OpKind::swiglu, p, layer, "act", T, model.ffn);
    B.linear(p, layer, "fc2", "fc2.dgrad", "fc2.wgrad", model.ffn, h);
    B.elem(OpKind::residual, p, layer, "residual2", T, h);
  };
  for (int l = 0; l < layers; ++l) forward(Pass::fwd, l);
  if (last_stage) {
    B.elem(OpKind::rmsnorm, Pass::fwd, -1, "final_norm", T, h);
    B.linear(Pass::fwd, -1, "logits", "", "", h, model.vocab);
    B.elem(OpKind::loss, Pass::fwd, -1, "loss", T, model.vocab);
    B.elem(OpKind::loss, Pass::bwd, -1, "loss.bwd", T, model.vocab);
    B.linear(Pass::bwd, -1, "", "logits.dgrad", "logits.wgrad", h, model.vocab);
    B.elem(OpKind::rmsnorm, Pass::bwd, -1, "final_norm.bwd", T, h);
  }
  for (int l = layers - 1; l >= 0; --l) {
    if (recompute_full) forward(Pass::recompute, l);
    B.elem(OpKind::residual, Pass::bwd, l, "residual2.bwd", T, h);
    B.linear(Pass::bwd, l, "", "fc2.dgrad", "fc2.wgrad", model.ffn, h);
    B.elem(OpKind::swiglu, Pass::bwd, l, "act.bwd", T, model.ffn);
    B.linear(Pass::bwd, l, "", "fc1.dgrad", "fc1.wgrad", h, ffn_out);
    B.elem(OpKind::rmsnorm, Pass::bwd, l, "norm2.bwd", T, h);
    B.elem(OpKind::residual, Pass::bwd, l, "residual1.bwd", T, h);
    B.linear(Pass::bwd, l, "", "proj.dgrad", "proj.wgrad", q, h);
    attention(Pass::bwd, l);
    B.elem(OpKind::rope, Pass::bwd, l, "rope.bwd", T, q + kv);
    B.linear(Pass::bwd, l, "", "qkv.dgrad", "qkv.wgrad", h, q + 2 * kv);
    B.elem(OpKind::rmsnorm, Pass::bwd, l, "norm1.bwd", T, h);
  }
  return std::move(B.w);
}

double gemm_flops(const StageWork& w, Pass pass) {
  double f = 0;
  for (const auto& o : w.ops)
    if (o.kind == OpKind::gemm && o.pass == pass) f += o.flops();
  return f;
}

double attention_flops(const StageWork& w, Pass pass) {
  double f = 0;
  for (const auto& o : w.ops)
    if (o.kind == OpKind::attention && o.pass == pass) f += o.flops();
  return f;
}

}  // namespace dcp::exec
