"""A tapered Llama-style Transformer in plain PyTorch (no `transformers`):
the reference that tests/reference/check_model.py compares tlm's compiled
models with, and that bench/train_bench.py trains beside tlm.

The math is that of /work/shared/design/method.md (and of Hugging Face's
LlamaForCausalLM, whose parameter names it uses):

    h_0     = embed[tokens]
    z_l     = h_l + o_proj(attention(rope(q_proj(x)), rope(k_proj(x)), v_proj(x))),
              x = rmsnorm(h_l) * input_layernorm
    h_{l+1} = z_l + mlp_l(rmsnorm(z_l) * post_attention_layernorm)
    logits  = rmsnorm(h_L) * norm  @ (lm_head or embed)^T

    rmsnorm(x)   = x / sqrt(mean(x^2) + eps)
    rope         = rotate_half with angle(t, i) = t * base^(-2i / head_dim)
    attention    = causal softmax(q k^T / sqrt(head_dim)) v, per head
    mlp (swiglu) = down(silu(gate(x)) * up(x)),  mlp (gelu) = down(gelu_tanh(up(x)))

with a width per layer (the taper), no biases, and mean cross-entropy over
the targets that are not -1.

The other mixers of method.md ("The four architectures"), x the block's
normalised input, A = heads * head_dim:

  gated_attention  o_proj(Y * sigmoid(g_proj(x))): Y the attention output
                   above [T, A]; g_proj [A, D] (elementwise) or [H, D]
                   (headwise: head h's gate scales its head_dim channels)
  titans           no RoPE; per head q = l2norm(silu(q_proj x)),
                   k = l2norm(silu(k_proj x)), v = silu(v_proj x),
                   l2norm(u) = u / sqrt(sum u^2 + 1e-6);
                   theta = inner_lr sigmoid(theta_proj x),
                   eta = sigmoid(eta_proj x), alpha = sigmoid(alpha_proj x)
                   (one scalar per head and token); with M = S = 0 and M0
                   the memory at the start of the chunk of C tokens holding t:
                       S = eta S - theta 2 (M0 k - v) k^T
                       M = (1 - alpha) M + S,   y = M q
                   out = o_proj(rmsnorm_per_head(y) * out_norm * silu(g_proj x))
  hope_attention   attention as the Transformer's, then, instead of the MLP,
                   CMS levels i = 0..k-1: u <- u + mlp_i(rmsnorm(u) * norm_i),
                   each with the layer's width (model.layers.L.cms.I.*); level
                   i is trained every cms[i] steps (check_model.py's Replay)
"""
import math

import torch
from torch import nn

F = nn.functional

# A speed peer (bench/gpu_peer.py) sets this: softmax attention then runs
# through PyTorch's fused causal kernel (F.scaled_dot_product_attention,
# is_causal: FlashAttention in bf16 on a GPU, no [T, T] scores kept), where this
# torch has it (2.0 on). The reference checks keep the plain products
# below, which run in float64.
FAST_ATTENTION = False


def fast_attention_available():
    return hasattr(F, "scaled_dot_product_attention")


class Config:
    """The model's settings, from the dump's "model" metadata (a dict with
    vocab, d_model, heads, head_dim, widths, mlp, tie_embeddings, norm_eps,
    rope_base)."""

    def __init__(self, d):
        self.vocab = int(d["vocab"])
        self.d_model = int(d["d_model"])
        self.heads = int(d["heads"])
        self.head_dim = int(d["head_dim"])
        self.widths = [int(w) for w in d["widths"]]
        self.mlp = d["mlp"]
        self.tie = bool(d["tie_embeddings"])
        self.eps = float(d["norm_eps"])
        self.rope_base = float(d["rope_base"])
        self.context = int(d.get("context", 0))
        # the mixer and its settings (absent: the Llama-style attention)
        self.mixer = d.get("mixer", "attention")
        self.gate = d.get("gate", "elementwise")
        self.chunk = int(d.get("chunk", 1) or 1)
        self.inner_lr = float(d.get("inner_lr", 0.1))
        self.cms = [int(p) for p in d.get("cms", [])] or [1]


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(T, head_dim, base, dtype):
    """cos, sin [T, head_dim] (HF: inv_freq over the even indices,
    emb = cat(freqs, freqs)); angles in float64, then rounded to dtype as
    tlm's tables are."""
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    freqs = torch.outer(torch.arange(T, dtype=torch.float64), inv_freq)
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat([-x2, x1], dim=-1)


