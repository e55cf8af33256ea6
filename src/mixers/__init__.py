"""Mixers: the token mixers and channel mixers of sequence models, one module per idea.

Modules:

- ``mixers.attention``: dot-product, single-layer, additive, multi-head and bi-attention;
- ``mixers.alibi``: attention with linear biases (ALiBi), on eager, SDPA and FlexAttention paths;
- ``mixers.positions``: sinusoidal, learned and rotary positions;
- ``mixers.gmlp``: gMLP's Spatial Gating Unit, its block and the tiny-attention aMLP;
- ``mixers.feed_forward``: the feed-forward channel mixer and its GLU variants;
- ``mixers.model``: ``Block(token_mixer, channel_mixer)``, the language model, the registry;
- ``mixers.data``, ``mixers.train``, ``mixers.results``, ``mixers.plot``: corpus, training
  harness, results files with provenance, figures;
- ``mixers.experiments``, ``mixers.bench``: one module per chapter experiment or benchmark.

Conventions shared by every module:

- **Shapes are batch-first**: ``[batch, seq, d_model]``; attention heads are
  ``[batch, heads, seq, d_head]``, the layout of ``torch.nn.functional.scaled_dot_product_attention``.
- **Every boolean mask is True where reading is allowed.** A pairwise ``mask``
  ``[..., q_len, k_len]`` is True where query i may attend to key j (torch SDPA's sense; the
  opposite of ``torch.nn.MultiheadAttention``'s ``attn_mask``). A per-token mask is always called
  ``token_mask``, ``[batch, seq]``, True at real tokens and False at padding (the opposite of
  torch's ``key_padding_mask``); a padded token is never read. A mask must be ``torch.bool``, and
  one that allows nothing at all (no key for any query, or a sample with no real token) is
  refused as inverted, with an error that says so.
- **Attention layers return their output**, or ``(output, weights)`` with ``need_weights=True``.
- **Sibling classes share arguments and defaults**: ``MultiHeadAttention``,
  ``AlibiMultiHeadAttention`` and ``RotaryMultiHeadAttention`` take the same arguments
  (``causal=False`` by default, as in torch, and ``kdim``, ``vdim``, ``scale``, ``backend``).
- **Bad input fails early** with a ``TypeError`` or ``ValueError`` that names the argument and the
  expected shape; an empty sequence is refused the same way everywhere.
"""

__version__ = "0.1.0"
