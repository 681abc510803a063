// See config.h.
#include "model/config.h"

#include "core/error.h"

namespace dcp::model {

const char* mixer_name(MixerKind k) { return k == MixerKind::attention ? "attention" : "mamba"; }

void validate(const ModelConfig& c) {
  DCP_REQUIRE(c.vocab >= 2 && c.hidden >= 1 && c.ffn >= 1, "model: vocab=", c.vocab,
              ", hidden=", c.hidden, ", ffn=", c.ffn, " (need vocab >= 2, hidden >= 1, ffn >= 1)");
  DCP_REQUIRE(c.heads >= 1 && c.kv_heads >= 1 && c.heads % c.kv_heads == 0, "model: heads=",
              c.heads, " must be a multiple of kv_heads=", c.kv_heads, " (both >= 1)");
  DCP_REQUIRE(c.head_dim >= 2 && c.head_dim % 2 == 0, "model: head_dim=", c.head_dim,
              " must be even (RoPE rotates pairs)");
  DCP_REQUIRE(!c.mixers.empty(), "model: no blocks (mixers is empty)");
  DCP_REQUIRE(c.mamba_heads >= 1 && c.mamba_head_dim >= 1 && c.mamba_state >= 1,
              "model: mamba_heads=", c.mamba_heads, ", mamba_head_dim=", c.mamba_head_dim,
              ", mamba_state=", c.mamba_state, " must be >= 1");
  DCP_REQUIRE(c.mtp_loss_weight >= 0, "model: mtp_loss_weight=", c.mtp_loss_weight, " < 0");
  DCP_REQUIRE(c.rope_theta > 0 && c.norm_eps > 0 && c.init_std > 0, "model: rope_theta=",
              c.rope_theta, ", norm_eps=", c.norm_eps, ", init_std=", c.init_std,
              " must be > 0");
}

}  // namespace dcp::model