def apply_rope(x, cos, sin):
    """x: [B, H, T, D]; cos, sin: [T, D]"""
    return x * cos + rotate_half(x) * sin


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        A = c.heads * c.head_dim
        self.heads, self.head_dim = c.heads, c.head_dim
        self.q_proj = nn.Linear(c.d_model, A, bias=False)
        self.k_proj = nn.Linear(c.d_model, A, bias=False)
        self.v_proj = nn.Linear(c.d_model, A, bias=False)
        self.o_proj = nn.Linear(A, c.d_model, bias=False)

    def attend(self, x, cos, sin, mask):
        """the heads' outputs, concatenated [B, T, A], before o_proj"""
        B, T, _ = x.shape
        H, D = self.heads, self.head_dim
        q, k, v = (p(x).view(B, T, H, D).transpose(1, 2) for p in (self.q_proj, self.k_proj, self.v_proj))
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if FAST_ATTENTION and fast_attention_available():
            # one dtype for the kernel: under bf16 autocast v is bf16 while
            # the RoPE tables made q and k fp32
            q, k = q.to(v.dtype), k.to(v.dtype)
            return F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, H * D)
        s = (q @ k.transpose(-1, -2)) / math.sqrt(D)
        p = torch.softmax(s.masked_fill(mask, float("-inf")), dim=-1)
        return (p @ v).transpose(1, 2).reshape(B, T, H * D)

    def forward(self, x, cos, sin, mask):
        return self.o_proj(self.attend(x, cos, sin, mask))


class GatedAttention(Attention):
    """Attention whose output is scaled by sigmoid(g_proj(x)) before o_proj:
    one gate per channel (g_proj [A, D]) or per head (g_proj [H, D])."""

    def __init__(self, c):
        super().__init__(c)
        self.headwise = c.gate == "headwise"
        self.g_proj = nn.Linear(c.d_model, c.heads if self.headwise else c.heads * c.head_dim, bias=False)

    def forward(self, x, cos, sin, mask):
        y = self.attend(x, cos, sin, mask)
        g = torch.sigmoid(self.g_proj(x))
        if self.headwise:
            B, T, _ = x.shape
            y = (y.view(B, T, self.heads, self.head_dim) * g.unsqueeze(-1)).reshape(B, T, -1)
        else:
            y = y * g
        return self.o_proj(y)


def l2norm(u, eps=1e-6):
    """u / sqrt(sum(u^2) + eps) over the last dimension"""
    return u / torch.sqrt(u.pow(2).sum(-1, keepdim=True) + eps)


def memory_scan(q, k, v, theta, eta, alpha, chunk):
    """The Titans matrix memory of every (batch, head), token by token.
    q, k, v: [B, H, T, d]; theta, eta, alpha: [B, H, T]. The gradient of
    |M k_t - v_t|^2 is taken at M0, the memory after the previous chunk's
    last token (chunk 1: M_{t-1}). Returns y [B, H, T, d], y_t = M_t q_t."""
    B, H, T, d = q.shape
    M = q.new_zeros(B, H, d, d)
    S = q.new_zeros(B, H, d, d)
    M0 = M
    ys = []
    for t in range(T):
        if t % chunk == 0:
            M0 = M
        kt = k[:, :, t]
        e = torch.einsum("bhij,bhj->bhi", M0, kt) - v[:, :, t]
        G = 2 * e.unsqueeze(-1) * kt.unsqueeze(-2)            # G_ij = 2 e_i k_j
        S = eta[:, :, t, None, None] * S - theta[:, :, t, None, None] * G
        M = (1 - alpha[:, :, t, None, None]) * M + S
        ys.append(torch.einsum("bhij,bhj->bhi", M, q[:, :, t]))
    return torch.stack(ys, dim=2)


class HeadRMSNorm(nn.Module):
    """RMSNorm of each head's channels on its own; weight [heads * head_dim]"""

    def __init__(self, heads, head_dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(heads * head_dim))
        self.heads, self.head_dim, self.eps = heads, head_dim, eps

    def forward(self, y):
        B, T, _ = y.shape
        y = y.view(B, T, self.heads, self.head_dim)
        y = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + self.eps)
        return y.reshape(B, T, -1) * self.weight


class TitansMemory(nn.Module):
    """Titans' neural memory as the mixer (see the module's docstring)."""

    def __init__(self, c):
        super().__init__()
        A, H = c.heads * c.head_dim, c.heads
        self.heads, self.head_dim = H, c.head_dim
        self.chunk, self.inner_lr = c.chunk, c.inner_lr
        self.q_proj = nn.Linear(c.d_model, A, bias=False)
        self.k_proj = nn.Linear(c.d_model, A, bias=False)
        self.v_proj = nn.Linear(c.d_model, A, bias=False)
        self.theta_proj = nn.Linear(c.d_model, H, bias=False)
        self.eta_proj = nn.Linear(c.d_model, H, bias=False)
        self.alpha_proj = nn.Linear(c.d_model, H, bias=False)
        self.out_norm = HeadRMSNorm(H, c.head_dim, c.eps)
        self.g_proj = nn.Linear(c.d_model, A, bias=False)
        self.o_proj = nn.Linear(A, c.d_model, bias=False)

    def forward(self, x, cos=None, sin=None, mask=None):
        B, T, _ = x.shape
        H, d = self.heads, self.head_dim

        def heads(u):                       # [B, T, A] -> [B, H, T, d]
            return u.view(B, T, H, d).transpose(1, 2)

        q = l2norm(heads(F.silu(self.q_proj(x))))
        k = l2norm(heads(F.silu(self.k_proj(x))))
        v = heads(F.silu(self.v_proj(x)))
        theta = self.inner_lr * torch.sigmoid(self.theta_proj(x)).transpose(1, 2)   # [B, H, T]
        eta = torch.sigmoid(self.eta_proj(x)).transpose(1, 2)
        alpha = torch.sigmoid(self.alpha_proj(x)).transpose(1, 2)
        y = memory_scan(q, k, v, theta, eta, alpha, self.chunk).transpose(1, 2).reshape(B, T, H * d)
        return self.o_proj(self.out_norm(y) * F.silu(self.g_proj(x)))


