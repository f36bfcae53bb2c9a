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
"""
import math

import torch
from torch import nn

F = nn.functional


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

    def forward(self, x, cos, sin, mask):
        B, T, _ = x.shape
        H, D = self.heads, self.head_dim
        q, k, v = (p(x).view(B, T, H, D).transpose(1, 2) for p in (self.q_proj, self.k_proj, self.v_proj))
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        s = (q @ k.transpose(-1, -2)) / math.sqrt(D)
        p = torch.softmax(s.masked_fill(mask, float("-inf")), dim=-1)
        y = (p @ v).transpose(1, 2).reshape(B, T, H * D)
        return self.o_proj(y)


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


class Block(nn.Module):
    def __init__(self, c, width):
        super().__init__()
        self.input_layernorm = RMSNorm(c.d_model, c.eps)
        self.self_attn = Attention(c)
        self.post_attention_layernorm = RMSNorm(c.d_model, c.eps)
        self.mlp = MLP(c.d_model, width, c.mlp)

    def forward(self, h, cos, sin, mask):
        z = h + self.self_attn(self.input_layernorm(h), cos, sin, mask)
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
    model.norm.weight, lm_head.weight (absent when tied)."""

    def __init__(self, c):
        super().__init__()
        self.c = c
        self.model = Body(c)
        if not c.tie:
            self.lm_head = nn.Linear(c.d_model, c.vocab, bias=False)
        self._tables = {}

    def _rope(self, T, dtype):
        key = (T, dtype)
        if key not in self._tables:
            cos, sin = rope_tables(T, self.c.head_dim, self.c.rope_base, dtype)
            mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
            self._tables[key] = (cos, sin, mask)
        return self._tables[key]

    def forward(self, tokens):
        """tokens: [B, T] int64 -> logits [B, T, vocab]"""
        dtype = self.model.embed_tokens.weight.dtype
        cos, sin, mask = self._rope(tokens.shape[1], dtype)
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
    embedding (and so a tied head); norms do not."""
    return not (name.endswith("layernorm.weight") or name == "model.norm.weight" or "embed_tokens" in name)
