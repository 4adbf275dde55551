"""A small decoder-only transformer with random weights: the model the capstone engine runs.

Taught in chapter 6 (the capstone). Real torch modules (embedding, attention over
a paged-free KV cache, MLP, LM head) and a vision encoder for images, sized by
:class:`ModelConfig`: :data:`CPU_MODEL` keeps a step to a few milliseconds on a
laptop core, :data:`GPU_MODEL` makes a step take a few milliseconds on an H100.

The KV cache holds one row per running request (a *slot*), ``max_model_len``
positions each. A step's tokens come flat, request after request, with their slot
and position: every shape is known on the host, so the forward never reads the
device back. With ``sliding_window`` the cache is a ring of ``max_model_len``
positions and a token attends to the last ``max_model_len`` positions its request
wrote (as Mistral's sliding window does): positions then grow without bound, so a
request can be tens of thousands of tokens into its output at a step's usual cost.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

import torch
from torch import nn

from synclab.device import DeviceLike, is_simulated, mark_device
from synclab.engine.cuda_graphs import GraphedForward


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int = 64
    hidden_size: int = 32
    num_layers: int = 2
    num_heads: int = 2
    max_model_len: int = 384  # positions per KV-cache slot
    max_num_seqs: int = 16  # KV-cache slots
    image_feature_size: int = 16  # per placeholder position of an image, before the vision encoder
    seed: int = 0
    sliding_window: bool = False  # the KV cache a ring of max_model_len positions: positions are unbounded
    dtype: torch.dtype = torch.float32  # the weights' and the KV cache's (logits are computed in float32)
    cuda_graphs: bool = False  # on a GPU, a windowed forward replayed from CUDA graphs (synclab.engine.cuda_graphs)

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads

    @property
    def num_parameters(self) -> int:
        """Weights: embedding and LM head, and per layer attention (4 h^2) and a 4h MLP (8 h^2), biases and norms."""
        h = self.hidden_size
        per_layer = 4 * h * h + 4 * h + 8 * h * h + 5 * h + 4 * h
        return 2 * self.vocab_size * h + self.num_layers * per_layer + self.image_feature_size * h + 3 * h

    def weight_bytes(self) -> int:
        return self.num_parameters * torch.empty(0, dtype=self.dtype).element_size()


CPU_MODEL = ModelConfig()
# The first GPU ablations' model (hidden 1,024, 8 layers, float32): about 1 ms of device work in a 5-9 ms step, so the
# device idled whatever the host did. Kept for what those stored runs measured.
GPU_MODEL = ModelConfig(vocab_size=32_000, hidden_size=1024, num_layers=8, num_heads=16, max_model_len=1024,
                        max_num_seqs=128, image_feature_size=256)
# What the capstone runs on a GPU since: a Llama-8B-like shape in bf16 (hidden 4,096, 32 layers, 32 heads; a 4h GELU
# MLP where Llama has a 3.5h SwiGLU one: 6.7 B parameters, 13.4 GB of weights a decode step reads), random weights.
# A decode step of a small batch then reads its weights once, a few milliseconds on an H100 or H200: device work
# comparable to the host's step, as in vLLM serving an 8B model at a small batch.
LLAMA_8B_LIKE = ModelConfig(vocab_size=32_000, hidden_size=4096, num_layers=32, num_heads=32, max_model_len=1024,
                            max_num_seqs=128, image_feature_size=256, dtype=torch.bfloat16, cuda_graphs=True)
# On a card too small for it (under 40 GiB: weights, a KV cache and room to work), the same shape at half the width and
# layers: 0.9 B parameters, stated as such wherever its numbers appear.
SMALL_GPU_MODEL = ModelConfig(vocab_size=32_000, hidden_size=2048, num_layers=16, num_heads=16, max_model_len=1024,
                              max_num_seqs=128, image_feature_size=256, dtype=torch.bfloat16, cuda_graphs=True)
LLAMA_8B_MIN_MEMORY = 40 * 2**30


def gpu_model(total_memory: int) -> ModelConfig:
    """The capstone's GPU model for a card of ``total_memory`` bytes: :data:`LLAMA_8B_LIKE`, or on a card under
    :data:`LLAMA_8B_MIN_MEMORY`, :data:`SMALL_GPU_MODEL`."""
    return LLAMA_8B_LIKE if total_memory >= LLAMA_8B_MIN_MEMORY else SMALL_GPU_MODEL


class DecoderLayer(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.num_heads, self.head_dim = config.num_heads, config.head_dim
        self.norm1 = nn.LayerNorm(config.hidden_size)
        self.qkv = nn.Linear(config.hidden_size, 3 * config.hidden_size)
        self.out = nn.Linear(config.hidden_size, config.hidden_size)
        self.norm2 = nn.LayerNorm(config.hidden_size)
        self.mlp = nn.Sequential(nn.Linear(config.hidden_size, 4 * config.hidden_size), nn.GELU(),
                                 nn.Linear(4 * config.hidden_size, config.hidden_size))

    def forward(self, x: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, slots: torch.Tensor,
                rows: torch.Tensor, key_mask: torch.Tensor, num_keys: int) -> torch.Tensor:
        """``x`` [T, hidden]; caches [slots, max_model_len, heads, head_dim]; ``rows`` [T] the cache rows the
        tokens write; ``key_mask`` [T, num_keys] bool: which of the first ``num_keys`` rows each token sees."""
        t = x.shape[0]
        q, k, v = self.qkv(self.norm1(x)).view(t, 3, self.num_heads, self.head_dim).unbind(1)  # each [T, H, D]
        k_cache.index_put_((slots, rows), k)  # this step's keys and values join the cache
        v_cache.index_put_((slots, rows), v)
        keys = k_cache[slots, :num_keys]  # [T, num_keys, H, D]: each token sees its own request's cache
        values = v_cache[slots, :num_keys]
        scores = torch.einsum("thd,tlhd->thl", q, keys) / math.sqrt(self.head_dim)  # [T, H, max_len]
        scores = scores.masked_fill(~key_mask[:, None, :], float("-inf"))  # causal: keys at or before the token
        attn = torch.einsum("thl,tlhd->thd", scores.softmax(-1), values).reshape(t, -1)  # [T, hidden]
        x = x + self.out(attn)
        return x + self.mlp(self.norm2(x))


@contextmanager
def _built_as(config: ModelConfig, device: DeviceLike) -> Iterator[None]:
    """A float32 model is built on the host (its weights the same on every machine); a bf16 one (billions of weights)
    in its dtype on its device, where random initialisation takes a second, not minutes of one CPU."""
    if config.dtype == torch.float32:
        yield
        return
    before = torch.get_default_dtype()
    torch.set_default_dtype(config.dtype)
    try:
        with torch.device(device):
            yield
    finally:
        torch.set_default_dtype(before)


class TinyDecoder(nn.Module):
    """Token embedding, ``num_layers`` decoder layers with a KV cache, an LM head; a linear vision encoder."""

    def __init__(self, config: ModelConfig, device: DeviceLike) -> None:
        super().__init__()
        self.config = config
        real_device = "cpu" if is_simulated(device) else device
        with torch.random.fork_rng(devices=[]), _built_as(config, real_device):  # the same for every engine of it
            torch.manual_seed(config.seed)
            self._build(config)
        self.requires_grad_(False)  # inference only: no autograd bookkeeping on the host
        cache_shape = (config.num_layers, config.max_num_seqs, config.max_model_len, config.num_heads, config.head_dim)
        self.to(real_device, dtype=config.dtype)
        # [layers, slots, max_len, H, D]
        self.k_cache = torch.zeros(cache_shape, device=real_device, dtype=config.dtype)
        self.v_cache = torch.zeros(cache_shape, device=real_device, dtype=config.dtype)
        # sliding window: the position each cache row holds, -1 for none yet  # [slots, max_model_len] int64
        self.cache_positions = torch.full(cache_shape[1:3], -1, dtype=torch.int64, device=real_device)
        for tensor in [*self.parameters(), self.k_cache, self.v_cache, self.cache_positions]:
            mark_device(tensor)  # on a CPU: device memory, as far as count_syncs is concerned
        # a windowed forward's shapes depend on its number of tokens alone: one graph per step size (a GPU's only)
        graphed = config.cuda_graphs and config.sliding_window and torch.device(real_device).type == "cuda"
        self.graphed = GraphedForward(self._windowed_forward) if graphed else None

    def _build(self, config: ModelConfig) -> None:
        self.embed = nn.Embedding(config.vocab_size, config.hidden_size)
        self.vision_encoder = nn.Linear(config.image_feature_size, config.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(config) for _ in range(config.num_layers))
        self.norm = nn.LayerNorm(config.hidden_size)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)

    def encode_images(self, pixels: torch.Tensor) -> torch.Tensor:
        """``pixels`` [num_embeds, image_feature_size] -> embeddings [num_embeds, hidden], in the model's dtype."""
        if self.config.dtype != torch.float32:  # float32 pixels into a bf16 model (asked of the config: no torch call)
            pixels = pixels.to(self.config.dtype)
        return self.vision_encoder(pixels)

    def forward(self, inputs_embeds: torch.Tensor, slots: torch.Tensor, positions: torch.Tensor,
                max_len: int) -> torch.Tensor:
        """``inputs_embeds`` [T, hidden], ``slots`` and ``positions`` [T] int64 -> hidden states [T, hidden].

        ``max_len`` (host int) bounds every position of the step, so attention reads only that much cache. Where the
        model is graphed (:attr:`graphed`), the forward is a graph's replay.
        """
        if self.graphed is not None:
            return self.graphed(inputs_embeds, slots, positions)
        return self._layers(inputs_embeds, slots, positions, max_len)

    def _windowed_forward(self, inputs_embeds: torch.Tensor, slots: torch.Tensor,
                          positions: torch.Tensor) -> torch.Tensor:
        """The forward under a sliding window, whose reads ``max_len`` does not bound."""
        return self._layers(inputs_embeds, slots, positions, self.config.max_model_len)

    def forward_mode(self) -> str:
        """How the forward runs, in words: eagerly, or from CUDA graphs (:mod:`synclab.engine.cuda_graphs`)."""
        return self.graphed.mode() if self.graphed is not None else "eager"

    def _layers(self, inputs_embeds: torch.Tensor, slots: torch.Tensor, positions: torch.Tensor,
                max_len: int) -> torch.Tensor:
        if self.config.sliding_window:
            rows, key_mask, num_keys = self._window(slots, positions)
        else:  # row p holds position p; the request wrote rows 0..p before this token reads them
            rows, num_keys = positions, max_len
            key_mask = torch.arange(max_len, device=positions.device)[None, :] <= positions[:, None]  # [T, max_len]
        x = inputs_embeds
        for i, layer in enumerate(self.layers):
            x = layer(x, self.k_cache[i], self.v_cache[i], slots, rows, key_mask, num_keys)
        return self.norm(x)

    def _window(self, slots: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int]:
        """The ring's rows for ``positions``, and which rows each token sees: the last max_model_len positions."""
        window = self.config.max_model_len
        rows = positions % window  # [T]
        self.cache_positions.index_put_((slots, rows), positions)
        held = self.cache_positions[slots]  # [T, window]: the position each row of the token's slot holds
        key_mask = (held >= 0) & (held <= positions[:, None]) & (held > positions[:, None] - window)
        return rows, key_mask, window

    def forget_slot(self, slot: int) -> None:
        """A new request takes ``slot``: under a sliding window, no row of it holds one of its positions yet."""
        if self.config.sliding_window:
            self.cache_positions[slot] = -1

    def compute_logits(self, hidden_states: torch.Tensor) -> torch.Tensor:
        logits = self.lm_head(hidden_states)  # [rows, vocab]
        # sampling's biases and masks in float32; the config is asked, not the tensor (no torch call on the CPU path)
        return logits if self.config.dtype == torch.float32 else logits.float()