class MLP(nn.Module):
    def __init__(self, d_model, width, kind):
        super().__init__()
        self.kind = kind
        if kind == "swiglu":
            self.gate_proj = nn.Linear(d_model, width, bias=False)
        self.up_proj = nn.Linear(d_model, width, bias=False)
        self.down_proj = nn.Linear(width, d_model, bias=False)

    def forward(self, x):
        if self.kind == "swiglu":
            h = F.silu(self.gate_proj(x)) * self.up_proj(x)
        else:
            h = F.gelu(self.up_proj(x), approximate="tanh")
        return self.down_proj(h)


class CMSLevel(MLP):
    """One level of hope_attention's Continuum Memory System: u + mlp(norm(u))
    (parameters norm, gate_proj, up_proj, down_proj)."""

    def __init__(self, c, width):
        super().__init__(c.d_model, width, c.mlp)
        self.norm = RMSNorm(c.d_model, c.eps)

    def forward(self, u):
        return u + super().forward(self.norm(u))


MIXERS = {"attention": Attention, "gated_attention": GatedAttention, "titans": TitansMemory,
          "hope_attention": Attention}


class Block(nn.Module):
    def __init__(self, c, width):
        super().__init__()
        self.input_layernorm = RMSNorm(c.d_model, c.eps)
        self.self_attn = MIXERS[c.mixer](c)
        if c.mixer == "hope_attention":
            self.cms = nn.ModuleList(CMSLevel(c, width) for _ in c.cms)
        else:
            self.post_attention_layernorm = RMSNorm(c.d_model, c.eps)
            self.mlp = MLP(c.d_model, width, c.mlp)

    def forward(self, h, cos, sin, mask):
        z = h + self.self_attn(self.input_layernorm(h), cos, sin, mask)
        if hasattr(self, "cms"):
            for level in self.cms:
                z = level(z)
            return z
        return z + self.mlp(self.post_attention_layernorm(z))


class Body(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab, c.d_model)
        self.layers = nn.ModuleList(Block(c, w) for w in c.widths)
        self.norm = RMSNorm(c.d_model, c.eps)


class TaperedLlama(nn.Module):
    """Parameters named as in HF Llama: model.embed_tokens.weight,
    model.layers.L.{input_layernorm, self_attn.{q,k,v,o}_proj,
    post_attention_layernorm, mlp.{gate,up,down}_proj}.weight,
    model.norm.weight, lm_head.weight (absent when tied); gated attention
    adds self_attn.g_proj, titans self_attn.{theta,eta,alpha,g}_proj and
    self_attn.out_norm, and hope_attention has cms.I.{norm, gate_proj,
    up_proj, down_proj} in place of post_attention_layernorm and mlp."""

    def __init__(self, c):
        super().__init__()
        self.c = c
        self.model = Body(c)
        if not c.tie:
            self.lm_head = nn.Linear(c.d_model, c.vocab, bias=False)
        self._tables = {}

    def _rope(self, T, dtype, device):
        """The tables on the tokens' device (computed on the CPU in float64,
        then moved: a GPU peer's model got them on the CPU and failed)."""
        key = (T, dtype, device)
        if key not in self._tables:
            cos, sin = rope_tables(T, self.c.head_dim, self.c.rope_base, dtype)
            mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
            self._tables[key] = (cos.to(device), sin.to(device), mask.to(device))
        return self._tables[key]

    def forward(self, tokens):
        """tokens: [B, T] int64 -> logits [B, T, vocab]"""
        dtype = self.model.embed_tokens.weight.dtype
        cos, sin, mask = self._rope(tokens.shape[1], dtype, tokens.device)
        h = self.model.embed_tokens(tokens)
        for block in self.model.layers:
            h = block(h, cos, sin, mask)
        h = self.model.norm(h)
        w = self.model.embed_tokens.weight if self.c.tie else self.lm_head.weight
        return F.linear(h, w)


def loss_fn(logits, targets):
    """mean cross-entropy over the targets that are not -1"""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-1)


def decays(name):
    """The weight-decay policy tlm documents: matrices decay, except the
    embedding (and so a tied head); norms (input_layernorm,
    post_attention_layernorm, titans' out_norm, the CMS levels' norm,
    model.norm) do not."""
    return not (name.endswith("layernorm.weight") or name.endswith(".norm.weight")
                or name.endswith("out_norm.weight") or "embed_tokens" in name)


def period(c, name):
    """How often the optimizer updates a parameter: cms[I] for the
    parameters of CMS level I (model.layers.L.cms.I.*), 1 otherwise."""
    parts = name.split(".")
    if len(parts) > 4 and parts[0] == "model" and parts[1] == "layers" and parts[3] == "cms":
        return c.cms[int(parts[4])]
    return 1
