"""Mixers: the token mixers and channel mixers of sequence models, one module
per idea.

Modules:

- ``mixers.attention``: dot-product, single-layer, additive, multi-head and
  bi-attention;
- ``mixers.alibi``: attention with linear biases (ALiBi), on eager, SDPA and
  FlexAttention paths;
- ``mixers.positions``: sinusoidal, learned and rotary positions;
- ``mixers.gmlp``: gMLP's Spatial Gating Unit, its block and the tiny-attention
  aMLP;
- ``mixers.feed_forward``: the feed-forward channel mixer and its GLU variants;
- ``mixers.model``: ``Block(token_mixer, channel_mixer)``, the language model,
  the registry;
- ``mixers.data``, ``mixers.train``, ``mixers.results``, ``mixers.plot``:
  corpus, training harness, results files with provenance, figures;
- ``mixers.experiments``, ``mixers.bench``: one module per chapter experiment
  or benchmark.

Conventions shared by every module:

- **Shapes are batch-first**: ``[batch, seq, d_model]``; attention heads are
  ``[batch, heads, seq, d_head]``, the layout of
  ``torch.nn.functional.scaled_dot_product_attention``.
- **Every boolean mask is True where reading is allowed.** A pairwise ``mask``
  ``[..., q_len, k_len]`` is True where query i may attend to key j (torch
  SDPA's sense; the opposite of ``torch.nn.MultiheadAttention``'s
  ``attn_mask``). A per-token mask is always called ``token_mask``, ``[batch,
  seq]``, True at real tokens and False at padding (the opposite of torch's
  ``key_padding_mask``); a padded token is never read: padded inputs are zeroed
  on entry, so not even a NaN or inf there reaches a real token's output or
  gradient. A mask must be ``torch.bool``; a pairwise mask is 2-D ``[q_len,
  k_len]`` or has every dim of the scores (``[batch|1, heads|1, q_len,
  k_len]``), never a rank in between that broadcasting would read ambiguously;
  and a mask that can only be inverted (no key for any query, a sample with no
  real token, a real query left with nothing to read in self-attention) is
  refused, with an error that says so.
- **Attention layers return their output**, or ``(output, weights)`` with
  ``need_weights=True``.
- **Sibling classes share arguments and defaults**: ``MultiHeadAttention``,
  ``AlibiMultiHeadAttention`` and ``RotaryMultiHeadAttention`` take the same
  arguments (``causal=False`` by default, as in torch, and ``kdim``, ``vdim``,
  ``scale``, ``backend``).
- **Bad input fails early** with a ``TypeError`` or ``ValueError`` that names
  the argument and the expected shape; an empty sequence is refused the same
  way everywhere.
"""

__version__ = "0.1.0"
